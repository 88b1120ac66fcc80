"""A thin client for Honcho's v3 HTTP API, one per workspace.

Ours rather than an SDK's, because the SDKs read keys and URLs from the
environment, retry POSTs blindly (duplicating messages) and create resources
as a side effect of reads (shared/honcho/NOTES.md section 10). This one:

* takes its URL and key from bxmem's configuration only (trust_env=False:
  no proxy or CA variables either) and sends the key to its own workspace;
* never follows redirects, never retries; the caller decides, after checking;
* uses a fresh connection after a 5xx (the server drops keep-alive then);
* raises typed errors whose text holds the workspace, the operation and the
  status, never a response body (422 bodies echo the message text) or a key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Self
from urllib.parse import quote

import httpx

from . import __version__
from .config import Key

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0
MAX_MESSAGE_CHARS = 25_000
MAX_BATCH = 100
PAGE_SIZE = 100


class HonchoError(Exception):
    def __init__(self, workspace: str, operation: str, kind: str, status: int | None = None) -> None:
        self.workspace = workspace
        self.operation = operation
        self.kind = kind
        self.status = status
        super().__init__(f"honcho {operation} in {workspace}: {kind}")


class Unavailable(HonchoError):
    """Connection refused or reset, a timeout, a 5xx or an unreadable answer.
    For a POST, the server may or may not have acted on it, unless `unsent`:
    no connection was made, so nothing reached the server."""

    unsent = False


class Refused(HonchoError):
    """A 4xx: the server understood and said no."""


class KeyRefused(Refused):
    """401 or 403: the workspace's key is not accepted."""


class Missing(Refused):
    """404: the route or the resource does not exist. `no_route`: the server has
    no such route at all (a version without it), told from a missing resource
    by the framework's own answer, `{"detail": "Not Found"}`, where a missing
    resource is named (`Workspace W not found`)."""

    no_route = False


_TLS = None


def _tls_context():
    """One verifying TLS context per process, made only for https URLs: loading
    the CA bundle costs about 40 ms, which plain-HTTP servers (a tailnet) need
    not pay on every run. (verify=False above applies to http:// only, where
    there is no TLS to verify.)"""
    global _TLS
    if _TLS is None:
        import ssl

        _TLS = ssl.create_default_context()
    return _TLS


def _seg(value: str) -> str:
    return quote(value, safe="")


# What bxmem asks of each workspace's configuration (seed section 6). Complete
# nested objects, because Honcho merges configuration one level deep only.
CONFIG_DEFAULTS: dict[str, Any] = {
    "reasoning": {"enabled": True},
    "peer_card": {"use": True, "create": True},
    "summary": {"enabled": True},
    "dream": {"enabled": True},
}
CONFIG_QUIET: dict[str, Any] = {
    "reasoning": {"enabled": False},
    "peer_card": {"use": False, "create": False},
    "summary": {"enabled": False},
    "dream": {"enabled": False},
}


def configuration_for(role: str) -> dict[str, Any]:
    """The fleet's notes are read by no model; the agent's own workspaces get Honcho's defaults."""
    return CONFIG_QUIET if role == "fleet" else CONFIG_DEFAULTS


def configuration_applied(wanted: dict[str, Any], stored: dict[str, Any] | None) -> bool:
    stored = stored or {}
    for section, values in wanted.items():
        got = stored.get(section) or {}
        for name, value in values.items():
            if got.get(name) != value:
                return False
    return True


