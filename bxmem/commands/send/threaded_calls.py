"""Calls on a thread of their own, so `send` prepares the next request while Honcho answers the last."""

from __future__ import annotations

import queue
import threading


class Lane:
    """A daemon thread that makes calls one after another, so the main thread can
    prepare the next request while this one waits for Honcho. A run has two:
    one posts messages, one opens the next group's session. Being a daemon, it
    is abandoned, not waited for, when a run stops with a call in flight."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, client, call, *args) -> Call:
        pending = Call(client)
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, daemon=True)
            self._thread.start()
        self._calls.put((pending, call, args))
        return pending

    def close(self, then_close: list | None = None) -> None:
        """The thread ends once the calls queued before this are made, closing
        `then_close` (clients still in use by those calls) on its way out."""
        if self._thread is not None:
            self._calls.put((None, then_close or [], ()))
            self._thread = None

    def _serve(self) -> None:
        while True:
            pending, call, args = self._calls.get()
            if pending is None:
                for client in call:
                    client.close()
                return
            try:
                pending.result = call(*args)
            except BaseException as exc:  # handed to the main thread by `wait`
                pending.error = exc
            pending.done.set()


class Call:
    def __init__(self, client) -> None:
        self.client = client  # not closed under the call while it is in flight
        self.done = threading.Event()
        self.result = None
        self.error: BaseException | None = None

    @property
    def busy(self) -> bool:
        return not self.done.is_set()

    def wait(self):
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.result
