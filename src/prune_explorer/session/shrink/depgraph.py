"""Shrink: physically remove the channels that pruning made dead, with Torch-Pruning's DepGraph.

Masks only zero values; :func:`shrink` turns a masked model into a smaller dense one. It works on
a copy (the model given is never changed): the copy's pruning is made permanent
(``prune.remove``), then Torch-Pruning (``torch-pruning``, VainF/Torch-Pruning) traces it on
``example_inputs`` and, for each output channel we find dead, removes it *and everything coupled
to it*: the next convolutions' and linears' input channels, BatchNorm entries, biases, the other
branch of a residual add, the slices of a concatenation, grouped and depthwise convolutions.

When is a channel dead? When its output is exactly zero whatever the input, so that removing it
cannot change the model's outputs. For every member of the channel's DepGraph group that
produces it:

* a convolution or linear layer: its weight slice for the channel is all zero (e.g. the
  structured masks zero it) and its bias entry is zero (pruned, or absent);
* a depthwise (or per-channel grouped) convolution fed by a dead channel: its bias entry is zero;
* a BatchNorm fed by a dead channel: it maps zero to zero, ``beta - gamma * mean / sqrt(var +
  eps) == 0`` (e.g. its weight and bias entries are pruned too);
* any other layer with parameters in the group (LayerNorm, PReLU, a bare parameter ...): the
  channel is kept, to be safe.

A channel whose weights are all zero but whose bias or BatchNorm shift is not is *kept* and the
report says so: it still outputs a constant, and (e.g. through a zero-padded convolution) no
exact folding of that constant exists in general. Prune those bias entries as well to remove it.
A channel only partly zero is kept too, and counted. Channels of the layers that produce the
model's output are never removed (that would change the output's shape).

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> from prune_explorer.session.shrink.depgraph import shrink
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
>>> _ = prune.ln_structured(model[0], "weight", amount=2, n=1, dim=0)
>>> dead = (model[0].weight_mask.sum(dim=1) == 0).float()
>>> _ = prune.custom_from_mask(model[0], "bias", mask=1 - dead)
>>> report = shrink(model, torch.randn(4, 8), repeats=3)
>>> report.model[0].weight.shape, report.model[2].weight.shape
(torch.Size([4, 8]), torch.Size([3, 4]))
>>> report.removed
{'0': 2}
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from prune_explorer import prune

from .measure import ShrinkReport, measure

__all__ = ["ShrinkReport", "dense_copy", "install_hint", "kept_reasons", "shrink"]

#: How to get the optional dependency.
install_hint = ("Session.shrink needs Torch-Pruning, a dependency of prune-explorer that is "
                "missing here: pip install torch-pruning")

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_NORM = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
_LAYERS = (nn.Linear, *_CONV, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def _torch_pruning() -> Any:
    try:
        import torch_pruning  # type: ignore[import-untyped]
    except ImportError as error:  # pragma: no cover - exercised by monkeypatching sys.modules
        raise ImportError(install_hint) from error
    return torch_pruning


def _as_tuple(example_inputs: Any) -> tuple[Any, ...]:
    return tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (
        example_inputs,)


def _is_depthwise(module: nn.Module) -> bool:
    return isinstance(module, _CONV) and module.groups > 1 and (
        module.groups == module.in_channels == module.out_channels)


def _slice_zero(weight: torch.Tensor, idx: int) -> bool:
    return not bool(weight[idx].any())


def _bias_zero(module: nn.Module, idx: int) -> bool:
    bias = getattr(module, "bias", None)
    return bias is None or float(bias[idx]) == 0.0


def _out_weight(module: nn.Module) -> torch.Tensor:
    """Weight with output channels along dim 0 (transposed convs keep them on dim 1)."""
    weight = cast(torch.Tensor, module.weight).detach()
    return weight.transpose(0, 1) if getattr(module, "transposed", False) else weight


@dataclass
class _Verdict:
    removable: bool
    reason: str = ""


def _member_dead(module: Any, idx: int, is_out: bool, *, root: bool) -> _Verdict:
    """Whether one group member lets channel ``idx`` be removed (see the module docstring)."""
    if isinstance(module, _NORM):
        if not module.affine and not module.track_running_stats:
            return _Verdict(True)
        mean = module.running_mean[idx] if module.running_mean is not None else 0.0
        var = module.running_var[idx] if module.running_var is not None else 1.0
        gamma = module.weight[idx] if module.weight is not None else 1.0
        beta = module.bias[idx] if module.bias is not None else 0.0
        shift = beta - gamma * mean / torch.sqrt(torch.as_tensor(var + module.eps))
        return _Verdict(float(shift) == 0.0, f"{type(module).__name__} shifts zero to "
                        f"{float(shift):.3g}")
    if _is_depthwise(module):
        dead_in = root and _slice_zero(module.weight.detach(), idx)
        if not _bias_zero(module, idx):
            return _Verdict(False, "depthwise bias is not zero")
        return _Verdict(True) if dead_in or not root else _Verdict(False, "weights not zero")
    if isinstance(module, _LAYERS):
        if not is_out:
            return _Verdict(True)  # a consumer: its input slice goes, exactly
        if not _slice_zero(_out_weight(module), idx):
            return _Verdict(False, "weights not all zero")
        if not _bias_zero(module, idx):
            return _Verdict(False, "bias is not zero")
        return _Verdict(True)
    if isinstance(module, nn.Module) and next(module.parameters(recurse=False), None) is None:
        return _Verdict(True)  # a parameter-free op (activation, pooling, add, cat ...)
    if not isinstance(module, (nn.Module, nn.Parameter)):
        return _Verdict(True)  # Torch-Pruning's wrappers of functional ops
    return _Verdict(False, f"coupled with {type(module).__name__}, which shrink does not judge")


def _output_modules(model: nn.Module, inputs: tuple[Any, ...]) -> set[nn.Module]:
    """Leaf modules whose output tensor is (part of) the model's output."""
    produced: dict[int, nn.Module] = {}
    handles = [m.register_forward_hook(
        lambda mod, _i, out: produced.__setitem__(id(out), mod) if isinstance(
            out, torch.Tensor) else None)
        for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            out = model(*inputs)
    finally:
        for h in handles:
            h.remove()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return {produced[id(o)] for o in outs if id(o) in produced}


def kept_reasons(group: Any, dg: Any, root_idx: int, outputs: set[nn.Module]) -> str:
    """Why channel ``root_idx`` of ``group`` cannot go ("" when it can)."""
    for item in group.items:
        dep = item.dep
        module = dep.target.module
        is_out = dg.is_out_channel_pruning_fn(dep.handler)
        for idx, rid in zip(item.idxs, item.root_idxs, strict=True):
            if rid != root_idx:
                continue
            # a node without outputs is the model's last: the channel reaches the output unless
            # this node is a layer that consumes it (its input channels)
            consumer = isinstance(module, _LAYERS) and not is_out and not _is_depthwise(module)
            if (is_out and module in outputs) or (not dep.target.outputs and not consumer):
                return "feeds the model's output"
            verdict = _member_dead(module, int(idx), is_out, root=item is group.items[0])
            if not verdict.removable:
                name = dg._module2name.get(module, type(module).__name__)
                return f"{name}: {verdict.reason}"
    return ""


def _shapes(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return tuple(out.shape)
    if isinstance(out, (tuple, list)):
        return [_shapes(o) for o in out]
    if isinstance(out, dict):
        return {k: _shapes(v) for k, v in out.items()}
    return None


def _check_output_shapes(dense: nn.Module, small: nn.Module, inputs: tuple[Any, ...]) -> None:
    """A last guard: the shrunk model must give outputs of the same shapes."""
    with torch.no_grad():
        want, got = _shapes(dense(*inputs)), _shapes(small(*inputs))
    if want != got:
        raise RuntimeError(f"shrink: the shrunk model's outputs have shapes {got}, not {want}; "
                           "nothing is returned (please report this model)")


def dense_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with its pruning made permanent (``model`` is not touched).

    The pruned tensors a forward pre-hook computed (``orig * mask``, not graph leaves) cannot be
    deep-copied; they are copied detached, then ``prune.remove_all`` makes the masks permanent.
    """
    memo: dict[int, Any] = {}
    for module in model.modules():
        for name in prune.pruned_parameters(module, recurse=False):
            value = getattr(module, name, None)
            if isinstance(value, torch.Tensor):
                memo[id(value)] = value.detach().clone()
    copied = copy.deepcopy(model, memo)
    prune.remove_all(copied)
    return copied


def _roots(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, (nn.Linear, *_CONV))]


def shrink(model: nn.Module, example_inputs: Any, *, repeats: int = 20) -> ShrinkReport:
    """A smaller copy of ``model`` without its dead channels, and the savings measured.

    Parameters
    ----------
    model : nn.Module
        A (possibly pruned) model; it is not changed.
    example_inputs : Tensor or tuple of Tensors
        Inputs to trace the model with and to measure FLOPs and latency on.
    repeats : int
        Timed forward passes per model for the latency median.

    Returns
    -------
    ShrinkReport
        ``.model`` the new model; parameters, FLOPs, state_dict bytes and CPU latency before and
        after; channels removed per layer; channels kept and why.
    """
    tp = _torch_pruning()
    inputs = _as_tuple(example_inputs)
    training = model.training
    dense = dense_copy(model)
    dense.eval()
    small = copy.deepcopy(dense)
    outputs = _output_modules(small, inputs)
    dg = tp.DependencyGraph().build_dependency(small, example_inputs=list(inputs)
                                               if len(inputs) > 1 else inputs[0], verbose=False)
    removed: dict[str, int] = {}
    kept: list[tuple[str, int, str]] = []
    partly: dict[str, int] = {}
    with torch.no_grad():
        _remove_dead(tp, dg, small, outputs, removed, kept, partly)
    _check_output_shapes(dense, small, inputs)
    small.train(training)
    before = measure(dense, inputs, repeats)
    after = measure(small, inputs, repeats)
    return ShrinkReport(model=small, before=before, after=after, removed=removed, kept=kept,
                        partly_zero=partly)


def _remove_dead(tp: Any, dg: Any, small: nn.Module, outputs: set[nn.Module],
                 removed: dict[str, int], kept: list[tuple[str, int, str]],
                 partly: dict[str, int]) -> None:
    """Remove every removable dead channel of ``small`` in place; record what happened.

    Channels are reported by their index in the original model (``positions`` follows each
    layer's surviving output channels as groups are pruned).
    """
    roots = _roots(small)
    positions = {root: list(range(_out_weight(root).shape[0])) for _, root in roots}
    original = {root: len(p) for root, p in positions.items()}
    for name, root in roots:
        if root not in dg.module2node:
            continue
        weight = _out_weight(root)
        flat = weight.reshape(weight.shape[0], -1)
        zero_rows = (flat == 0).all(dim=1)
        partly_zero = int(((flat == 0).any(dim=1) & ~zero_rows).sum())
        if partly_zero:
            partly[name] = partly_zero
        candidates = [int(i) for i in torch.nonzero(zero_rows).reshape(-1)]
        if not candidates:
            continue
        handler = (tp.prune_linear_out_channels if isinstance(root, nn.Linear)
                   else tp.prune_conv_out_channels)
        group = dg.get_pruning_group(root, handler, idxs=candidates)
        go = []
        for idx in candidates:
            reason = kept_reasons(group, dg, idx, outputs)
            if reason:
                kept.append((name, positions[root][idx], reason))
            else:
                go.append(idx)
        if go and len(go) < weight.shape[0]:
            group = dg.get_pruning_group(root, handler, idxs=go)
            for item in group.items:
                module = item.dep.target.module
                if module in positions and (dg.is_out_channel_pruning_fn(item.dep.handler)
                                            or _is_depthwise(module)):
                    gone = {int(i) for i in item.idxs}
                    positions[module] = [p for i, p in enumerate(positions[module])
                                         if i not in gone]
            group.prune()
        elif go:
            kept += [(name, positions[root][idx], "every channel of the layer is dead; one "
                      "must stay") for idx in go]
    for name, root in roots:
        n_removed = original[root] - len(positions[root])
        if n_removed:
            removed[name] = n_removed
