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
>>> s.report()[["name", "zeros", "methods"]]
       name  zeros           methods
0  0.weight      8  (ln_structured,)
1    0.bias      0                ()
2  2.weight      0                ()
3    2.bias      0                ()
>>> result = s.commit()
>>> result.names, result.freed
(('0.weight',), 256)
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import nn

from .checks import check_step
from .compute import global_masks, local_mask
from .errors import InvalidStepError, NotUndoableError
from .events import EventEmitter, SessionEvent
from .execute import run_step
from .history import HistoryEntry, TensorHistory
from .hooks import (
    ModuleOrder,
    TensorState,
    capture,
    capture_order,
    find_hook,
    hook_methods,
    method_name,
    refresh_pruned,
    restore,
    restore_order,
)
from .methods import SEED_LIMIT, check_method, check_seed, check_settings, is_random
from .packed import PackedMask
from .plan import Plan
from .registry import TensorInfo, discover, unknown_target
from .reports import (
    compare_frame,
    effective_tensor,
    memory_report,
    tensor_report,
    with_total,
)
from .step import Step

__all__ = ["CommitResult", "Session"]


@dataclass(frozen=True)
class CommitResult:
    """What :meth:`Session.commit` made permanent and the memory it released.

    ``bytes_before``/``bytes_after`` count, for the committed tensors, the ``_orig`` parameter,
    the ``_mask`` buffer and the pruned copy before, and the remaining parameter after.
    """

    names: tuple[str, ...]
    bytes_before: int
    bytes_after: int

    @property
    def freed(self) -> int:
        """Bytes released (``bytes_before - bytes_after``)."""
        return self.bytes_before - self.bytes_after

    def __repr__(self) -> str:
        return (
            f"CommitResult({len(self.names)} tensors made permanent, "
            f"{self.bytes_before:,} -> {self.bytes_after:,} bytes, freed {self.freed:,})"
        )


@dataclass
class _Snapshot:
    # Per tensor: its module, its captured state, and (for `remove`) the values `_orig` held.
    tensors: list[tuple[nn.Module, TensorState, torch.Tensor | None]]
    orders: list[tuple[nn.Module, ModuleOrder]]


@dataclass
class _Action:
    kind: str  # "apply" or "commit"
    step: Step
    snapshot: _Snapshot | None  # None once a commit has sealed it (no way back)
    names: tuple[str, ...] = field(default=())


