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

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
import torch
from torch import nn

from prune_explorer.importance.calibration import Calibration, Loss
from prune_explorer.prune.layers import out_dim
from prune_explorer.prune.validation import unprunable

from .analysis.frames import effective_tensor
from .analysis.sensitivity import sensitivity as _sensitivity
from .analysis.why import CriteriaComparison, WhyData
from .errors import InterruptedAfterCommit, InvalidStepError, NotUndoableError
from .events import SessionEvent
from .history.tensor_history import HistoryEntry, TensorHistory
from .loop.fine_tuning import FineTuning, check_undo_bytes
from .loop.results import RoundResult, ScheduleRun
from .loop.schedule import Schedule
from .model.aliases import unshared
from .model.hooks import find_hook, hook_methods, refresh_pruned
from .model.saving import guard_merging, guard_saving
from .model.targets import TensorInfo, alias_map, discover, is_lookup_or_norm, quantized_weights
from .model.watch import MODULE_GONE, ModelChangedError, changed_error, seen
from .parts.arguments import Arguments
from .parts.calibrating import Calibrating
from .parts.commits import CommitResult, CommitReview, Commits
from .parts.explaining import Explaining
from .parts.previewing import Previews
from .parts.reporting import Reports
from .parts.stepping import Stepping
from .plans import plan as _plans
from .plans.plan import Plan
from .preview.magnitudes import MagnitudeCache, Magnitudes
from .preview.order_cache import OrderCache
from .preview.picture import (
    CellEdges,
    MaskSummaries,
    PreviewPicture,
    StepRequest,
    preview_picture,
)
from .steps.calibrated import Calibrated
from .steps.checks import check_step
from .steps.methods import METHODS, check_seed, method_name
from .steps.step import Step, split_address
from .steps.tied import tied_step
from .steps.training import TrainFunction, TrainingStep
from .tensors.packed import MaskBits, PackedMask, ones_mask
from .tensors.sharded import refuse_move, refuse_sharded, tensor_of
from .transaction.interrupts import thread_state_kept
from .transaction.journal import Action, Journal, locked

