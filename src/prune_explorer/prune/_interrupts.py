"""Ctrl-C waits while the package changes its state: :func:`held_interrupts`.

An interrupt (SIGINT: Ctrl-C, Jupyter's interrupt button) raises ``KeyboardInterrupt`` between
any two bytecodes of the main thread. Bookkeeping that must never stop half-way -- the core
putting a module back after a failed install, the session opening, rolling back or committing a
transaction -- runs while interrupts are *held*: a SIGINT that arrives then is recorded and
raised as soon as the held section ends. Only the parts that may take long or run the caller's
code are *open* to it (:meth:`Gate.open`): the block of a transaction, which the transaction
rolls back exactly when it is interrupted, and the session's change-event callbacks. Sections
nest: an open inner section passes a SIGINT to the handler of the section around it, so a
second Ctrl-C during the core's rollback inside a session's open block waits for the rollback.

Threads other than the main thread receive no signals: there :func:`held_interrupts` changes
nothing.

Examples
--------
>>> import signal
>>> done = []
>>> try:
...     with held_interrupts() as gate:
...         signal.raise_signal(signal.SIGINT)  # Ctrl-C: recorded, not raised here...
...         done.append(gate.pending)
... except KeyboardInterrupt:
...     done.append("raised at the end")
>>> done
[True, 'raised at the end']
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # what signal.signal wraps (no stub)
import contextlib
import dis
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

__all__ = ["Gate", "held_interrupts", "machinery"]

# Code that an interrupt must not stop half-way even where the gate is open: what enters and
# leaves a generator-based ``with`` block (an interrupt there would skip the generator's own
# clean-up), the functions marked with :func:`machinery`, and a ``with`` statement between its
# ``__enter__`` and its block (:func:`_entering_with`). One that arrives there waits.
_MACHINERY = {contextlib._GeneratorContextManager.__enter__.__code__,
              contextlib._GeneratorContextManager.__exit__.__code__}

_F = TypeVar("_F", bound=Callable[..., Any])

#: The instructions that call a ``with`` statement's ``__enter__``: an interrupt raised there,
#: once ``__enter__`` has returned, would skip ``__exit__`` (the block is not entered yet).
_WITH_ENTRY = frozenset(dis.opmap[op] for op in ("BEFORE_WITH", "SETUP_WITH",
                                                 "BEFORE_ASYNC_WITH", "SETUP_ASYNC_WITH")
                        if op in dis.opmap)


def _entering_with(frame: FrameType) -> bool:
    """Whether ``frame`` stands at a ``with`` statement whose ``__enter__`` just returned."""
    code, at = frame.f_code.co_code, frame.f_lasti
    return 0 <= at < len(code) and code[at] in _WITH_ENTRY

_SIGINT = int(signal.SIGINT)


def machinery(function: _F) -> _F:
    """Mark ``function`` as never stopped by an interrupt inside :meth:`Gate.open` (it is
    held instead); what it calls is not marked."""
    _MACHINERY.add(function.__code__)
    return function


class Gate:
    """The state of one :func:`held_interrupts` section: ``pending`` is True once a SIGINT
    arrived while held; :meth:`open` lets interrupts through for a block."""

    __slots__ = ("is_open", "pending", "previous")

    def __init__(self, previous: Any) -> None:
        self.previous = previous
        self.pending = False
        self.is_open = False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The SIGINT handler while the section runs."""
        if self.is_open and (frame is None or (frame.f_code not in _MACHINERY
                                               and not _entering_with(frame))):
            self._pass_on(frame)
            return
        self.pending = True

    def _pass_on(self, frame: FrameType | None) -> None:
        # to the handler of the section around (Python's raises KeyboardInterrupt)
        if callable(self.previous):
            self.previous(signal.SIGINT, frame)
        elif self.previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    def check(self) -> None:
        """Deliver a held interrupt now (call where giving up changes nothing): it raises
        ``KeyboardInterrupt``, unless a section around this one holds it in turn."""
        if self.pending:
            self.pending = False
            self._pass_on(None)

    def open(self, *, check: bool = True) -> _Opened:
        """Let interrupts through inside the block (a held one is raised on entering it, with
        ``check``)."""
        return _Opened(self, check)

    def __repr__(self) -> str:
        return f"Gate(open={self.is_open}, pending={self.pending})"


class _Unheld(Gate):
    """Outside the main thread: no signal ever arrives; nothing is held."""

    __slots__ = ()


class _Opened:
    """The block of :meth:`Gate.open` (entering and leaving it is machinery)."""

    __slots__ = ("check", "gate")

    def __init__(self, gate: Gate, check: bool) -> None:
        self.gate = gate
        self.check = check

    @machinery
    def __enter__(self) -> None:
        if self.check:
            self.gate.check()
        self.gate.is_open = True

    @machinery
    def __exit__(self, *exc: object) -> None:
        self.gate.is_open = False


class held_interrupts:  # used as a function: ``with held_interrupts() as gate:``
    """Hold SIGINT for the block (except inside ``gate.open()``); raise it when the block ends.

    The interrupt is delivered to the handler that was installed before (normally Python's,
    which raises ``KeyboardInterrupt``). Sections nest.

    A class rather than a function returning one: entered on every pruning call. The handler
    is swapped through ``_signal`` (what ``signal.signal`` wraps: that wrapper's conversions to
    and from enums cost more than the swap itself).
    """

    __slots__ = ("gate",)

    @machinery
    def __enter__(self) -> Gate:
        previous = _signal.getsignal(_SIGINT)
        if previous is None:  # a handler Python cannot put back
            self.gate: Gate = _Unheld(None)
            return self.gate
        gate = self.gate = Gate(previous)
        try:
            _signal.signal(_SIGINT, gate.handle)
        except ValueError:  # not the main thread (of the main interpreter): no signal arrives
            gate = self.gate = _Unheld(None)
        return gate

    @machinery
    def __exit__(self, *exc: object) -> None:
        gate = self.gate
        if isinstance(gate, _Unheld):
            return
        _signal.signal(_SIGINT, gate.previous)
        if gate.pending:
            signal.raise_signal(signal.SIGINT)
