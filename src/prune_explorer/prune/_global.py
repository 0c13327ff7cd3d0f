"""``global_unstructured`` without torch's concatenated copy of the model.

torch concatenates every tensor's scores and masks, prunes the vector with one
``PruningContainer`` step and slices the result back. We give the same masks (same selection
rule, see :mod:`._select`) with one mask-sized buffer per tensor where the method is one of our
unstructured ones, and fall back to torch's own algorithm otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.utils.prune as _torch_prune
from torch import nn

from . import _module, _select_device, _sharded
from ._base import BasePruningMethod, PruningContainer
from ._dtensor import any_sharded
from ._hooks import HOOK_TYPE
from ._select import SMALL, resolve_ties, select
from .methods import _Unstructured
from .validation import check_same_shape, count_to_prune, problem

__all__ = ["global_compute", "global_setup"]


class _Entry:
    """One (module, name) of a global pruning call, with what it is pruned against."""

    def __init__(self, module: nn.Module, name: str, scores: torch.Tensor | None) -> None:
        where = "global_unstructured"
        self.module = module
        self.name = name
        self.current = _module.current_tensor(module, name, where)
        self.old = _module.find_hook(module, name, where)
        self.old_mask: torch.Tensor | None = (
            module._buffers[name + "_mask"] if self.old is not None else None
        )
        if scores is not None:
            check_same_shape(scores, self.current, where, "importance_scores",
                             f"parameter {name!r}")
        self.scores = self.current if scores is None else scores

    @property
    def mask_dtype(self) -> torch.dtype:
        return self.old_mask.dtype if self.old_mask is not None else self.current.dtype


def _parse_global_args(
    parameters: Any, importance_scores: Any
) -> list[_Entry]:
    where = "global_unstructured"
    if not isinstance(parameters, Iterable):
        raise TypeError(problem(where, "parameters", "an iterable of (module, name) pairs",
                                type(parameters).__name__))
    pairs = list(parameters)
    if not pairs:
        raise ValueError(problem(where, "parameters", "a non-empty iterable of (module, name)",
                                 pairs))
    if importance_scores is None:
        importance_scores = {}
    if not isinstance(importance_scores, dict):
        raise TypeError(problem(where, "importance_scores",
                                "a dict {(module, name): tensor} or None",
                                type(importance_scores).__name__))
    seen: set[tuple[int, str]] = set()
    entries = []
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(problem(where, f"parameters[{i}]", "a (module, name) tuple", pair))
        module, name = pair
        key = (id(module), name)
        if key in seen:
            raise ValueError(problem(where, f"parameters[{i}]", "listed only once", pair[1]))
        seen.add(key)
        entries.append(_Entry(module, name, importance_scores.get(pair)))
    return entries


def _common_dtype(tensors: Iterable[torch.Tensor]) -> torch.dtype:
    dtypes = [t.dtype for t in tensors]
    out = dtypes[0]
    for d in dtypes[1:]:
        out = torch.promote_types(out, d)
    return out


def _torch_rule(
    entries: list[_Entry], method: _torch_prune.BasePruningMethod
) -> list[torch.Tensor]:
    """torch's own algorithm: one concatenated vector, one container step, then slices."""
    device = entries[0].current.device
    scores = torch.cat([e.scores.reshape(-1).to(device) for e in entries])
    defaults = [
        e.old_mask if e.old_mask is not None else torch.ones_like(e.current) for e in entries
    ]
    default = torch.cat([d.reshape(-1).to(device) for d in defaults])
    chain = PruningContainer()
    chain._tensor_name = "temp"
    method._tensor_name = "temp"
    chain.add_pruning_method(method)
    final = chain.compute_mask(scores, default)
    masks, start = [], 0
    for e, d in zip(entries, defaults, strict=True):
        piece = final[start:start + e.current.numel()].view_as(e.current)
        masks.append(d * piece.to(dtype=d.dtype, device=d.device))
        start += e.current.numel()
    return masks


