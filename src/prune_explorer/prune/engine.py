"""The core's interface for the session layer: the machinery beneath the torch API.

``prune_explorer.prune`` itself exposes exactly the documented names of ``torch.nn.utils.prune``.
The session needs more of the core than that API gives -- the bracketing selection and its key
histograms (for the slider's precomputed orders and the global cut), the DTensor layout (for
sharded models), and module snapshots and hook installation (for exact undo and for applying
masks it already computed). This module is the one place it takes them from; the private
modules behind it (``_radix``, ``_select``, ``_module``, ``_dtensor``, ``_sharded``, ``_fsdp``,
``_on_demand``, ``_interrupts``) may be reorganised freely as long as these names keep their
meaning.

Examples
--------
>>> import torch
>>> from prune_explorer.prune import engine
>>> keys, bits = engine.magnitude_keys(torch.tensor([0.5, -0.25, 0.0]))
>>> keys.argsort().tolist()  # the order of |w|, ascending
[2, 1, 0]
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from . import _module
from ._base import PruningContainer
from ._dtensor import Layout, contiguous_stride, is_sharded
from ._fsdp import pruned_stand_in
from ._hooks import HOOK_TYPE
from ._interrupts import Gate, held_interrupts, machinery
from ._module import ModuleSnapshot, find_hook, snapshot, transaction
from ._on_demand import kept_attribute
from ._radix import (
    CHUNK,
    NAN_BITS,
    Cut,
    Straddle,
    all_reduce,
    count_alive,
    cuts_found,
    histogram,
    int_view,
    magnitude_keys,
    row_slabs,
)
from ._select import SMALL, select
from ._select_device import chunk_for, to_host
from ._select_device import wanted as device_path
from ._sharded import local_draws

__all__ = [
    "CHUNK",
    "HOOK_TYPE",
    "NAN_BITS",
    "SMALL",
    "Cut",
    "Gate",
    "Layout",
    "ModuleSnapshot",
    "Straddle",
    "all_reduce",
    "chunk_for",
    "contiguous_stride",
    "count_alive",
    "cuts_found",
    "device_path",
    "find_hook",
    "held_interrupts",
    "histogram",
    "install",
    "int_view",
    "is_sharded",
    "kept_attribute",
    "local_draws",
    "machinery",
    "magnitude_keys",
    "pruned_stand_in",
    "row_slabs",
    "select",
    "snapshot",
    "to_host",
    "transaction",
]


def install(module: nn.Module, name: str, method: Any, mask: torch.Tensor,
            old: tuple[int, Any] | None) -> Any:
    """Record ``method`` and its finished ``mask`` on ``module`` exactly as the core's own
    ``apply`` does (``name_orig``, ``name_mask``, the forward pre-hook, chained in a
    ``PruningContainer`` after ``old``, the hook :func:`find_hook` returned); returns the hook
    now in charge."""
    return _module.install(module, name, method, mask, old, PruningContainer)
