"""Previews: the masks (or per-cell counts) a step would leave, computed without changing
anything -- not the model, not the global RNG, not the session.

A part of :class:`~prune_explorer.session.Session`. Masks come from
:mod:`~prune_explorer.session.preview.masks` through the same core calls as applying, with the
session's order cache for fast L1 slider moves; a random step without a seed uses the seed the
next apply will draw, so preview and apply agree.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> masks = s.preview_global(["0.weight", "0.bias"], amount=5)
>>> sum(int((m == 0).sum()) for m in masks.values()), s.steps
(5, ())
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..preview.masks import cell_counts, global_masks, local_masks
from ..state import SessionState
from ..steps.checks import check_step
from ..steps.step import Step
from ..transaction.journal import locked
from .arguments import Arguments, as_list
from .stepping import Stepping

__all__ = ["Previews"]


class Previews:
    """What a step would do, without doing it (a part of ``Session``)."""

    def __init__(self, state: SessionState, arguments: Arguments,
                 stepping: Stepping | None = None) -> None:
        self._state = state
        self._lock = state._lock
        self._arguments = arguments
        self._stepping = stepping or Stepping(state)  # runs calibrated steps, rolled back

    @locked
    def preview(
        self, target: str, method: str, *, seed: int | None = None, **settings: Any
    ) -> torch.Tensor:
        """The mask :meth:`apply` would leave on ``target`` with these arguments.

        Nothing changes: not the model (state_dict, Parameter objects, hooks), not the global
        RNG state, not the session. For random methods without ``seed``, it uses the seed the
        next :meth:`apply` will draw, so preview and apply agree.

        Returns
        -------
        torch.Tensor
            Same shape, dtype and device as the tensor; 1 = kept.
        """
        where = "Session.preview"
        step = self._arguments.make_step(where, method, target, settings, seed, single=True,
                                         draw=False)
        return self.preview_step(step, where)[step.targets[0]]  # an alias: its tensor

    @locked
    def preview_masks(
        self, target: str, method: str, *, seed: int | None = None, **settings: Any
    ) -> Mapping[str, torch.Tensor]:
        """:meth:`preview` as ``{target: mask}``, the mask built only when it is read.

        For large tensors whose order or slice scores the session caches (L1 and seeded
        random_unstructured, ln_structured with a numeric ``n``, seeded random_structured)
        this is a ``preview.masks.LocalPreview``: with :meth:`preview_cells` for the picture and
        ``preview.masks.kept_count`` for the counts, a slider step builds no mask at all. The mask,
        once read, is :meth:`preview`'s bit for bit. Keyed by the tensor's listed address; an
        alias of a tied tensor reads it too (``preview.masks.PreviewMasks``).

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> from prune_explorer.session.preview.masks import kept_count
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(600, 400)))
        >>> masks = s.preview_masks("0.weight", "l1_unstructured", amount=0.25)
        >>> kept_count(masks, "0.weight"), masks
        (180000, LocalPreview('0.weight', 60,000 cut, mask not built))
        >>> torch.equal(masks["0.weight"], s.preview("0.weight", "l1_unstructured", amount=0.25))
        True
        """
        where = "Session.preview_masks"
        step = self._arguments.make_step(where, method, target, settings, seed, single=True,
                                         draw=False)
        return self.preview_step(step, where)

    @locked
    def preview_global(
        self,
        targets: Sequence[str],
        method: str = "l1_unstructured",
        *,
        amount: float | int,
        seed: int | None = None,
        importance: str | None = None,
    ) -> Mapping[str, torch.Tensor]:
        """The masks :meth:`apply_global` would leave, by address (built on first access for
        large L1 targets: ``preview.masks.GlobalPreview``); nothing changes. A tied tensor is one
        entry, under its listed address, which any of its aliases reads too
        (``preview.masks.PreviewMasks``)."""
        where = "Session.preview_global"
        return self.preview_step(
            self._arguments.global_step(where, targets, method, amount, seed, draw=False,
                                        importance=importance), where)

    @locked
    def preview_cells(
        self,
        target: str,
        method: str,
        *,
        row_edges: np.ndarray,
        col_edges: np.ndarray,
        targets: Sequence[str] | None = None,
        seed: int | None = None,
        alive: bool = False,
        **settings: Any,
    ) -> np.ndarray | None:
        """Kept entries per display cell of ``target`` after the step, without building a mask.

        Cells are the blocks ``[row_edges[r]:row_edges[r+1], col_edges[c]:col_edges[c+1]]`` of
        ``target`` viewed as ``(shape[0], numel / shape[0])``. Exactly the counts of the mask
        :meth:`preview` returns (``method="global_unstructured"`` with ``targets`` and
        ``pruning_method``/``amount`` for a global step), computed from the tensor's cached
        order in ``O(cells log n)`` (L1 and seeded random_unstructured), or from its cached
        slice scores and per-line counts (ln_structured with a numeric ``n``, seeded
        random_structured). None when only the mask can tell (other methods, small tensors):
        then pool :meth:`preview`'s mask. ``alive=True`` counts what stays alive, as
        :meth:`alive` does (kept and not exactly 0); None also when the tensor has too many
        exact zeros to subtract one by one (unstructured steps).

        Examples
        --------
        >>> import numpy as np, torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(600, 400)))
        >>> kept = s.preview_cells("0.weight", "l1_unstructured", amount=0.25,
        ...                        row_edges=np.array([0, 200, 400]), col_edges=np.array([0, 600]))
        >>> kept.shape, int(kept.sum())
        ((2, 1), 180000)
        """
        where = "Session.preview_cells"
        if method == "global_unstructured":
            step = self._arguments.make_step(where, method, as_list(targets), settings, seed,
                                             draw=False)
        else:
            step = self._arguments.make_step(where, method, target, settings, seed, single=True,
                                             draw=False)
        check_step(self._state._model, self._state._known, step, where)
        if step.calibrated:  # no cached order knows a criterion's scores: only the mask tells
            return None
        state = self._state
        return cell_counts(state._model, step, self._arguments.canonical(target), state._orders,
                           np.asarray(row_edges), np.asarray(col_edges), alive)

    def preview_step(self, step: Step, where: str) -> Mapping[str, torch.Tensor]:
        check_step(self._state._model, self._state._known, step, where)
        if step.calibrated:  # the step itself, rolled back: what apply installs, bit for bit
            return self._dry_run_masks(step, where)
        if step.is_global:
            return global_masks(self._state._model, step, self._state._orders, self._state._aliases)
        name = step.targets[0]  # a single-tensor step
        module, tensor_name = self._state._locate(name)
        return local_masks(module, tensor_name, step, self._state._orders, name,
                           self._state._aliases)

    def _dry_run_masks(self, step: Step, where: str) -> dict[str, torch.Tensor]:
        """The masks ``step`` leaves, from running it in a transaction that is rolled back (the
        route of steps computed from calibration: their preview is their apply)."""
        masks: dict[str, torch.Tensor] = {}
        with self._stepping.transaction(dry_run=True):
            done = self._stepping.run(step, where)
            for name in done.targets:
                module, tensor_name = self._state._locate(name)
                masks[name] = getattr(module, tensor_name + "_mask").detach().clone()
        return masks
