"""A deadline per request and a cap per answer. httpx's timeouts apply to each read, so a server sending a
byte every few seconds never trips them; here each socket operation gets only the time left. No compression
is asked for and a compressed answer is refused: a small gzip body can inflate a thousandfold past any cap.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from bxmem.honcho.api import HonchoError, KeyRefused, Missing, Redirected, Refused, Unavailable, monotonic
from bxmem.sources.jsonline import refuse_constant

# The most bytes one character can take in a JSON answer: a control character
# written \u00XX. Honcho writes every other character as itself, in UTF-8 (1-4 bytes).
JSON_CHAR_BYTES = 6
MESSAGE_CHARS = 25_000  # Honcho's MAX_MESSAGE_SIZE
CONCLUSION_CHARS = 65_535  # Honcho's ConclusionCreate limit
FIELDS_BYTES = 16_384  # a message's or conclusion's other fields: ids, times, metadata (bxmem's is under 600 bytes)
MESSAGE_BYTES = MESSAGE_CHARS * JSON_CHAR_BYTES + FIELDS_BYTES  # 166,384
CONCLUSION_BYTES = CONCLUSION_CHARS * JSON_CHAR_BYTES + FIELDS_BYTES  # 409,594
CAP_SMALL = 1 << 20  # a workspace, peer or session, a page of them, a chat's answer: 1 MiB
CAP_TINY = 64 << 10  # /health, a delete, an error: 64 KiB
# A workspace's queue status: four counts, and one entry of about 200 bytes for each
# session with derivation work queued or done since Honcho's last cleanup (20,000 of them).
CAP_QUEUE = 4 << 20
PAGE_OVERHEAD = 4_096  # a page's own fields, an array's brackets


def cap_messages(count: int) -> int:
    """A page, a search or a create answer of up to `count` messages (100: 16.6 MB)."""
    return count * MESSAGE_BYTES + PAGE_OVERHEAD


def cap_conclusions(count: int) -> int:
    """A page, a query or a create answer of up to `count` conclusions (20: 8.2 MB)."""
    return count * CONCLUSION_BYTES + PAGE_OVERHEAD


class AnswerTooLarge(Exception):
    def __init__(self, cap: int) -> None:
        self.cap = cap
        super().__init__(f"the answer was larger than {cap:,} bytes, and not read on")


class AnswerEncoded(Exception):
    """The answer came compressed, though none was asked for."""


class _Deadline(threading.local):
    at: float | None = None  # monotonic() by which this thread's request must end


_DEADLINE = _Deadline()


@contextmanager
def bounded(at: float) -> Iterator[None]:
    """Socket operations on this thread end by `at` (monotonic())."""
    before, _DEADLINE.at = _DEADLINE.at, at
    try:
        yield
    finally:
        _DEADLINE.at = before


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The time a socket operation may take: its own timeout, cut to what is left of the deadline."""
    at = _DEADLINE.at
    if at is None:
        return timeout
    left = at - monotonic()
    if left <= 0:
        raise error("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _BoundedStream(httpcore.NetworkStream):
    WRITE_CHUNK = 16_384  # each piece written is given what is left of the deadline

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for start in range(0, len(buffer), self.WRITE_CHUNK):
            self._inner.write(buffer[start : start + self.WRITE_CHUNK], _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _BoundedStream(
            self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout))
        )

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _BoundedBackend(httpcore.SyncBackend):
    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options=None
    ) -> httpcore.NetworkStream:
        return _BoundedStream(
            super().connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout), local_address, socket_options)
        )


class BoundedTransport(httpx.HTTPTransport):
    """httpx's own transport, on a pool whose sockets keep the deadline (httpx takes no network backend of its own).
    tests/test_honcho_bounds.py holds the deadline against a trickling server, so an httpx that changed this fails
    there, not in the field."""

    def __init__(self, ssl_context) -> None:
        super().__init__(verify=ssl_context or False, trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            network_backend=_BoundedBackend(),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
        )