class Session:
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
        self._known: dict[str, TensorInfo] = discover(model)
        self._histories: dict[str, list[HistoryEntry]] = {}
        self._found_methods: dict[str, tuple[str, ...]] = {}
        for name, info in self._known.items():
            module = model.get_submodule(info.module_name)
            found = find_hook(module, info.tensor_name)
            if found is None:
                device = getattr(module, info.tensor_name).device
                mask = PackedMask.ones(info.shape, device)
                self._found_methods[name] = ()
            else:
                mask = PackedMask.from_tensor(getattr(module, info.tensor_name + "_mask"))
                self._found_methods[name] = tuple(method_name(m) for m in hook_methods(found[1]))
            self._histories[name] = [HistoryEntry(0, None, mask)]
        self._actions: list[_Action] = []
        self._events = EventEmitter()
        self._rng = random.Random(seed)
        self._pending_seed: int | None = None
        self._commits: list[CommitResult] = []

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

    @property
    def steps(self) -> tuple[Step, ...]:
        """Steps applied so far (undone ones excluded), in order; commits appear as ``remove``."""
        return tuple(action.step for action in self._actions)

    @property
    def plan(self) -> Plan:
        """A :class:`Plan` of :attr:`steps` (a copy: editing it does not change the session).

        Pruning found on the model when the session started is not part of the plan: replay the
        plan on a model in that same state.
        """
        return Plan(self.steps)

    @property
    def commits(self) -> tuple[CommitResult, ...]:
        """Every :meth:`commit` so far, with the memory each freed."""
        return tuple(self._commits)

    def history(self, name: str) -> TensorHistory:
        """History of ``name``: the mask after each step that touched it (entry 0: as found)."""
        name = self._check_name(name, "Session.history")
        return TensorHistory(name, self._histories[name])

    def mask(self, name: str) -> torch.Tensor:
        """Current mask of ``name`` as a bool tensor (all True if not pruned or committed)."""
        name = self._check_name(name, "Session.mask")
        module, tensor_name = self._locate(name)
        if find_hook(module, tensor_name) is None:
            return torch.ones_like(getattr(module, tensor_name), dtype=torch.bool)
        return getattr(module, tensor_name + "_mask") != 0

    def tensor(self, name: str) -> torch.Tensor:
        """The values the forward pass uses for ``name`` (``orig * mask`` if pruned), detached."""
        name = self._check_name(name, "Session.tensor")
        return effective_tensor(*self._locate(name))

    def on_change(self, callback: Callable[[SessionEvent], object]) -> Callable[[], None]:
        """Call ``callback(event)`` after each apply/undo/reset/commit/to; returns unsubscribe."""
        return self._events.on_change(callback)

    # -- preview --------------------------------------------------------------------------------
    def preview(
        self, target: str, method: str, *, seed: int | None = None, **settings: Any
    ) -> torch.Tensor:
        """The mask :meth:`apply` would leave on ``target`` with these arguments.

        Nothing changes: not the model (state_dict, Parameter objects, hooks), not the global
        RNG state, not the session. For random methods without ``seed``, it uses the seed the
        next :meth:`apply` will use, so preview and apply agree.

        Returns
        -------
        torch.Tensor
            Same shape, dtype and device as the tensor; 1 = kept.
        """
        where = "Session.preview"
        step = self._make_step(where, method, target, settings, seed, single=True)
        return self._preview_step(step, where)[target]

    def preview_global(
        self,
        targets: Sequence[str],
        method: str = "l1_unstructured",
        *,
        amount: float | int,
        seed: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """The masks :meth:`apply_global` would leave, by address; nothing changes."""
        where = "Session.preview_global"
        step = self._make_step(
            where, "global_unstructured", _as_list(targets),
            {"pruning_method": method, "amount": amount}, seed,
        )
        return self._preview_step(step, where)

    def _preview_step(self, step: Step, where: str) -> dict[str, torch.Tensor]:
        check_step(self._model, self._known, step, where)
        if step.is_global:
            return global_masks(self._model, step)
        module, tensor_name = self._locate(step.target)  # type: ignore[arg-type]
        return {step.target: local_mask(module, tensor_name, step)}  # type: ignore[dict-item]

    # -- apply ----------------------------------------------------------------------------------
    def apply(self, target: str, method: str, *, seed: int | None = None, **settings: Any) -> Step:
        """Prune ``target`` with ``method`` (through ``torch.nn.utils.prune``); returns the Step.

        ``settings`` are the method's: ``amount``; ``amount, dim`` (random_structured);
        ``amount, n, dim`` (ln_structured); ``mask`` (custom_from_mask). Random methods use
        ``seed`` or draw one from the session; the step records it. Invalid input raises
        :class:`InvalidStepError` before anything changes.
        """
        where = "Session.apply"
        step = self._make_step(where, method, target, settings, seed, single=True)
        self._apply_step(step, where)
        self._consume_seed(seed, step)
        return step

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
        step = self._make_step(
            where, "global_unstructured", _as_list(targets),
            {"pruning_method": method, "amount": amount}, seed,
        )
        self._apply_step(step, where)
        self._consume_seed(seed, step)
        return step

    def apply_step(self, step: Step) -> Step:
        """Apply a ready-made :class:`Step` (e.g. from a :class:`Plan`); returns it.

        A ``remove`` step is a :meth:`commit` of its tensor (not undoable).
        """
        if not isinstance(step, Step):
            raise TypeError(f"Session.apply_step: step must be a Step; got {type(step).__name__}")
        if step.method == "remove":
            self.commit([step.target])  # type: ignore[list-item]
            return step
        self._apply_step(step, "Session.apply_step")
        return step

    # -- trials (apply, look, undo: no events, no trace) ---------------------------------------
    @contextlib.contextmanager
    def _trial(self, target: str, method: str, **settings: Any) -> Iterator[None]:
        seed = settings.pop("seed", None)
        step = self._make_step("Session.sensitivity", method, target, settings, seed,
                               single=True)
        self._apply_step(step, "Session.sensitivity", emit=False)
        try:
            yield
        finally:
            self._undo_last()

    @contextlib.contextmanager
    def _trial_global(self, targets: Sequence[str], method: str, *, amount: float,
                      seed: int | None = None) -> Iterator[None]:
        step = self._make_step("Session.sensitivity", "global_unstructured", list(targets),
                               {"pruning_method": method, "amount": amount}, seed)
        self._apply_step(step, "Session.sensitivity", emit=False)
        try:
            yield
        finally:
            self._undo_last()

    def sensitivity(self, evaluate: Callable[[nn.Module], float], **options: Any) -> pd.DataFrame:
        """Score the model as each target (and all at once) is pruned more; see
        :func:`prune_explorer.session.sensitivity.sensitivity` for the options. The model,
        history and plan are left exactly as they were.
        """
        from .sensitivity import sensitivity

        return sensitivity(self, evaluate, **options)

    # -- undo / reset / commit ------------------------------------------------------------------
    def undo(self) -> Step:
        """Undo the last step exactly (mask buffer, hook and container contents, the original
        Parameter object when the tensor's first step is undone); returns the undone step.

        Raises
        ------
        NotUndoableError
            Nothing to undo, or the last action was a commit.
        """
        if not self._actions:
            raise NotUndoableError("Session.undo: nothing to undo; no steps are applied")
        action = self._actions[-1]
        if action.kind == "commit" or action.snapshot is None:
            raise NotUndoableError(
                f"Session.undo: the last action was commit of {action.step.target!r}, which is "
                "not undoable: prune.remove made that pruning permanent and freed the _orig copy "
                "and the mask"
            )
        self._undo_last()
        self._events.emit(SessionEvent("undo", action.names, (action.step,)))
        return action.step

    def reset(self) -> None:
        """Return the model to how the session found it (undo every step).

        Raises :class:`NotUndoableError`, changing nothing, if a commit happened.
        """
        committed = [a.step.target for a in self._actions if a.kind == "commit"]
        if committed:
            raise NotUndoableError(
                "Session.reset: the model cannot go back to how the session found it because "
                f"commit made pruning permanent for {committed}; undo() still goes back to just "
                "after the last commit"
            )
        if not self._actions:
            return
        names = tuple(dict.fromkeys(n for a in self._actions for n in a.names))
        steps = self.steps
        self._rollback()
        self._events.emit(SessionEvent("reset", names, steps))

    def commit(self, names: str | Iterable[str] | None = None) -> CommitResult:
        """Make pruning permanent with ``prune.remove`` (not undoable).

        Parameters
        ----------
        names : str or iterable of str, optional
            Tensors to commit; default: every currently pruned tensor.

        Returns
        -------
        CommitResult
            The tensors committed and the bytes before/after (``freed`` = ``_orig`` + mask).
        """
        where = "Session.commit"
        if names is None:
            chosen = [n for n in self._known if find_hook(*self._locate(n)) is not None]
        elif isinstance(names, str):
            chosen = [names]
        elif isinstance(names, Iterable):
            chosen = list(names)
        else:
            raise InvalidStepError(
                f"{where}: names must be a tensor address, a list of them or None; got {names!r}",
                "names",
            )
        steps = []
        for name in chosen:
            step = Step._build(where, "remove", name, {}, None)
            check_step(self._model, self._known, step, where)
            if step in steps:
                raise InvalidStepError(f"{where}: names lists {name!r} twice", "names")
            steps.append(step)
        if not steps:
            return CommitResult((), 0, 0)
        memory = memory_report(self._model, self._known).set_index("name")
        before = int(sum(memory.loc[n, "bytes_before"] for n in chosen))
        after = int(sum(memory.loc[n, "bytes_after"] for n in chosen))
        try:
            for step in steps:
                self._apply_step(step, where, emit=False)
        finally:
            self._seal()
        result = CommitResult(tuple(chosen), before, after)
        self._commits.append(result)
        self._events.emit(SessionEvent("commit", tuple(chosen), tuple(steps)))
        return result

    # -- device ---------------------------------------------------------------------------------
    def to(self, device: torch.device | str) -> Session:
        """Move the model, its masks and the history to ``device``; returns the session."""
        device = torch.device(device)
        self._model.to(device)
        for name in self._known:
            refresh_pruned(*self._locate(name))  # Module.to does not move the pruned copy
            self._histories[name] = [
                HistoryEntry(e.index, e.step, e.mask.to(device)) for e in self._histories[name]
            ]
        self._events.emit(SessionEvent("to", (), ()))
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

        return shrink(self._model, example_inputs, repeats=repeats)

    # -- reports --------------------------------------------------------------------------------
    def methods(self, name: str) -> tuple[str, ...]:
        """Method names applied to ``name`` in order: those found on it, then the session's."""
        name = self._check_name(name, "Session.methods")
        return self._found_methods[name] + tuple(
            e.step.method for e in self._histories[name][1:] if e.step is not None
        )

    def report(self, totals: bool = False) -> pd.DataFrame:
        """One row per tensor; columns
        ``["name", "module_type", "shape", "numel", "zeros", "sparsity", "channels_pruned",
        "methods"]`` (see :mod:`prune_explorer.session.reports`).

        With ``totals=True`` a final row named ``"TOTAL"`` sums ``numel`` and ``zeros`` over the
        model.
        """
        frame = tensor_report(self._model, self._known, {n: self.methods(n) for n in self._known})
        return with_total(frame) if totals else frame

    def memory_report(self) -> pd.DataFrame:
        """Bytes that :meth:`commit` would free, per pruned tensor plus a ``"TOTAL"`` row."""
        return memory_report(self._model, self._known)

    def compare_global_local(
        self,
        names: Sequence[str] | None = None,
        amount: float | int = 0.5,
        *,
        collapse_threshold: float = 0.99,
    ) -> pd.DataFrame:
        """Global vs uniform per-tensor ``l1_unstructured`` at the same ``amount``, side by side.

        Computed with previews (on top of the current state), so nothing changes. ``names``
        defaults to every tensor with at least 2 dims (the weights). One row per tensor plus a
        ``"TOTAL"`` row; columns ``["name", "numel", "sparsity_global", "sparsity_local",
        "pruned_global", "pruned_local", "collapsed_global", "collapsed_local"]``. A tensor is
        collapsed when at least ``collapse_threshold`` of it is pruned or every slice along some
        dim is.
        """
        where = "Session.compare_global_local"
        if names is None:
            names = [n for n, info in self._known.items() if len(info.shape) >= 2]
        names = _as_list(names)
        if not isinstance(collapse_threshold, (int, float)) or isinstance(
            collapse_threshold, bool
        ) or not 0.0 < collapse_threshold <= 1.0:
            raise InvalidStepError(
                f"{where}: collapse_threshold must be a float in (0, 1]; "
                f"got {collapse_threshold!r}",
                "collapse_threshold",
            )
        glob = self._make_step(
            where, "global_unstructured", names,
            {"pruning_method": "l1_unstructured", "amount": amount}, None,
        )
        global_result = self._preview_step(glob, where)
        local_result = {}
        for name in names:
            step = Step._build(where, "l1_unstructured", name, {"amount": amount})
            local_result.update(self._preview_step(step, where))
        return compare_frame(self._known, names, global_result, local_result, collapse_threshold)

    # -- internals ------------------------------------------------------------------------------
    def _check_name(self, name: Any, where: str) -> str:
        if not isinstance(name, str) or name not in self._known:
            if isinstance(name, str):
                raise unknown_target(name, self._known, where, "name")
            raise InvalidStepError(f"{where}: name must be a tensor address string; got {name!r}",
                                   "name")
        return name

    def _locate(self, name: str) -> tuple[nn.Module, str]:
        info = self._known[name]
        return self._model.get_submodule(info.module_name), info.tensor_name

    def _make_step(
        self,
        where: str,
        method: Any,
        target: Any,
        settings: Mapping[str, Any],
        seed: Any,
        single: bool = False,
    ) -> Step:
        spec = check_method(method, where)
        if single and spec.name == "global_unstructured":
            raise InvalidStepError(
                f"{where}: method 'global_unstructured' acts on several tensors; use "
                f"{where}_global(targets, method, amount=...)",
                "method",
            )
        if single and spec.name == "remove":
            raise InvalidStepError(
                f"{where}: method 'remove' makes pruning permanent; use Session.commit(names)",
                "method",
            )
        clean = check_settings(spec, settings, where)
        if seed is None and is_random(spec, clean):
            if self._pending_seed is None:
                self._pending_seed = self._rng.randrange(SEED_LIMIT)
            seed = self._pending_seed
        return Step._build(where, spec.name, target, clean, seed)

    def _consume_seed(self, given: int | None, step: Step) -> None:
        # A drawn seed is used by every preview until an apply consumes it.
        if given is None and step.is_random:
            self._pending_seed = None

    def _apply_step(
        self, step: Step, where: str, emit: bool = True, keep_values: bool = False
    ) -> None:
        # keep_values: for `remove`, keep a copy of the `_orig` values so that even the commit
        # can be rolled back until sealed (Plan.apply's all-or-nothing); costs one copy.
        check_step(self._model, self._known, step, where)
        located = [(name, *self._locate(name)) for name in step.targets]
        orders = {id(m): (m, capture_order(m)) for _, m, _ in located}
        states = []
        for _, module, tensor_name in located:
            state = capture(module, tensor_name)
            data = None
            if keep_values and step.method == "remove":
                data = state.param.detach().clone()
            states.append((module, state, data))
        snapshot = _Snapshot(states, list(orders.values()))
        try:
            run_step(self._model, step)
        except BaseException:
            self._restore(snapshot)
            raise
        for name, module, tensor_name in located:
            history = self._histories[name]
            if step.method == "remove":
                mask = history[-1].mask
            else:
                mask = PackedMask.from_tensor(getattr(module, tensor_name + "_mask"))
            history.append(HistoryEntry(len(history), step, mask))
        kind = "commit" if step.method == "remove" else "apply"
        self._actions.append(_Action(kind, step, snapshot, step.targets))
        if emit:
            self._events.emit(SessionEvent(kind, step.targets, (step,)))

    def _restore(self, snapshot: _Snapshot) -> None:
        for module, state, data in reversed(snapshot.tensors):
            if data is not None:
                with torch.no_grad():
                    state.param.copy_(data)
            restore(module, state)
        for module, order in snapshot.orders:
            restore_order(module, order)

    def _undo_last(self) -> None:
        action = self._actions.pop()
        if action.snapshot is None:  # callers check; never reached
            raise NotUndoableError("Session: this action can no longer be undone")
        self._restore(action.snapshot)
        for name in action.names:
            self._histories[name].pop()

    def _rollback(self) -> None:
        # Undo every action that can still be undone (commits included until sealed).
        while self._actions and self._actions[-1].snapshot is not None:
            self._undo_last()

    def _seal(self) -> None:
        # Nothing up to the last commit can be undone any more: drop those snapshots (and the
        # `_orig` values a plan kept for its rollback). Later steps stay undoable.
        last = max((i for i, a in enumerate(self._actions) if a.kind == "commit"), default=-1)
        for action in self._actions[: last + 1]:
            action.snapshot = None

    def __repr__(self) -> str:
        pruned = sum(1 for n in self._known if find_hook(*self._locate(n)) is not None)
        masked = sum(h[-1].mask.pruned for h in self._histories.values())
        total = sum(info.numel for info in self._known.values())
        undoable = 0
        for action in reversed(self._actions):
            if action.snapshot is None or action.kind == "commit":
                break
            undoable += 1
        steps = len(self._actions)
        share = masked / total if total else 0.0
        return (
            f"Session({type(self._model).__name__}: {len(self._known)} tensors, {pruned} pruned, "
            f"{steps} step{'s' * (steps != 1)} ({undoable} undoable), "
            f"{masked:,} of {total:,} entries masked ({share:.1%}))"
        )


def _as_list(names: Any) -> Any:
    # Keep strings as they are (the Step check rejects them with a clear message).
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        return names
    return list(names)
