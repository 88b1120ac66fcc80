"""The HTTP client for Honcho's v3 API, one per workspace: the only module that sends Honcho a request.
trust_env=False: the URL and key come from bxmem's configuration only, no proxy or CA variables either.
Limits, timeouts and errors live in honcho/api.py, which needs no httpx: import them from there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Self

import httpx

from bxmem.config.loader import Key
from bxmem.honcho import answers, api
from bxmem.honcho.answers import AnswerProblem
from bxmem.honcho.api import (
    CONCLUSION_PAGE_SIZE,
    MAX_BATCH,
    PAGE_SIZE,
    BadAnswer,
    BadId,
    HonchoError,
    KeyRefused,
    Missing,
    Redirected,
    Refused,
    Unavailable,
    monotonic,
)
from bxmem.honcho.http import CAP_QUEUE, CAP_SMALL, CAP_TINY, cap_conclusions, cap_messages, fetch, new_http
from bxmem.start.version import __version__

__all__ = [
    "AuditClient",
    "BadAnswer",
    "BadId",
    "HonchoError",
    "KeyRefused",
    "Missing",
    "ReadClient",
    "Redirected",
    "Refused",
    "Unavailable",
    "WorkspaceClient",
    "has_route",
    "health",
    "server_version",
]

SERVER = "(server)"  # what an error names in place of a workspace for a request about the server itself


class WorkspaceClient:
    """One workspace's client. `ends_by` (api.monotonic()): no request starts after it and none runs past it, so a
    command looping over pages stops at its own deadline too. `ends_by_name`: that deadline's name, for the error
    (None: ask's jobs say it themselves)."""

    def __init__(
        self,
        base_url: str,
        workspace: str,
        key: Key | None,
        *,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        ends_by: float | None = None,
        ends_by_name: str | None = "the command's deadline",
    ) -> None:
        self.base_url = base_url
        self.workspace = workspace
        self._key = key
        # Read here, not bound as defaults, so tests can shorten them.
        self._connect = connect_timeout or api.CONNECT_TIMEOUT
        self._read = read_timeout or api.READ_TIMEOUT
        self._timeout = httpx.Timeout(self._read, connect=self._connect)
        self.ends_by, self._ends_by_name = ends_by, ends_by_name
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            headers = {"User-Agent": f"bxmem/{__version__}", "Accept": "application/json"}
            if self._key is not None:
                headers["Authorization"] = self._key.bearer()
            self._client = new_http(self.base_url, headers, self._timeout)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _id(self, value: object, what: str, operation: str) -> str:
        """An id about to go into a request (from the ledger or an answer), checked first: never `..`, `a/b`, or an
        ESC."""
        if not answers.is_honcho_id(value):
            raise BadId(
                self.workspace, operation, f"the {what} is not a Honcho id ({answers.ID_RULE}); nothing was sent"
            )
        assert isinstance(value, str)
        return value

    def _ws_path(self, operation: str, suffix: str = "") -> str:
        return f"/v3/workspaces/{self._id(self.workspace, 'workspace name', operation)}{suffix}"

    def request(
        self,
        method: str,
        path: str,
        operation: str,
        *,
        json: Any = None,
        params: dict | None = None,
        cap: int = CAP_SMALL,
        seconds: float | None = None,
        seen: dict | None = None,
    ) -> Any:
        """The decoded answer of a 2xx (None when empty); a HonchoError otherwise. `seconds`: this request's
        deadline; `seen`: gets the answer's Date header."""
        now = monotonic()
        ends = now + (seconds if seconds is not None else self._connect + 2 * self._read)
        if self.ends_by is not None:
            if now >= self.ends_by:
                late = Unavailable(
                    self.workspace,
                    operation,
                    "not sent: no time left"
                    if self._ends_by_name is None
                    else f"not sent: {self._ends_by_name} has passed",
                )
                late.unsent = True
                raise late
            ends = min(ends, self.ends_by)
        try:
            _status, body = fetch(
                self._http(),
                self.workspace,
                operation,
                method,
                path,
                body=json,
                params=params,
                cap=cap,
                ends=ends,
                seen=seen,
            )
        except Unavailable as exc:
            self.close()  # a fresh connection next time: the server drops keep-alive after a 5xx
            if exc.kind == "timed out" and self._ends_by_name and ends == self.ends_by and monotonic() >= ends:
                exc.kind = f"timed out: {self._ends_by_name} has passed"  # not this request's own
                exc.args = (f"honcho {operation} in {self.workspace}: {exc.kind}",)
            raise
        return body

    def _parse(
        self, operation: str, parse: Callable[..., Any], body: Any, *args: Any, maybe_stored: bool = False
    ) -> Any:
        try:
            return parse(body, *args)
        except AnswerProblem as problem:
            raise BadAnswer(self.workspace, operation, problem, maybe_stored) from None

    # --- workspace, peers, sessions -----------------------------------------------

    def _create(self, path: str, operation: str, body: dict) -> Any:
        """A get-or-create. A 409 means "it exists" (docs/decisions.md), which is what
        was asked for: no answer body then (None). Honcho 3.0.12 itself answers 200."""
        try:
            return self.request("POST", path, operation, json=body)
        except Refused as exc:
            if exc.status == 409:
                return None
            raise

    def set_configuration(self, configuration: dict) -> dict | None:
        """PUT is an upsert: it creates the workspace if needed and sets its configuration.
        Returns the configuration the answer holds."""
        operation = "set workspace configuration"
        body = self.request("PUT", self._ws_path(operation), operation, json={"configuration": configuration})
        return self._parse(operation, answers.configuration, body)

    def read_configuration(self, if_exists: dict | None = None) -> dict | None:
        """The stored configuration, read back with get-or-create (a workspace key may call it, unlike
        workspaces/list); `if_exists` when the answer is a 409, which carries no workspace."""
        operation = "read workspace"
        self._ws_path(operation)  # the name is checked before it goes in the body
        body = self._create("/v3/workspaces", operation, {"id": self.workspace})
        if body is None:
            return if_exists
        return self._parse(operation, answers.configuration, body)

    def create_peer(self, peer: str, observe_me: bool) -> None:
        operation = "create peer"
        self._create(
            self._ws_path(operation, "/peers"),
            operation,
            {"id": self._id(peer, "peer", operation), "configuration": {"observe_me": observe_me}},
        )

    def create_session(self, session: str, peers: dict[str, bool], metadata: dict | None = None) -> None:
        operation = "create session"
        body: dict[str, Any] = {
            "id": self._id(session, "session", operation),
            "peers": {
                self._id(peer, "peer", operation): {"observe_me": observed, "observe_others": False}
                for peer, observed in peers.items()
            },
        }
        if metadata:
            body["metadata"] = metadata
        self._create(self._ws_path(operation, "/sessions"), operation, body)

    # --- messages -----------------------------------------------------------------

    def add_messages(self, session: str, messages: list[dict]) -> list[str]:
        """Honcho's ids for the messages, in order. A 2xx whose answer does not give
        each its own id is a BadAnswer with `maybe_stored`: they may be there."""
        if not 1 <= len(messages) <= MAX_BATCH:
            raise ValueError("a batch holds 1 to 100 messages")
        operation = "add messages"
        for m in messages:
            self._id(m.get("peer_id"), "peer", operation)
        path = self._ws_path(operation, f"/sessions/{self._id(session, 'session', operation)}/messages")
        body = self.request("POST", path, operation, json={"messages": messages}, cap=cap_messages(len(messages)))
        return self._parse(operation, answers.created_ids, body, len(messages), maybe_stored=True)

    def list_messages(self, session: str, filters: dict | None = None) -> Iterator[dict]:
        operation = "list messages"
        path = self._ws_path(operation, f"/sessions/{self._id(session, 'session', operation)}/messages/list")
        yield from self._pages(path, operation, filters, PAGE_SIZE, cap_messages(PAGE_SIZE), answers.listed_message)

    def _pages(
        self, path: str, operation: str, filters: dict | None, size: int, cap: int, item: Callable[[object, str], Any]
    ) -> Iterator[Any]:
        page = 1
        while True:
            body = self.request(
                "POST",
                path,
                operation,
                json={"filters": filters} if filters else {},
                params={"page": page, "size": size},
                cap=cap,
            )
            items, more = self._parse(operation, answers.page, body, size, page)
            # Every item is checked before any is handed on: a lookup acts on the page as a whole.
            yield from [self._parse(operation, item, raw, f"items[{n}]") for n, raw in enumerate(items)]
            if not more:
                return
            page += 1

    # --- conclusions --------------------------------------------------------------

    def create_conclusions(self, conclusions: list[dict]) -> list[str]:
        operation = "create conclusions"
        for c in conclusions:
            for what in ("observer_id", "observed_id", "session_id"):
                if what in c:
                    self._id(c[what], what.removesuffix("_id"), operation)
        body = self.request(
            "POST",
            self._ws_path(operation, "/conclusions"),
            operation,
            json={"conclusions": conclusions},
            cap=cap_conclusions(len(conclusions)),
        )
        return self._parse(operation, answers.created_ids, body, len(conclusions), maybe_stored=True)

    def list_conclusions(self, filters: dict) -> Iterator[dict]:
        operation = "list conclusions"
        yield from self._pages(
            self._ws_path(operation, "/conclusions/list"),
            operation,
            filters,
            CONCLUSION_PAGE_SIZE,
            cap_conclusions(CONCLUSION_PAGE_SIZE),
            answers.listed_conclusion,
        )

    def delete_conclusion(self, conclusion_id: object) -> bool:
        """True if deleted now, False if it was already gone (404 counts as done). An id that is not a Honcho id is a
        BadId: nothing is sent."""
        operation = "delete conclusion"
        path = self._ws_path(operation, f"/conclusions/{self._id(conclusion_id, 'conclusion id recorded', operation)}")
        try:
            self.request("DELETE", path, operation, cap=CAP_TINY)
        except Missing:
            return False
        return True


class ReadClient(WorkspaceClient):
    """The read path's calls, none of which creates anything in Honcho: recall and ask must never create a workspace,
    peer or session."""

    def search(self, query: str, limit: int) -> list[dict]:
        operation = "search"
        body = self.request(
            "POST",
            self._ws_path(operation, "/search"),
            operation,
            json={"query": query, "limit": limit},
            cap=cap_messages(limit),
        )
        return self._parse(operation, answers.search_hits, body, limit)

    def peer_ids(self, limit: int = PAGE_SIZE) -> list[str]:
        """The workspace's peers, oldest first, at most `limit`, with the workspace's own key (workspaces/list needs
        an admin key). Empty: the workspace does not exist or holds nothing to ask about; 3.0.12 answers a missing
        workspace 200 with no items and does not create it. Each id is asked next by path: one that is not a
        Honcho id is a BadAnswer."""
        operation = "list peers"
        size = min(limit, PAGE_SIZE)
        body = self.request(
            "POST", self._ws_path(operation, "/peers/list"), operation, json={}, params={"page": 1, "size": size}
        )
        items, _more = self._parse(operation, answers.page, body, size, 1)
        return [self._parse(operation, answers.listed_id, raw, f"items[{n}]") for n, raw in enumerate(items)][:limit]

    def query_conclusions(self, query: str, peer: str, top_k: int) -> list[dict]:
        operation = "query conclusions"
        body = self.request(
            "POST",
            self._ws_path(operation, "/conclusions/query"),
            operation,
            json={"query": query, "top_k": top_k, "filters": {"observer_id": peer, "observed_id": peer}},
            cap=cap_conclusions(top_k),
        )
        return self._parse(operation, answers.conclusion_hits, body, top_k)

    def find_conclusions(self, words: list[str], peer: str, size: int) -> list[dict]:
        """Conclusions a peer holds about itself containing any of `words` (case ignored), newest first, at most
        `size`: the lexical route (conclusions/query is by meaning alone)."""
        operation = "find conclusions"
        filters = {"observer_id": peer, "observed_id": peer, "OR": [{"content": {"icontains": w}} for w in words]}
        body = self.request(
            "POST",
            self._ws_path(operation, "/conclusions/list"),
            operation,
            json={"filters": filters},
            params={"page": 1, "size": size},
            cap=cap_conclusions(size),
        )
        items, _more = self._parse(operation, answers.page, body, size, 1)
        return [self._parse(operation, answers.conclusion_hit, raw, f"items[{n}]") for n, raw in enumerate(items)]

    def queue_status(self) -> dict[str, int]:
        """The workspace's derivation queue: a read only the workspace's own key (or an admin's) may make, which
        `doctor` tries each key with. Its per-session breakdown grows with the queue: capped at CAP_QUEUE."""
        operation = "read the queue"
        body = self.request("GET", self._ws_path(operation, "/queue/status"), operation, cap=CAP_QUEUE)
        return self._parse(operation, answers.queue_status, body)

    def chat(self, query: str, reasoning: str, timeout: float) -> str | None:
        """Workspace chat (Honcho 3.2+), its answer's text; raises Missing on a server without it."""
        operation = "workspace chat"
        body = self.request(
            "POST",
            self._ws_path(operation, "/chat"),
            operation,
            json={"query": query, "reasoning_level": reasoning, "stream": False},
            seconds=timeout,
        )
        return self._parse(operation, answers.chat_content, body)

    def peer_chat(self, peer: str, query: str, reasoning: str, timeout: float) -> str | None:
        operation = "peer chat"
        path = self._ws_path(operation, f"/peers/{self._id(peer, 'peer', operation)}/chat")
        body = self.request(
            "POST",
            path,
            operation,
            json={"query": query, "reasoning_level": reasoning, "stream": False},
            seconds=timeout,
        )
        return self._parse(operation, answers.chat_content, body)


class AuditClient(ReadClient):
    """Pages through a workspace for `bxmem audit`; creates nothing."""

    def sessions(self) -> Iterator[str]:
        operation = "list sessions"
        yield from self._pages(
            self._ws_path(operation, "/sessions/list"), operation, None, PAGE_SIZE, CAP_SMALL, answers.listed_id
        )


def _server(url: str, timeout: float) -> WorkspaceClient:
    """A keyless client for requests about the server itself, each within `timeout` in all."""
    return WorkspaceClient(
        url,
        SERVER,
        None,
        connect_timeout=timeout,
        read_timeout=timeout,
        ends_by=monotonic() + timeout,
        ends_by_name=None,
    )


def health(url: str, timeout: float) -> str | None:
    """The server's `/health`, bounded as every request is; a HonchoError unless it answers 2xx. Returns the answer's
    Date header (the server's clock), or None."""
    seen: dict = {}
    with _server(url, timeout) as client:
        client.request("GET", "/health", "health check", cap=CAP_TINY, seconds=timeout, seen=seen)
    return seen.get("date")


def server_version(url: str, timeout: float) -> str | None:
    """The version the server's OpenAPI document gives (FastAPI publishes it at
    /openapi.json), or None when the server publishes none (404)."""
    operation = "read the API document"
    with _server(url, timeout) as client:
        try:
            body = client.request("GET", "/openapi.json", operation, cap=CAP_SMALL, seconds=timeout)
        except Missing:
            return None
        return client._parse(operation, answers.api_version, body)


def has_route(url: str, path: str, timeout: float) -> bool | None:
    """Whether the server has a route at `path`, asked with a GET, which changes nothing: a POST-only route answers
    405 before any key or body is looked at, and a server without it answers its framework's 404
    (api.Missing.no_route). None when it cannot be told (a proxy's 404, say)."""
    operation = "look for a route"
    with _server(url, timeout) as client:
        try:
            client.request("GET", path, operation, cap=CAP_TINY, seconds=timeout)
        except Missing as exc:
            return False if exc.no_route else None
        except Refused:
            return True  # 405 (the route takes another method), or a key asked for: it is there
        return True
