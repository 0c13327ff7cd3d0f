"""Counting the aten ops a call runs: what a GPU would launch, counted anywhere.

Every aten op a call runs on a CUDA tensor is (at least) one kernel launch, except views and
metadata (:data:`VIEW_OPS`); the ops in :data:`SYNC_OPS` make the host wait for the device.
Counted with a ``TorchDispatchMode`` on CPU tensors inside
``prune_explorer.prune._select_device.forced()``, the device path's work is seen without a GPU.
Used by the device-path tests and by ``benchmarks/bench_launches.py``.

Examples
--------
>>> import torch
>>> with OpCounter() as counter:
...     _ = torch.ones(3).abs().view(3, 1)
>>> kernels(counter.ops), syncs(counter.ops)
(2, 0)
"""

from __future__ import annotations

import collections
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

#: aten ops that make a GPU wait for the host (or read data-dependent sizes back).
SYNC_OPS = frozenset({
    "_local_scalar_dense", "item", "nonzero", "unique", "_unique", "_unique2",
    "unique_consecutive", "unique_dim", "masked_select", "bincount", "is_nonzero", "equal",
    "allclose", "histc"})

#: aten ops that launch no kernel (views, metadata, an uninitialised allocation).
VIEW_OPS = frozenset({
    "view", "detach", "slice", "select", "expand", "promote_types", "split", "lift_fresh",
    "_unsafe_view", "as_strided", "alias", "reshape", "t", "unsqueeze", "squeeze", "empty",
    "permute", "transpose"})


class OpCounter(TorchDispatchMode):
    """Counts the aten ops run inside it, by name (:attr:`ops`)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def kernels(ops: collections.Counter[str]) -> int:
    """How many of ``ops`` launch a kernel on a GPU (all but :data:`VIEW_OPS`)."""
    return sum(n for op, n in ops.items() if op not in VIEW_OPS)


def syncs(ops: collections.Counter[str]) -> int:
    """How many of ``ops`` make the host wait for the device (:data:`SYNC_OPS`)."""
    return sum(n for op, n in ops.items() if op in SYNC_OPS)
