"""Checks of a step against a model's current state, run before anything changes.

:class:`~prune_explorer.session.steps.step.Step` already checks everything that needs no model
(method,
types, ranges). Here the rest: the addresses exist, ``dim`` fits the tensor, structured methods get
a tensor of at least 2 dims, an integer ``amount`` is no more than what is still unpruned, a custom
mask has the tensor's shape, global targets share a device, ``remove`` acts on a pruned tensor.

Examples
--------
>>> import torch
>>> from prune_explorer.session import Step
>>> from prune_explorer.session.steps.checks import check_step
>>> from prune_explorer.session.model.targets import discover
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 3))
>>> step = Step("ln_structured", "0.bias", amount=1, n=1, dim=0)
>>> try:
...     check_step(model, discover(model), step, "Session.apply")
... except ValueError as err:
...     print(err)  # doctest: +NORMALIZE_WHITESPACE
Session.apply: tensor '0.bias' must be at least 2-D for structured pruning (use an unstructured
method for 1-D tensors such as biases); got shape (3,)
"""

from __future__ import annotations

import torch
from torch import nn

from prune_explorer.prune import validation
from prune_explorer.prune.patterns import check_block, check_group_dim, live_blocks
from prune_explorer.prune.validation import unprunable

from ..errors import InvalidStepError
from ..model.hooks import find_hook
from ..model.targets import TensorInfo, unknown_target
from ..tensors.sharded import count_alive, is_dtensor, nonzero_summary, tensor_of
from .methods import core_errors
from .step import Step, split_address

__all__ = ["check_step", "kept_slices", "unpruned_channels", "unpruned_entries"]


def unpruned_entries(module: nn.Module, tensor_name: str) -> int:
    """Entries of ``module.<tensor_name>`` whose mask is 1 (all entries if not pruned)."""
    mask = getattr(module, tensor_name + "_mask", None)
    if mask is None or find_hook(module, tensor_name) is None:
        return tensor_of(module, tensor_name).numel()
    return count_alive(mask)  # a chunk at a time; sharded: on each shard, all-reduced


def unpruned_channels(module: nn.Module, tensor_name: str, dim: int) -> int:
    """Slices along ``dim`` not entirely masked (what a structured method may still prune)."""
    tensor = tensor_of(module, tensor_name)
    mask = getattr(module, tensor_name + "_mask", None)
    if mask is None or find_hook(module, tensor_name) is None:
        return tensor.shape[dim]
    return kept_slices(mask, dim % tensor.dim())


def kept_slices(kept: torch.Tensor, dim: int) -> int:
    """Slices along ``dim`` with at least one kept entry (what a structured method can cut).

    ``kept`` is a bool mask or a 0/1 mask as ``torch.nn.utils.prune`` makes them.
    """
    if is_dtensor(kept):  # sharded: per-slice counts on each shard, all-reduced
        return int(torch.count_nonzero(nonzero_summary(kept)[1][dim]))
    if kept.dim() == 0:
        return int(bool(kept))
    # An explicit row length: reshape(n, -1) is ambiguous for tensors with no entries.
    rows = kept.movedim(dim, 0).reshape(kept.shape[dim], kept.numel() // max(kept.shape[dim], 1))
    if rows.shape[1] == 0:  # slices with no entries keep nothing
        return 0
    # For 0/1 masks "any entry kept" is "max > 0", which is several times faster than any().
    alive = rows.any(dim=1) if kept.dtype == torch.bool else rows.amax(dim=1) > 0
    return int(alive.sum())


def _fits(amount: int, left: int, where: str, what: str) -> None:
    # The core's count rule (one template), worded with what the session knows is left.
    with core_errors("amount"):
        validation.count_to_prune(amount, left, where, what)


def check_step(model: nn.Module, known: dict[str, TensorInfo], step: Step, where: str) -> None:
    """Raise :class:`InvalidStepError` if ``step`` cannot run on ``model`` as it is now."""
    field = "targets" if step.is_global else "target"
    for address in step.targets:
        if address not in known:
            raise unknown_target(address, known, where, field, model)
    pairs = []
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        pairs.append((model.get_submodule(module_name), tensor_name))
        why = unprunable(tensor_of(*pairs[-1]))  # the core's rule: meta, quantized, int8...
        if why is not None and step.method != "remove":
            raise InvalidStepError(f"{where}: cannot prune {address!r}: {why}", field)

    if step.method == "remove":
        module, tensor_name = pairs[0]
        if find_hook(module, tensor_name) is None:
            raise InvalidStepError(
                f"{where}: target {step.target!r} is not pruned, so there is no pruning to "
                "make permanent",
                "target",
            )
        return

    amount = step.settings.get("amount")
    if step.is_global:
        devices = {str(tensor_of(m, t).device) for m, t in pairs}
        if len(devices) > 1:
            raise InvalidStepError(
                f"{where}: targets must all be on one device; got {sorted(devices)}", "targets"
            )
        if isinstance(amount, int):
            left = sum(unpruned_entries(m, t) for m, t in pairs)
            _fits(amount, left, where, "entries still unpruned in targets")
        return

    module, tensor_name = pairs[0]
    tensor = tensor_of(module, tensor_name)
    shape = tuple(tensor.shape)
    if step.spec.structured:
        with core_errors("target"):
            validation.check_structured(tensor, where, step.targets[0])
        dim = step.settings["dim"]
        of = f"{step.target!r} of shape {shape}"
        with core_errors("dim"):
            validation.check_dim(dim, tensor.dim(), where, of)
        if "n" in step.settings:
            with core_errors("n"):
                validation.check_norm_rank(step.settings["n"], tensor.dim(), where, of)
        if isinstance(amount, int):
            left = unpruned_channels(module, tensor_name, dim)
            _fits(amount, left, where,
                  f"channels of {step.targets[0]!r} along dim {dim} still unpruned")
        return
    if step.method == "semi_structured":  # the core's rules: dim fits, M tiles that dim
        with core_errors("dim"):
            validation.check_dim(step.settings["dim"], tensor.dim(), where,
                                 f"{step.target!r} of shape {shape}")
        _, group = validation.pattern_counts(step.settings["pattern"])
        with core_errors("pattern"):
            check_group_dim(tensor, step.settings["dim"], group, where)
    elif step.method == "block_structured":  # the core's rule: blocks tile the tensor
        with core_errors("block"):
            block = check_block(tensor, step.settings["block"], where)
        if isinstance(amount, int):  # amount counts the blocks still alive
            mask = getattr(module, tensor_name + "_mask", None)
            if mask is None or find_hook(module, tensor_name) is None:
                mask = torch.ones(()).expand(shape)
            _fits(amount, int(live_blocks(mask, block).sum()), where,
                  f"blocks of {step.targets[0]!r} still unpruned")
    elif isinstance(amount, int):
        left = unpruned_entries(module, tensor_name)
        _fits(amount, left, where, f"entries of {step.targets[0]!r} still unpruned")
    elif step.method == "custom_from_mask":
        mask_shape = step.settings["mask"].shape
        if mask_shape != shape:
            raise InvalidStepError(
                f"{where}: mask must have the shape of {step.target!r}, {shape}; "
                f"got shape {mask_shape}",
                "mask",
            )
