"""The session on a model sharded over processes (FSDP2 / DTensor parameters): the rank helpers.

Every rank builds its own ``Session(model)`` and calls the same methods in the same order, as for
any collective: applying, undoing and the reports talk to the other ranks. What each rank holds
and what it says:

* **Masks and history** stay sharded: each rank packs the bits of its own shard of every mask
  (:class:`~prune_explorer.session.tensors.packed.ShardedMask`), with the *global* kept count
  (one all-reduced integer), so a tensor's history, ``pruned`` counts and ``repr`` are the same
  on every rank and no rank holds a full mask. Undo snapshots keep the local bits too and give
  back a DTensor laid out as before.
* **Reports** are collective: counts of nonzero entries -- per tensor, and per slice along each
  dim for ``channels_pruned`` -- are computed on each shard and all-reduced
  (:func:`nonzero_summary`), never gathered; every rank gets the same table.
* **Previews** use the core's sharded path (the mask is a DTensor; the only traffic is the core's
  histograms), not the order cache, which refuses DTensors.
* **The plan** is the same on every rank; :meth:`Plan.save <prune_explorer.session.Plan.save>`
  writes the file on rank 0 only (:func:`rank`).
* ``shrink`` and ``sensitivity`` build or score one-process models: they refuse a sharded
  model (:func:`refuse_sharded`). ``Session.to`` refuses to move a sharded model to another
  device (its mesh's device type decides where it lives, :func:`refuse_move`); to where it is,
  it does nothing.
* **Tie notes** (``Step.ties``): for L1 the largest pruned and the smallest kept ``|w|`` are
  all-reduced; for random steps the core's own cut says whether it split a tie. A tie
  straddling the cut gets ``"lowest"``, as on one process (the core's "index" rule) -- so the
  plan and its snippet are the one-process session's, tie notes included.
* **Memory**: the session reads a pruned tensor through the core's stand-in
  (:func:`tensor_of`), never ``orig * mask``, and packs, unpacks and scans masks a chunk at a
  time: a step costs a rank the core call plus the session's bits.

Examples
--------
>>> import torch
>>> rank(), is_sharded(torch.nn.Linear(2, 2))  # no process group: rank 0, nothing sharded
(0, False)
>>> count, per_dim = nonzero_summary(torch.tensor([[0.0, 1.0], [0.0, 2.0]]))
>>> count, [v.tolist() for v in per_dim]
(2, [[1, 1], [0, 2]])
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from prune_explorer.prune import engine
from prune_explorer.prune.engine import Layout, all_reduce, pruned_stand_in
from prune_explorer.prune.engine import is_sharded as is_dtensor

__all__ = ["count_alive", "count_nonzero", "is_dtensor", "is_sharded",
           "nonzero_summary", "rank", "reduce_extremes", "refuse_move",
           "refuse_sharded", "shard_of", "tensor_of", "total_count"]


def tensor_of(module: nn.Module, name: str) -> Any:
    """``module.<name>`` as the session reads it -- its shape, dtype and device, and its values
    wherever its mask is 1 (all the values a step can still prune). For a tensor pruned on a
    sharded parameter that is the core's stand-in (``name_orig``'s storage, no copy): reading
    ``module.<name>`` would compute ``orig * mask``, as large as the shard. Anything else:
    ``getattr(module, name)``."""
    stand = pruned_stand_in(module, name)
    return getattr(module, name) if stand is None else stand


def is_sharded(model: nn.Module) -> bool:
    """Whether any parameter or buffer of ``model`` is a DTensor (e.g. after ``fully_shard``)."""
    return any(is_dtensor(t) for t in (*model.parameters(), *model.buffers()))


def rank() -> int:
    """This process's rank in the default group; 0 without ``torch.distributed``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0


def refuse_sharded(model: nn.Module, where: str) -> None:
    """Raise ``NotImplementedError`` naming ``where`` if ``model`` is sharded (every rank
    raises alike, so no rank waits on the others)."""
    if is_sharded(model):
        raise NotImplementedError(
            f"{where}: the model is sharded over processes (DTensor parameters, e.g. after "
            "fully_shard); this works on a one-process model only: load the full state_dict "
            "into an unsharded copy and use a Session on that")


def refuse_move(model: nn.Module, device: torch.device, where: str) -> None:
    """Raise ``NotImplementedError`` naming ``where`` if ``model`` is sharded and not all on
    ``device`` already: a DTensor lives on the device type of its mesh, so a sharded model
    moves by sharding it again on a mesh of the new device, not by ``to``. Moving it where it
    is already is allowed (nothing moves). Every rank decides alike, from its own tensors."""
    if not is_sharded(model):
        return
    here = {t.device for t in (*model.parameters(), *model.buffers())}
    if all(d.type == device.type and device.index in (None, d.index) for d in here):
        return
    raise NotImplementedError(
        f"{where}: the model is sharded over processes (DTensor parameters, e.g. after "
        f"fully_shard) and its tensors stay on its device mesh's devices "
        f"({', '.join(sorted(str(d) for d in here))}); got device={str(device)!r}: shard the "
        "model on a mesh of that device (init_device_mesh) and start a Session on it")


def _group(t: Any) -> Any:
    """The process group whose ranks hold the different shards of DTensor ``t``."""
    return Layout(t, "Session").group


def total_count(t: Any, local: int) -> int:
    """``local`` (a count over this rank's shard of ``t``) summed over the shards of ``t``;
    ``local`` itself for a plain tensor. A collective for DTensors."""
    if not is_dtensor(t):
        return local
    out = torch.tensor([local], dtype=torch.int64, device=t.to_local().device)
    return int(all_reduce(out, _group(t))[0])


def shard_of(t: Any) -> torch.Tensor:
    """This rank's shard of DTensor ``t``; ``t`` itself for a plain tensor."""
    return t.to_local() if is_dtensor(t) else t


def count_alive(mask: Any) -> int:
    """Entries of the 0/1 ``mask`` equal to 1, over every shard for a DTensor; read a chunk at a
    time (the core's :func:`~prune_explorer.prune.engine.count_alive`)."""
    return total_count(mask, engine.count_alive(shard_of(mask).detach().reshape(-1)))


def count_nonzero(t: Any) -> int:
    """Nonzero entries of ``t``, over every shard for a DTensor (one all-reduce of one int)."""
    return total_count(t, int(torch.count_nonzero(shard_of(t).detach())))


def nonzero_summary(t: Any) -> tuple[int, list[torch.Tensor]]:
    """(nonzero entries of ``t``, for each dim the nonzero count of every slice along it).

    Read a slab of rows (about a chunk) at a time. For a DTensor the counts are taken on each
    shard and all-reduced in one call (``1 + sum of the dims`` integers), so every rank gets the
    same answer and nothing is gathered.
    """
    shard = shard_of(t).detach()
    shape = tuple(t.shape)
    offset = Layout(t, "Session.report").offset if is_dtensor(t) else (0,) * len(shape)
    flat = torch.zeros(1 + sum(shape), dtype=torch.int64, device=shard.device)
    count, per = flat[:1], list(flat[1:].split(list(shape))) if shape else []
    if not shape:
        count += int(bool(shard != 0))
    for row, slab in engine.row_slabs(shard) if shape and shard.numel() else ():
        nonzero = slab != 0
        count += torch.count_nonzero(nonzero)
        for d in range(nonzero.dim()):
            others = [i for i in range(nonzero.dim()) if i != d]
            counts = nonzero.sum(dim=others) if others else nonzero.to(torch.int64)
            start = offset[d] + (row if d == 0 else 0)
            per[d][start:start + counts.numel()] += counts
    if is_dtensor(t):
        all_reduce(flat, _group(t))
    flat = flat.cpu()
    return int(flat[0]), list(flat[1:].split(list(shape))) if shape else []


def reduce_extremes(t: Any, top: float, bottom: float, flag: bool) -> tuple[float, float, bool]:
    """(max of ``top``, min of ``bottom``, any ``flag``) over the shards of DTensor ``t``."""
    device = t.to_local().device
    group = _group(t)
    high = all_reduce(torch.tensor([top, float(flag)], dtype=torch.float64, device=device),
                      group, dist.ReduceOp.MAX)
    low = all_reduce(torch.tensor([bottom], dtype=torch.float64, device=device), group,
                     dist.ReduceOp.MIN)
    return float(high[0]), float(low[0]), bool(high[1])
