"""The session's record of what it did, and the one way to take it back exactly.

A :class:`Journal` holds a session's actions (each with a
:class:`~prune_explorer.prune.engine.ModuleSnapshot` of the modules it changed), its commits,
the generator that draws seeds, and the change events not yet sent. A *savepoint*
(:meth:`Journal.begin`) remembers how long each of those was; :meth:`Journal.rollback` undoes every
action taken since, in reverse, and cuts everything back to the savepoint. That is the whole of
"all or nothing": ``Session.transaction`` wraps it, and every public action of the session (one
step, a plan, a sweep, a commit of several tensors) runs inside one.

Commits (``prune.remove``) write the pruned values into the original parameter in place, so their
snapshot keeps a copy of those values until the outermost transaction ends (:meth:`Journal.seal`);
from then on they are permanent.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> with s.transaction(dry_run=True):  # apply, look, and leave no trace
...     _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
...     int(s.mask("0.weight").sum())
4
>>> s.steps
()
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

from prune_explorer.prune.engine import ModuleSnapshot, snapshot

from ..errors import NotUndoableError
from ..events import EventEmitter, SessionEvent
from ..history.tensor_history import HistoryEntry
from ..model.watch import structure_changed
from ..steps.methods import SEED_LIMIT
from ..steps.step import Step
from ..tensors.packed import MaskBits, PackedMask
from .interrupts import held_interrupts, thread_state_kept

__all__ = ["Action", "Journal", "locked", "take_snapshot"]



def take_snapshot(pairs: list[tuple[nn.Module, str]], *, keep_values: bool,
                  bits: MaskBits | None = None) -> list[ModuleSnapshot]:
    """Snapshots of ``(module, tensor name)`` pairs as the session keeps them: masks as bits
    (32x smaller than a float32 mask), those ``bits`` already holds not packed again."""
    pack = PackedMask.from_tensor if bits is None else bits.pack

    def store(mask: torch.Tensor) -> Callable[[], torch.Tensor]:
        packed, dtype, device = pack(mask), mask.dtype, mask.device
        return lambda: packed.unpack(dtype, device)

    return snapshot(pairs, keep_values=keep_values, store=store)


@dataclass
class Action:
    """One step the session took: ``kind`` is ``"apply"``, ``"commit"`` or ``"train"`` (a
    fine-tune, keep_weights or rewind: :mod:`~prune_explorer.session.steps.training`);
    ``snapshots`` is None once sealed (no way back). A snapshot is anything with
    ``restore()``: a :class:`ModuleSnapshot`, or for a training step one that also has
    ``counterpart()`` (a snapshot of the state now, to redo) and ``nbytes``. ``dropped`` says
    why the snapshots were let go when it was not a commit (the cap on what undo keeps)."""

    kind: str
    step: Step
    snapshots: list[Any] | None
    names: tuple[str, ...]
    dropped: str | None = None

    @property
    def kept_bytes(self) -> int:
        """Bytes of value copies its snapshots hold (0 once sealed)."""
        return sum(int(getattr(s, "nbytes", 0)) + int(getattr(s, "size", 0))
                   for s in self.snapshots or ())

    def restore(self) -> None:
        if self.snapshots is None:  # callers check; never reached
            raise NotUndoableError("Session: this action can no longer be undone")
        for snap in reversed(self.snapshots):
            snap.restore()


@dataclass(frozen=True)
class _Savepoint:
    actions: int
    histories: dict[str, int]
    commits: int
    rng: Any
    events: int
    undo: int  # length of the undo log


# What the rollback runs to take back one change made inside a transaction, and the tensors
# it touches (their watch records are renewed afterwards).
_Undo = tuple[tuple[str, ...], Callable[[], None]]


class Journal:
    """Actions, commits, seed generator and pending events of one session, with savepoints.

    ``histories`` is the session's per-tensor history (shared, not copied): a rollback cuts it
    back too. Every change made inside a transaction -- an action recorded, an action undone, a
    device move -- first writes how to take it back in the *undo log*; a rollback runs the log
    backwards, so it is exact from any point, even half-way through one of those changes.
    """

    def __init__(self, histories: dict[str, list[HistoryEntry]], seed: int | None) -> None:
        self.histories = histories
        self.actions: list[Action] = []
        self.commits: list[Any] = []
        self.events = EventEmitter()
        self.revision = 0
        self._rng = random.Random(seed)
        self._pending: list[SessionEvent] = []
        self._savepoints: list[_Savepoint] = []
        self._undo: list[_Undo] = []

    # -- seeds ------------------------------------------------------------------------------------
    def peek_seed(self) -> int:
        """The seed :meth:`draw_seed` will return next; changes nothing (safe from any thread)."""
        twin = random.Random()
        twin.setstate(self._rng.getstate())
        return twin.randrange(SEED_LIMIT)

    def draw_seed(self) -> int:
        """Draw the next seed (only actions do this, on the caller's thread)."""
        return self._rng.randrange(SEED_LIMIT)

    # -- events -----------------------------------------------------------------------------------
    def emit(self, event: SessionEvent) -> None:
        """Queue ``event``; it is sent when the outermost transaction succeeds."""
        self._pending.append(event)

    # -- savepoints -------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """How many transactions are open."""
        return len(self._savepoints)

    @property
    def floor(self) -> int:
        """Actions below this index belong to before the innermost open transaction."""
        return self._savepoints[-1].actions if self._savepoints else 0

    @property
    def outer_floor(self) -> int:
        """:attr:`floor` as seen from inside an action's own transaction (the one around it)."""
        return self._savepoints[-2].actions if len(self._savepoints) > 1 else 0

    def begin(self) -> _Savepoint:
        """Open a transaction: remember where everything stands (interrupts held)."""
        point = _Savepoint(
            len(self.actions), {n: len(h) for n, h in self.histories.items()},
            len(self.commits), self._rng.getstate(), len(self._pending), len(self._undo),
        )
        self._savepoints.append(point)
        return point

    def on_rollback(self, names: tuple[str, ...], undo: Callable[[], None]) -> None:
        """Log how to take back a change about to be made to ``names`` (call it *before* the
        change: ``undo`` must work from any point of it, and be harmless if it never began)."""
        if self._savepoints:
            self._undo.append((names, undo))

    def rollback(self, point: _Savepoint) -> set[str]:
        """Take back every change since ``point`` (the undo log, backwards), cut everything
        back to it and close it; returns the tensors touched. Interrupts held."""
        touched: set[str] = set()
        while len(self._undo) > point.undo:
            names, undo = self._undo[-1]
            undo()
            self._undo.pop()
            touched.update(names)
        for name, length in point.histories.items():
            del self.histories[name][length:]
        del self.commits[point.commits:]
        self._rng.setstate(point.rng)
        del self._pending[point.events:]
        self._close(point)
        return touched

    def end(self, point: _Savepoint) -> list[SessionEvent]:
        """Close ``point`` after success; the outermost one seals commits, forgets the undo log
        and returns the events to send. Interrupts held."""
        self._close(point)
        if self._savepoints:
            return []
        self.seal()
        self._undo.clear()
        events, self._pending = self._pending, []
        self.revision += bool(events)
        return events

    def _close(self, point: _Savepoint) -> None:
        for index, open_point in enumerate(self._savepoints):
            if open_point is point:
                del self._savepoints[index:]
                return

    def seal(self) -> None:
        """Nothing up to the last commit can be undone any more: drop those snapshots (and the
        values they kept). Later steps stay undoable."""
        last = max((i for i, a in enumerate(self.actions) if a.kind == "commit"), default=-1)
        for action in self.actions[: last + 1]:
            action.snapshots = None

    # -- undo -------------------------------------------------------------------------------------
    def undoable(self, *, outer: bool) -> int:
        """How many of the last actions can be undone one by one now (``outer``: asked from
        inside an action's own transaction)."""
        count = 0
        for action in reversed(self.actions[self.outer_floor if outer else self.floor:]):
            if action.snapshots is None or action.kind == "commit":
                break
            count += 1
        return count

    def record(self, action: Action) -> None:
        """Add ``action``, about to be taken (a rollback restores its snapshots)."""
        self.on_rollback(action.names, functools.partial(self._unrecord, action))
        self.actions.append(action)

    def _unrecord(self, action: Action) -> None:
        action.restore()
        if self.actions and self.actions[-1] is action:
            self.actions.pop()

    def undo_last(self) -> Action:
        """Undo the last action exactly and drop its history entries; returns it.

        Inside a transaction a rollback takes the undo back: the objects the action left on
        the modules are kept (by reference) until the transaction ends.
        """
        action = self.actions[-1]
        if action.snapshots is None:  # callers check; never reached
            raise NotUndoableError("Session: this action can no longer be undone")
        redo = [snap.counterpart() if hasattr(snap, "counterpart")
                else ModuleSnapshot(snap.module, snap.names) for snap in action.snapshots]
        entries = [(self.histories[name], self.histories[name][-1]) for name in action.names]
        self.on_rollback(action.names, functools.partial(self._redo, action, redo, entries))
        with held_interrupts():  # never half-restored, even outside a transaction
            action.restore()
            self.actions.pop()
            for history, _ in entries:
                history.pop()
        return action

    def _redo(self, action: Action, redo: list[Any],
              entries: list[tuple[list[HistoryEntry], HistoryEntry]]) -> None:
        for snap in redo:
            snap.restore()
        if not self.actions or self.actions[-1] is not action:
            self.actions.append(action)
        for history, entry in entries:
            if not history or history[-1] is not entry:
                history.append(entry)


_F = TypeVar("_F", bound=Callable[..., Any])


def locked(method: _F) -> _F:
    # Every public method holds the session's lock: a background preview and a notebook cell
    # never see the model half-changed.
    # It gives the thread its state back on any exit (interrupts.thread_state_kept): a preview's
    # no_grad block stopped by Ctrl-C never leaves autograd off.
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock, thread_state_kept():
            try:
                return method(self, *args, **kwargs)
            except AttributeError as err:  # a module gone behind the session's back?
                state = getattr(self, "_state", self)
                changed = structure_changed(state._model, state._known,
                                            f"Session.{method.__name__}")
                if changed is None:
                    raise
                raise changed from err

    return wrapper  # type: ignore[return-value]
