"""Pruning parameters sharded over processes: DTensors, e.g. after FSDP2's ``fully_shard``.

The public calls are unchanged; the core hands a call to this module when the parameter is a
``torch.distributed.tensor.DTensor``. Every rank calls it, as with any collective. Masks are
DTensors laid out like their parameters (``name_orig`` stays the sharded parameter,
``name_mask`` is a sharded buffer), and, gathered, they are bit for bit the masks one process
gives on the same full tensors, under the default tie rule (same count as torch; among entries
tied at the cut the lowest flat index first -- for ``global_unstructured`` the position in the
concatenation of the parameters in the order given).

How each method is done
-----------------------
* ``l1_unstructured``, ``random_unstructured`` and ``global_unstructured`` with either: each rank
  writes its keys into its shard of the new mask, and the cut is found from all-reduced
  histograms (:mod:`._radix`): no weights are gathered, the bytes sent do not depend on the model
  size, and the extra memory per rank is a few :data:`._radix.CHUNK`-sized temporaries (plus a
  key buffer where the scores' dtype is not the mask's, e.g. float64 importance scores of a
  float32 weight). An already-pruned tensor is read through :func:`stand_in` (its pruned values
  are not computed) and its mask so far a chunk at a time (entries where it is 1 are alive).
* Random draws are one-process draws: every rank runs through the *whole* stream the one-process
  call would draw (``torch.rand`` of the tensor, or of the surviving entries, or of their
  concatenation) in pieces, keeps the draws at its own positions, and leaves the generator (the
  global one, or ``generator=``) exactly where the one-process call leaves it. So every rank must
  start from the same generator state (``torch.manual_seed(s)`` on every rank), and then the mask
  equals the one-process mask after the same seed. Each rank spends the time of the full draw
  (on the CPU in pieces; on other devices, whose draws do not split, in one piece).
* ``ln_structured`` / ``random_structured``: one value per slice along ``dim``, the same vector on
  every rank (:mod:`._sharded_slices`).
* Anything else (custom methods, ``'nuc'`` norms, the ``"torch"`` tie rule) gathers the full
  tensor on every rank, computes the one-process mask and keeps the local part: exact, not
  memory-scalable.

How pruned DTensor parameters live on their modules under FSDP2 is in :mod:`._fsdp`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from . import _radix
from ._dtensor import (
    Layout,
    count,
    gathered,
    is_sharded,
    is_stand_in,
)
from ._select import get_tie_break
from ._sharded_slices import structured_mask

__all__ = ["global_masks", "local_draws", "mask_for"]


def _kind(method: Any) -> str | None:
    """Which sharded algorithm stands in for ``method``'s compute_mask, if any: only our own
    classes, used as they are (a subclass's or a patched compute_mask is honoured densely).

    A method class names its algorithm in its own ``_sharded_kind`` attribute (never inherited:
    a subclass may compute something else); its ``compute_mask`` must be the one defined beside it.
    """
    cls = type(method)
    kind: str | None = cls.__dict__.get("_sharded_kind")
    if kind is None or getattr(cls.compute_mask, "__module__", "") != cls.__module__:
        return None
    ties = getattr(method, "ties", None) or get_tie_break()
    if kind in ("l1", "random") and ties != "index":
        return None
    if kind == "ln" and method.n == "nuc":
        return None
    return kind


@dataclass
class _Part:
    """One tensor of an unstructured call, as this rank sees it."""

    layout: Layout
    scores: torch.Tensor  # local
    default: torch.Tensor | None  # local mask so far (None: fresh)
    dtype: torch.dtype  # of the new mask
    offset: int  # global flat start in the concatenation


def _unstructured(parts: Sequence[_Part], method: Any, largest: bool, where: str
                  ) -> list[torch.Tensor]:
    """Local masks pruning the ``amount`` smallest |scores| (``largest``: the largest draws)
    across ``parts`` in one-process order."""
    group = parts[0].layout.group
    if any(not p.layout.same_group(parts[0].layout) for p in parts):
        raise NotImplementedError(f"{where}: every parameter must be sharded over the same "
                                  "mesh dimension")
    kdtype = parts[0].scores.dtype
    for p in parts[1:]:
        kdtype = torch.promote_types(kdtype, p.scores.dtype)
    # the mask so far, flat (None: fresh); its entries equal to 1 are alive, read a chunk at a time
    alive = [None if p.default is None else p.default.reshape(-1) for p in parts]
    totals = [p.layout.numel for p in parts]
    if any(a is not None for a in alive):
        device = parts[0].scores.device
        counts = torch.tensor([p.layout.numel if a is None else _radix.count_alive(a)
                               for p, a in zip(parts, alive, strict=True)], device=device)
        totals = [t if a is None else int(c) for t, a, c in
                  zip(totals, alive, _radix.all_reduce(counts, group).tolist(), strict=True)]
    k = count(method, sum(totals), where,
               "prunable entries left across tensors" if len(parts) > 1 else "prunable entries")
    if k == 0:
        return [torch.ones(p.layout.local_shape, dtype=p.dtype, device=p.scores.device)
                if p.default is None else p.default.to(p.dtype, copy=True) for p in parts]
    masks = [torch.empty(p.layout.local_shape, dtype=p.dtype, device=p.scores.device)
             for p in parts]
    keys = [m.view(-1) if m.dtype == kdtype else
            torch.empty(m.numel(), dtype=kdtype, device=m.device) for m in masks]
    if largest:
        _draw_keys([p.layout for p in parts], alive, keys, totals, method.generator)
    else:
        for p, key in zip(parts, keys, strict=True):
            for s, out in zip(p.scores.reshape(-1).split(_radix.CHUNK), key.split(_radix.CHUNK),
                              strict=True):
                torch.abs(s.to(kdtype), out=out)
    keysets, bits = [], 0
    for p, a, key in zip(parts, alive, keys, strict=True):
        ints, bits = _radix.int_view(key)
        if largest:  # the largest draws have the smallest (top - bits)
            ints.neg_().add_((1 << bits) - 1)
        else:  # one pattern for every NaN (all rank above inf, tied among themselves)
            ints.clamp_(max=_radix.NAN_BITS[key.dtype])
        if a is not None:  # already pruned: marked, out of the count
            for piece, was in zip(ints.split(_radix.CHUNK), a.split(_radix.CHUNK),
                                  strict=True):
                piece.masked_fill_(was != 1, -1)
        starts, run = p.layout.runs()
        keysets.append(_radix.KeySet(ints, starts, run, p.offset))
    total = parts[-1].offset + parts[-1].layout.numel
    cut = _radix.find_cut(keysets, k, bits, total, group)
    for ks, m in zip(keysets, masks, strict=True):
        _radix.write_kept(ks, m.view(-1), cut)
    return masks


def local_draws(layouts: Sequence[Layout], alive: Sequence[torch.Tensor | None],
                totals: Sequence[int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator | None) -> list[torch.Tensor]:
    """This rank's part of the draws a random unstructured call makes on one process (the
    stream over the surviving entries of every tensor, concatenated in order), as flat local
    tensors of ``dtype`` on ``device``; entries not alive hold 0. ``alive``:
    each tensor's flat local mask so far (entries equal to 1 are alive; None: all);
    ``totals``: the global count of alive entries of each tensor. A collective where a mask is
    given."""
    keys = [torch.zeros(math.prod(lay.local_shape), dtype=dtype, device=device)
            for lay in layouts]
    _draw_keys(layouts, alive, keys, totals, generator)
    return keys


def _draw_keys(layouts: Sequence[Layout], alive: Sequence[torch.Tensor | None],
               keys: list[torch.Tensor], totals: Sequence[int],
               generator: torch.Generator | None) -> None:
    """Write into ``keys`` the draws one process makes: ``rand`` over the surviving entries of
    every tensor (where its flat mask so far, ``alive``, is 1), concatenated in order."""
    segments: list[tuple[int, torch.Tensor, torch.Tensor | None]] = []
    base = 0
    for layout, a, key, total in zip(layouts, alive, keys, totals, strict=True):
        starts, run = layout.runs()
        if a is None:
            firsts = starts.tolist()
        else:  # stream position of each run = surviving entries before it, on every rank
            counts = _radix.count_alive_runs(a, run)
            mine = list(zip(starts.tolist(), counts, strict=True))
            everyone: list[Any] = [mine]
            if layout.group is not None:
                everyone = [None] * dist.get_world_size(layout.group)
                dist.all_gather_object(everyone, mine, group=layout.group)
                _radix.STATS.collectives += 1
            before, acc = {}, 0
            for start, count in sorted(r for rank in everyone for r in rank):
                before[start] = acc
                acc += count
            firsts = [before[s] for s in starts.tolist()]
        for r, first in enumerate(firsts):
            piece = slice(r * run, (r + 1) * run)
            segments.append((base + first, key[piece], None if a is None else a[piece]))
        base += total
    _radix.draw_stream(segments, base, generator)


def mask_for(method: Any, chain: Callable[..., Any], module: torch.nn.Module, name: str,
             scores: Any, current: Any,
             old: tuple[int, Any] | None, where: str) -> Any:
    """The mask ``method.apply(module, name)`` installs on a sharded ``current`` (a DTensor of
    its layout); ``old`` is the pruning hook already on ``name``, if any."""
    layout = Layout(current, where)
    default = None if old is None else layout.local(module._buffers[name + "_mask"])
    dtype = current.dtype if old is None else scores.dtype
    kind = _kind(method)
    if kind == "l1" and not scores.dtype.is_floating_point:
        kind = None  # integer scores: the one-process order (topk), gathered
    with torch.no_grad():
        if kind in ("l1", "random"):
            part = _Part(layout, layout.local(scores), default, dtype, 0)
            local = _unstructured([part], method, kind == "random", where)[0]
        elif kind in ("ln", "random_structured"):
            local = structured_mask(layout, method, kind, layout.local(scores), default, dtype,
                                    where, is_stand_in(scores))
        elif kind == "custom":
            base = default if default is not None else torch.ones(
                layout.local_shape, dtype=dtype, device=current.to_local().device)
            local = base.to(dtype) * layout.local(method.mask).to(dtype)
        elif kind == "identity":
            local = (torch.ones(layout.local_shape, dtype=dtype,
                                device=current.to_local().device)
                     if default is None else default.clone())
        else:
            local = _dense(layout, method, chain, scores, current, old, module, name)
    return layout.wrap(local.contiguous())


def _values(x: torch.Tensor, scores: Any, mask: torch.Tensor | None) -> torch.Tensor:
    """``x`` (``scores`` or a part of it), multiplied by ``mask`` (the same part of the mask so
    far) where ``scores`` is a :func:`stand_in`: the pruned values, as the hook computes them."""
    if mask is None or not is_stand_in(scores):
        return x
    return mask.to(dtype=x.dtype) * x


def _dense(layout: Layout, method: Any, chain: Callable[..., Any], scores: Any, current: Any,
           old: Any, module: torch.nn.Module, name: str) -> torch.Tensor:
    """Exact but not scalable: the one-process mask from the gathered tensors, local part.
    ``chain(*methods)`` is the core's container of several methods on one tensor."""
    full_scores = gathered(scores)
    if old is not None:
        full_scores = _values(full_scores, scores, gathered(module._buffers[name + "_mask"]))
    if old is None:
        full = method.compute_mask(full_scores, default_mask=torch.ones(
            current.shape, dtype=current.dtype, device=full_scores.device))
    else:
        previous = old[1]
        members = tuple(previous) if hasattr(previous, "_pruning_methods") else (previous,)
        full = chain(*members, method).compute_mask(
            full_scores, default_mask=gathered(module._buffers[name + "_mask"]))
    return layout.local(full).clone()


