"""Which way a step split entries that tie exactly at its cut, so the snippet can say so.

The session runs the core in its default tie rule (``prune.tie_break("index")``): when entries of
equal key straddle the cut of a large tensor, the core prunes the same *number* of them as torch,
lowest flat index first, instead of calling torch's full sorted ``topk``. Stock torch would pick
some other tied entries, so :func:`note_ties` says, right after a step ran, which tied entries it
pruned:

* ``None`` -- no tie straddled the cut (the set of pruned entries is unique), or the tied entries
  pruned are torch's own choice: the plain ``torch.nn.utils.prune`` call reproduces the mask;
* ``"lowest"`` -- the tied entries pruned are those of lowest flat index (over the targets'
  unpruned entries in order, concatenated for a global step);
* ``"highest"`` -- those of highest flat index.

For ``"lowest"``/``"highest"`` the snippet passes a stable rank of the keys as
``importance_scores``, which makes stock torch prune exactly those entries (see
:mod:`prune_explorer.session.codegen.tie_lines`).

On one process the note is read off the core: every selection it makes inside the step records
whether a tie straddled its cut (``engine.Straddle``, from the counts it already has), and the
tied entries it takes are always the lowest-index ones -- so no second pass over the weights.
Where the core said nothing (a step that pruned nothing) or the targets are sharded, the note is
looked up. Keys: ``|importance|`` for L1 (the tensor's values as the step found them); for random
methods the seeded draws (the largest are pruned), drawn again from the step's seed exactly as
the core drew them. ``ln_structured`` ranks the slices still alive by their norms and keeps the
tied slices of lowest index, so a tie that straddles its cut is noted ``"highest"`` (the tied
slices cut are those of highest index), read off the core's selection over the norms (sharded or
not); the snippet ranks the norms that way (``tie_lines.SLICE_HELPER``).
``random_structured`` needs no note: it prunes every slice whose draw is at most the cut draw, as
torch does, whatever the order.

Examples
--------
>>> import torch
>>> keys = torch.tensor([0.1, 0.5, 0.5, 0.5, 0.9])
>>> split_of(keys, torch.tensor([True, True, False, False, False]))
'lowest'
>>> split_of(keys, torch.tensor([True, False, False, True, False]))
'highest'
>>> split_of(keys, torch.tensor([True, False, False, False, False])) is None
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from prune_explorer.prune import engine
from prune_explorer.prune.engine import Layout, local_draws

from ..preview.global_cut import GlobalCut
from ..preview.order_cache import TensorOrder
from ..steps.seeding import draws_for, generator_for
from ..steps.step import Step, split_address
from ..tensors.packed import PackedMask
from ..tensors.sharded import count_alive, is_dtensor, reduce_extremes, shard_of

__all__ = ["note_from_cuts", "note_ties", "split_of"]


def split_of(keys: torch.Tensor, pruned: torch.Tensor) -> str | None:
    """How the pruned entries (the smallest ``keys``) split the tie at the cut, if one straddles.

    ``keys`` and ``pruned`` are 1-D over the candidate entries, in flat order. Returns ``None``
    when no tie straddles the cut (or nothing/everything is pruned), ``"lowest"`` or
    ``"highest"`` when the pruned tied entries are those of lowest / highest index, and
    ``"other"`` for any other split (torch's own ``topk`` choice).
    """
    top = _cut([keys], [pruned], [~pruned])
    if top is None:
        return None
    return _split(pruned[keys == top])


def _cut(keys: list[torch.Tensor], pruned: list[torch.Tensor],
         kept: list[torch.Tensor]) -> torch.Tensor | None:
    """The key at the cut when a tie straddles it (largest pruned == smallest kept), else None.

    Masked reductions, no gathers: a few passes over each tensor.
    """
    reductions = []  # per key tensor: any NaN, largest pruned, smallest kept (read at once)
    for k, p, m in zip(keys, pruned, kept, strict=True):
        if k.numel():
            reductions += [torch.isnan(k).any(), torch.where(p, k, float("-inf")).amax(),
                           torch.where(m, k, float("inf")).amin()]
    if not reductions:
        return None
    read = engine.to_host(reductions)
    if any(read[0::3]):
        return None  # NaN keys: the core leaves those cuts to torch's topk
    top, bottom = max(read[1::3]), min(read[2::3])
    if not math.isfinite(top) or not math.isfinite(bottom) or top < bottom:
        return None
    return keys[0].new_tensor(top, device="cpu")


def _split(taken: torch.Tensor) -> str:
    """``taken``: for the tied entries in flat order, whether each was pruned."""
    count = int(taken.count_nonzero())
    if bool(taken[:count].all()):
        return "lowest"
    if bool(taken[taken.numel() - count:].all()):
        return "highest"
    return "other"


def _split_flags(tied: Sequence[torch.Tensor], pruned: Sequence[torch.Tensor]) -> str:
    """:func:`_split` of the tied entries (``tied`` flags per flat tensor, read in order as
    one vector) where ``pruned`` flags which were pruned -- without gathering them: where the
    first and last pruned and kept tied entries lie, every tensor's read back at once."""
    ends = []  # per tensor, per side (pruned, kept): any, first, last flat position
    for t, p in zip(tied, pruned, strict=True):
        for flags in (t & p, t & ~p):
            if flags.numel():
                ends += [flags.any(), flags.int().argmax(), flags.numel() - 1 -
                         flags.flip(0).int().argmax()]
            else:
                ends += [flags.new_zeros(()), flags.new_zeros(()), flags.new_zeros(())]
    read = iter(engine.to_host(ends))
    firsts: dict[bool, list[float]] = {True: [], False: []}
    lasts: dict[bool, list[float]] = {True: [], False: []}
    offset = 0
    for t in tied:
        for side in (True, False):
            some, first, last = next(read), next(read), next(read)
            if some:
                firsts[side].append(offset + first)
                lasts[side].append(offset + last)
        offset += t.numel()
    if not firsts[False] or not firsts[True] or max(lasts[True]) < min(firsts[False]):
        return "lowest"
    if max(lasts[False]) < min(firsts[True]):
        return "highest"
    return "other"


def note_ties(
    model: nn.Module,
    step: Step,
    before: Mapping[str, PackedMask],
    importance: Mapping[str, torch.Tensor],
    cuts: Sequence[engine.Cut | engine.Straddle] = (),
) -> str | None:
    """``"lowest"``/``"highest"`` if ``step`` (just applied) split a straddling tie that way.

    Parameters
    ----------
    model
        The model after the step.
    step
        The step; only unstructured L1/random steps (local or global) and ``ln_structured``
        steps can get a note.
    before
        The kept-masks of the step's targets before it ran, by address.
    importance
        The targets' values as the step found them (what L1 ranks), by address.
    cuts
        What the core found while running the step
        (:func:`~prune_explorer.prune.engine.cuts_found`): its sharded path's cuts, and
        whether its selection split a tie at the cut
        (:class:`~prune_explorer.prune.engine.Straddle`; for ``ln_structured``, its slice
        cut). Where the selection said, that is the note: the tensors are not read again.
    """
    straddles = [c.flag for c in cuts if isinstance(c, engine.Straddle)]
    sharded = is_dtensor(importance[step.targets[0]])
    if step.is_global:
        inner = step.settings["pruning_method"]
    elif step.method in ("l1_unstructured", "random_unstructured"):
        inner = step.method
    elif step.method == "ln_structured":
        # read off the core's own slice cut (select records whether tied norms straddled
        # it, sharded or not): it keeps the tied slices of lowest index, so those it cut are
        # the highest
        return "highest" if _any(straddles) else None
    else:
        return None
    if sharded:
        return _note_sharded(model, step, inner, before, importance,
                             [c for c in cuts if isinstance(c, engine.Cut)])
    if straddles:  # the core's selection said, on the way (lowest index first)
        return "lowest" if _any(straddles) else None
    masks = []
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        after = getattr(model.get_submodule(module_name), tensor_name + "_mask").reshape(-1)
        was = before[address].unpack(device=after.device).reshape(-1)
        masks.append((was, after != 0))
    split: str | None
    if inner == "l1_unstructured":
        dtype = _common_dtype([importance[a] for a in step.targets])
        keys = [importance[a].detach().reshape(-1).abs().to(dtype) for a in step.targets]
        newly = [was & ~kept for was, kept in masks]
        top = _cut(keys, newly, [kept for _, kept in masks])
        if top is None:
            return None
        tied = [(k == top.to(k.device)) & was for k, (was, _) in zip(keys, masks, strict=True)]
        split = _split_flags(tied, newly)
    else:
        flags = torch.cat([(~kept)[was].cpu() for was, kept in masks])
        first = importance[step.targets[0]]
        dtype = _common_dtype([importance[a] for a in step.targets])
        draws = draws_for(step.seed, flags.numel(), dtype, first.device)  # type: ignore[arg-type]
        # the largest draws are pruned: the smallest negated ones
        split = split_of(draws.neg().cpu(), flags)
    return split if split in ("lowest", "highest") else None


def _note_sharded(model: nn.Module, step: Step, inner: str, before: Mapping[str, PackedMask],
                  importance: Mapping[str, torch.Tensor],
                  cuts: Sequence[engine.Cut]) -> str | None:
    """:func:`note_ties` for targets sharded over processes (a collective). The core took tied
    entries lowest global index first, so a tie straddling the cut is ``"lowest"``.

    A random step is read off the core's own cut (``cuts``: a tie straddles exactly where the
    core split one; a step that pruned nothing has none). Otherwise (L1 steps; random steps the
    core computed densely) the largest pruned and the smallest kept key of each shard are
    reduced. Keys: ``|importance|`` for L1, read where the mask was 1 (``importance`` may be
    the core's stand-in, see :func:`~prune_explorer.session.tensors.sharded.tensor_of`); for
    random steps the negated draws, each rank drawing the one-process stream again from the
    step's seed and keeping its own positions. Every shard is read a chunk at a time in the
    keys' own dtype (nothing shard-sized is allocated, but the draws of that random case)."""
    if inner == "random_unstructured":
        if cuts:
            return "lowest" if any(c.last is not None for c in cuts) else None
        newly = sum(before[a].kept for a in step.targets) - sum(
            count_alive(getattr(model.get_submodule(split_address(a)[0]),
                                split_address(a)[1] + "_mask")) for a in step.targets)
        if newly == 0:
            return None
    layouts, afters = [], []
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        after = shard_of(getattr(model.get_submodule(module_name), tensor_name + "_mask"))
        afters.append(after.reshape(-1))
        layouts.append(Layout(importance[address], "Session"))
    first = importance[step.targets[0]]
    device = shard_of(first).device
    if inner == "l1_unstructured":
        keys = [shard_of(importance[a].detach()).reshape(-1) for a in step.targets]
    else:
        dtype = _common_dtype([importance[a] for a in step.targets])
        generator = generator_for("random_unstructured", step.seed, device).get("generator")
        alive = [shard_of(before[a].unpack(device=device)).reshape(-1) for a in step.targets]
        keys = local_draws(layouts, alive, [before[a].kept for a in step.targets], dtype, device,
                           generator)
        del alive
    top, bottom, nan = float("-inf"), float("inf"), False
    for key, address, after in zip(keys, step.targets, afters, strict=True):
        if not key.numel():  # an empty shard (split() would still give one empty piece)
            continue
        start = 0
        for was in before[address].pieces(device):  # the pieces' sizes set the keys'
            k, m = key[start:start + was.numel()], after[start:start + was.numel()]
            start += was.numel()
            kept = m != 0
            if inner == "l1_unstructured":
                k = k.abs()
                # one process reads orig * mask: a pruned inf is NaN there
                nan = nan or bool(torch.isnan(k).any()) or bool((torch.isinf(k) & ~was).any())
            else:
                k = k.neg()  # the largest draws are pruned
            pruned = was.logical_and_(~kept)
            top = max(top, float(torch.where(pruned, k, float("-inf")).amax()))
            bottom = min(bottom, float(torch.where(kept, k, float("inf")).amin()))
            del k, was, kept, pruned  # before the next chunk's
    top, bottom, nan = reduce_extremes(first, top, bottom, nan)
    if nan or not (math.isfinite(top) and math.isfinite(bottom)) or top < bottom:
        return None
    return "lowest"


def note_from_cuts(cuts: Sequence[tuple[TensorOrder | GlobalCut, int]]) -> str | None:
    """What :func:`note_ties` finds, read off what the preview cached before the step runs.

    ``cuts``: each target's order (its state before the step) and how many of its first
    entries the step prunes, or a global L1 step's :class:`GlobalCut` (the same for every
    target). A tie straddles the cut exactly when the largest pruned key equals the smallest
    kept one; the core then prunes the tied entries of lowest flat index first (its "index"
    rule, which the orders and the cut follow), so the note is ``"lowest"``. ``O(targets)``.
    """
    if cuts and isinstance(cuts[0][0], GlobalCut):
        return "lowest" if cuts[0][0].straddles else None
    orders = [(o, c) for o, c in cuts if isinstance(o, TensorOrder)]
    pruned = [o.sorted_keys[c - 1] for o, c in orders if c > 0]
    kept = [o.sorted_keys[c] for o, c in orders if c < o.alive]
    if not pruned or not kept:
        return None
    read = [int(k) for k in engine.to_host([*pruned, *kept])]  # one host read for all
    top, bottom = max(read[:len(pruned)]), min(read[len(pruned):])
    return "lowest" if top == bottom else None


def _any(flags: Sequence[bool | torch.Tensor]) -> bool:
    """Whether any of ``flags`` (bools, 0-d bool tensors) is true: one host read for all the
    tensors on a device."""
    tensors = [f for f in flags if isinstance(f, torch.Tensor)]
    return any(f is True for f in flags) or any(engine.to_host(tensors))


def _common_dtype(tensors: Sequence[torch.Tensor]) -> torch.dtype:
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype
