"""brokerd's session-state socket: one JSON line out, one back, within 2 s. Anything else (a peer that is not
our own user too) means brokerd cannot answer, and the turn stays undecided.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from bxmem.sources.jsonline import parse_object

TIMEOUT_S = 2.0
MAX_REPLY = 4096


class BrokerUnavailable(Exception):
    """brokerd cannot answer; the message says why, never anything from a reply."""


@dataclass(frozen=True)
class SessionState:
    trust_class: str  # public | private | secret
    untrusted: bool


def _check_directory(sock_path: Path) -> None:
    directory = sock_path.parent
    try:
        st = directory.stat()
    except FileNotFoundError:
        raise BrokerUnavailable(f"{directory} does not exist") from None
    except OSError as exc:
        raise BrokerUnavailable(f"cannot look at {directory}: {exc.strerror}") from None
    if st.st_uid != os.getuid():
        raise BrokerUnavailable(f"{directory} is not owned by this user")
    if stat.S_IMODE(st.st_mode) != 0o700:
        raise BrokerUnavailable(f"{directory} has mode {stat.S_IMODE(st.st_mode):o}, not 700")


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def session_state(sock_path: Path, session: str, timeout: float = TIMEOUT_S) -> SessionState:
    _check_directory(sock_path)
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(str(sock_path))
        except FileNotFoundError:
            raise BrokerUnavailable(f"no socket at {sock_path}") from None
        except ConnectionRefusedError:
            raise BrokerUnavailable(f"connection refused at {sock_path}") from None
        if _peer_uid(sock) != os.getuid():
            raise BrokerUnavailable(f"the process at {sock_path} is not running as this user")
        request = json.dumps({"SessionState": {"session": session}}) + "\n"
        sock.sendall(request.encode())
        reply = b""
        while not reply.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
            chunk = sock.recv(MAX_REPLY)
            if not chunk:
                break
            reply += chunk
            if len(reply) > MAX_REPLY:
                raise BrokerUnavailable("the reply is too long")
    except TimeoutError:
        raise BrokerUnavailable(f"no reply within {timeout:g} s") from None
    except OSError as exc:
        raise BrokerUnavailable(f"{exc.strerror or type(exc).__name__} at {sock_path}") from None
    finally:
        sock.close()
    return _parse(reply)


def _parse(reply: bytes) -> SessionState:
    """The reply's state; anything but the one shape the interfaces give (nested
    too deep, a key twice, wrong types, not UTF-8) did not parse."""
    message = parse_object(reply)
    body = message.get("SessionStateReply") if isinstance(message, dict) else None
    if not isinstance(body, dict):
        raise BrokerUnavailable("the reply did not parse")
    trust_class, untrusted = body.get("class"), body.get("untrusted")
    if (
        not isinstance(trust_class, str)
        or trust_class not in ("public", "private", "secret")
        or not isinstance(untrusted, bool)
    ):
        raise BrokerUnavailable("the reply did not parse")
    return SessionState(trust_class=trust_class, untrusted=untrusted)
