"""DTensor basics shared by the sharded algorithms and FSDP2 support: is a tensor sharded,
where a rank's shard sits in the full tensor (:class:`Layout`), the stand-in for a sharded
pruned tensor, gathering, and the core's counting and ``dim`` rules as the sharded algorithms
read them. Imports no other pruning module but :mod:`.validation`, so everything above can use it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import torch

from .validation import check_dim, check_norm_rank, check_structured, count_to_prune

__all__ = ["Layout", "any_sharded", "contiguous_stride", "count", "gathered", "is_sharded",
           "is_stand_in", "stand_in", "structured_dim"]


_FOUND: list[type] = []  # DTensor, once torch.distributed.tensor has been imported


def _dtensor_type() -> type | None:
    # No DTensor can exist before torch.distributed.tensor is imported: no import here.
    if _FOUND:
        return _FOUND[0]
    module = sys.modules.get("torch.distributed.tensor")
    cls = getattr(module, "DTensor", None)
    if cls is not None:
        _FOUND.append(cls)
    return cls


#: Tensor classes that are never DTensors (a DTensor made a Parameter keeps its class).
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def is_sharded(t: object) -> bool:
    """Whether ``t`` is a DTensor."""
    if type(t) in _PLAIN:
        return False
    cls = _dtensor_type()
    return cls is not None and isinstance(t, cls)


def any_sharded(tensors: Iterable[object]) -> bool:
    """Whether any of ``tensors`` is a DTensor."""
    return any(is_sharded(t) for t in tensors)


#: Marks the tensor :func:`stand_in` makes.
_STAND_IN = "_prune_explorer_stand_in"


def stand_in(orig: Any) -> Any:
    """What the core reads as the pruned tensor ``orig * mask`` of a sharded parameter, without
    computing it: a new DTensor over ``orig``'s storage (no copy), marked as standing in.

    It equals the pruned tensor wherever the mask is 1 -- every entry an unstructured method can
    still prune, so unstructured paths read it as it is; paths that read every value (norms of
    structured methods, the gathered fallback) multiply by the mask themselves, a slab at a time
    for the norms (:mod:`._sharded_slices`), at once for the gathered fallback
    (``_sharded._values``).
    """
    out = orig.detach()
    setattr(out, _STAND_IN, True)
    return out


def is_stand_in(x: Any) -> bool:
    return bool(getattr(x, _STAND_IN, False))


def contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a contiguous tensor of ``shape``."""
    stride, acc = [], 1
    for size in reversed(shape):
        stride.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(stride))


class Layout:
    """Where one rank's shard of a DTensor sits in the full tensor.

    The local shard is a box of the full tensor; its entries, in local flat order, form runs of
    ``run`` consecutive global flat indices starting at ``starts``.
    """

    def __init__(self, t: Any, where: str) -> None:
        from torch.distributed.tensor import Shard
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

        self.mesh = t.device_mesh
        self.placements = tuple(t.placements)
        sharded = []
        for i, p in enumerate(self.placements):
            if type(p) is Shard:
                sharded.append(i)
            elif not p.is_replicate():
                raise NotImplementedError(
                    f"{where}: sharded pruning supports Shard and Replicate placements; "
                    f"got {p!r}")
        if len(sharded) > 1:
            raise NotImplementedError(
                f"{where}: sharded pruning supports parameters sharded over one mesh dimension "
                f"(FSDP, HSDP); got placements {self.placements}")
        self.mesh_dim = sharded[0] if sharded else None
        self.group = None if self.mesh_dim is None else self.mesh.get_group(self.mesh_dim)
        self.shape = tuple(t.shape)
        local, offset = compute_local_shape_and_global_offset(t.shape, self.mesh, self.placements)
        self.local_shape, self.offset = tuple(local), tuple(offset)
        self.numel = t.numel()

    def runs(self) -> tuple[torch.Tensor, int]:
        """(global flat start of each run, run length) of the local entries in local order."""
        shape, local, offset = self.shape, self.local_shape, self.offset
        if not shape:
            return torch.zeros(1, dtype=torch.int64), 1
        if 0 in local:
            return torch.zeros(0, dtype=torch.int64), 1
        stride = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            stride[d] = stride[d + 1] * shape[d + 1]
        split = [d for d in range(len(shape)) if local[d] != shape[d]]
        p = split[-1] if split else 0
        run = 1
        for d in range(p, len(shape)):
            run *= local[d]
        starts = torch.tensor([offset[p] * stride[p]], dtype=torch.int64)
        for d in range(p - 1, -1, -1):
            along = (torch.arange(local[d], dtype=torch.int64) + offset[d]) * stride[d]
            starts = (along[:, None] + starts[None, :]).reshape(-1)
        return starts, run

    def same_group(self, other: Layout) -> bool:
        return self.mesh == other.mesh and self.mesh_dim == other.mesh_dim

    def local(self, x: Any) -> torch.Tensor:
        """This rank's part of ``x``: a DTensor (redistributed to this layout if need be) or a
        full tensor of the global shape."""
        if is_sharded(x):
            if x.device_mesh != self.mesh or tuple(x.placements) != self.placements:
                x = x.redistribute(self.mesh, self.placements)
            local: torch.Tensor = x.to_local()
            return local
        box = tuple(slice(o, o + n) for o, n in zip(self.offset, self.local_shape, strict=True))
        part: torch.Tensor = x[box]
        return part

    def wrap(self, local: torch.Tensor) -> Any:
        """A DTensor of this layout holding ``local``."""
        from torch.distributed.tensor import DTensor

        return DTensor.from_local(local, self.mesh, self.placements, run_check=False,
                                  shape=torch.Size(self.shape),
                                  stride=contiguous_stride(self.shape))


# The core's rules used by the sharded algorithms (the only names they take from validation).


def count(method: Any, size: int, where: str, what: str) -> int:
    """The core's rule for how many of ``size`` units ``method.amount`` prunes (checked)."""
    return count_to_prune(method.amount, size, where, what)


def structured_dim(method: Any, shape: tuple[int, ...], where: str) -> int:
    """The core's checks of a structured method on a tensor of ``shape``; returns ``dim``."""
    like = torch.empty(shape, device="meta")
    check_structured(like, where, getattr(method, "_tensor_name", None))
    dim = check_dim(method.dim, len(shape), where)
    if hasattr(method, "n"):
        check_norm_rank(method.n, len(shape), where)
    return dim


def gathered(x: Any) -> torch.Tensor:
    """The whole tensor: gathered on every rank if ``x`` is a DTensor (a collective)."""
    out: torch.Tensor = x.full_tensor() if is_sharded(x) else x
    return out