__all__ = ["CommitResult", "CommitReview", "ModelChangedError", "Session"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _told_by(source: Callable[..., Any]) -> Callable[[_F], _F]:
    """Give a method that hands over to one of the session's parts the part's docstring, so
    ``help(Session.x)`` reads the same wherever ``x`` lives."""
    def document(method: _F) -> _F:
        method.__doc__ = source.__doc__
        return method

    return document


def _placement(model: nn.Module, histories: dict[str, list[HistoryEntry]]
               ) -> Callable[[], None]:
    """What ``model.to`` and a history move change, by reference; returns the function that
    puts it all back (the same Parameter objects with their old data and gradients, the old
    buffers and pruned copies, the old history entries)."""
    params = [(p, p.data, p.grad) for p in model.parameters()]
    modules = [(m, dict(m._parameters), dict(m._buffers),
                {k: v for k, v in m.__dict__.items() if isinstance(v, torch.Tensor)})
               for m in model.modules()]
    entries = {name: list(history) for name, history in histories.items()}

    def put_back() -> None:
        for param, data, grad in params:
            param.grad = None
            param.data = data
            param.grad = grad
        for module, parameters, buffers, attributes in modules:
            module._parameters.clear()
            module._parameters.update(parameters)
            module._buffers.clear()
            module._buffers.update(buffers)
            module.__dict__.update(attributes)
            refresh = getattr(module, "_init_flat_weights", None)  # RNNs cache their weights
            if refresh is not None:
                refresh()
        for name, history in entries.items():
            histories[name][:] = history

    return put_back


class Session:
    """An exploration of pruning on ``model``, which it prunes in place.

    Parameters
    ----------
    model : torch.nn.Module
        Any module. Every parameter of every submodule is a prunable tensor, addressed by
        ``"<module qualified name>.<parameter name>"`` (see :attr:`names`). Tensors already
        pruned when the session starts are recognised; the session returns to that state on
        :meth:`reset`. A parameter held by several modules (tied weights, as GPT-2's
        ``lm_head.weight`` and ``transformer.wte.weight``) is one tensor: listed once, pruned
        once with every name seeing the same mask, counted once (see :attr:`tied` and
        :mod:`prune_explorer.session.model.aliases`).
    seed : int or None, default 0
        Seeds the session's own ``random.Random``, which draws the seed of each random step
        that is not given one. ``None`` draws from the operating system.
    undo_bytes : int or None, default None
        The most bytes of weight copies the history keeps so that fine-tunes and rewinds can
        be undone exactly (None: no cap); see :attr:`undo_bytes`.

    Notes
    -----
    Methods: ``"identity"``, ``"random_unstructured"`` (amount), ``"l1_unstructured"`` (amount),
    ``"random_structured"`` (amount, dim), ``"ln_structured"`` (amount, n, dim),
    ``"custom_from_mask"`` (mask), and global pruning through :meth:`apply_global`. ``amount``
    is a fraction in [0, 1] of what is still unpruned, or a count. Masks are those of
    ``torch.nn.utils.prune``: the same dtype as the parameter, 1 = kept.

    Every public method holds the session's re-entrant :attr:`lock`, and every action is all
    or nothing (see :meth:`transaction`). The public methods are all here; those that only
    hand over to one of the session's parts (``parts/``: previews, reports, commits, the
    transaction) say which, and each part sees the session through
    :class:`~prune_explorer.session.state.SessionState` only. Pruning changed on the model
    behind the session's back is refused with :class:`ModelChangedError` (see
    :mod:`prune_explorer.session.model.watch`).

    Examples
    --------
    >>> import torch
    >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
    >>> _ = s.apply("0.weight", "random_unstructured", amount=0.5)
    >>> s
    Session(Sequential: 2 tensors, 1 pruned, 1 step (1 undoable), 4 of 10 entries masked (40.0%))
    """

    def __init__(self, model: nn.Module, *, seed: int | None = 0,
                 undo_bytes: int | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"Session: model must be a torch.nn.Module; got {type(model).__name__}")
        if seed is not None:
            seed = check_seed(seed, "Session")
        undo_bytes = check_undo_bytes(undo_bytes, "Session")
        self._model = model
        self._lock = threading.RLock()
        self._known: dict[str, TensorInfo] = discover(model)  # a tied tensor once
        self._aliases = alias_map(self._known)
        for info in self._known.values():
            apart = unshared(model, info) if info.aliases else ()
            if apart:
                warnings.warn(
                    f"Session: tensor {info.name!r} is tied to {', '.join(map(repr, apart))} "
                    f"(one parameter) but they do not share its pruning: torch.nn.utils.prune "
                    f"prunes one module, which unties them. The session treats them as one "
                    f"tensor with the pruning of {info.name!r}; its next step or commit on it "
                    "gives every alias that pruning", UserWarning, stacklevel=2)
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
        self._calibrated: Calibrated | None = None  # Session.calibrate's (parts/calibrating.py)
        # The parts (parts/): each works on this session's state (SessionState).
        self._stepping = Stepping(self)
        self._arguments = Arguments(self)
        self._previews = Previews(self, self._arguments, self._stepping)
        self._reports = Reports(self, self._arguments, self._previews)
        self._commits = Commits(self, self._stepping)
        self._fine_tuning = FineTuning(self, self._stepping, undo_bytes)
        self._calibrating = Calibrating(self, self._arguments, self._stepping)
        self._explaining = Explaining(self, self._arguments, self._previews)
        guard_saving(model)  # save_pretrained warns while pruning would be lost (saving.py)
        guard_merging(model)  # peft's merge_and_unload refuses while it would lose the delta

    # -- the session's state, as its parts see it (SessionState) ---------------------------------
    def _locate(self, name: str) -> tuple[nn.Module, str]:
        info = self._known[name]
        try:
            return self._model.get_submodule(info.module_name), info.tensor_name
        except AttributeError:  # gone behind the session's back (an adapter merged...)
            raise changed_error("Session", name, MODULE_GONE.format(info.module_name)) \
                from None

    # -- the transaction (parts/stepping.py) -----------------------------------------------------
    @property
    def lock(self) -> threading.RLock:
        """The session's re-entrant lock; hold it to make several calls one atomic read."""
        return self._lock

    @_told_by(Stepping.transaction)
    def transaction(self, *, dry_run: bool = False) -> contextlib.AbstractContextManager[Any]:
        return self._stepping.transaction(dry_run=dry_run)

    def _check_in_sync(self, names: Iterable[str], where: str) -> None:
        self._stepping.check_in_sync(names, where)

    # -- previews (parts/previewing.py) ----------------------------------------------------------
    @_told_by(Previews.preview)
    def preview(self, target: str, method: str, *, seed: int | None = None,
                **settings: Any) -> torch.Tensor:
        return self._previews.preview(target, method, seed=seed, **settings)

    @_told_by(Previews.preview_masks)
    def preview_masks(self, target: str, method: str, *, seed: int | None = None,
                      **settings: Any) -> Mapping[str, torch.Tensor]:
        return self._previews.preview_masks(target, method, seed=seed, **settings)

    @_told_by(Previews.preview_global)
    def preview_global(self, targets: Sequence[str], method: str = "l1_unstructured", *,
                       amount: float | int, seed: int | None = None,
                       importance: str | None = None) -> Mapping[str, torch.Tensor]:
        return self._previews.preview_global(targets, method, amount=amount, seed=seed,
                                             importance=importance)

    @_told_by(Previews.preview_cells)
    def preview_cells(self, target: str, method: str, *, row_edges: np.ndarray,
                      col_edges: np.ndarray, targets: Sequence[str] | None = None,
                      seed: int | None = None, alive: bool = False, **settings: Any
                      ) -> np.ndarray | None:
        return self._previews.preview_cells(target, method, row_edges=row_edges,
                                            col_edges=col_edges, targets=targets, seed=seed,
                                            alive=alive, **settings)

    @locked
    def preview_picture(
        self,
        request: StepRequest,
        *,
        cell_edges: CellEdges | None = None,
        summaries: MaskSummaries | None = None,
    ) -> PreviewPicture:
        """Everything one picture of a previewed step is drawn from, in one consistent reading.

        The masks of :meth:`preview_masks` (or :meth:`preview_global`), the shown tensor's
        counts now, the kept entries per picture cell from :meth:`preview_cells` where the
        session's order tells them, a reader of windows, the other targets' kept counts and
        the targets' sizes: what a view needs to draw the step and count it, decided here. A
        slider step on a cached tensor builds no mask; what is lazy stays lazy until read.

        Parameters
        ----------
        request : StepRequest
            The step and the tensor shown (``request.target``).
        cell_edges : callable, optional
            ``shape -> (row_edges, col_edges)`` of the picture's cells (matrix view, rank >=
            2); without it the picture pools :attr:`PreviewPicture.shown`, read here.
        summaries : MaskSummaries, optional
            The current state's summaries, kept by the caller between pictures so counts and
            slices are read once per state; a fresh one by default.

        Returns
        -------
        PreviewPicture
            Finish its numbers with :meth:`PreviewPicture.counts` once the picture is pooled.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> from prune_explorer.session.preview.picture import StepRequest
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(8, 4)))
        >>> picture = s.preview_picture(StepRequest("0.weight", "l1_unstructured",
        ...                                         {"amount": 0.25}))
        >>> picture
        PreviewPicture('0.weight', l1_unstructured, shape=(4, 8), pooled mask, mask built)
        >>> picture.counts(shown_kept=int(picture.shown().sum())).stats.units_pruned
        8
        """
        return preview_picture(self, request, cell_edges=cell_edges, summaries=summaries)


    def _preview_step(self, step: Step, where: str) -> Mapping[str, torch.Tensor]:
        return self._previews.preview_step(step, where)

    def _canonical(self, target: Any) -> Any:
        return self._arguments.canonical(target)

    # -- calibration (parts/calibrating.py) ------------------------------------------------------
    @_told_by(Calibrating.calibrate)
    def calibrate(self, batches: Iterable[Any], loss: Loss | None = None, *,
                  targets: Sequence[str] | None = None, per_sample: bool = True) -> Calibration:
        return self._calibrating.calibrate(batches, loss, targets=targets, per_sample=per_sample)

    @property
    def calibration(self) -> Calibration | None:
        """The statistics of the last :meth:`calibrate`, or None."""
        return None if self._calibrated is None else self._calibrated.statistics

    # -- why a criterion keeps a weight (parts/explaining.py) -----------------------------------
    @_told_by(Explaining.why)
    def why(self, name: str, importance: str = "wanda") -> WhyData:
        return self._explaining.why(name, importance)

    @_told_by(Explaining.compare_criteria)
    def compare_criteria(self, target: str, method: str = "l1_unstructured", *, against: str,
                         importance: str = "magnitude", targets: Sequence[str] | None = None,
                         seed: int | None = None, **settings: Any) -> CriteriaComparison:
        return self._explaining.compare_criteria(target, method, against=against,
                                                 importance=importance, targets=targets,
                                                 seed=seed, **settings)

    # -- reports (parts/reporting.py) ------------------------------------------------------------
    @_told_by(Reports.methods)
    def methods(self, name: str) -> tuple[str, ...]:
        return self._reports.methods(name)

    @_told_by(Reports.alive)
    def alive(self, name: str, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self._reports.alive(name, mask)

    @_told_by(Reports.kept_count)
    def kept_count(self, name: str, *, alive: bool = False) -> int:
        return self._reports.kept_count(name, alive=alive)

    @_told_by(Reports.zeros_after)
    def zeros_after(self, masks: Mapping[str, torch.Tensor]) -> dict[str, int]:
        return self._reports.zeros_after(masks)

    @_told_by(Reports.magnitudes)
    def magnitudes(self, name: str, *, n: Any = None, dim: int | None = None) -> Magnitudes:
        return self._reports.magnitudes(name, n=n, dim=dim)

    @_told_by(Reports.report)
    def report(self, totals: bool = False) -> pd.DataFrame:
        return self._reports.report(totals)

    @_told_by(Reports.zeros)
    def zeros(self) -> dict[str, int]:
        return self._reports.zeros()

    @_told_by(Reports.memory_report)
    def memory_report(self) -> pd.DataFrame:
        return self._reports.memory_report()

    @_told_by(Reports.compare_global_local)
    def compare_global_local(self, names: Sequence[str] | None = None, amount: float | int = 0.5,
                             *, collapse_threshold: float = 0.99) -> pd.DataFrame:
        return self._reports.compare_global_local(names, amount,
                                                  collapse_threshold=collapse_threshold)

    # -- commits (parts/commits.py) --------------------------------------------------------------
    @_told_by(Commits.review_commit)
    def review_commit(self, names: str | Iterable[str] | None = None) -> CommitReview:
        return self._commits.review_commit(names)

    @_told_by(Commits.commit)
    def commit(self, names: str | Iterable[str] | None = None) -> CommitResult:
        return self._commits.commit(names)

    # -- what the session holds -----------------------------------------------------------------
    @property
    def model(self) -> nn.Module:
        """The model being pruned (in place)."""
        return self._model

    @property
    def names(self) -> tuple[str, ...]:
        """Addresses of all prunable tensors, in module order; a tied tensor once (its other
        names: :attr:`tied`)."""
        return tuple(self._known)

    def info(self, name: str) -> TensorInfo:
        """Address, module type, shape and numel of one tensor."""
        return self._known[self._arguments.check_name(name, "Session.info")]

    def default_targets(self) -> list[str]:
        """The tensors people usually prune: weights of rank >= 2 (Linear, Conv and the like)
        outside embedding tables (token and position) and norm layers -- under any of a tied
        tensor's names -- and a tied tensor once. The default of every "targets"; any tensor
        can still be picked by name.

        When that leaves nothing, the first non-empty of: the other tensors of rank >= 2
        outside those layers, every weight of rank >= 2, every tensor of rank >= 2.

        Tensors the pruning API cannot prune (:attr:`unprunable`: int8/int4 or quantized
        weights, torchao tensors, the packed weights of ``torch.ao`` quantized layers, meta or
        offloaded weights) are never default targets. When the model has any of rank >= 2,
        the result is the remaining floating-point weights outside embeddings and norms (maybe
        none: ``[]``) -- never a fallback to the token embedding -- and a ``UserWarning`` names
        what was left out and why.
        """
        left_out = {n: why for n, why in self.unprunable.items()
                    if n not in self._known or len(self._known[n].shape) >= 2}
        wide = [n for n, info in self._known.items()
                if len(info.shape) >= 2 and n not in left_out]
        usual = [n for n in wide if not any(
            is_lookup_or_norm(self._model.get_submodule(split_address(a)[0]))
            for a in (n, *self._known[n].aliases))]
        weights = [n for n in usual if self._known[n].tensor_name == "weight"]
        if left_out:  # the usual targets were quantized or offloaded: no silent fallback
            chosen = weights or usual
            first, why = next(iter(left_out.items()))
            warnings.warn(
                f"Session.default_targets: left out {len(left_out)} tensor"
                f"{'s' * (len(left_out) != 1)} the pruning API cannot prune (Session.unprunable"
                f" lists them), e.g. {first!r}: {why}; "
                + (f"returning the {len(chosen)} remaining floating-point weights"
                   if chosen else "no floating-point weights remain outside embeddings and "
                   "norms: returning []"), UserWarning, stacklevel=2)
            return chosen
        return weights or usual or [n for n in wide if self._known[n].tensor_name == "weight"] \
            or wide

    @property
    def unprunable(self) -> dict[str, str]:
        """Tensors of the model the pruning API cannot prune, each with why: weights on the
        meta device (offloaded, or not loaded), quantized or integer ones (torch.ao, torchao,
        int8/int4), and the packed weights of ``torch.ao`` quantized layers (not parameters, so
        not in :attr:`names`). Naming one in a step is refused with that reason.

        Examples
        --------
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Linear(2, 2))
        >>> model[1].weight = torch.nn.Parameter(torch.ones(2, 2, dtype=torch.int8),
        ...                                      requires_grad=False)
        >>> list(Session(model).unprunable)
        ['1.weight']
        """
        found = {n: unprunable(tensor_of(*self._locate(n))) for n in self._known}
        return {**{n: why for n, why in found.items() if why is not None},
                **quantized_weights(self._model)}

    @property
    def tied(self) -> dict[str, tuple[str, ...]]:
        """Tied tensors: each listed address with its aliases, the other names of the same
        parameter (an alias works wherever an address does and means the listed tensor).

        Examples
        --------
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5))
        >>> model[1].weight = model[0].weight  # a tied head, as in GPT-2
        >>> s = Session(model)
        >>> s.tied, s.names
        ({'0.weight': ('1.weight',)}, ('0.weight', '1.bias'))
        >>> s.apply("1.weight", "l1_unstructured", amount=0.4)
        Step('l1_unstructured', '0.weight', amount=0.4)
        >>> model[1].weight_mask is model[0].weight_mask
        True
        """
        return {n: info.aliases for n, info in self._known.items() if info.aliases}

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
        return Plan(self.steps, tied=self.tied)

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
    def revision(self) -> int:
        """How many actions changed the session so far (apply, undo, reset, commit, to; a
        transaction counts once): two readings differ iff something took effect between them,
        e.g. before an interrupt (see :class:`InterruptedAfterCommit`)."""
        return self._journal.revision

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

    @locked
    def global_blocker(self, targets: Sequence[str], method: str = "l1_unstructured", *,
                       amount: float | int) -> str | None:
        """Why :meth:`apply_global` with these arguments would refuse now, in words (None: it
        would apply).

        Examples
        --------
        >>> import torch
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> s.global_blocker([], amount=0.5)
        'targets must be a non-empty list of tensor addresses for global_unstructured; got []'
        >>> s.global_blocker(["0.weight", "0.bias"], amount=11)
        'amount must be at most the number of entries still unpruned in targets (10); got 11'
        >>> s.global_blocker(["0.weight", "0.bias"], amount=10) is None
        True
        """
        where = "Session.apply_global"
        return self._first_refusal(where, lambda: [
            self._arguments.global_step(where, targets, method, amount, None, draw=False)],
            plan=False)

    @locked
    def plan_blocker(self, steps: Iterable[Step]) -> str | None:
        """Why :meth:`apply_all` of ``steps`` (a :class:`Plan`, or any iterable of Step) would
        refuse now, in words (None: it would apply them).

        Every step is checked as :meth:`apply_all` checks it, against the model as it is now.
        Where a step acts on a tensor that an earlier step of ``steps`` changes, what it may do
        there (an integer ``amount``, a ``remove``) depends on the masks the earlier steps
        leave: then the plan is applied in a transaction that is always rolled back
        (``transaction(dry_run=True)``: no trace, no event), so the answer is exactly
        :meth:`apply_all`'s, at the cost of one apply.

        Examples
        --------
        >>> import torch
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> s.plan_blocker([Step("remove", "0.weight")])
        "steps[0]: target '0.weight' is not pruned, so there is no pruning to make permanent"
        >>> s.plan_blocker([Step("l1_unstructured", "0.weight", amount=0.5),
        ...                 Step("remove", "0.weight")]) is None
        True
        >>> why = s.plan_blocker([Step("l1_unstructured", "0.weight", amount=6),
        ...                       Step("l1_unstructured", "0.weight", amount=6)])
        >>> why.split(" of ")[0], s.steps  # known only by running the first: nothing is kept
        ('steps[1]: amount must be at most the number', ())
        """
        return self._first_refusal("Session.apply_all", lambda: list(steps), plan=True)

    def _first_refusal(self, where: str, make: Callable[[], list[Any]], *,
                       plan: bool) -> str | None:
        # The checks an action runs before it changes anything (_run's), without running it;
        # the first refusal in words, without the API location (as undo_blocker words it).
        touched: set[str] = set()
        run = False
        try:
            steps = make()
            for index, step in enumerate(steps):
                at = f"{where}: steps[{index}]" if plan else where
                if not isinstance(step, Step):
                    raise TypeError(f"{at} must be a Step; got {type(step).__name__}")
                if isinstance(step, TrainingStep):  # checked only by running the training
                    continue
                step = tied_step(step, self._known, self._aliases, at)
                if touched.isdisjoint(step.targets):
                    check_step(self._model, self._known, step, at)
                    self._stepping.check_in_sync(step.targets, at)
                else:  # what it may do depends on the earlier steps' masks (see plan_blocker)
                    for name in step.targets:
                        self._arguments.check_name(name, at)
                    run = True
                touched.update(step.targets)
            if run:  # only running the earlier steps tells: run them all, leave no trace
                with self.transaction(dry_run=True):
                    self.apply_all(steps)
        except (ValueError, TypeError, RuntimeError) as err:
            text = str(err)
            return text[len(where) + 2:] if text.startswith(where + ": ") else text
        return None

    def _undo_blocker(self, *, outer: bool) -> str | None:
        # The one rule for undo (Session.undo raises it, the explorer shows it by its button).
        journal = self._journal
        floor = journal.outer_floor if outer else journal.floor
        if len(journal.actions) <= floor:
            return ("nothing to undo; no steps are applied"
                    + (" inside this transaction" if floor else ""))
        action = journal.actions[-1]
        if action.snapshots is None and action.dropped is not None:
            return f"the last step, {action.step!r}, cannot be undone exactly: {action.dropped}"
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
        dropped = [a for a in journal.actions if a.snapshots is None and a.dropped]
        if dropped:
            return (f"the model cannot go back to how the session found it because step "
                    f"{dropped[-1].step!r} cannot be undone exactly: {dropped[-1].dropped}")
        if journal.outer_floor if outer else journal.floor:
            return "cannot reset inside a transaction that started after the first step"
        if not journal.actions:
            return "nothing to reset; no steps are applied"
        return None

    @locked
    def history(self, name: str) -> TensorHistory:
        """History of ``name``: the mask after each step that touched it (entry 0: as found)."""
        name = self._arguments.check_name(name, "Session.history")
        return TensorHistory(name, list(self._histories[name]))

    @locked
    def mask(self, name: str) -> torch.Tensor:
        """Current mask of ``name`` as a bool tensor (all True if not pruned or committed)."""
        name = self._arguments.check_name(name, "Session.mask")
        module, tensor_name = self._locate(name)
        if find_hook(module, tensor_name) is None:
            return torch.ones_like(getattr(module, tensor_name), dtype=torch.bool)
        return getattr(module, tensor_name + "_mask") != 0

    @locked
    def tensor(self, name: str) -> torch.Tensor:
        """The values the forward pass uses for ``name`` (``orig * mask`` if pruned), detached."""
        name = self._arguments.check_name(name, "Session.tensor")
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
        train: TrainFunction | None = None,
    ) -> list[Step]:
        """Apply ``steps`` (a :class:`Plan` or any iterable of Step) in order as one transaction.

        A ``remove`` step commits its tensor; a ``fine_tune`` step calls ``train(model,
        epochs)`` (required then), ``keep_weights`` and ``rewind`` keep and write back the
        weights (:mod:`~prune_explorer.session.steps.training`). If any step fails, nothing is
        applied and the error names it (``"<where>: steps[i]: ..."``). ``progress(done,
        total)`` is called after each step. Returns the steps.
        """
        steps = list(steps)
        with self.transaction():
            for index, step in enumerate(steps):
                if not isinstance(step, Step):
                    raise TypeError(f"{where}: steps[{index}] must be a Step; got "
                                    f"{type(step).__name__}")
                steps[index] = self._apply_ready(step, f"{where}: steps[{index}]", train)
                if progress is not None:
                    progress(index + 1, len(steps))
        self._fine_tuning.enforce_undo_cap()
        return steps

    # -- apply ----------------------------------------------------------------------------------
    def apply(self, target: str, method: str, *, seed: int | None = None,
              with_bias: bool = False, **settings: Any) -> Step:
        """Prune ``target`` with ``method`` (through ``torch.nn.utils.prune``); returns the Step.

        ``settings`` are the method's: ``amount``; ``amount, dim`` (random_structured);
        ``amount, n, dim`` (ln_structured); ``mask`` (custom_from_mask); ``pattern`` and
        optionally ``dim`` (semi_structured: without it, the layer's reduction dim, see
        :mod:`prune_explorer.prune.layers`; the step records the dim used). Random methods use
        ``seed`` or draw one from the session; the step records it. Invalid input raises
        :class:`InvalidStepError` before anything changes.

        ``with_bias=True`` (structured methods along the layer's output dim: dim 0 of a
        ``Linear``/conv weight, dim 1 of a ``transformers`` ``Conv1D``) also prunes the bias
        entries of every unit whose weights are now all pruned, so that the unit outputs zero
        and :meth:`shrink` can remove it. That is a second step, ``custom_from_mask`` on the
        bias, in the same transaction: in the history and the plan, replayed by the snippet,
        and undone by its own :meth:`undo` (it is the later of the two).
        """
        where = "Session.apply"
        with self.transaction():
            step = self._arguments.make_step(where, method, target, settings, seed, single=True)
            bias = self._bias_of(step, where) if with_bias is not False else None
            done = self._apply_ready(step, where)
            if bias is not None:
                self._prune_bias(done, bias, where)
            return done

    def _bias_of(self, step: Step, where: str) -> str | None:
        """The bias address that ``with_bias=True`` prunes along with ``step`` (None if the
        layer has no bias); refuses a step that does not prune the layer's output units."""
        module, tensor_name = self._locate(str(step.target))
        units = out_dim(module, tensor_name)
        rank = len(self._known[str(step.target)].shape)
        dim = step.settings.get("dim")
        if not METHODS[step.method].structured or units is None or dim is None or \
                int(dim) % rank != units:
            raise InvalidStepError(
                f"{where}: with_bias=True prunes the bias of the output units a structured "
                f"step removes; it needs ln_structured or random_structured along the output "
                f"dim of a layer's weight ({type(module).__name__}: "
                f"{'none known' if units is None else f'dim={units}'}); got {step.method} "
                f"with dim={dim}", "with_bias")
        bias = self._known[str(step.target)].module_name
        address = f"{bias}.bias" if bias else "bias"
        return address if address in self._known else None

    def _prune_bias(self, step: Step, bias: str, where: str) -> None:
        module, tensor_name = self._locate(str(step.target))
        dim = out_dim(module, tensor_name)
        mask = cast(torch.Tensor, getattr(module, tensor_name + "_mask"))
        rows = mask.detach().movedim(cast(int, dim), 0).reshape(mask.shape[cast(int, dim)], -1)
        alive = (rows != 0).any(dim=1).cpu()
        bias_module, bias_name = self._locate(bias)
        current = getattr(bias_module, bias_name + "_mask", None)
        kept_now = torch.ones_like(alive) if current is None else current.detach().cpu() != 0
        if bool((kept_now & ~alive).any()):  # some bias entry of a dead unit is still kept
            self._apply_ready(self._arguments.make_step(where, "custom_from_mask", bias,
                                              {"mask": alive}, None, single=True), where)

    def apply_global(
        self,
        targets: Sequence[str],
        method: str = "l1_unstructured",
        *,
        amount: float | int,
        seed: int | None = None,
        importance: str | None = None,
    ) -> Step:
        """``global_unstructured`` over ``targets``: one threshold across all of them.

        ``method`` is ``"l1_unstructured"`` or ``"random_unstructured"``; ``amount`` counts
        over the union of what is still unpruned in the targets. ``importance`` (with
        ``"l1_unstructured"``): the criterion whose scores compete (see :meth:`calibrate`).
        """
        where = "Session.apply_global"
        with self.transaction():
            step = self._arguments.global_step(where, targets, method, amount, seed,
                                               importance=importance)
            return self._apply_ready(step, where)

    def apply_step(self, step: Step, *, train: TrainFunction | None = None) -> Step:
        """Apply a ready-made :class:`Step` (e.g. from a :class:`Plan`); returns it.

        A ``remove`` step is a :meth:`commit` of its tensor (not undoable); a ``fine_tune``
        step needs ``train`` (see :meth:`apply_all`).
        """
        if not isinstance(step, Step):
            raise TypeError(f"Session.apply_step: step must be a Step; got {type(step).__name__}")
        with self.transaction():
            done = self._apply_ready(step, "Session.apply_step", train)
        self._fine_tuning.enforce_undo_cap()
        return done

    def _apply_ready(self, step: Step, where: str, train: TrainFunction | None = None) -> Step:
        if isinstance(step, TrainingStep):
            return self._fine_tuning.apply_training(step, where, train)
        if step.method == "remove":
            step = tied_step(step, self._known, self._aliases, where)  # as recorded
            self._commits.commit_in_transaction([step.target], where)
            return step
        step = self._stepping.run(step, where)
        self._journal.emit(SessionEvent("apply", step.targets, (step,)))
        return step

    # -- the loop: fine-tune, schedules (loop/fine_tuning.py) ---------------------------------
    @_told_by(FineTuning.fine_tune)
    def fine_tune(self, train: TrainFunction, epochs: int) -> Step:
        return self._fine_tuning.fine_tune(train, epochs)

    @_told_by(FineTuning.fine_tune_schedule)
    def fine_tune_schedule(
        self,
        schedule: Schedule,
        train: TrainFunction,
        evaluate: Callable[[nn.Module], float] | None = None,
        *,
        targets: Sequence[str] | None = None,
        scope: str = "global",
        method: str = "l1_unstructured",
        on_round: Callable[[RoundResult], object] | None = None,
        on_epoch: Callable[[int, int, int], object] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> ScheduleRun:
        return self._fine_tuning.fine_tune_schedule(
            self, schedule, train, evaluate, targets=targets, scope=scope, method=method,
            on_round=on_round, on_epoch=on_epoch, should_stop=should_stop)

    @property
    def runs(self) -> tuple[ScheduleRun, ...]:
        """Every schedule run of this session, in order (stopped ones too), for the chart."""
        return self._fine_tuning.runs

    @property
    def undo_bytes(self) -> int | None:
        """The most bytes of weight copies the history keeps for undo (None: no cap).

        Past it, the oldest copies are let go after each action; undo then refuses at the
        first step it can no longer restore exactly (:meth:`undo_blocker` says why).
        """
        return self._fine_tuning.undo_bytes

    @undo_bytes.setter
    def undo_bytes(self, value: int | None) -> None:
        self._fine_tuning.set_undo_bytes(check_undo_bytes(value, "Session.undo_bytes"))

    @property
    def undo_kept_bytes(self) -> int:
        """Bytes of value copies the history keeps now so that undo is exact."""
        return self._fine_tuning.undo_kept_bytes

    @property
    def kept_weights_bytes(self) -> int:
        """Bytes of the weights kept by the last ``keep_weights`` step (0 if none)."""
        return self._fine_tuning.kept_weights_bytes

    def sensitivity(self, evaluate: Callable[[nn.Module], float], **options: Any) -> pd.DataFrame:
        """Score the model as each target (and all at once) is pruned more; see
        :func:`prune_explorer.session.analysis.sensitivity.sensitivity` for the options. The model,
        history and plan are left exactly as they were.
        """
        refuse_sharded(self._model, "Session.sensitivity")
        with thread_state_kept():  # its no_grad blocks run outside any transaction too
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
        action = None
        try:
            with self.transaction():
                action = self._undo_last(where)
        except InterruptedAfterCommit as err:  # done: say which step
            err.result = None if action is None else action.step  # type: ignore[attr-defined]
            raise
        return action.step

    def _undo_last(self, where: str) -> Action:
        journal = self._journal
        blocker = self._undo_blocker(outer=True)
        if blocker is not None:
            raise NotUndoableError(f"{where}: {blocker}")
        action = journal.actions[-1]
        self._stepping.check_in_sync(action.names, where)
        journal.undo_last()
        self._stepping.resee(action.names)
        journal.emit(SessionEvent("undo", action.names, (action.step,)))
        return action

    def reset(self) -> None:
        """Return the model to how the session found it (undo every step).

        Raises :class:`NotUndoableError`, changing nothing, if a commit happened. Warns
        (``UserWarning``, naming the tensors) when tensors stay pruned afterwards: pruning that
        was done outside the session, which reset does not take back.
        """
        where = "Session.reset"
        with self.transaction():
            journal = self._journal
            blocker = self._reset_blocker(outer=True)
            if blocker is not None and journal.actions:
                raise NotUndoableError(f"{where}: {blocker}")
            if journal.actions:
                names = tuple(dict.fromkeys(n for a in journal.actions for n in a.names))
                self._stepping.check_in_sync(names, where)
                steps = self.steps
                while journal.actions:
                    journal.undo_last()
                self._stepping.resee(names)
                journal.emit(SessionEvent("reset", names, steps))
            kept = [n for n in self._known if find_hook(*self._locate(n)) is not None]
        if kept:  # pruning the session did not do stays: say so
            warnings.warn(
                f"{where}: {kept[:8]}{' and more' if len(kept) > 8 else ''} stay pruned: that "
                "pruning was done outside the session (found when it started: Session.found, or "
                "done on the model since), and reset() takes back only the session's own "
                "steps; use prune.remove or a fresh, unpruned model to drop it",
                UserWarning, stacklevel=2)

    # -- device ---------------------------------------------------------------------------------
    def to(self, device: torch.device | str) -> Session:
        """Move the model, its masks, the history and the calibration statistics to ``device``;
        returns the session (the calibration batches stay the caller's objects)."""
        device = torch.device(device)
        with self._lock:
            if self._journal.depth:
                raise NotUndoableError("Session.to: cannot move the model inside a transaction")
            with self.transaction():  # an interrupt half-way moves everything back
                self._stepping.check_in_sync(self._known, "Session.to")
                refuse_move(self._model, device, "Session.to")
                self._journal.on_rollback(self.names, _placement(self._model, self._histories))
                self._model.to(device)
                for name in self._known:
                    refresh_pruned(*self._locate(name))  # Module.to does not move the pruned copy
                    self._histories[name][:] = [
                        HistoryEntry(e.index, e.step, e.mask.to(device))
                        for e in self._histories[name]
                    ]
                calibrated = self._calibrated  # the statistics follow the model
                if calibrated is not None:
                    self._journal.on_rollback((), lambda: setattr(self, "_calibrated",
                                                                  calibrated))
                    self._calibrated = calibrated.to(device)
                self._stepping.resee(self._known)
                self._journal.emit(SessionEvent("to", (), ()))
        return self

    # -- saving ---------------------------------------------------------------------------------
    def plain_model(self) -> nn.Module:
        """A plain copy of the model with its pruning made permanent, to save the way its
        library saves (``save_pretrained``, ``torch.save(m.state_dict())``): pruned entries are
        zeros in ordinary parameters, no ``_orig``/``_mask``/hooks. The session's model, history
        and undo are not touched (:meth:`commit` does the same in place).
        See :mod:`prune_explorer.session.model.saving`.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
        >>> plain = s.plain_model()
        >>> int((plain[0].weight == 0).sum()), sorted(plain.state_dict())
        (4, ['0.bias', '0.weight'])
        """
        from .shrink.depgraph import dense_copy

        refuse_sharded(self._model, "Session.plain_model")
        with self._lock:
            return dense_copy(self._model)

    # -- shrink ---------------------------------------------------------------------------------
    def shrink(self, example_inputs: Any, *, repeats: int = 20) -> Any:
        """A new, smaller model without the channels pruning made dead, and its savings.

        Outside undo and history: the session's model is not changed (adopt ``report.model``
        yourself, e.g. in a new Session). See :mod:`prune_explorer.session.shrink.depgraph`.

        Returns
        -------
        prune_explorer.session.shrink.depgraph.ShrinkReport
            ``.model``, parameters/FLOPs/state_dict bytes/CPU latency before and after.
        """
        from .shrink.depgraph import shrink

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


_plans.RUNNER.session = Session  # Plan.apply and Plan.validate run plans with a Session
