"""DataFrames describing a model's pruning state (fixed, documented columns).

Each is a :class:`~prune_explorer.session.analysis.wording.ReportFrame`: a DataFrame with the plain
values below that prints for people (percentages, separators).

Three reports, each one row per tensor plus an optional ``"TOTAL"`` row:

``REPORT_COLUMNS`` (:func:`tensor_report`)
    ``name`` address; ``module_type`` class name of the owning module; ``shape`` tuple;
    ``numel``; ``zeros`` entries equal to 0 in the tensor the forward pass sees (``orig * mask``
    if pruned -- so committed pruning still counts); ``sparsity`` = zeros / numel;
    ``channels_pruned`` dict ``{dim: number of slices along dim that are entirely 0}``;
    ``methods`` tuple of method names applied, in order; ``aliases`` tuple of the tensor's
    other addresses when it is tied (one parameter held by several modules, listed and counted
    once), else empty.
``COMPARE_COLUMNS`` (:func:`compare_frame`)
    ``name``, ``numel``, ``sparsity_global``, ``sparsity_local``, ``pruned_global``,
    ``pruned_local``, ``collapsed_global``, ``collapsed_local``.
``MEMORY_COLUMNS`` (:func:`memory_report`)
    ``name``; ``orig_bytes`` the ``_orig`` parameter; ``mask_bytes`` the ``_mask`` buffer;
    ``pruned_copy_bytes`` the ``orig * mask`` tensor the forward pass uses; ``bytes_before`` the
    three together; ``bytes_after`` what remains after ``prune.remove`` (the pruned copy, now the
    parameter); ``freed`` = before - after = ``_orig`` + ``_mask``. A parameter sharded over
    processes keeps no pruned copy (it is computed on demand), so there ``pruned_copy_bytes`` is
    0, ``bytes_after`` is ``_orig`` (``remove`` writes into it) and ``freed`` is ``_mask``;
    bytes are those of the whole tensor, summed over ranks.

Examples
--------
>>> import torch
>>> from prune_explorer.session.analysis.frames import channels_pruned, is_collapsed
>>> channels_pruned(torch.tensor([[0.0, 0.0], [0.0, 1.0]]))
{0: 1, 1: 1}
>>> is_collapsed(torch.tensor([False, False, True]), threshold=0.5)
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pandas as pd
import torch
from torch import nn

from prune_explorer.prune.engine import kept_attribute

from ..model.hooks import find_hook
from ..model.targets import TensorInfo
from ..tensors.sharded import count_nonzero, nonzero_summary
from .wording import ReportFrame

__all__ = [
    "COMPARE_COLUMNS",
    "MEMORY_COLUMNS",
    "REPORT_COLUMNS",
    "channels_pruned",
    "collapsed_layers",
    "collapses",
    "compare_frame",
    "effective_tensor",
    "is_collapsed",
    "memory_report",
    "tensor_report",
    "tensor_zeros",
    "with_total",
]

T = TypeVar("T")

REPORT_COLUMNS = [
    "name", "module_type", "shape", "numel", "zeros", "sparsity", "channels_pruned", "methods",
    "aliases",
]
COMPARE_COLUMNS = [
    "name", "numel", "sparsity_global", "sparsity_local", "pruned_global", "pruned_local",
    "collapsed_global", "collapsed_local",
]
MEMORY_COLUMNS = [
    "name", "orig_bytes", "mask_bytes", "pruned_copy_bytes", "bytes_before", "bytes_after",
    "freed",
]


def effective_tensor(module: nn.Module, tensor_name: str) -> torch.Tensor:
    """The values the forward pass uses: ``orig * mask`` when pruned, else the parameter."""
    with torch.no_grad():
        if find_hook(module, tensor_name) is not None:
            orig = getattr(module, tensor_name + "_orig")
            return orig * getattr(module, tensor_name + "_mask")
        return getattr(module, tensor_name).detach()


def _dead_slices(per_dim: list[torch.Tensor]) -> dict[int, int]:
    # Slices along each dim with no kept (nonzero) entry, from nonzero_summary's counts.
    return {d: int(torch.count_nonzero(v == 0)) for d, v in enumerate(per_dim)}


def channels_pruned(tensor: torch.Tensor) -> dict[int, int]:
    """``{dim: slices along dim that are entirely 0}`` for every dim of ``tensor`` (a
    collective for a DTensor: per-slice counts are all-reduced, see :mod:`..tensors.sharded`)."""
    if tensor.numel() == 0:
        return {d: 0 for d in range(tensor.dim())}
    return _dead_slices(nonzero_summary(tensor)[1])


def collapses(kept: int, numel: int, threshold: float = 0.99) -> bool:
    """The layer-collapse rule on counts: at least ``threshold`` of the ``numel`` entries pruned
    (``kept`` entries left). Losing every slice along some dim (every channel of a channel set)
    is included: it leaves no entry kept.

    Examples
    --------
    >>> collapses(1, 100), collapses(2, 100), collapses(0, 0)
    (True, False, False)
    """
    return numel > 0 and (numel - kept) / numel >= threshold


def is_collapsed(kept: torch.Tensor, threshold: float = 0.99) -> bool:
    """Layer collapse (:func:`collapses`) of a mask: at least ``threshold`` of the entries
    pruned, or, structurally, every slice along some dim (every channel of a channel set)
    pruned.

    ``kept`` is a mask (bool or 0/1), True/1 = kept.
    """
    return collapses(count_nonzero(kept), kept.numel(), threshold)


def collapsed_layers(kept: Mapping[str, int], numel: Mapping[str, int],
                     threshold: float = 0.99) -> list[str]:
    """Addresses, in the order of ``kept``, whose layer a step collapses (:func:`collapses`):
    ``kept`` holds the entries each would keep, ``numel`` their sizes. Counts only, so a
    preview's lazy masks (``Session.preview_global``) need not be built.

    Examples
    --------
    >>> collapsed_layers({"a": 4, "b": 0}, {"a": 4, "b": 4})
    ['b']
    """
    return [name for name, count in kept.items() if collapses(count, numel[name], threshold)]


def _zeros(module: nn.Module, tensor_name: str) -> int:
    """Exact zeros of ``module.tensor_name`` as the forward pass sees it (one count, a
    collective for a DTensor)."""
    values = effective_tensor(module, tensor_name)
    if values.is_meta:  # no values (offloaded, not loaded): none known to be 0
        return 0
    return values.numel() - count_nonzero(values) if values.numel() else 0


def _channels(module: nn.Module, tensor_name: str) -> dict[int, int]:
    """:func:`channels_pruned` of ``module.tensor_name`` as the forward pass sees it (none
    known for a tensor on the meta device)."""
    values = effective_tensor(module, tensor_name)
    return {} if values.is_meta else channels_pruned(values)


def _fact(memo: Callable[..., Any] | None, module: nn.Module, tensor_name: str, what: str,
          compute: Callable[[nn.Module, str], T]) -> T:
    # compute(module, tensor_name), through ``memo`` (once per tensor state) when given.
    if memo is None:
        return compute(module, tensor_name)
    value: T = memo(module, tensor_name, what, lambda: compute(module, tensor_name))
    return value


def tensor_zeros(model: nn.Module, known: Mapping[str, TensorInfo],
                 memo: Callable[..., Any] | None = None) -> dict[str, int]:
    """The ``zeros`` column of :func:`tensor_report` alone, by address: one count per tensor,
    no per-slice counts (what a picker or a summary line needs)."""
    return {name: _fact(memo, model.get_submodule(info.module_name), info.tensor_name, "zeros",
                        _zeros)
            for name, info in known.items()}


def tensor_report(
    model: nn.Module,
    known: Mapping[str, TensorInfo],
    methods: Mapping[str, tuple[str, ...]],
    memo: Callable[..., Any] | None = None,
    zeros: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """One row per tensor of ``known`` with :data:`REPORT_COLUMNS`.

    ``memo(module, tensor_name, what, compute)``, if given, returns ``compute()`` or what it
    returned for the tensor in the same state (``OrderCache.memo``); the zeros and the
    channel counts are memoised apart, so :func:`tensor_zeros` shares the first. ``zeros``:
    the zeros column, when the caller knows it (``Session.zeros``).
    """
    zeros_by_name = tensor_zeros(model, known, memo) if zeros is None else zeros
    rows = []
    for name, info in known.items():
        module = model.get_submodule(info.module_name)
        count = zeros_by_name[name]
        channels = _fact(memo, module, info.tensor_name, "channels", _channels)
        rows.append(
            {
                "name": name,
                "module_type": info.module_type,
                "shape": info.shape,
                "numel": info.numel,
                "zeros": count,
                "sparsity": count / info.numel if info.numel else 0.0,
                "channels_pruned": dict(channels),
                "methods": tuple(methods.get(name, ())),
                "aliases": info.aliases,
            }
        )
    return ReportFrame(rows, columns=REPORT_COLUMNS).astype({"numel": "int64", "zeros": "int64",
                                                             "sparsity": "float64"})


def with_total(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` from :func:`tensor_report` plus a final ``"TOTAL"`` row for the whole model.

    The total row has ``module_type=""``, ``shape=()``, summed ``numel`` and ``zeros``,
    ``sparsity = zeros / numel``, ``channels_pruned={}``, ``methods=()`` and ``aliases=()``.
    """
    numel = int(frame["numel"].sum())
    zeros = int(frame["zeros"].sum())
    total = {
        "name": "TOTAL",
        "module_type": "",
        "shape": (),
        "numel": numel,
        "zeros": zeros,
        "sparsity": zeros / numel if numel else 0.0,
        "channels_pruned": {},
        "methods": (),
        "aliases": (),
    }
    out = ReportFrame([*frame.to_dict("records"), total], columns=REPORT_COLUMNS)
    return out.astype({"numel": "int64", "zeros": "int64", "sparsity": "float64"})