class WorkspaceClient:
    def __init__(
        self,
        base_url: str,
        workspace: str,
        key: Key | None,
        *,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
    ) -> None:
        self.base_url = base_url
        self.workspace = workspace
        self._key = key
        # Module constants read here, not bound as defaults, so tests can shorten them.
        self._timeout = httpx.Timeout(read_timeout or READ_TIMEOUT, connect=connect_timeout or CONNECT_TIMEOUT)
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            headers = {"User-Agent": f"bxmem/{__version__}", "Accept": "application/json"}
            if self._key is not None:
                headers["Authorization"] = self._key.bearer()
            self._client = httpx.Client(
                base_url=self.base_url,
                headers=headers,
                timeout=self._timeout,
                trust_env=False,
                follow_redirects=False,
                verify=_tls_context() if self.base_url.startswith("https:") else False,
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ws_path(self, suffix: str = "") -> str:
        return f"/v3/workspaces/{_seg(self.workspace)}{suffix}"

    def request(
        self,
        method: str,
        path: str,
        operation: str,
        *,
        json: Any = None,
        params: dict | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> Any:
        try:
            response = self._http().request(
                method, path, json=json, params=params, timeout=timeout or self._timeout
            )
        except httpx.HTTPError as exc:
            self.close()
            kind = "timed out" if isinstance(exc, httpx.TimeoutException) else f"connection failed ({type(exc).__name__})"
            error = Unavailable(self.workspace, operation, kind)
            # Raised while connecting, before a byte of the request was written.
            error.unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
            raise error from None
        status = response.status_code
        if status >= 500:
            self.close()  # the server drops the keep-alive connection after a 5xx
            raise Unavailable(self.workspace, operation, f"HTTP {status}", status)
        if status in (401, 403):
            raise KeyRefused(self.workspace, operation, f"HTTP {status}", status)
        if status == 404:
            missing = Missing(self.workspace, operation, "HTTP 404", status)
            missing.no_route = _no_route(response)
            raise missing
        if status >= 400:
            raise Refused(self.workspace, operation, f"HTTP {status}", status)
        if status >= 300:
            raise Refused(self.workspace, operation, f"HTTP {status} (redirects are not followed)", status)
        if status == 204 or not response.content:
            return None
        try:
            return response.json()
        except (ValueError, RecursionError):  # nested too deep is no answer either
            self.close()
            raise Unavailable(self.workspace, operation, "the answer was not JSON", status) from None

    # --- workspace, peers, sessions -----------------------------------------------

    def _create(self, path: str, operation: str, body: dict) -> Any:
        """A get-or-create. A 409 means "it exists" (seed section 5.7), which is what
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
        body = self.request("PUT", self._ws_path(), "set workspace configuration", json={"configuration": configuration})
        return body.get("configuration") if isinstance(body, dict) else None

    def read_configuration(self, if_exists: dict | None = None) -> dict | None:
        """The stored configuration, read back with get-or-create (which a workspace key may call,
        unlike workspaces/list, which needs an admin key); `if_exists` when the answer is a
        409, "exists", which carries no workspace."""
        body = self._create("/v3/workspaces", "read workspace", {"id": self.workspace})
        if body is None:
            return if_exists
        return _expect_dict(body, self.workspace, "read workspace").get("configuration")

    def create_peer(self, peer: str, observe_me: bool) -> None:
        self._create(self._ws_path("/peers"), "create peer", {"id": peer, "configuration": {"observe_me": observe_me}})

    def create_session(self, session: str, peers: dict[str, bool], metadata: dict | None = None) -> None:
        body: dict[str, Any] = {
            "id": session,
            "peers": {peer: {"observe_me": observed, "observe_others": False} for peer, observed in peers.items()},
        }
        if metadata:
            body["metadata"] = metadata
        self._create(self._ws_path("/sessions"), "create session", body)

    # --- messages -----------------------------------------------------------------

    def add_messages(self, session: str, messages: list[dict]) -> list[str]:
        if not 1 <= len(messages) <= MAX_BATCH:
            raise ValueError("a batch holds 1 to 100 messages")
        body = self.request(
            "POST",
            self._ws_path(f"/sessions/{_seg(session)}/messages"),
            "add messages",
            json={"messages": messages},
        )
        if not isinstance(body, list) or len(body) != len(messages):
            raise Unavailable(self.workspace, "add messages", "the answer did not list every message")
        return [_expect_dict(m, self.workspace, "add messages").get("id", "") for m in body]

    def list_messages(self, session: str, filters: dict | None = None) -> Iterator[dict]:
        yield from self._pages(self._ws_path(f"/sessions/{_seg(session)}/messages/list"), "list messages", filters)

    def _pages(self, path: str, operation: str, filters: dict | None) -> Iterator[dict]:
        page = 1
        while True:
            body = self.request(
                "POST",
                path,
                operation,
                json={"filters": filters} if filters else {},
                params={"page": page, "size": PAGE_SIZE},
            )
            body = _expect_dict(body, self.workspace, operation)
            items = body.get("items")
            if not isinstance(items, list):
                raise Unavailable(self.workspace, operation, "the answer was not a page")
            yield from (item for item in items if isinstance(item, dict))
            pages = body.get("pages")
            if not items or not isinstance(pages, int) or page >= pages:
                return
            page += 1

    # --- conclusions --------------------------------------------------------------

    def create_conclusions(self, conclusions: list[dict]) -> list[str]:
        body = self.request(
            "POST", self._ws_path("/conclusions"), "create conclusions", json={"conclusions": conclusions}
        )
        if not isinstance(body, list) or len(body) != len(conclusions):
            raise Unavailable(self.workspace, "create conclusions", "the answer did not list every conclusion")
        return [_expect_dict(c, self.workspace, "create conclusions").get("id", "") for c in body]

    def list_conclusions(self, filters: dict) -> Iterator[dict]:
        yield from self._pages(self._ws_path("/conclusions/list"), "list conclusions", filters)

    def delete_conclusion(self, conclusion_id: str) -> bool:
        """True if deleted now, False if it was already gone (404 counts as done)."""
        try:
            self.request("DELETE", self._ws_path(f"/conclusions/{_seg(conclusion_id)}"), "delete conclusion")
        except Missing:
            return False
        return True


class ReadClient(WorkspaceClient):
    """The read path's calls: search, conclusion query, chat. None of them creates
    anything in Honcho (recall and ask must never create a workspace, peer or session)."""

    def search(self, query: str, limit: int) -> list[dict]:
        body = self.request("POST", self._ws_path("/search"), "search", json={"query": query, "limit": limit})
        return _expect_list(body, self.workspace, "search")

    def peer_ids(self, limit: int = PAGE_SIZE) -> list[str]:
        """The workspace's peers, oldest first, at most `limit`. Read-only and answered
        with the workspace's own key (POST workspaces/list needs an admin key): an
        empty list means the workspace does not exist, or holds nothing to ask
        about (every message and conclusion belongs to a peer). 3.0.12 checked:
        a missing workspace answers 200 with no items and is not created."""
        body = self.request("POST", self._ws_path("/peers/list"), "list peers", json={},
                            params={"page": 1, "size": min(limit, PAGE_SIZE)})
        items = _expect_dict(body, self.workspace, "list peers").get("items")
        if not isinstance(items, list):
            raise Unavailable(self.workspace, "list peers", "the answer was not a page")
        return [p["id"] for p in items if isinstance(p, dict) and isinstance(p.get("id"), str)][:limit]

    def query_conclusions(self, query: str, peer: str, top_k: int) -> list[dict]:
        """Conclusions a peer holds about itself (observer and observed the same peer)."""
        body = self.request(
            "POST",
            self._ws_path("/conclusions/query"),
            "query conclusions",
            json={"query": query, "top_k": top_k, "filters": {"observer_id": peer, "observed_id": peer}},
        )
        return _expect_list(body, self.workspace, "query conclusions")

    def chat(self, query: str, reasoning: str, timeout: float) -> dict:
        """Workspace chat (Honcho 3.2+); raises Missing with `no_route` on a server without it."""
        body = self.request(
            "POST", self._ws_path("/chat"), "workspace chat",
            json={"query": query, "reasoning_level": reasoning, "stream": False},
            timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
        )
        return _expect_dict(body, self.workspace, "workspace chat")

    def peer_chat(self, peer: str, query: str, reasoning: str, timeout: float) -> dict:
        body = self.request(
            "POST", self._ws_path(f"/peers/{_seg(peer)}/chat"), "peer chat",
            json={"query": query, "reasoning_level": reasoning, "stream": False},
            timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
        )
        return _expect_dict(body, self.workspace, "peer chat")


class AuditClient(ReadClient):
    """Pages through a workspace for `bxmem audit`; creates nothing."""

    def sessions(self) -> Iterator[dict]:
        yield from self._pages(self._ws_path("/sessions/list"), "list sessions", None)


# What FastAPI (Starlette) answers for a path it has no route for.
NO_ROUTE_BODY = {"detail": "Not Found"}


def _no_route(response: httpx.Response) -> bool:
    """Compared whole with a constant: nothing of the body is kept or shown."""
    if len(response.content) > 64:
        return False
    try:
        return bool(response.json() == NO_ROUTE_BODY)
    except ValueError:
        return False


def _expect_list(value: Any, workspace: str, operation: str) -> list[dict]:
    if not isinstance(value, list):
        raise Unavailable(workspace, operation, "the answer was not a JSON array")
    return [item for item in value if isinstance(item, dict)]


def _expect_dict(value: Any, workspace: str, operation: str) -> dict:
    if not isinstance(value, dict):
        raise Unavailable(workspace, operation, "the answer was not a JSON object")
    return value