def _fast(entries: list[_Entry], method: _Unstructured) -> list[torch.Tensor] | None:
    """Our unstructured methods across tensors without torch's concatenated copy of the model.

    Same selection as torch's rule (one vector of the surviving entries in parameter order):
    random draws are made over that vector exactly as torch does; L1 ranks |score| read in
    place (where some tensor is pruned already, one mask-sized buffer per tensor holds |score|,
    NaN where pruned: NaN ranks last) and the choice is written into the new masks. None where
    only torch's rule can decide.
    """
    ties = resolve_ties(method.ties)
    dtype = _common_dtype(e.scores for e in entries)
    if not dtype.is_floating_point:
        return None
    device_path = _select_device.wanted(entries[0].current)  # counts read back at once
    alive = [None if e.old_mask is None else (e.old_mask.reshape(-1) == 1) for e in entries]
    counts = _counts([None if a is None else torch.count_nonzero(a) for a in alive],
                     [e.current.numel() for e in entries], device_path)
    k = count_to_prune(method.amount, sum(counts), method.where,
                       "prunable entries left across tensors")
    if k == 0:
        return [torch.ones_like(e.current) if e.old_mask is None else e.old_mask.clone()
                for e in entries]
    if method._LARGEST:  # random: one draw over the surviving entries, as torch makes it
        draws = method._keys(torch.empty(sum(counts), dtype=dtype,
                                         device=entries[0].current.device))
        # draws are never negative: above SMALL on the device path, ranked as |draws| (fewer
        # operations than signed keys; below, the sort would take an extra abs)
        keep = ~select([draws], k, largest=True, ties=ties,
                       magnitude=device_path and draws.numel() > SMALL).selected(draws)
        return _scatter_kept(entries, alive, counts, keep)
    pruned_before = any(a is not None for a in alive)
    if pruned_before and ties == "torch":
        return None  # torch's topk must see its own gathered vector
    masks, keys = [], []
    scratch: list[torch.Tensor | None] = []
    for e, a in zip(entries, alive, strict=True):
        mask = torch.empty(e.current.shape, dtype=e.mask_dtype, device=e.current.device)
        if not pruned_before:  # rank by |score| read in place
            key = e.scores.reshape(-1) if e.scores.dtype == dtype else (
                e.scores.to(dtype).reshape(-1))
        elif e.scores.dtype == dtype == mask.dtype:
            key = torch.abs(e.scores, out=mask).view(-1)
        else:
            key = torch.abs(e.scores.to(dtype)).reshape(-1)
        if a is not None:
            key.masked_fill_(~a.to(key.device), float("nan"))
        masks.append(mask)
        keys.append(key)
        # the device path keeps its integer keys in the mask-to-be (or in |score| itself,
        # whose magnitude keys are its own bits)
        scratch.append(key if pruned_before else mask.view(-1))
    if pruned_before:
        finite = _counts([torch.count_nonzero(~torch.isnan(x)) for x in keys],
                         [0] * len(keys), device_path)
        if k > sum(finite):
            return None  # NaN scores would have to be pruned among the NaN markers
    chosen = select(keys, k, largest=False, ties=ties,
                    magnitude=device_path or not pruned_before, scratch=scratch)
    for i, (mask, key, e) in enumerate(zip(masks, keys, entries, strict=True)):
        chosen.write_kept(key, mask.view(-1), i)
        if e.old_mask is not None:  # already pruned entries (NaN keys above) stay pruned
            mask.mul_(e.old_mask.to(mask.device))
    return masks


def _counts(found: list[torch.Tensor | None], default: list[int], at_once: bool) -> list[int]:
    """The counts ``found`` (0-d tensors; None: ``default``) as ints, read back in one
    transfer when ``at_once`` (the device path), else one by one."""
    present = [c for c in found if c is not None]
    if at_once and present:
        read = iter(_select_device.read_host(torch.stack([c.to(present[0].device)
                                                          for c in present])))
        return [d if c is None else next(read) for c, d in zip(found, default, strict=True)]
    return [d if c is None else int(c) for c, d in zip(found, default, strict=True)]


def _scatter_kept(
    entries: list[_Entry], alive: list[torch.Tensor | None], counts: list[int],
    keep: torch.Tensor,
) -> list[torch.Tensor]:
    """Split the kept flags of the surviving entries (in parameter order) into masks."""
    masks, start = [], 0
    for e, a, c in zip(entries, alive, counts, strict=True):
        piece = keep[start:start + c].to(device=e.current.device, dtype=e.mask_dtype)
        start += c
        if a is None:
            masks.append(piece.view(e.current.shape).clone())
        else:
            mask = torch.zeros(e.current.shape, dtype=e.mask_dtype, device=e.current.device)
            if _select_device.wanted(mask):  # no host sync for the boolean index
                mask.view(-1).masked_scatter_(a.to(mask.device), piece)
            else:
                mask.view(-1)[a] = piece
            masks.append(mask)
    return masks


def global_setup(
    parameters: Any, pruning_method: Any, importance_scores: Any, kwargs: dict[str, Any]
) -> tuple[list[_Entry], _torch_prune.BasePruningMethod]:
    """Check the arguments and build the method (ours or torch's: both are accepted)."""
    where = "global_unstructured"
    entries = _parse_global_args(parameters, importance_scores)
    if not (isinstance(pruning_method, type)
            and issubclass(pruning_method, HOOK_TYPE)):
        raise TypeError(problem(where, "pruning_method", "a BasePruningMethod subclass",
                                pruning_method))
    method: _torch_prune.BasePruningMethod
    if issubclass(pruning_method, BasePruningMethod):
        method = pruning_method._create(where, **kwargs)
    else:
        method = pruning_method(**kwargs)
    # torch's base class leaves PRUNING_TYPE to its subclasses, so its annotations lack it
    kind = method.PRUNING_TYPE  # type: ignore[attr-defined]
    if kind != "unstructured":
        raise TypeError(problem(
            where, "pruning_method",
            "a method of PRUNING_TYPE 'unstructured' (e.g. L1Unstructured)",
            f"{pruning_method.__name__} ({kind})"))
    return entries, method


def global_compute(
    entries: list[_Entry], method: _torch_prune.BasePruningMethod
) -> list[torch.Tensor]:
    if any_sharded(e.current for e in entries):  # DTensors: collective, see _sharded
        return _sharded.global_masks(entries, method, global_compute)
    with torch.no_grad():
        masks = None
        # the fast path stands in for our own compute_mask: only where the class uses it as is
        if isinstance(method, _Unstructured) and (
                type(method).compute_mask is _Unstructured.compute_mask):
            masks = _fast(entries, method)
        if masks is None:
            masks = _torch_rule(entries, method)
    return masks
