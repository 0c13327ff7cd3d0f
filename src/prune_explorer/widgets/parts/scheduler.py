"""Run the latest request only: coalescing for live previews.

Dragging a slider sends many value changes. Rendering each of them in turn would queue stale
pictures behind the one the user is looking for. A :class:`LatestOnly` keeps just the newest
request: while a job runs, newer requests replace each other, and when the job finishes it runs
once more with the newest one. Requests that were superseded are never run.

Two modes:

``debounce=None`` (synchronous)
    :meth:`LatestOnly.request` runs the job at once in the caller's thread. Deterministic; the
    mode of the tests and of scripts.
``debounce=seconds`` (background)
    A daemon worker thread runs the job after ``debounce`` seconds without a new request
    (0 = as soon as the worker is free). :meth:`LatestOnly.flush` runs the pending request now
    and returns when it is done, which makes the background mode testable too.

Examples
--------
>>> seen = []
>>> runner = LatestOnly(seen.append, debounce=60.0)  # a long quiet period: nothing runs alone
>>> for value in range(10):
...     runner.request(value)
>>> runner.flush()
True
>>> seen  # nine stale requests were dropped
[9]
>>> runner.close()
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["LatestOnly"]

_NOTHING = object()

# Schedulers whose worker may be mid-job when the interpreter exits. A daemon thread still inside a
# torch kernel at shutdown aborts the process ("terminate called without an active exception"), so
# at exit every live scheduler is closed, which lets a running job finish first.
_LIVE: weakref.WeakSet[LatestOnly] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for scheduler in list(_LIVE):
        scheduler.close()


class LatestOnly:
    """Call ``job(request)`` for the newest request only (see the module docstring).

    Parameters
    ----------
    job : callable
        Called with one request at a time, never concurrently with itself. Exceptions go to
        ``on_error`` when it is given; otherwise they are raised to the caller (synchronous
        mode and :meth:`flush`) or dropped (worker thread).
    debounce : float or None
        ``None``: run synchronously. A number >= 0: seconds of quiet before the worker runs.
    on_error : callable, optional
        Called with the exception when a job fails.
    name : str
        Name of the worker thread.
    """

    def __init__(
        self,
        job: Callable[[Any], object],
        *,
        debounce: float | None = None,
        on_error: Callable[[BaseException], object] | None = None,
        name: str = "prune-explorer-preview",
    ) -> None:
        if debounce is not None and (
            isinstance(debounce, bool) or not isinstance(debounce, (int, float)) or debounce < 0
        ):
            raise ValueError(
                f"LatestOnly: debounce must be None or a number of seconds >= 0; got {debounce!r}"
            )
        self._job = job
        self.debounce = None if debounce is None else float(debounce)
        self._on_error = on_error
        self._name = name
        self._cond = threading.Condition()
        self._run_lock = threading.RLock()  # one job at a time, whoever runs it
        self._pending: Any = _NOTHING
        self._last_request_at = 0.0
        self._closed = False
        self._thread: threading.Thread | None = None
        _LIVE.add(self)
        self.requested = 0  #: requests received
        self.runs = 0  #: jobs run (requested - runs were superseded or are pending)

    # -- public -----------------------------------------------------------------------------------
    @property
    def pending(self) -> bool:
        """True while a request waits to be run."""
        with self._cond:
            return self._pending is not _NOTHING

    def request(self, value: Any) -> None:
        """Ask for ``job(value)``; supersedes any request not yet started."""
        if self._closed:
            return
        self.requested += 1
        if self.debounce is None:
            self._run(value)
            return
        with self._cond:
            self._pending = value
            self._last_request_at = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._worker, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self) -> bool:
        """Run the pending request now, in this thread; returns whether there was one.

        Also waits for a job the worker has already started, so that on return the newest
        request has been run.
        """
        with self._run_lock:  # waits for a running job to finish
            with self._cond:
                value, self._pending = self._pending, _NOTHING
            if value is _NOTHING:
                return False
            self._run(value)
            return True

    def close(self) -> None:
        """Stop the worker (pending requests are dropped); later requests are ignored."""
        with self._cond:
            self._closed = True
            self._pending = _NOTHING
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    # -- internals --------------------------------------------------------------------------------
    def _run(self, value: Any) -> None:
        with self._run_lock:
            self.runs += 1
            try:
                self._job(value)
            except Exception as err:
                if self._on_error is None:
                    raise
                self._on_error(err)

    def _take(self) -> Any:
        # Wait for a request and for `debounce` seconds of quiet after it; _NOTHING on close.
        with self._cond:
            while True:
                if self._closed:
                    return _NOTHING
                if self._pending is _NOTHING:
                    self._cond.wait()
                    continue
                delay = self.debounce or 0.0  # the worker runs in background mode only
                quiet = time.monotonic() - self._last_request_at
                if quiet < delay:
                    self._cond.wait(delay - quiet)
                    continue
                return self._pending

    def _worker(self) -> None:
        while True:
            value = self._take()
            if value is _NOTHING:
                return
            with self._run_lock:
                with self._cond:
                    if self._pending is not value:  # flushed or superseded meanwhile
                        continue
                    self._pending = _NOTHING
                with contextlib.suppress(Exception):  # no on_error: nobody to tell
                    self._run(value)

    def __repr__(self) -> str:
        mode = "synchronous" if self.debounce is None else f"background, debounce {self.debounce}s"
        return (
            f"LatestOnly({mode}, {self.requested} requested, {self.runs} run, "
            f"pending={self.pending})"
        )
