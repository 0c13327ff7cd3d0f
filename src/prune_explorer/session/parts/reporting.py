"""Reports of a session: per-tensor table, memory, global-vs-local comparison, commit review.

A part of :class:`~prune_explorer.session.Session`: every method reads the model through the
session's lock and changes nothing (the frames are built by :mod:`..analysis.frames`).

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> list(s.report()["name"])
['0.weight', '0.bias']
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from ..analysis.frames import compare_frame, memory_report, tensor_report, tensor_zeros, with_total
from ..errors import InvalidStepError
from ..model.hooks import find_hook
from ..preview.l1_order import _few_zeros
from ..preview.magnitudes import Magnitudes
from ..preview.masks import GlobalPreview
from ..state import SessionState
from ..steps.step import Step
from ..tensors.sharded import count_nonzero, is_dtensor, tensor_of
from ..transaction.journal import locked
from .arguments import Arguments, as_list
from .previewing import Previews

__all__ = ["Reports"]


#: The memoised facts of a tensor's values: its exact zeros (flat indices, when few) and
#: whether every entry is finite (``_value_facts``).
_VALUES = "values"


def _value_facts(values: torch.Tensor) -> tuple[torch.Tensor | None, bool]:
    return _few_zeros(values, None), bool(torch.isfinite(values).all())


class Reports:
    """Read-only questions about the session (a part of ``Session``)."""

    def __init__(self, state: SessionState, arguments: Arguments, previews: Previews) -> None:
        self._state = state
        self._lock = state._lock
        self._arguments = arguments
        self._previews = previews

    # -- reports --------------------------------------------------------------------------------
    @locked
    def methods(self, name: str) -> tuple[str, ...]:
        """Method names applied to ``name`` in order: those found on it, then the session's."""
        name = self._arguments.check_name(name, "Session.methods")
        return self._state._found_methods[name] + tuple(
            e.step.method for e in self._state._histories[name][1:] if e.step is not None
        )

    @locked
    def alive(self, name: str, mask: torch.Tensor | None = None) -> torch.Tensor:
        """What the forward pass keeps of ``name``: a bool tensor, True where the entry is
        neither masked nor exactly 0 (so committed pruning counts as pruned).

        With ``mask`` (e.g. a :meth:`preview`), what it would keep once that mask is installed.
        The :meth:`report` counts ``zeros`` the same way: ``zeros = numel - alive.sum()``.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> _ = s.apply("0.weight", "l1_unstructured", amount=3)
        >>> _ = s.commit()
        >>> int(s.mask("0.weight").sum()), int(s.alive("0.weight").sum())  # no mask, 3 zeros
        (8, 5)
        >>> int(s.alive("0.weight", s.preview("0.weight", "l1_unstructured", amount=4)).sum())
        4
        """
        name = self._arguments.check_name(name, "Session.alive")
        module, tensor_name = self._state._locate(name)
        pruned = find_hook(module, tensor_name) is not None
        values = getattr(module, tensor_name + "_orig" if pruned else tensor_name).detach()
        if mask is None:
            mask = getattr(module, tensor_name + "_mask") if pruned else None
        kept = values != 0
        return kept if mask is None else kept & (mask != 0)

    @locked
    def kept_count(self, name: str, *, alive: bool = False) -> int:
        """Entries of ``name`` that its mask keeps (``mask(name).sum()``); with ``alive``,
        those that are also not exactly 0 (``alive(name).sum()``).

        Cheap where the session's caches hold the tensor: the kept count of a tensor whose
        L1 order is cached (a preview built it, an apply carried it) is known, and the exact
        zeros of its values, when few, are found once per value state (apply and undo keep
        them), so ``alive`` costs ``O(zeros)``. Otherwise one count over the tensor.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> _ = s.apply("0.weight", "l1_unstructured", amount=3)
        >>> _ = s.commit()
        >>> s.kept_count("0.weight"), s.kept_count("0.weight", alive=True)  # no mask, 3 zeros
        (8, 5)
        """
        name = self._arguments.check_name(name, "Session.kept_count")
        module, tensor_name = self._state._locate(name)
        pruned = find_hook(module, tensor_name) is not None
        mask = getattr(module, tensor_name + "_mask") if pruned else None
        order = self._state._orders.peek(module, tensor_name)
        if order is not None:
            kept = order.alive
        elif mask is None:
            kept = self._state._known[name].numel
        else:
            kept = count_nonzero(mask)
        if not alive:
            return kept
        values = getattr(module, tensor_name + "_orig" if pruned else tensor_name).detach()
        if is_dtensor(values):
            return count_nonzero(self.alive(name))
        zeros, _ = self._state._orders.memo(module, tensor_name, _VALUES,
                                     lambda: _value_facts(values), values_only=True)
        if zeros is None:  # many (committed pruning): count them with the mask
            return count_nonzero(self.alive(name))
        if mask is None:
            return kept - zeros.numel()
        return kept - count_nonzero(mask.reshape(-1)[zeros])

    def _zeros_known(self, name: str) -> int | None:
        # The report's zeros of ``name`` from what the caches hold, or None. Exact: the mask is
        # the 0/1 mask the session installed (unchanged since, see MaskBits) and the values
        # are finite, so ``orig * mask`` is 0 exactly where the entry is not alive.
        module, tensor_name = self._state._locate(name)
        pruned = find_hook(module, tensor_name) is not None
        if pruned and self._state._bits.knows(getattr(module, tensor_name + "_mask")) is None:
            return None
        facts = self._state._orders.recall(module, tensor_name, _VALUES, values_only=True)
        if facts is None or facts[0] is None or (pruned and not facts[1]):
            return None
        return self._state._known[name].numel - self.kept_count(name, alive=True)

    @locked
    def zeros_after(self, masks: Mapping[str, torch.Tensor]) -> dict[str, int]:
        """Per tensor of a preview's ``masks``, the :meth:`report` ``zeros`` once they are
        installed (entries masked or exactly 0). ``O(log n)`` per target of a lazy global L1
        preview (``preview.masks.GlobalPreview``); otherwise one pass over each tensor.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> zeros = s.zeros_after(s.preview_global(["0.weight", "0.bias"], amount=5))
        >>> sorted(zeros), sum(zeros.values())
        (['0.bias', '0.weight'], 5)
        """
        if isinstance(masks, GlobalPreview):
            return {name: masks.zeros(name) for name in masks}
        out = {}
        for name, mask in masks.items():
            kept = self.alive(name, mask)
            out[name] = kept.numel() - int(kept.count_nonzero())
        return out

    @locked
    def magnitudes(self, name: str, *, n: Any = None, dim: int | None = None) -> Magnitudes:
        """What a magnitude step on ``name`` ranks, sorted: ``|w|`` of the unpruned entries
        (``l1_unstructured``), or with ``dim`` the ``n``-norms of the unpruned slices along it
        (``ln_structured``). Built once per tensor state (see :mod:`..preview.magnitudes`).

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> m = s.magnitudes("0.weight")
        >>> m.count, m.cut(3) == float(s.tensor("0.weight").abs().flatten().sort().values[3])
        (8, True)
        >>> s.magnitudes("0.weight", n=2, dim=0).unit
        'output rows (dim 0)'
        """
        name = self._arguments.check_name(name, "Session.magnitudes")
        module, tensor_name = self._state._locate(name)
        return self._state._magnitudes.get(module, tensor_name, self._state._orders, n=n, dim=dim)

    @locked
    def report(self, totals: bool = False) -> pd.DataFrame:
        """One row per tensor; columns
        ``["name", "module_type", "shape", "numel", "zeros", "sparsity", "channels_pruned",
        "methods", "aliases"]`` (see :mod:`prune_explorer.session.analysis.frames`): a tied
        tensor is one row, under its first address, with its other addresses as ``aliases``.

        With ``totals=True`` a final row named ``"TOTAL"`` sums ``numel`` and ``zeros`` over the
        model.

        A tensor on the meta device (offloaded, as accelerate's ``device_map`` and
        ``cpu_offload`` leave them, or not loaded yet) has no values to count: its row says 0
        zeros and no pruned channels, and a ``UserWarning`` names such tensors.
        """
        state = self._state
        unknown = [n for n in state._known if tensor_of(*state._locate(n)).is_meta]
        if unknown:
            warnings.warn(
                f"Session.report: {len(unknown)} tensor{'s' * (len(unknown) != 1)} "
                f"({', '.join(map(repr, unknown[:3]))}{' and more' if len(unknown) > 3 else ''}"
                ") are on the meta device (offloaded or not loaded): their values are not in "
                "memory, so their zeros and pruned channels are not counted (shown as 0)",
                UserWarning, stacklevel=3)
        methods = {n: self.methods(n) for n in state._known}
        frame = tensor_report(state._model, state._known, methods, state._orders.memo,
                              zeros=self.zeros())
        return with_total(frame) if totals else frame

    @locked
    def zeros(self) -> dict[str, int]:
        """The :meth:`report`'s ``zeros`` by address, without the rest of it (no per-channel
        counts): one count per tensor, memoised per tensor state like the report's.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> _ = s.apply("0.weight", "l1_unstructured", amount=3)
        >>> s.zeros() == dict(zip(s.report()["name"], s.report()["zeros"]))
        True
        >>> s.zeros()
        {'0.weight': 3, '0.bias': 0}
        """
        known = {n: self._zeros_known(n) for n in self._state._known}
        counted = tensor_zeros(self._state._model, {n: i for n, i in self._state._known.items()
                                             if known[n] is None}, self._state._orders.memo)
        return {n: counted[n] if z is None else z for n, z in known.items()}

    @locked
    def memory_report(self) -> pd.DataFrame:
        """Bytes that :meth:`commit` would free, per pruned tensor plus a ``"TOTAL"`` row."""
        return memory_report(self._state._model, self._state._known)

    @locked
    def compare_global_local(
        self,
        names: Sequence[str] | None = None,
        amount: float | int = 0.5,
        *,
        collapse_threshold: float = 0.99,
    ) -> pd.DataFrame:
        """Global vs uniform per-tensor ``l1_unstructured`` at the same ``amount``, side by side.

        Computed with previews (on top of the current state), so nothing changes. ``names``
        defaults to :meth:`default_targets`. One row per tensor plus a ``"TOTAL"`` row; columns
        ``["name", "numel", "sparsity_global", "sparsity_local", "pruned_global",
        "pruned_local", "collapsed_global", "collapsed_local"]``. A tensor is collapsed when at
        least ``collapse_threshold`` of it is pruned or every slice along some dim is.
        """
        where = "Session.compare_global_local"
        chosen = self._state.default_targets() if names is None else names
        names = self._arguments.canonical(as_list(chosen))
        if not isinstance(collapse_threshold, (int, float)) or isinstance(
            collapse_threshold, bool
        ) or not 0.0 < collapse_threshold <= 1.0:
            raise InvalidStepError(
                f"{where}: collapse_threshold must be a float in (0, 1]; "
                f"got {collapse_threshold!r}",
                "collapse_threshold",
            )
        glob = self._arguments.global_step(where, names, "l1_unstructured", amount, None,
                                           draw=False)
        global_result = self._previews.preview_step(glob, where)
        local_result: dict[str, torch.Tensor] = {}
        for name in names:
            step = Step._build(where, "l1_unstructured", name, {"amount": amount})
            local_result.update(self._previews.preview_step(step, where))
        return compare_frame(self._state._known, names, global_result, local_result,
                             collapse_threshold)
