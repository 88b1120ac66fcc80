"""The typed errors of bxmem's Honcho client (honcho/client.py), by what the caller does next.

Their text holds the workspace, the operation and the status or the kind of
failure, never a response body (422 bodies echo the message text) or a key.
Stdlib only: recall and ask tell them apart without importing the HTTP stack.
"""

from __future__ import annotations

from bxmem.honcho.answers import AnswerProblem


class HonchoError(Exception):
    def __init__(self, workspace: str, operation: str, kind: str, status: int | None = None) -> None:
        self.workspace = workspace
        self.operation = operation
        self.kind = kind
        self.status = status
        super().__init__(f"honcho {operation} in {workspace}: {kind}")


class Unavailable(HonchoError):
    """Connection refused or reset, a timeout (a request's deadline too), a 5xx,
    an answer that is not JSON or is larger than its route's cap. For a POST,
    the server may or may not have acted on it, unless `unsent`: no connection
    was made, so nothing reached the server."""

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
