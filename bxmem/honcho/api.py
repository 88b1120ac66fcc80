"""What bxmem knows of Honcho's API without the HTTP stack, so recall, ask, sync and send's planning need
no httpx. Errors are sorted by what the caller does next; their text never holds a response body (422 bodies
echo the message text) or a key.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit  # loaded already: pathlib imports it

from bxmem.honcho.answers import AnswerProblem

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from typing import Any

# --- limits ---------------------------------------------------------------------------

MAX_MESSAGE_CHARS = 25_000  # Honcho's MAX_MESSAGE_SIZE: longer texts are sent in pieces
MAX_BATCH = 100  # messages one request may create
PAGE_SIZE = 100
# Conclusions may be 65,535 characters each: a page of 20 keeps its cap near a message page's.
CONCLUSION_PAGE_SIZE = 20

# --- how long a request may take ------------------------------------------------------

# Read at each call, never bound as defaults, so tests can shorten them.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0


def request_deadline_s() -> float:
    return CONNECT_TIMEOUT + 2 * READ_TIMEOUT


def settle_wait_s() -> float:
    """How long after its attempt line an in-doubt request may still be acted on by Honcho: the client gives up by
    request_deadline_s at the latest (a trickling answer too), and one more read timeout is left for the server to
    finish what it had received (95 s with the defaults)."""
    return request_deadline_s() + READ_TIMEOUT


def monotonic() -> float:
    """The clock every deadline is kept on: the system's monotonic clock, read
    directly, so a test that freezes time.monotonic (freezegun, which real-time
    threads escape) cannot give two threads of one command two clocks."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


# --- each workspace's configuration -----------------------------------------------------

# Complete nested objects, because Honcho merges configuration one level deep only
# (docs/decisions.md).
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
        got = stored.get(section)
        if not isinstance(got, dict):  # absent, or not an object: not what was asked for
            return False
        for name, value in values.items():
            if got.get(name) != value:
                return False
    return True


# --- errors -----------------------------------------------------------------------------


class HonchoError(Exception):
    def __init__(self, workspace: str, operation: str, kind: str, status: int | None = None) -> None:
        self.workspace = workspace
        self.operation = operation
        self.kind = kind
        self.status = status
        super().__init__(f"honcho {operation} in {workspace}: {kind}")


class Unavailable(HonchoError):
    """A connection refused or reset, a timeout, a 5xx, or an answer that is not JSON or is past its route's cap. For
    a POST the server may or may not have acted, unless `unsent`: nothing reached the server."""

    unsent = False


class Redirected(Unavailable):
    """A 3xx. Never followed: a misconfigured URL or a server sending bxmem (and its
    key) elsewhere. Not a refusal of the item, which waits, in doubt if it was a POST."""


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


class BadAnswer(Refused):
    """A 2xx whose answer bxmem cannot use (honcho/answers.py names the field).
    A refusal of the item it was for, never a crash. `maybe_stored`: the request
    created something (messages, conclusions) that Honcho may have stored, so
    the item is in doubt and is looked up before it is ever sent again."""

    def __init__(self, workspace: str, operation: str, problem: AnswerProblem, maybe_stored: bool) -> None:
        super().__init__(workspace, operation, f"Honcho's answer is not usable: {problem}")
        self.maybe_stored = maybe_stored


class BadId(Refused):
    """An id bxmem was about to put in a request (from the ledger, written from an
    earlier answer, or from an answer just read) is not a Honcho id. Nothing was sent."""


# --- whether the server's address answers -------------------------------------------------


def reach(url: str, timeout: float, workspace: str) -> None:
    """Unavailable (`unsent`) when no address of the server accepts a connection within `timeout`: when Honcho is
    down, recall says so at once without loading the HTTP stack. The C module `_socket`, not `socket`, whose
    import builds its enums (docs/performance.md)."""
    import _socket  # deferred: lean

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    problem: OSError | None = None
    host = parts.hostname or ""
    try:
        # An ASCII name as bytes skips the idna codec.
        addresses = _socket.getaddrinfo(host.encode() if host.isascii() else host, port, 0, _socket.SOCK_STREAM)
    except OSError as exc:
        addresses, problem = [], exc
    for family, kind, proto, _name, address in addresses:  # as socket.create_connection does
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return
        except OSError as exc:
            problem = exc
        finally:
            sock.close()
    if problem is None:
        problem = OSError("no address")
    unreachable = Unavailable(workspace, "connect", f"connection failed ({problem.strerror or type(problem).__name__})")
    unreachable.unsent = True
    raise unreachable from None