def read_capped(response: httpx.Response, cap: int) -> bytearray:
    """The body of a streamed response, refused past `cap` bytes (AnswerTooLarge)
    or when it is compressed (AnswerEncoded)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise AnswerEncoded
    declared = response.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > cap:
        raise AnswerTooLarge(cap)
    body = bytearray()
    for chunk in response.iter_raw():
        body += chunk
        if len(body) > cap:
            raise AnswerTooLarge(cap)
    return body  # json.loads takes it as it is: no copy


_TLS: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process, made only for https URLs: loading
    the CA bundle is dear (docs/performance.md), and plain-HTTP servers (a
    tailnet) need not pay for it on every run."""
    global _TLS
    if _TLS is None:
        _TLS = ssl.create_default_context()
    return _TLS


def new_http(base_url: str, headers: dict[str, str], timeout: httpx.Timeout) -> httpx.Client:
    """No redirects followed, nothing from the environment (proxies, CA variables),
    no compression asked for, every request bounded (above)."""
    tls = tls_context() if base_url.startswith("https:") else None
    return httpx.Client(
        base_url=base_url,
        headers={**headers, "Accept-Encoding": "identity"},
        timeout=timeout,
        trust_env=False,
        follow_redirects=False,
        transport=BoundedTransport(tls),
    )


def _status_error(workspace: str, operation: str, status: int) -> HonchoError | None:
    if status >= 500:
        return Unavailable(workspace, operation, f"HTTP {status}", status)
    if status in (401, 403):
        return KeyRefused(workspace, operation, f"HTTP {status}", status)
    if status == 404:
        return Missing(workspace, operation, "HTTP 404", status)
    if status >= 400:
        return Refused(workspace, operation, f"HTTP {status}", status)
    if status >= 300:
        return Redirected(workspace, operation, f"HTTP {status}: a redirect, which bxmem does not follow", status)
    return None


def fetch(
    http: httpx.Client,
    workspace: str,
    operation: str,
    method: str,
    path: str,
    *,
    body: Any,
    params: dict | None,
    cap: int,
    ends: float,
    seen: dict | None = None,
) -> tuple[int, Any]:
    """One bounded request: (status, the decoded answer or None); a HonchoError for anything but a 2xx, never with a
    body in its text. `seen` gets the answer's `Date` header (the server's clock, whatever the status), or None."""
    try:
        with bounded(ends):
            response = http.send(http.build_request(method, path, json=body, params=params), stream=True)
            try:
                status = response.status_code
                if seen is not None:
                    seen["date"] = response.headers.get("date")
                error = _status_error(workspace, operation, status)
                if isinstance(error, Missing):
                    error.no_route = _no_route(response)
                if error is not None:
                    raise error  # no other error's body is read: nothing in it is used
                raw = read_capped(response, cap)
            finally:
                response.close()
    except httpx.HTTPError as exc:
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else f"connection failed ({type(exc).__name__})"
        error = Unavailable(workspace, operation, kind)
        # Raised while connecting, before a byte of the request was written.
        error.unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
        raise error from None
    except AnswerTooLarge as exc:
        raise Unavailable(workspace, operation, str(exc), status) from None
    except AnswerEncoded:
        raise Unavailable(
            workspace, operation, "the answer came compressed, which bxmem does not ask for", status
        ) from None
    if status == 204 or not raw:
        return status, None
    try:
        # Strict JSON, as every reader of outside input: NaN and Infinity are no JSON a server may send.
        return status, json.loads(raw, parse_constant=refuse_constant)
    except (ValueError, RecursionError):  # nested too deep is no answer either
        raise Unavailable(workspace, operation, "the answer was not JSON", status) from None


# What FastAPI (Starlette) answers for a path it has no route for.
NO_ROUTE_BODY = {"detail": "Not Found"}


def _no_route(response: httpx.Response) -> bool:
    """Compared whole with a constant, reading at most 64 bytes: nothing of the body is kept or shown."""
    try:
        return bool(json.loads(read_capped(response, 64)) == NO_ROUTE_BODY)
    except (AnswerTooLarge, AnswerEncoded, ValueError, RecursionError):
        return False
