"""A fake Honcho server: real HTTP on 127.0.0.1, state in memory.

It behaves as shared/honcho/NOTES.md records the real 3.0.12 server does
(201 new / 200 existing, implicit creation by messages and PUT, 500 for a
bad id in the path, metadata containment filters, 25,000-character messages,
100 per batch, 401 for a wrong key), validates every request against the
real server's OpenAPI document, and can be told to fail in the ways the
network and the server fail.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jsonschema
import referencing
import referencing.jsonschema

# The real 3.0.12 server's document, kept in the repository so a bare clone
# tests itself (provenance: tests/fixtures/README.md); BXMEM_OPENAPI tries another.
OPENAPI = Path(
    os.environ.get("BXMEM_OPENAPI") or Path(__file__).resolve().parent / "fixtures" / "honcho-3.0.12-openapi.json"
)
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,512}$")
# Routes of later Honcho versions that bxmem probes on purpose: 3.0.12's document
# lacks them and its server answers 404 (the fake does too, unless told it has
# workspace chat). Their bodies are checked against a later server's document
# (an excerpt: tests/fixtures/README.md).
LATER_ROUTES = [("POST", re.compile(r"^/v3/workspaces/[^/]+/chat$"))]
LATER_OPENAPI = Path(__file__).resolve().parent / "fixtures" / "honcho-261d885c-workspace-chat.json"


def _now() -> str:
    return datetime.now(UTC).isoformat()


class OpenAPIChecker:
    """Matches a request to the document's operations and validates its body and query."""

    def __init__(self, path: Path = OPENAPI) -> None:
        self.doc = json.loads(path.read_text())
        resource = referencing.Resource.from_contents(
            self.doc, default_specification=referencing.jsonschema.DRAFT202012
        )
        self.registry = referencing.Registry().with_resource("urn:openapi", resource)
        self.routes = []
        for template, ops in self.doc["paths"].items():
            pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
            for method, op in ops.items():
                self.routes.append((method.upper(), re.compile(pattern), template, op))

    def check(self, method: str, path: str, query: dict, body: object) -> list[str]:
        matches = [r for r in self.routes if r[0] == method and r[1].match(path)]
        if not matches:
            return [f"{method} {path}: no such operation in the OpenAPI document"]
        # The most specific template wins (fewest path parameters).
        _m, _p, template, op = min(matches, key=lambda r: r[2].count("{"))
        problems = []
        for param in op.get("parameters", []):
            if param["in"] == "query" and param["name"] in query:
                raw = query[param["name"]]
                value = int(raw) if raw.lstrip("-").isdigit() else (raw == "true" if raw in ("true", "false") else raw)
                problems += self._validate(param["schema"], value, f"{method} {template} ?{param['name']}")
        for name in query:
            if name not in {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}:
                problems.append(f"{method} {template}: unknown query parameter {name}")
        content = (op.get("requestBody") or {}).get("content", {}).get("application/json")
        if content is not None and body is not None:
            problems += self._validate(content["schema"], body, f"{method} {template} body")
        elif content is None and body is not None:
            problems.append(f"{method} {template}: takes no JSON body")
        elif content is not None and body is None and (op.get("requestBody") or {}).get("required"):
            problems.append(f"{method} {template}: body required")
        return problems

    def _validate(self, schema: dict, value: object, where: str) -> list[str]:
        schema = {**schema, "$schema": "https://json-schema.org/draft/2020-12/schema"}
        schema = json.loads(json.dumps(schema).replace('"#/components', '"urn:openapi#/components'))
        validator = jsonschema.Draft202012Validator(schema, registry=self.registry)
        return [f"{where}: {e.message[:200]}" for e in validator.iter_errors(value)]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict
    headers: dict
    body: object
    status: int = 0


@dataclass
class Fault:
    # "status": answer `status`, store nothing; "hang": say nothing for `seconds`, store
    # nothing; "drop": close at once; "store-then-drop": store, close without answering;
    # "store-then-status": store, answer `status` (a 409 "exists"); "malformed": store,
    # answer unreadable JSON; "deep": store, answer JSON nested 5,000 levels; "late": accept, say nothing, and store only when
    # `release` is set (by `release_late`) or `seconds` pass, then close: the server
    # acts on a request after its client gave up.
    action: str
    match: str  # a regex over "METHOD /path"
    times: int = 1
    status: int = 500
    seconds: float = 0.0
    after: int = 0  # matching requests let through before the fault applies
    release: threading.Event = field(default_factory=threading.Event)
    stored: threading.Event = field(default_factory=threading.Event)  # set once a late request is stored


