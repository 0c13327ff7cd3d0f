"""The status line and progress bar: where every action reports, and errors land as text.

:meth:`StatusBar.run` is the widget boundary. It calls an action, shows "working..." and a
progress bar while it runs, and turns any exception into a one-line message (never a
traceback). Atomicity is the session's job: its calls change nothing when they fail.

Examples
--------
>>> bar = StatusBar()
>>> bar.run("Divide", lambda progress: 1 / 0)
>>> bar.kind, bar.text
('error', 'Divide failed: ZeroDivisionError: division by zero')
>>> bar.run("Add", lambda progress: 1 + 1)
2
>>> bar.kind
'ok'
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets as widgets
import torch

from prune_explorer.session.errors import InterruptedAfterCommit
from prune_explorer.session.transaction.interrupts import Gate, held_interrupts, machinery

from .html import message

__all__ = ["Progress", "StatusBar", "describe_error", "human_error"]

LOG = logging.getLogger("prune_explorer.widgets")

Progress = Callable[[int, int], None]
"""``progress(done, total)``: report how far a long action got."""


def describe_error(err: BaseException) -> str:
    """A readable one-line description of ``err``.

    Validation errors of the session already name the call, the rule and the value, so they are
    shown as they are; other exceptions get their type name in front.
    """
    if isinstance(err, KeyboardInterrupt):
        return "interrupted (KeyboardInterrupt)"
    text = str(err).strip() or type(err).__name__
    if isinstance(err, (ValueError, TypeError, RuntimeError)) and type(err).__module__.startswith(
        "prune_explorer"
    ):
        return text
    return f"{type(err).__name__}: {text}"


# "Session.preview: ", "Plan.from_json: ", "Explorer: ": where in the API a message was raised.
_LOCATION = re.compile(r"(?:[A-Z]\w*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+): ")


def human_error(err: BaseException, what: str = "") -> str:
    """:func:`describe_error` for people: without the API location that starts the package's
    own messages (``"Session.preview: "``, or ``what`` itself), which the action names already.

    >>> human_error(ValueError("x"))
    'ValueError: x'
    >>> from prune_explorer.session import InvalidStepError
    >>> human_error(InvalidStepError("Session.preview: amount must be in [0, 1]; got 2", "amount"))
    'amount must be in [0, 1]; got 2'
    """
    text = describe_error(err)
    if text != str(err).strip():
        return text  # a foreign exception: its type name leads, nothing to strip
    if what and text.startswith(what + ": "):
        return text[len(what) + 2:]
    match = _LOCATION.match(text)
    return text[match.end():] if match else text


def _done_text(what: str, done: str | Callable[[Any], str] | None, result: Any) -> str:
    # ``result``: None when the action was cut short after taking effect (``done`` may know
    # what it did all the same).
    if callable(done):
        try:
            return done(result)
        except Exception:  # the action succeeded; wording its message must not raise
            return f"{what}: done"
    return done if done is not None else f"{what}: done"


class StatusBar:
    """An HTML status line (class ``pe-status``) and a progress bar (``pe-progress``).

    Attributes
    ----------
    kind : str
        ``"info"``, ``"ok"``, ``"working"``, ``"warning"`` or ``"error"``.
    text : str
        The message shown, as plain text.
    source : str
        Who wrote the message (``"action"`` or ``"preview"``), so a later successful preview
        clears only its own error.
    last_error : BaseException or None
        The exception behind the last error message.
    busy : ipywidgets.HTML
        The busy indicator (``pe-busy``): hidden, shown by :meth:`working` once an action has
        run for ``busy_delay`` seconds.
    busy_delay : float
        Seconds before the busy indicator appears (0: at once).
    """

    def __init__(self) -> None:
        self.html = widgets.HTML(value="")
        self.html.add_class("pe-status")
        self.progress = widgets.IntProgress(
            value=0, min=0, max=1, description="", layout=widgets.Layout(display="none")
        )
        self.progress.add_class("pe-progress")
        self.busy = widgets.HTML(value="", layout=widgets.Layout(display="none"))
        self.busy.add_class("pe-busy")
        self.busy_delay = 0.3
        self._busy_depth = 0
        self.widget = widgets.HBox([self.busy, self.progress, self.html])
        self.kind = "info"
        self.text = ""
        self.source = "action"
        self.last_error: BaseException | None = None
        # Previews write from a worker thread: each check-and-write is one locked step.
        self._lock = threading.RLock()

    def show(self, kind: str, text: str, source: str = "action") -> None:
        """Replace the message."""
        with self._lock:
            self.kind, self.text, self.source = kind, text, source
            self.html.value = message(kind, text)

    def error(self, err: BaseException, what: str, source: str = "action",
              shown: str | None = None) -> None:
        """Set ``"<what> failed: <description of err>"`` (:func:`human_error`) and log the
        traceback at DEBUG. ``shown``: where the message is already on show (e.g. "by the
        controls"); the line then points there instead of repeating it (:attr:`text` holds
        it all the same)."""
        with self._lock:
            self.last_error = err
            LOG.debug("%s failed", what, exc_info=err)
            self.show("error", f"{what} failed: {human_error(err, what)}", source)
            if shown is not None:
                self.html.value = message("error", f"{what} failed: the message is {shown}.")

    def clear(self, source: str | tuple[str, ...] | None = None) -> None:
        """Remove the message (only if ``source``, or one of several, wrote it, when given)."""
        sources = (source,) if isinstance(source, str) else source
        with self._lock:
            if sources is None or self.source in sources:
                self.show("info", "", "action")

    @contextlib.contextmanager
    def working(self, what: str) -> Iterator[None]:
        """Show the busy indicator ("working: <what>") if the block runs longer than
        :attr:`busy_delay`; hide it when the block ends. Safe from any thread; nests."""
        def show() -> None:
            with self._lock:
                if self._busy_depth:
                    self.busy.value = message("working", f"⏳ working: {what}…")
                    self.busy.layout.display = ""

        with self._lock:
            self._busy_depth += 1
        timer = None
        if self.busy_delay <= 0:
            show()
        else:
            timer = threading.Timer(self.busy_delay, show)
            timer.daemon = True
            timer.start()
        try:
            yield
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._busy_depth -= 1
                if not self._busy_depth:
                    self.busy.layout.display = "none"
                    self.busy.value = ""

    def set_progress(self, done: int, total: int) -> None:
        """Show the progress bar at ``done`` of ``total``."""
        self.progress.max = max(1, int(total))
        self.progress.value = min(int(done), self.progress.max)
        self.progress.layout.display = ""

    def run(
        self,
        what: str,
        action: Callable[[Progress], Any],
        *,
        done: str | Callable[[Any], str] | None = None,
        source: str = "action",
        settle: Callable[[], bool] | None = None,
    ) -> Any:
        """Run ``action(progress)``; report success as ``done`` (or "<what>: done").

        ``done`` may be a function of the action's result that returns the message. An error
        is shown as written by ``source`` (see :meth:`clear`).

        ``settle``, when given, is called once the action ended, however it ended, with Ctrl-C
        held (it cannot be cut short): it brings the widgets up to date and says whether the
        action took effect. The message follows that answer, not the exception that arrived:
        an interrupt after the action took effect, however many, is reported as done.
        Without ``settle``, only an :class:`InterruptedAfterCommit` counts as done.

        Returns the action's result, or None when it raised (the error is shown instead). A
        ``KeyboardInterrupt`` is shown too, then re-raised.
        """
        # Ctrl-C is let through only while the action runs: the message always says what
        # happened.
        with held_interrupts() as gate:
            self.show("working", f"{what}: working...")
            self.set_progress(0, 1)
            grad = torch.is_grad_enabled()  # the user's autograd mode, whatever cuts us short
            failure: BaseException | None = None
            try:
                with self.working(what):
                    result = _run_open(gate, action, self.set_progress)
            except BaseException as err:
                failure, result = err, getattr(err, "result", None)
                torch.set_grad_enabled(grad)  # an interrupt in a no_grad exit left it off
            finally:
                self.progress.layout.display = "none"
            try:
                with self.working(what):  # the redraw reads too: the busy line stays up
                    took_effect = (settle() if settle is not None
                                   else isinstance(failure, InterruptedAfterCommit))
            except Exception as err:  # a bug in the redraw: reported as before it was held
                failure, took_effect = failure or err, False
            if failure is None or (took_effect and isinstance(failure, KeyboardInterrupt)):
                self.last_error = None
                self.show("ok", _done_text(what, done, result))
                if failure is not None:
                    raise failure  # done, but the cell still stops
                return result
            self.error(failure, what, source)
            if not isinstance(failure, Exception):
                raise failure  # an interrupt still stops the cell; the message says so
            return None

    def __repr__(self) -> str:
        return f"StatusBar({self.kind}: {self.text!r})"


@machinery
def _run_open(gate: Gate, action: Callable[[Progress], Any], progress: Progress) -> Any:
    # Ctrl-C is let through while the action runs, and no further: one that arrives as it
    # returns waits (this frame is machinery) until the status says it is done.
    with gate.open():
        return action(progress)