def memory_report(model: nn.Module, known: Mapping[str, TensorInfo]) -> pd.DataFrame:
    """Bytes that ``prune.remove`` would free, one row per pruned tensor plus ``"TOTAL"``.

    Columns :data:`MEMORY_COLUMNS`.
    """
    rows = []
    for name, info in known.items():
        module = model.get_submodule(info.module_name)
        if find_hook(module, info.tensor_name) is None:
            continue
        orig = getattr(module, info.tensor_name + "_orig")
        mask = getattr(module, info.tensor_name + "_mask")
        orig_b, mask_b = orig.numel() * orig.element_size(), mask.numel() * mask.element_size()
        if kept_attribute(module, info.tensor_name):
            copy = getattr(module, info.tensor_name)
            copy_b = copy.numel() * copy.element_size()
            after = copy_b  # the pruned copy becomes the parameter
        else:  # sharded: no pruned copy is kept; remove writes into the parameter in place
            copy_b, after = 0, orig_b
        rows.append(
            {
                "name": name,
                "orig_bytes": orig_b,
                "mask_bytes": mask_b,
                "pruned_copy_bytes": copy_b,
                "bytes_before": orig_b + mask_b + copy_b,
                "bytes_after": after,
                "freed": orig_b + mask_b + copy_b - after,
            }
        )
    total: dict[str, Any] = {"name": "TOTAL"}
    for column in MEMORY_COLUMNS[1:]:
        total[column] = sum(int(row[column]) for row in rows)
    frame = ReportFrame([*rows, total], columns=MEMORY_COLUMNS)
    return frame.astype({c: "int64" for c in MEMORY_COLUMNS[1:]})