class FakeHoncho:
    def __init__(self, keys: dict[str, str] | None = None, checker: OpenAPIChecker | None = None) -> None:
        self.keys = dict(keys or {})  # workspace -> the key it accepts; absent: auth off for it
        self.checker = checker or OpenAPIChecker()
        self.later_checker = OpenAPIChecker(LATER_OPENAPI)
        self.lock = threading.RLock()
        self.workspaces: dict[str, dict] = {}
        self.peers: dict[tuple[str, str], dict] = {}
        self.sessions: dict[tuple[str, str], dict] = {}
        self.messages: list[dict] = []
        self.conclusions: dict[str, dict] = {}
        self.requests: list[Recorded] = []
        self.violations: list[str] = []
        self.faults: list[Fault] = []
        self.workspace_chat = False  # 3.0.12 has none
        self.clock_offset = 0.0  # seconds added to the Date header of every answer (a server whose clock is off)
        self.openapi_published = True  # GET /openapi.json answers the document (FastAPI's default)
        self.queue: dict[str, dict[str, int]] = {}  # workspace -> its queue status' counts (default: all 0)
        self.latency = 0.0  # seconds per request
        self.chat_latency = 0.0
        self.chats_in_flight = 0
        self.max_chats_in_flight = 0
        self.latency_per_message = 0.0
        # ask's faults: a chat that never answers holds its connection until the
        # client closes it; it counts as in flight until then (max_chats_in_flight).
        self.chat_never_answers = False
        self.chats_closed = 0  # never-answered chats whose client closed the connection
        self.chat_reply: str | None = None  # what every chat answers, instead of naming who was asked
        self.in_flight = 0  # requests being answered right now, and the most at once
        self.max_in_flight = 0
        # tests/hostile_honcho.py: called first for every request; True when it answered it itself.
        self.attack: Callable[..., bool] | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # --- lifecycle ------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeHoncho:
        handler = _make_handler(self)
        server = _QuietServer(("127.0.0.1", self.port), handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: new connections are refused (the port is kept for `start`)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeHoncho:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def inject(
        self, action: str, match: str = ".", times: int = 1, status: int = 500, seconds: float = 0.0, after: int = 0
    ) -> None:
        with self.lock:
            self.faults.append(Fault(action, match, times, status, seconds, after))

    def release_late(self, timeout: float = 10.0) -> int:
        """Let every parked "late" request be stored now; returns how many were stored."""
        with self.lock:
            late = [f for f in self.faults if f.action == "late" and not f.release.is_set()]
        for fault in late:
            fault.release.set()
        return sum(1 for fault in late if fault.stored.wait(timeout))

    def _take_fault(self, line: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and re.search(fault.match, line):
                    if fault.after > 0:
                        fault.after -= 1
                        continue
                    fault.times -= 1
                    return fault
        return None

    def other_method(self, method: str, path: str) -> int | None:
        """405 for a path the server has a route at under other methods only (what doctor's
        GET probes of POST routes get), 404 for a later version's route this server lacks;
        None when the method's own route exists, or the path is no route at all."""
        routes = [(m, p) for m, p, _t, _o in self.checker.routes] + (LATER_ROUTES if self.workspace_chat else [])
        if any(m == method and p.match(path) for m, p in routes):
            return None
        if any(p.match(path) for _m, p in routes):
            return 405
        return 404 if any(p.match(path) for _m, p in LATER_ROUTES) else None

    # --- views for tests --------------------------------------------------------------

    def messages_in(self, ws: str, session: str | None = None) -> list[dict]:
        with self.lock:
            return [
                m for m in self.messages if m["workspace_id"] == ws and (session is None or m["session_id"] == session)
            ]

    def conclusions_in(self, ws: str) -> list[dict]:
        with self.lock:
            return [c for c in self.conclusions.values() if c["workspace_id"] == ws]

    # --- the API ------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict, headers: dict, body: Any) -> tuple[int, object]:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if path == "/health":
            return 200, {"status": "ok"}
        if parts[:2] != ["v3", "workspaces"]:
            return 404, {"detail": "Not Found"}
        if len(parts) == 2 and method == "POST":
            return self._get_or_create_workspace(headers, body)
        if parts[2:3] == ["list"] and len(parts) == 3:
            return self._list_workspaces(headers, body, query)
        ws = parts[2]
        if not ID_RE.match(ws):
            return 500, {"detail": "An unexpected error occurred"}
        denied = self._auth(ws, headers)
        if denied:
            return denied
        rest = parts[3:]
        with self.lock:
            return self._route(method, ws, rest, query, body)

    def _auth(self, ws: str, headers: dict) -> tuple[int, object] | None:
        key = self.keys.get(ws)
        if key is None:
            return None
        if headers.get("authorization") != f"Bearer {key}":
            return 401, {"detail": "Invalid or missing JWT"}
        return None

    def _ensure_ws(self, ws: str, configuration: dict | None = None) -> bool:
        if ws in self.workspaces:
            return False
        self.workspaces[ws] = {"id": ws, "metadata": {}, "configuration": configuration or {}, "created_at": _now()}
        return True

    def _get_or_create_workspace(self, headers: dict, body: dict) -> tuple[int, object]:
        ws = body["id"]
        denied = self._auth(ws, headers)
        if denied:
            return denied
        with self.lock:
            created = self._ensure_ws(ws, body.get("configuration"))  # an existing one ignores it
            return (201 if created else 200), self.workspaces[ws]

    def _list_workspaces(self, headers: dict, body: dict, query: dict) -> tuple[int, object]:
        if self.keys:  # admin only: with auth on, no workspace key may list
            return 401, {"detail": "JWT not permissioned for this resource"}
        with self.lock:
            items = list(self.workspaces.values())
            wanted = ((body or {}).get("filters") or {}).get("id")
            if wanted is not None:
                items = [w for w in items if w["id"] == wanted]
            return 200, _page(items, query)

    def _ensure_peer(self, ws: str, peer: str, configuration: dict | None = None) -> bool:
        key = (ws, peer)
        if key in self.peers:
            if configuration is not None:
                self.peers[key]["configuration"] = configuration
            return False
        self.peers[key] = {
            "id": peer,
            "workspace_id": ws,
            "metadata": {},
            "configuration": configuration or {},
            "created_at": _now(),
        }
        return True

    def _route(self, method: str, ws: str, rest: list[str], query: dict, body) -> tuple[int, object]:
        if not rest and method == "PUT":
            self._ensure_ws(ws)
            stored = self.workspaces[ws]
            if body.get("metadata") is not None:
                stored["metadata"] = body["metadata"]
            new = {k: v for k, v in (body.get("configuration") or {}).items() if v is not None}
            stored["configuration"] = {**stored["configuration"], **new}  # shallow merge, as the real one
            return 200, stored
        if rest == ["peers"] and method == "POST":
            self._ensure_ws(ws)
            created = self._ensure_peer(ws, body["id"], body.get("configuration"))
            return (201 if created else 200), self.peers[(ws, body["id"])]
        if rest == ["sessions"] and method == "POST":
            return self._create_session(ws, body)
        if rest == ["sessions", "list"] and method == "POST":
            items = [s for (w, _), s in self.sessions.items() if w == ws and s["is_active"]]
            return 200, _page([_public_session(s) for s in items], query)
        if len(rest) == 2 and rest[0] == "sessions" and method == "DELETE":
            # As 3.0.12: marked inactive at once (202); the id is never taken again, and
            # without a deriver its messages stay, listed by id but in no active session.
            session = self.sessions.get((ws, rest[1]))
            if session is None or not session["is_active"]:
                return 404, {"detail": f"Session {rest[1]} not found in workspace {ws}"}
            session["is_active"] = False
            return 202, {"message": "Session deleted successfully"}
        if len(rest) == 3 and rest[0] == "sessions" and rest[2] == "messages" and method == "POST":
            return self._add_messages(ws, rest[1], body)
        if len(rest) == 4 and rest[0] == "sessions" and rest[2:] == ["messages", "list"] and method == "POST":
            if not ID_RE.match(rest[1]):
                return 500, {"detail": "An unexpected error occurred"}
            found = [m for m in self.messages if m["workspace_id"] == ws and m["session_id"] == rest[1]]
            found = _filter_messages(found, (body or {}).get("filters"))
            return 200, _page(found, query)
        if rest == ["conclusions"] and method == "POST":
            return self._create_conclusions(ws, body)
        if rest == ["conclusions", "list"] and method == "POST":
            found = [c for c in self.conclusions.values() if c["workspace_id"] == ws]
            found = _filter_conclusions(found, (body or {}).get("filters"))
            found.reverse()  # newest first
            return 200, _page(found, query)
        if rest == ["conclusions", "query"] and method == "POST":
            filters = body.get("filters") or {}
            observer = filters.get("observer_id", filters.get("observer"))
            observed = filters.get("observed_id", filters.get("observed"))
            if not observer or not observed:
                return 422, {"detail": "observer and observed must be specified for semantic search."}
            held = [
                c
                for c in self.conclusions.values()
                if c["workspace_id"] == ws and c["observer_id"] == observer and c["observed_id"] == observed
            ]
            return 200, _nearest(held, body["query"], body.get("top_k", 10))
        if len(rest) == 2 and rest[0] == "conclusions" and method == "DELETE":
            conclusion = self.conclusions.get(rest[1])
            if conclusion is None or conclusion["workspace_id"] != ws:
                return 404, {"detail": "Conclusion not found"}
            del self.conclusions[rest[1]]
            return 204, None
        if rest == ["search"] and method == "POST":
            return 200, _search(self.messages, ws, body["query"], body.get("limit", 10))
        if rest == ["chat"] and method == "POST":
            if not self.workspace_chat:
                return 404, {"detail": "Not Found"}  # no such route: 3.0.12
            if ws not in self.workspaces:  # as the workspace-chat build answers, creating nothing
                return 404, {"detail": f"Workspace {ws} not found"}
            return self._chat(f"workspace {ws}", body)
        if len(rest) == 3 and rest[0] == "peers" and rest[2] == "chat" and method == "POST":
            self._ensure_ws(ws)  # 3.0.12 creates a missing workspace even here
            return self._chat(f"peer {rest[1]} in {ws}", body)
        if rest == ["queue", "status"] and method == "GET":  # a read: creates nothing
            counts = {"pending": 0, "in_progress": 0, "completed": 0, **self.queue.get(ws, {})}
            return 200, {
                **{f"{k}_work_units": v for k, v in counts.items()},
                "total_work_units": sum(counts.values()),
                "sessions": None,
            }
        if rest == ["peers", "list"] and method == "POST":
            return 200, _page([p for (w, _), p in self.peers.items() if w == ws], query)  # creates nothing
        return 404, {"detail": "Not Found"}

    def _hold_chat(self, connection: socket.socket) -> None:
        """A chat that never answers: hold the request until the client closes it."""
        import select

        with self.lock:
            self.chats_in_flight += 1
            self.max_chats_in_flight = max(self.max_chats_in_flight, self.chats_in_flight)
        try:
            while self._server is not None:
                readable, _, _ = select.select([connection], [], [], 0.05)
                if readable and not connection.recv(1, socket.MSG_PEEK):
                    with self.lock:
                        self.chats_closed += 1
                    return
        except OSError:
            return
        finally:
            with self.lock:
                self.chats_in_flight -= 1

    def _chat(self, who: str, body: dict) -> tuple[int, object]:
        self.chats_in_flight += 1
        self.max_chats_in_flight = max(self.max_chats_in_flight, self.chats_in_flight)
        self.lock.release()  # let other chats run while this one "thinks"
        try:
            time.sleep(self.chat_latency)
        finally:
            self.lock.acquire()
            self.chats_in_flight -= 1
        if self.chat_reply is not None:
            return 200, {"content": self.chat_reply}
        return 200, {"content": f"({who} answers: {body['query'][:40]})"}

    def _create_session(self, ws: str, body: dict) -> tuple[int, object]:
        self._ensure_ws(ws)
        sid = body["id"]
        existing = self.sessions.get((ws, sid))
        if existing is not None and not existing["is_active"]:
            return 404, {"detail": f"Session {sid} not found in workspace {ws}"}
        created = existing is None
        if existing is None:
            existing = self.sessions[(ws, sid)] = {
                "id": sid,
                "workspace_id": ws,
                "is_active": True,
                "metadata": body.get("metadata") or {},
                "configuration": body.get("configuration") or {},
                "created_at": _now(),
                "peers": {},
            }
        elif body.get("metadata") is not None:
            existing["metadata"] = body["metadata"]
        for peer, config in (body.get("peers") or {}).items():
            self._ensure_peer(ws, peer)
            existing["peers"].setdefault(peer, config)  # an active member keeps its config
        return (201 if created else 200), _public_session(existing)

    def _add_messages(self, ws: str, sid: str, body: dict) -> tuple[int, object]:
        if not ID_RE.match(sid):
            return 500, {"detail": "An unexpected error occurred"}
        self._ensure_ws(ws)
        session = self.sessions.get((ws, sid))
        if session is not None and not session["is_active"]:
            return 404, {"detail": f"Session {sid} not found in workspace {ws}"}
        if session is None:
            session = self.sessions[(ws, sid)] = {
                "id": sid,
                "workspace_id": ws,
                "is_active": True,
                "metadata": {},
                "configuration": {},
                "created_at": _now(),
                "peers": {},
            }
        out = []
        for m in body["messages"]:
            self._ensure_peer(ws, m["peer_id"])
            session["peers"].setdefault(m["peer_id"], {"observe_me": None, "observe_others": None})
            message = {
                "id": secrets.token_urlsafe(16)[:21],
                "content": m["content"].replace("\x00", ""),
                "peer_id": m["peer_id"],
                "session_id": sid,
                "metadata": m.get("metadata") or {},
                "created_at": m.get("created_at") or _now(),
                "workspace_id": ws,
                "token_count": len(m["content"].split()),
            }
            self.messages.append(message)
            out.append(message)
        return 201, out

    def _create_conclusions(self, ws: str, body: dict) -> tuple[int, object]:
        out = []
        for c in body["conclusions"]:
            for peer in (c["observer_id"], c["observed_id"]):
                if (ws, peer) not in self.peers:
                    return 404, {"detail": f"Peer {peer} not found"}
            if c.get("session_id") and (ws, c["session_id"]) not in self.sessions:
                return 404, {"detail": f"Session {c['session_id']} not found"}
        for c in body["conclusions"]:
            conclusion = {
                "id": secrets.token_urlsafe(16)[:21],
                "content": c["content"],
                "observer_id": c["observer_id"],
                "observed_id": c["observed_id"],
                "session_id": c.get("session_id"),
                "level": "explicit",
                "source_ids": None,
                "times_derived": None,
                "created_at": _now(),
                "workspace_id": ws,
            }
            self.conclusions[conclusion["id"]] = conclusion
            out.append({k: v for k, v in conclusion.items() if k != "workspace_id"})
        return 201, out


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)  # a killed client is not news; anything else is


def _public_session(s: dict) -> dict:
    return {k: v for k, v in s.items() if k != "peers"}


def _page(items: list, query: dict) -> dict:
    page = int(query.get("page", 1))
    size = int(query.get("size", 50))
    total = len(items)
    pages = (total + size - 1) // size
    return {"items": items[(page - 1) * size : page * size], "total": total, "page": page, "size": size, "pages": pages}


def _contains(stored: dict, wanted: dict) -> bool:
    return all(
        k in stored
        and (_contains(stored[k], v) if isinstance(v, dict) and isinstance(stored[k], dict) else stored[k] == v)
        for k, v in wanted.items()
    )


def _filter_messages(items: list[dict], filters: dict | None) -> list[dict]:
    for key, value in (filters or {}).items():
        if key == "metadata":
            items = [m for m in items if _contains(m["metadata"], value)]
        elif key in ("peer_id", "session_id"):
            items = [m for m in items if m[key] == value]
        else:
            raise ValueError(f"filter {key} not supported by the fake")
    return items


def _filter_conclusions(items: list[dict], filters: dict | None) -> list[dict]:
    for key, value in (filters or {}).items():
        key = {"observer": "observer_id", "observed": "observed_id"}.get(key, key)
        if key == "OR":  # as recall's lexical route asks: {"OR": [{"content": {"icontains": word}}, ...]}
            words = [f["content"]["icontains"].lower() for f in value]
            items = [c for c in items if any(w in c["content"].lower() for w in words)]
            continue
        if key not in ("observer_id", "observed_id", "session_id", "level"):
            raise ValueError(f"filter {key} not supported by the fake")
        items = [c for c in items if c.get(key) == value]
    return items


def _overlap(query: str, text: str) -> int:
    asked = set(re.findall(r"\w+", query.lower()))
    return len(asked & set(re.findall(r"\w+", text.lower())))


def _nearest(items: list[dict], query: str, limit: int) -> list[dict]:
    """A stand-in for Honcho's semantic order: every item, those sharing most words with the
    query first (Honcho's search has no cut-off either: it answers with its nearest, however far)."""
    ranked = sorted(enumerate(items), key=lambda pair: (-_overlap(query, pair[1]["content"]), pair[0]))
    return [item for _n, item in ranked][:limit]


def _search(messages: list[dict], ws: str, query: str, limit: int) -> list[dict]:
    """Message search as Honcho 3.0.12 answers it: the whole workspace ranked, nearest first, up to `limit`
    (no cut-off); a query holding punctuation finds by meaning alone, which the stand-in leaves as is."""
    return _nearest([m for m in messages if m["workspace_id"] == ws], query, limit)


def _make_handler(fake: FakeHoncho):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: without this, Nagle's algorithm
            # and the client's delayed ACK add about 40 ms to every answer.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def _serve(self, method: str) -> None:
            split = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(split.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if len(raw) < length:  # the client went away mid-request (a SIGKILLed send)
                self.close_connection = True
                return
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
                fake.violations.append(f"{method} {split.path}: body is not JSON")
            headers = {k.lower(): v for k, v in self.headers.items()}
            record = Recorded(method, split.path, query, headers, body)
            with fake.lock:
                fake.requests.append(record)
                fake.in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
            try:
                self._answer(method, split, query, headers, body, record)
            finally:
                with fake.lock:
                    fake.in_flight -= 1

        def _answer(self, method: str, split, query: dict, headers: dict, body: object, record: Recorded) -> None:
            if fake.attack is not None and fake.attack(self, method, split.path, query, headers, body, record):
                return
            line = f"{method} {split.path}"
            fault = fake._take_fault(line)
            if fault and fault.action == "drop":
                self.close_connection = True
                return
            if fault and fault.action == "hang":
                time.sleep(fault.seconds)
                self.close_connection = True
                return
            if fault and fault.action == "late":
                # The client's read timeout passes while this waits; what it asked is
                # stored afterwards, then the (long gone) connection is closed.
                fault.release.wait(fault.seconds or 30.0)
            if fault and fault.action == "status":
                record.status = fault.status
                self._reply(fault.status, {"detail": "injected"})
                if fault.status >= 500:
                    self.close_connection = True  # the real server drops keep-alive after a 5xx
                return
            if fake.chat_never_answers and method == "POST" and split.path.endswith("/chat"):
                fake._hold_chat(self.connection)
                self.close_connection = True
                return
            if method == "GET" and split.path == "/openapi.json":
                if not fake.openapi_published:
                    self._reply(404, {"detail": "Not Found"})
                    return
                doc = dict(fake.checker.doc)
                if fake.workspace_chat:
                    doc["paths"] = {**doc["paths"], **fake.later_checker.doc["paths"]}
                self._reply(200, doc)
                return
            other = fake.other_method(method, split.path) if method == "GET" else None
            if other is not None:  # as Starlette answers a path it has under another method, or not at all
                record.status = other
                self._reply(other, {"detail": "Method Not Allowed" if other == 405 else "Not Found"})
                return
            later = any(m == method and p.match(split.path) for m, p in LATER_ROUTES)
            if later and not fake.workspace_chat:
                problems = []  # 3.0.12 has no such route: it answers 404 whatever the body
            else:
                problems = (fake.later_checker if later else fake.checker).check(method, split.path, query, body)
            if problems:
                fake.violations.extend(problems)
                record.status = 422
                self._reply(422, {"detail": [{"msg": p} for p in problems]})
                return
            delay = fake.latency + fake.latency_per_message * len(
                (body or {}).get("messages", []) if isinstance(body, dict) else []
            )
            if delay:
                time.sleep(delay)
            try:
                status, payload = fake.handle(method, split.path, query, headers, body)
            except ValueError as exc:
                status, payload = 422, {"detail": str(exc)}
            record.status = status
            if fault and fault.action in ("store-then-drop", "late"):
                fault.stored.set()
                self.close_connection = True
                return
            if fault and fault.action == "store-then-status":
                record.status = fault.status
                self._reply(fault.status, {"detail": "injected: already exists"})
                return
            if fault and fault.action == "malformed":
                self._raw(200, b"{this is not json")
                return
            if fault and fault.action == "deep":
                self._raw(200, b"[" * 5000 + b"]" * 5000)
                return
            self._reply(status, payload)
            if status >= 500:
                self.close_connection = True

        def _reply(self, status: int, payload: object) -> None:
            self._raw(status, b"" if payload is None else json.dumps(payload).encode())

        def _raw(self, status: int, data: bytes) -> None:
            try:
                self.send_response(status)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if data:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client was killed mid-answer
                self.close_connection = True

        def date_time_string(self, timestamp: float | None = None) -> str:
            return formatdate((time.time() if timestamp is None else timestamp) + fake.clock_offset, usegmt=True)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

    return Handler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