class _Dense:
    """A global-pruning entry with full (gathered) tensors, for the dense fallback."""

    def __init__(self, entry: Any) -> None:
        self.module, self.name, self.old = entry.module, entry.name, entry.old
        self.old_mask = None if entry.old_mask is None else gathered(entry.old_mask)
        self.current = _values(gathered(entry.current), entry.current, self.old_mask)
        self.scores = _values(gathered(entry.scores), entry.scores, self.old_mask)
        self.mask_dtype = entry.mask_dtype


def global_masks(entries: Sequence[Any], method: Any,
                 dense: Callable[[list[Any], Any], list[torch.Tensor]]) -> list[Any]:
    """The masks ``global_unstructured`` installs when its parameters are DTensors.

    ``entries`` are the core's (module, name, current, scores, old_mask, mask_dtype) records;
    ``dense`` is the core's one-process computation, used by the exact fallback.
    """
    where = "global_unstructured"
    if not all(is_sharded(e.current) for e in entries):
        raise NotImplementedError(f"{where}: parameters must be all DTensors or none "
                                  "(sharded and plain parameters mixed)")
    layouts = [Layout(e.current, where) for e in entries]
    kind = _kind(method)
    if kind == "l1" and not all(e.scores.dtype.is_floating_point for e in entries):
        kind = None  # integer scores: the one-process order (topk), gathered
    with torch.no_grad():
        if kind in ("l1", "random"):
            parts, offset = [], 0
            for e, lay in zip(entries, layouts, strict=True):
                default = None if e.old_mask is None else lay.local(e.old_mask)
                parts.append(_Part(lay, lay.local(e.scores), default, e.mask_dtype, offset))
                offset += lay.numel
            locals_ = _unstructured(parts, method, kind == "random", where)
        else:
            full = dense([_Dense(e) for e in entries], method)
            locals_ = [lay.local(m).clone() for lay, m in zip(layouts, full, strict=True)]
    return [lay.wrap(m.contiguous()) for lay, m in zip(layouts, locals_, strict=True)]
