"""The session's transaction and its step runner: every public action happens whole or not at all.

:meth:`Stepping.transaction` is ``Session.transaction``: it holds the session's lock, opens a
savepoint of the journal (:mod:`..transaction.journal`) and rolls it back on any exception;
:meth:`Stepping.run` takes one step inside it (check, snapshot, run, record). A part of
:class:`~prune_explorer.session.Session`, working on its :class:`~..state.SessionState`.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> with s.transaction(dry_run=True):  # apply, look, and leave no trace
...     _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
>>> s.steps
()
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn

from prune_explorer.prune import engine

from ..codegen.tie_split import note_from_cuts, note_ties
from ..errors import InterruptedAfterCommit
from ..history.tensor_history import HistoryEntry, starting_mask
from ..model.aliases import share_aliases
from ..model.watch import (
    MASK_REPLACED,
    MASK_WRITTEN,
    changed_error,
    describe_change,
    seen,
    structure_changed,
)
from ..preview.masks import cached_cuts
from ..preview.order_cache import TensorOrder
from ..state import SessionState
from ..steps.checks import check_step
from ..steps.execute import replay_tensors, run_step
from ..steps.step import Step
from ..steps.tied import tied_step
from ..tensors.packed import PackedMask
from ..tensors.sharded import tensor_of
from ..transaction.interrupts import ThreadState, held_interrupts
from ..transaction.journal import Action, take_snapshot

__all__ = ["Stepping"]


class Stepping:
    """The session's consistency: its transaction, and running one step inside it."""

    def __init__(self, state: SessionState) -> None:
        self._state = state

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
        journal = self._state._journal
        # Ctrl-C is held while the journal changes, and let through only inside the block and
        # the callbacks (see .interrupts): the rollback undoes whatever the block did, and the
        # commit -- closing the savepoint -- cannot stop half-way.
        with held_interrupts() as gate:
            while not self._state._lock.acquire(timeout=0.05):  # a wait Ctrl-C can still end
                gate.check()
            try:
                point = journal.begin()
                state = ThreadState.now()  # the thread's autograd mode is the user's too
                try:
                    with gate.open():
                        yield self._state
                        if dry_run:
                            raise _DryRun
                except BaseException as err:
                    state.restore()  # an interrupt in a no_grad exit left autograd off
                    self.resee(journal.rollback(point))
                    if isinstance(err, AttributeError):  # a module gone behind its back?
                        changed = structure_changed(self._state._model, self._state._known,
                                                    "Session")
                        if changed is not None:
                            raise changed from err
                    if not isinstance(err, _DryRun):
                        raise
                    return
                events = journal.end(point)
            finally:
                self._state._lock.release()
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

    def check_in_sync(self, names: Iterable[str], where: str) -> None:
        for name in dict.fromkeys(names):
            now = seen(*self._state._locate(name))
            change = describe_change(self._state._seen[name], now)
            if change in (MASK_REPLACED, MASK_WRITTEN) and PackedMask.from_tensor(now[1]) == (
                self._state._histories[name][-1].mask
            ):  # the same mask in a new buffer (model.to, .half...) or rewritten: no change
                self._state._seen[name] = now
                continue
            if change is not None:
                raise changed_error(where, name, change)

    def resee(self, names: Iterable[str]) -> None:
        # After every change (step, commit, undo, rollback, move): the aliases of a tied
        # tensor get its state (session/aliases.py), and the state is noted.
        for name in names:
            share_aliases(self._state._model, self._state._known[name])
            self._state._seen[name] = seen(*self._state._locate(name))

    def run(self, step: Step, where: str) -> Step:
        # One step inside the current transaction: check, snapshot, run, record. Returns the
        # step as recorded: with a note of how it split a tie at its cut (Step.ties), if it did.
        step = tied_step(step, self._state._known, self._state._aliases, where, self._state._model)
        check_step(self._state._model, self._state._known, step, where)
        self.check_in_sync(step.targets, where)
        located = [(name, *self._state._locate(name)) for name in step.targets]
        pairs = [(module, tensor_name) for _, module, tensor_name in located]
        kind = "commit" if step.method == "remove" else "apply"
        edits = step.spec.edits_weights  # SparseGPT: undo restores the values too
        snapshots = take_snapshot(pairs, keep_values=kind == "commit" or edits,
                                  bits=self._state._bits)
        # the values as the step finds them, where they can still be pruned (what the tie note
        # reads; a sharded tensor's pruned values are not computed: tensor_of)
        found = {name: tensor_of(module, tensor_name) for name, module, tensor_name in located}
        before = {name: starting_mask(self._state._histories[name], found[name])
                  for name, _, _ in located}
        # The masks and the tie note, from the targets' cached orders if a preview built them
        # (no pass over the entries) or from a global L1 step's key histograms (where a
        # preview cached them); else the core computes the masks and says, on the way, how
        # it split a tie. A calibrated step's scores are no cached order's.
        cuts = cached_cuts(self._state._model, step, self._state._orders) \
            if kind == "apply" and not step.calibrated else None
        # L1 orders valid now: after the step, restricted to the survivors, they are the new
        # state's (an O(n) pass instead of a sort on the next preview).
        l1 = [self._state._orders.peek(module, tensor_name) if kind == "apply" and not edits
              else None for _, module, tensor_name in located]
        action = Action(kind, step, snapshots, step.targets)
        self._state._journal.record(action)
        # what the history packs (bool masks, where the orders gave them) or takes as it is
        # (bits packed on the way, where a global cut's CPU pass built the mask)
        kept: dict[str, torch.Tensor | PackedMask] = {}
        masks = None if cuts is None else _masks_of(cuts, located, kept)
        with engine.cuts_found() as core_cuts:  # the core's cuts: how it split ties
            ran = run_step(self._state._model, step, masks, self._state._calibrated)
        for i, (order, (_, module, tensor_name)) in enumerate(zip(l1, located, strict=True)):
            # The mask installed is order.mask(n) when it came from that very order: the
            # carry need not read it back to find out.
            cut = cuts[i][1] if masks is not None and cuts is not None \
                and order is not None and cuts[i][0] is order else None
            self._state._orders.carry(module, tensor_name, order, cut)
        if kind == "apply":
            note = note_ties(self._state._model, step, before, found, core_cuts) if cuts is None \
                else note_from_cuts(cuts)
            replay = replay_tensors(self._state._model, step, ran, {
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
            ready = iter(PackedMask.from_tensors(
                [m for m in sources if not isinstance(m, PackedMask)]))
            packed = dict(zip(buffers, [m if isinstance(m, PackedMask) else next(ready)
                                        for m in sources], strict=True))
            for name, buffer in buffers.items():
                # the next step's snapshot reuses it
                self._state._bits.remember(buffer, packed[name])
        for name, _, _ in located:
            history = self._state._histories[name]
            mask = history[-1].mask if kind == "commit" else packed[name]
            history.append(HistoryEntry(len(history), step, mask))
        self.resee(step.targets)
        return step


def _masks_of(cuts: list[tuple[Any, int]], located: list[tuple[str, nn.Module, str]],
              kept: dict[str, torch.Tensor | PackedMask]) -> dict[str, Any] | None:
    """The masks a step leaves, from what its preview cached (see ``preview.masks.cached_cuts``;
    None: the core computes them, where a mask buffer's dtype or device differs from the mask
    the cache gives, which then would not be the core's). Where an order gives the mask, its
    bool form goes in ``kept`` too (the history packs it: no second pass over the mask); where
    a global cut packed its bits on the way, the packed mask does."""
    masks = {}
    for (source, n), (address, module, tensor_name) in zip(cuts, located, strict=True):
        if isinstance(source, TensorOrder):
            kept[address] = order_kept = source.kept(n)
            mask = order_kept.to(source.mask_dtype)
        else:
            mask, bits = source.mask_and_bits(n)
            if bits is not None:
                kept[address] = PackedMask.from_bits(mask.shape, *bits)
        buffer = module._buffers.get(tensor_name + "_mask")
        if buffer is not None and (buffer.dtype, buffer.device) != (mask.dtype, mask.device):
            kept.clear()
            return None
        masks[address] = mask
    return masks


class _DryRun(Exception):
    """Raised inside a dry-run transaction to roll it back (never escapes)."""
