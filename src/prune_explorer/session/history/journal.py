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

import contextlib
import functools
import random
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

from prune_explorer.prune import engine
from prune_explorer.prune.engine import ModuleSnapshot, snapshot

from ..codegen.tie_split import note_from_cuts, note_ties
from ..errors import InterruptedAfterCommit, NotUndoableError
from ..events import EventEmitter, SessionEvent
from ..model.aliases import share_aliases, tied_step
from ..model.sharded import tensor_of
from ..model.targets import TensorInfo
from ..model.watch import (
    MASK_REPLACED,
    MASK_WRITTEN,
    ModelChangedError,
    Seen,
    describe_change,
    seen,
)
from ..slider.order_cache import OrderCache, TensorOrder
from ..slider.previews import cached_cuts
from ..steps.calibrated import Calibrated
from ..steps.checks import check_step
from ..steps.execute import replay_tensors, run_step
from ..steps.methods import SEED_LIMIT
from ..steps.step import Step
from .interrupts import held_interrupts
from .packed import MaskBits, PackedMask
from .tensor_history import HistoryEntry, starting_mask

__all__ = ["Action", "Journal", "Transactional", "locked"]



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
    """One step the session took: ``kind`` is ``"apply"`` or ``"commit"``; ``snapshots`` is
    None once sealed (no way back)."""

    kind: str
    step: Step
    snapshots: list[ModuleSnapshot] | None
    names: tuple[str, ...]

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
        redo = [ModuleSnapshot(snap.module, snap.names) for snap in action.snapshots]
        entries = [(self.histories[name], self.histories[name][-1]) for name in action.names]
        self.on_rollback(action.names, functools.partial(self._redo, action, redo, entries))
        with held_interrupts():  # never half-restored, even outside a transaction
            action.restore()
            self.actions.pop()
            for history, _ in entries:
                history.pop()
        return action

    def _redo(self, action: Action, redo: list[ModuleSnapshot],
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
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class Transactional:
    """The session's consistency: its lock, its transaction, and running one step inside it.

    A mixin of :class:`~prune_explorer.session.Session`, which sets the attributes below.
    """

    _model: nn.Module
    _known: dict[str, TensorInfo]
    _aliases: dict[str, str]  # alias address of a tied tensor -> the address it is listed under
    _histories: dict[str, list[HistoryEntry]]
    _journal: Journal
    _lock: threading.RLock
    _seen: dict[str, Seen]
    _orders: OrderCache  # the previews' orders: an apply installs their masks
    _bits: MaskBits  # the history's packed masks, by buffer: snapshots reuse them
    _calibrated: Calibrated | None  # what Session.calibrate recorded (calibrated steps read it)

    @property
    def lock(self) -> threading.RLock:
        """The session's re-entrant lock; hold it to make several calls one atomic read."""
        return self._lock


    def _locate(self, name: str) -> tuple[nn.Module, str]:
        info = self._known[name]
        return self._model.get_submodule(info.module_name), info.tensor_name

    # -- the transaction ------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self, *, dry_run: bool = False) -> Iterator[Any]:
        """Everything in the block happens, or nothing does.

        If the block raises anything (``KeyboardInterrupt`` included), every step taken in it is
        undone exactly -- tensors, hooks, buffers, history, plan, commits, the seed generator --
        and no change event is sent. On success the events are sent once the outermost
        transaction ends, to every subscriber even if one fails (the first failure is raised
        after; an interrupt then is an :class:`InterruptedAfterCommit`: the action is done).
        Ctrl-C waits while the session's own records change, so they are never half-written.
        Commits in the block stay undoable by the rollback until then (their original values
        are copied meanwhile). ``dry_run=True`` always rolls back: apply, look,
        leave no trace. Holds :attr:`lock` while the block runs; transactions nest.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2)))
        >>> try:
        ...     with s.transaction():
        ...         _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
        ...         _ = s.apply("1.weight", "l1_unstructured", amount=99)  # too many: fails
        ... except ValueError:
        ...     pass
        >>> s.steps, sorted(s.model.state_dict())  # the first step was undone too
        ((), ['0.bias', '0.weight', '1.bias', '1.weight'])
        """
        journal = self._journal
        # Ctrl-C is held while the journal changes, and let through only inside the block and
        # the callbacks (see .interrupts): the rollback undoes whatever the block did, and the
        # commit -- closing the savepoint -- cannot stop half-way.
        with held_interrupts() as gate:
            while not self._lock.acquire(timeout=0.05):  # a wait Ctrl-C can still end
                gate.check()
            try:
                point = journal.begin()
                grad = torch.is_grad_enabled()  # the thread's autograd mode is the user's too
                try:
                    with gate.open():
                        yield self
                        if dry_run:
                            raise _DryRun
                except BaseException as err:
                    torch.set_grad_enabled(grad)  # an interrupt in a no_grad exit left it off
                    self._resee(journal.rollback(point))
                    if not isinstance(err, _DryRun):
                        raise
                    return
                events = journal.end(point)
            finally:
                self._lock.release()
            if not events:  # nested, or nothing changed: a held Ctrl-C is raised at the end
                return
            # Done: every subscriber hears of it, even if Ctrl-C came since the commit.
            held, gate.pending = gate.pending, False
            failure = journal.events.deliver(events, functools.partial(gate.open, check=False))
            if failure is None and (held or gate.pending):
                gate.pending, failure = False, KeyboardInterrupt()
            if isinstance(failure, KeyboardInterrupt) and not isinstance(
                    failure, InterruptedAfterCommit):
                raise InterruptedAfterCommit(
                    "the action was interrupted after it took effect, while its change events "
                    "were sent; it is done (see Session.revision)") from failure
            if failure is not None:
                raise failure

    def _check_in_sync(self, names: Iterable[str], where: str) -> None:
        for name in dict.fromkeys(names):
            now = seen(*self._locate(name))
            change = describe_change(self._seen[name], now)
            if change in (MASK_REPLACED, MASK_WRITTEN) and PackedMask.from_tensor(now[1]) == (
                self._histories[name][-1].mask
            ):  # the same mask in a new buffer (model.to, .half...) or rewritten: no change
                self._seen[name] = now
                continue
            if change is not None:
                raise ModelChangedError(
                    f"{where}: tensor {name!r} was changed outside the session ({change}); the "
                    "session's history no longer describes it, so it refuses to act on it. "
                    "Start a new Session(model) to continue from the model as it is"
                )

    def _resee(self, names: Iterable[str]) -> None:
        # After every change (step, commit, undo, rollback, move): the aliases of a tied
        # tensor get its state (session/aliases.py), and the state is noted.
        for name in names:
            share_aliases(self._model, self._known[name])
            self._seen[name] = seen(*self._locate(name))

    def _run(self, step: Step, where: str) -> Step:
        # One step inside the current transaction: check, snapshot, run, record. Returns the
        # step as recorded: with a note of how it split a tie at its cut (Step.ties), if it did.
        step = tied_step(step, self._known, self._aliases, where, self._model)
        check_step(self._model, self._known, step, where)
        self._check_in_sync(step.targets, where)
        located = [(name, *self._locate(name)) for name in step.targets]
        pairs = [(module, tensor_name) for _, module, tensor_name in located]
        kind = "commit" if step.method == "remove" else "apply"
        edits = step.spec.edits_weights  # SparseGPT: undo restores the values too
        snapshots = take_snapshot(pairs, keep_values=kind == "commit" or edits, bits=self._bits)
        # the values as the step finds them, where they can still be pruned (what the tie note
        # reads; a sharded tensor's pruned values are not computed: tensor_of)
        found = {name: tensor_of(module, tensor_name) for name, module, tensor_name in located}
        before = {name: starting_mask(self._histories[name], found[name]) for name, _, _ in located}
        # The masks and the tie note, from the targets' cached orders if a preview built them
        # (no pass over the entries) or from a global L1 step's key histograms (built if need
        # be); else the core computes the masks and the note is looked up after the step ran.
        cuts = cached_cuts(self._model, step, self._orders, build_global=True) \
            if kind == "apply" and not step.calibrated else None
        # L1 orders valid now: after the step, restricted to the survivors, they are the new
        # state's (an O(n) pass instead of a sort on the next preview).
        l1 = [self._orders.peek(module, tensor_name) if kind == "apply" and not edits else None
              for _, module, tensor_name in located]
        action = Action(kind, step, snapshots, step.targets)
        self._journal.record(action)
        kept: dict[str, torch.Tensor] = {}  # bool masks, where the orders gave them
        masks = None if cuts is None else _masks_of(cuts, located, kept)
        with engine.cuts_found() as core_cuts:  # the core's cuts: how it split ties
            ran = run_step(self._model, step, masks, self._calibrated)
        for i, (order, (_, module, tensor_name)) in enumerate(zip(l1, located, strict=True)):
            # The mask installed is order.mask(n) when it came from that very order: the
            # carry need not read it back to find out.
            cut = cuts[i][1] if masks is not None and cuts is not None \
                and order is not None and cuts[i][0] is order else None
            self._orders.carry(module, tensor_name, order, cut)
        if kind == "apply":
            note = note_ties(self._model, step, before, found, core_cuts) if cuts is None \
                else note_from_cuts(cuts)
            replay = replay_tensors(self._model, step, ran, {
                name: mask.unpack(torch.bool) for name, mask in before.items()
            }) if step.calibrated else None
            step = action.step = step._noted(note, ran.detail, replay)
        packed: dict[str, PackedMask] = {}
        if kind != "commit":  # every target's bits at once: one host read for their counts
            buffers = {name: getattr(module, tensor_name + "_mask")
                       for name, module, tensor_name in located}
            sources = [kept[name] if masks is not None and name in kept
                       and buffers[name] is masks.get(name) else buffers[name]
                       for name, _, _ in located]
            packed = dict(zip(buffers, PackedMask.from_tensors(sources), strict=True))
            for name, buffer in buffers.items():
                self._bits.remember(buffer, packed[name])  # the next step's snapshot reuses it
        for name, _, _ in located:
            history = self._histories[name]
            mask = history[-1].mask if kind == "commit" else packed[name]
            history.append(HistoryEntry(len(history), step, mask))
        self._resee(step.targets)
        return step


def _masks_of(cuts: list[tuple[Any, int]], located: list[tuple[str, nn.Module, str]],
              kept: dict[str, torch.Tensor]) -> dict[str, Any] | None:
    """The masks a step leaves, from what its preview cached (see ``compute.cached_cuts``;
    None: the core computes them, where a mask buffer's dtype or device differs from the mask
    the cache gives, which then would not be the core's). Where an order gives the mask, its
    bool form goes in ``kept`` too (the history packs it: no second pass over the mask)."""
    masks = {}
    for (source, n), (address, module, tensor_name) in zip(cuts, located, strict=True):
        if isinstance(source, TensorOrder):
            kept[address] = source.kept(n)
            mask = kept[address].to(source.mask_dtype)
        else:
            mask = source.mask(n)
        buffer = module._buffers.get(tensor_name + "_mask")
        if buffer is not None and (buffer.dtype, buffer.device) != (mask.dtype, mask.device):
            kept.clear()
            return None
        masks[address] = mask
    return masks


class _DryRun(Exception):
    """Raised inside a dry-run transaction to roll it back (never escapes)."""
