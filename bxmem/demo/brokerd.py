"""A stand-in brokerd on a real Unix socket, for the demo and the tests; it can answer late, hang or answer garbage."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path


class StubBrokerd:
    def __init__(self, sock_path: Path, states: dict[str, tuple[str, bool]] | None = None) -> None:
        self.sock_path = Path(sock_path)
        self.states: dict[str, tuple[str, bool]] = dict(states or {})
        self.delay = 0.0  # seconds before answering
        self.garbage = False
        self.raw_reply: bytes | None = None  # sent as it is instead of a reply
        self.late_once: set[str] = set()  # sessions whose first question is answered after `late_delay`
        self.late_delay = 3.0
        self.requests: list[str] = []
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> StubBrokerd:
        self.sock_path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.sock_path.parent, 0o700)
        try:
            self.sock_path.unlink()
        except FileNotFoundError:
            pass
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.sock_path))
        server.listen(64)
        self._server = server
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()
            self._server = None
        try:
            self.sock_path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> StubBrokerd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        server = self._server
        while server is not None:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            conn.settimeout(5)
            try:
                while not data.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                session = json.loads(data)["SessionState"]["session"]
                self.requests.append(session)
                if session in self.late_once:
                    self.late_once.discard(session)
                    time.sleep(self.late_delay)
                if self.delay:
                    time.sleep(self.delay)
                if self.garbage:
                    conn.sendall(b"{not json\n")
                    return
                if self.raw_reply is not None:
                    conn.sendall(self.raw_reply)
                    return
                trust_class, untrusted = self.states.get(session, ("private", False))
                reply = {"SessionStateReply": {"class": trust_class, "untrusted": untrusted}}
                conn.sendall((json.dumps(reply) + "\n").encode())
            except (OSError, ValueError, KeyError, TypeError):
                return
