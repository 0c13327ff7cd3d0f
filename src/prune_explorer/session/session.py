"""``Session``: explore pruning on a live model with preview, history, undo, commit and reports.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> torch.manual_seed(0)  # doctest: +ELLIPSIS
<torch._C.Generator object at ...>
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
>>> s = Session(model)
>>> s.names
('0.weight', '0.bias', '2.weight', '2.bias')
>>> mask = s.preview("0.weight", "ln_structured", amount=0.25, n=2, dim=0)  # model untouched
>>> step = s.apply("0.weight", "ln_structured", amount=0.25, n=2, dim=0)
>>> torch.equal(mask, model[0].weight_mask)
True
>>> _ = s.apply_global(["0.weight", "2.weight"], "l1_unstructured", amount=0.5)
>>> s.history("0.weight").pruned_counts()[:2], int(s.report()["zeros"].sum())  # 8 + 32 / 2
([0, 8], 24)
>>> s.undo()
Step('global_unstructured', ['0.weight', '2.weight'], pruning_method='l1_unstructured', amount=0.5)
>>> s.report()[["name", "methods", "zeros", "sparsity"]]  # prints for people (values: fractions)
       name        methods zeros sparsity
0  0.weight  ln_structured     8    25.0%
1    0.bias                    0     0.0%
2  2.weight                    0     0.0%
3    2.bias                    0     0.0%
>>> result = s.commit()
>>> result.names, result.freed
(('0.weight',), 256)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd
import torch
from torch import nn

from .commits import CommitResult, CommitReview, Committing
from .distributed import ones_mask, refuse_move, refuse_sharded
from .errors import NotUndoableError
from .events import SessionEvent
from .history import HistoryEntry, TensorHistory
from .hooks import find_hook, hook_methods, method_name, refresh_pruned
from .magnitudes import MagnitudeCache
from .methods import check_seed
from .order_cache import OrderCache
from .packed import MaskBits, PackedMask
from .plan import Plan
from .registry import TensorInfo, discover
from .reporting import Reporting
from .reports import effective_tensor
from .sensitivity import sensitivity as _sensitivity
from .step import Step
from .transaction import Journal, locked
from .watch import ModelChangedError, seen

__all__ = ["CommitResult", "CommitReview", "ModelChangedError", "Session"]

class Session(Reporting, Committing):
    """An exploration of pruning on ``model``, which it prunes in place.

    Parameters
    ----------
    model : torch.nn.Module
        Any module. Every parameter of every submodule is a prunable tensor, addressed by
        ``"<module qualified name>.<parameter name>"`` (see :attr:`names`). Tensors already
        pruned when the session starts are recognised; the session returns to that state on
        :meth:`reset`.
    seed : int or None, default 0
        Seeds the session's own ``random.Random``, which draws the seed of each random step
        that is not given one. ``None`` draws from the operating system.

    Notes
    -----
    Methods: ``"identity"``, ``"random_unstructured"`` (amount), ``"l1_unstructured"`` (amount),
    ``"random_structured"`` (amount, dim), ``"ln_structured"`` (amount, n, dim),
    ``"custom_from_mask"`` (mask), and global pruning through :meth:`apply_global`. ``amount``
    is a fraction in [0, 1] of what is still unpruned, or a count. Masks are those of
    ``torch.nn.utils.prune``: the same dtype as the parameter, 1 = kept.

    Every public method holds the session's re-entrant :attr:`lock`, and every action is all
    or nothing (see :meth:`transaction`). Pruning changed on the model behind the session's
    back is refused with :class:`ModelChangedError` (see :mod:`prune_explorer.session.watch`).

    Examples
    --------
    >>> import torch
    >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
    >>> _ = s.apply("0.weight", "random_unstructured", amount=0.5)
    >>> s
    Session(Sequential: 2 tensors, 1 pruned, 1 step (1 undoable), 4 of 10 entries masked (40.0%))
    """

    def __init__(self, model: nn.Module, *, seed: int | None = 0) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"Session: model must be a torch.nn.Module; got {type(model).__name__}")
        if seed is not None:
            seed = check_seed(seed, "Session")
        self._model = model
        self._lock = threading.RLock()
        self._known: dict[str, TensorInfo] = discover(model)
        self._histories: dict[str, list[HistoryEntry]] = {}
        self._found_methods: dict[str, tuple[str, ...]] = {}
        for name, info in self._known.items():
            module = model.get_submodule(info.module_name)
            found = find_hook(module, info.tensor_name)
            if found is None:
                mask = ones_mask(getattr(module, info.tensor_name))
                self._found_methods[name] = ()
            else:
                mask = PackedMask.from_tensor(getattr(module, info.tensor_name + "_mask"))
                self._found_methods[name] = tuple(method_name(m) for m in hook_methods(found[1]))
            self._histories[name] = [HistoryEntry(0, None, mask)]
        self._journal = Journal(self._histories, seed)
        self._events = self._journal.events  # the subscribers (tests count them)
        self._seen = {name: seen(*self._locate(name)) for name in self._known}
        self._orders = OrderCache()  # per tensor state: what a slider move needs (previews)
        self._bits = MaskBits()  # the history's packed masks, by the buffer they describe
        self._magnitudes = MagnitudeCache()  # per tensor state: sorted |w| / norms (histograms)

    # -- what the session holds -----------------------------------------------------------------
    @property
    def model(self) -> nn.Module:
        """The model being pruned (in place)."""
        return self._model

    @property
    def names(self) -> tuple[str, ...]:
        """Addresses of all prunable tensors, in module order."""
        return tuple(self._known)

    def info(self, name: str) -> TensorInfo:
        """Address, module type, shape and numel of one tensor."""
        return self._known[self._check_name(name, "Session.info")]

    def default_targets(self) -> list[str]:
        """The tensors people usually prune: weights of rank >= 2 (Linear, Conv and the like);
        every tensor of rank >= 2 when no such weight exists. The default of every "targets"."""
        wide = [n for n, info in self._known.items() if len(info.shape) >= 2]
        return [n for n in wide if self._known[n].tensor_name == "weight"] or wide

    @property
    @locked
    def steps(self) -> tuple[Step, ...]:
        """Steps applied so far (undone ones excluded), in order; commits appear as ``remove``."""
        return tuple(action.step for action in self._journal.actions)

    @property
    def plan(self) -> Plan:
        """A :class:`Plan` of :attr:`steps` (a copy: editing it does not change the session).

        Pruning found on the model when the session started (:attr:`found`) is not part of the
        plan: replay the plan on a model in that same state.
        """
        return Plan(self.steps)

    @property
    def found(self) -> dict[str, tuple[str, ...]]:
        """Tensors already pruned when the session started, with the methods found on them.

        That pruning is the session's starting point: entry 0 of each :meth:`history`, kept by
        :meth:`reset`, and not part of :attr:`plan` (its settings and seeds are unknown).
        """
        return {n: m for n, m in self._found_methods.items() if m}

    @property
    @locked
    def commits(self) -> tuple[CommitResult, ...]:
        """Every :meth:`commit` so far, with the memory each freed."""
        return tuple(self._journal.commits)

    @property
    @locked
    def can_undo(self) -> bool:
        """Whether :meth:`undo` would succeed now (a step to undo, and it is not a commit)."""
        return self._journal.undoable(outer=False) > 0

    @locked
    def undo_blocker(self) -> str | None:
        """Why :meth:`undo` would refuse now, in words (None: it can undo the last step).

        Examples
        --------
        >>> import torch
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> s.undo_blocker()
        'nothing to undo; no steps are applied'
        >>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
        >>> s.undo_blocker() is None
        True
        """
        return self._undo_blocker(outer=False)

    @locked
    def reset_blocker(self) -> str | None:
        """Why :meth:`reset` would refuse now, or that it has nothing to do, in words (None:
        it would undo every step).

        Examples
        --------
        >>> import torch
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
        >>> s.reset_blocker() is None
        True
        >>> _ = s.commit()
        >>> s.reset_blocker().startswith("the model cannot go back to how the session found it")
        True
        """
        return self._reset_blocker(outer=False)

    def _undo_blocker(self, *, outer: bool) -> str | None:
        # The one rule for undo (Session.undo raises it, the explorer shows it by its button).
        journal = self._journal
        floor = journal.outer_floor if outer else journal.floor
        if len(journal.actions) <= floor:
            return ("nothing to undo; no steps are applied"
                    + (" inside this transaction" if floor else ""))
        action = journal.actions[-1]
        if action.kind == "commit" or action.snapshots is None:
            return (f"the last action was commit of {action.step.target!r}, which is not "
                    "undoable: prune.remove made that pruning permanent and freed the _orig "
                    "copy and the mask")
        return None

    def _reset_blocker(self, *, outer: bool) -> str | None:
        # The one rule for reset (Session.reset raises it, the explorer shows it by its button).
        journal = self._journal
        committed = [a.step.target for a in journal.actions if a.kind == "commit"]
        if committed:
            return ("the model cannot go back to how the session found it because commit "
                    f"made pruning permanent for {committed}; undo() still goes back to just "
                    "after the last commit")
        if journal.outer_floor if outer else journal.floor:
            return "cannot reset inside a transaction that started after the first step"
        if not journal.actions:
            return "nothing to reset; no steps are applied"
        return None

    @locked
    def history(self, name: str) -> TensorHistory:
        """History of ``name``: the mask after each step that touched it (entry 0: as found)."""
        name = self._check_name(name, "Session.history")
        return TensorHistory(name, list(self._histories[name]))

    @locked
    def mask(self, name: str) -> torch.Tensor:
        """Current mask of ``name`` as a bool tensor (all True if not pruned or committed)."""
        name = self._check_name(name, "Session.mask")
        module, tensor_name = self._locate(name)
        if find_hook(module, tensor_name) is None:
            return torch.ones_like(getattr(module, tensor_name), dtype=torch.bool)
        return getattr(module, tensor_name + "_mask") != 0

    @locked
    def tensor(self, name: str) -> torch.Tensor:
        """The values the forward pass uses for ``name`` (``orig * mask`` if pruned), detached."""
        name = self._check_name(name, "Session.tensor")
        return effective_tensor(*self._locate(name))

    def on_change(self, callback: Callable[[SessionEvent], object]) -> Callable[[], None]:
        """Call ``callback(event)`` after each apply/undo/reset/commit/to; returns unsubscribe.

        Inside a :meth:`transaction`, events are sent when it succeeds (none if it fails).
        """
        return self._journal.events.on_change(callback)

    def apply_all(
        self,
        steps: Iterable[Step],
        *,
        where: str = "Session.apply_all",
        progress: Callable[[int, int], object] | None = None,
    ) -> list[Step]:
        """Apply ``steps`` (a :class:`Plan` or any iterable of Step) in order as one transaction.

        A ``remove`` step commits its tensor. If any step fails, nothing is applied and the
        error names it (``"<where>: steps[i]: ..."``). ``progress(done, total)`` is called after
        each step. Returns the steps.
        """
        steps = list(steps)
        with self.transaction():
            for index, step in enumerate(steps):
                if not isinstance(step, Step):
                    raise TypeError(f"{where}: steps[{index}] must be a Step; got "
                                    f"{type(step).__name__}")
                steps[index] = self._apply_ready(step, f"{where}: steps[{index}]")
                if progress is not None:
                    progress(index + 1, len(steps))
        return steps

    # -- apply ----------------------------------------------------------------------------------
    def apply(self, target: str, method: str, *, seed: int | None = None, **settings: Any) -> Step:
        """Prune ``target`` with ``method`` (through ``torch.nn.utils.prune``); returns the Step.

        ``settings`` are the method's: ``amount``; ``amount, dim`` (random_structured);
        ``amount, n, dim`` (ln_structured); ``mask`` (custom_from_mask). Random methods use
        ``seed`` or draw one from the session; the step records it. Invalid input raises
        :class:`InvalidStepError` before anything changes.
        """
        where = "Session.apply"
        with self.transaction():
            step = self._make_step(where, method, target, settings, seed, single=True)
            return self._apply_ready(step, where)

    def apply_global(
        self,
        targets: Sequence[str],
        method: str = "l1_unstructured",
        *,
        amount: float | int,
        seed: int | None = None,
    ) -> Step:
        """``global_unstructured`` over ``targets``: one threshold across all of them.

        ``method`` is ``"l1_unstructured"`` or ``"random_unstructured"``; ``amount`` counts
        over the union of what is still unpruned in the targets.
        """
        where = "Session.apply_global"
        with self.transaction():
            return self._apply_ready(self._global_step(where, targets, method, amount, seed),
                                     where)

    def apply_step(self, step: Step) -> Step:
        """Apply a ready-made :class:`Step` (e.g. from a :class:`Plan`); returns it.

        A ``remove`` step is a :meth:`commit` of its tensor (not undoable).
        """
        if not isinstance(step, Step):
            raise TypeError(f"Session.apply_step: step must be a Step; got {type(step).__name__}")
        with self.transaction():
            return self._apply_ready(step, "Session.apply_step")

    def _apply_ready(self, step: Step, where: str) -> Step:
        if step.method == "remove":
            self._commit([step.target], where)
            return step
        step = self._run(step, where)
        self._journal.emit(SessionEvent("apply", step.targets, (step,)))
        return step

    def sensitivity(self, evaluate: Callable[[nn.Module], float], **options: Any) -> pd.DataFrame:
        """Score the model as each target (and all at once) is pruned more; see
        :func:`prune_explorer.session.sensitivity.sensitivity` for the options. The model,
        history and plan are left exactly as they were.
        """
        refuse_sharded(self._model, "Session.sensitivity")
        return _sensitivity(self, evaluate, **options)

    # -- undo / reset / commit ------------------------------------------------------------------
    def undo(self) -> Step:
        """Undo the last step exactly (mask buffer, hook and container contents, the original
        Parameter object when the tensor's first step is undone); returns the undone step.

        Raises
        ------
        NotUndoableError
            Nothing to undo, the last action was a commit, or (inside a :meth:`transaction`)
            the last step was taken before it.
        ModelChangedError
            The last step's tensors were changed outside the session.
        """
        where = "Session.undo"
        with self.transaction():
            journal = self._journal
            blocker = self._undo_blocker(outer=True)
            if blocker is not None:
                raise NotUndoableError(f"{where}: {blocker}")
            action = journal.actions[-1]
            self._check_in_sync(action.names, where)
            journal.undo_last()
            self._resee(action.names)
            journal.emit(SessionEvent("undo", action.names, (action.step,)))
        return action.step

    def reset(self) -> None:
        """Return the model to how the session found it (undo every step).

        Raises :class:`NotUndoableError`, changing nothing, if a commit happened.
        """
        where = "Session.reset"
        with self.transaction():
            journal = self._journal
            blocker = self._reset_blocker(outer=True)
            if blocker is not None and journal.actions:
                raise NotUndoableError(f"{where}: {blocker}")
            if not journal.actions:
                return
            names = tuple(dict.fromkeys(n for a in journal.actions for n in a.names))
            self._check_in_sync(names, where)
            steps = self.steps
            while journal.actions:
                journal.undo_last()
            self._resee(names)
            journal.emit(SessionEvent("reset", names, steps))

    # -- device ---------------------------------------------------------------------------------
    def to(self, device: torch.device | str) -> Session:
        """Move the model, its masks and the history to ``device``; returns the session."""
        device = torch.device(device)
        with self._lock:
            if self._journal.depth:
                raise NotUndoableError("Session.to: cannot move the model inside a transaction")
            self._check_in_sync(self._known, "Session.to")
            refuse_move(self._model, device, "Session.to")
            self._model.to(device)
            for name in self._known:
                refresh_pruned(*self._locate(name))  # Module.to does not move the pruned copy
                self._histories[name][:] = [
                    HistoryEntry(e.index, e.step, e.mask.to(device))
                    for e in self._histories[name]
                ]
            self._resee(self._known)
        self._journal.events.emit(SessionEvent("to", (), ()))
        return self

    # -- shrink ---------------------------------------------------------------------------------
    def shrink(self, example_inputs: Any, *, repeats: int = 20) -> Any:
        """A new, smaller model without the channels pruning made dead, and its savings.

        Outside undo and history: the session's model is not changed (adopt ``report.model``
        yourself, e.g. in a new Session). See :mod:`prune_explorer.session.shrink`.

        Returns
        -------
        prune_explorer.session.shrink.ShrinkReport
            ``.model``, parameters/FLOPs/state_dict bytes/CPU latency before and after.
        """
        from .shrink import shrink

        refuse_sharded(self._model, "Session.shrink")
        with self._lock:
            return shrink(self._model, example_inputs, repeats=repeats)

    # -- internals ------------------------------------------------------------------------------
    @locked
    def __repr__(self) -> str:
        pruned = sum(1 for n in self._known if find_hook(*self._locate(n)) is not None)
        masked = sum(h[-1].mask.pruned for h in self._histories.values())
        total = sum(info.numel for info in self._known.values())
        undoable = self._journal.undoable(outer=False)
        steps = len(self._journal.actions)
        share = masked / total if total else 0.0
        return (
            f"Session({type(self._model).__name__}: {len(self._known)} tensors, {pruned} pruned, "
            f"{steps} step{'s' * (steps != 1)} ({undoable} undoable), "
            f"{masked:,} of {total:,} entries masked ({share:.1%}))"
        )