def compare_frame(
    known: Mapping[str, TensorInfo],
    names: Sequence[str],
    global_masks: Mapping[str, torch.Tensor],
    local_masks: Mapping[str, torch.Tensor],
    threshold: float = 0.99,
) -> pd.DataFrame:
    """Global-vs-local table (:data:`COMPARE_COLUMNS`) from masks, plus a ``"TOTAL"`` row.

    The total row sums ``numel`` and the pruned counts, gives the overall sparsity, and flags
    collapse when any tensor collapsed.
    """
    rows: list[dict[str, Any]] = []
    for name in names:
        numel = known[name].numel
        g_kept, l_kept = global_masks[name], local_masks[name]
        g_pruned = numel - count_nonzero(g_kept)
        l_pruned = numel - count_nonzero(l_kept)
        rows.append(
            {
                "name": name,
                "numel": numel,
                "sparsity_global": g_pruned / numel if numel else 0.0,
                "sparsity_local": l_pruned / numel if numel else 0.0,
                "pruned_global": g_pruned,
                "pruned_local": l_pruned,
                "collapsed_global": is_collapsed(g_kept, threshold),
                "collapsed_local": is_collapsed(l_kept, threshold),
            }
        )
    numel = sum(r["numel"] for r in rows)
    g_total = sum(r["pruned_global"] for r in rows)
    l_total = sum(r["pruned_local"] for r in rows)
    rows.append(
        {
            "name": "TOTAL",
            "numel": numel,
            "sparsity_global": g_total / numel if numel else 0.0,
            "sparsity_local": l_total / numel if numel else 0.0,
            "pruned_global": g_total,
            "pruned_local": l_total,
            "collapsed_global": any(r["collapsed_global"] for r in rows),
            "collapsed_local": any(r["collapsed_local"] for r in rows),
        }
    )
    frame = ReportFrame(rows, columns=COMPARE_COLUMNS)
    return frame.astype(
        {
            "numel": "int64",
            "pruned_global": "int64",
            "pruned_local": "int64",
            "sparsity_global": "float64",
            "sparsity_local": "float64",
            "collapsed_global": "bool",
            "collapsed_local": "bool",
        }
    )
