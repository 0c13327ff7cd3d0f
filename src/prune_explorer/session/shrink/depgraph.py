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
model's output are never removed (that would change the output's shape). A layer with dead
channels that tracing the example inputs never reaches is reported with that reason, and an
error of Torch-Pruning is raised as a :class:`ShrinkError` that names the model and the cause.

Language models (Hugging Face ``transformers``): ``example_inputs`` may be a dict of keyword
inputs (``{"input_ids": ids, "attention_mask": mask}``); a model whose ``forward`` takes
``use_cache`` gets ``use_cache=False`` unless the inputs say otherwise (a key/value cache is not
part of what the model computes, and is no tensor to trace); and of any output (a
``ModelOutput``, a tuple, a dict) every tensor is traced and compared, e.g. ``.logits``.
``transformers``' ``Conv1D`` (GPT-2's ``c_fc``, ``c_proj``, ...) is shrunk like ``Linear``,
along its real axes (weight (in, out): output units are dim 1), through a pruner registered with
Torch-Pruning's customized-pruner API. The shrunk model's outputs are checked against the dense
model's (shapes, and values within float rounding); nothing is returned if they differ.

To shrink a trained model, whose biases are not zero, prune each unit's bias with its weights:
``Session.apply(..., "ln_structured", ..., with_bias=True)``.

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
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.prune.layers import LAYER_AXES, layer_axes, out_dim

from ..errors import ShrinkError
from .measure import ShrinkReport, measure

#: ``(args, kwargs)`` of one forward pass.
Inputs = tuple[tuple[Any, ...], dict[str, Any]]

__all__ = ["ShrinkError", "ShrinkReport", "dense_copy", "install_hint", "kept_reasons", "shrink"]


#: How to get the optional dependency.
install_hint = ("Session.shrink needs Torch-Pruning, a dependency of prune-explorer that is "
                "missing here: pip install torch-pruning")

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_NORM = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
_LAYERS = (nn.Linear, *_CONV, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
_CONV1D = LAYER_AXES["Conv1D"]


def _is_conv1d(module: Any) -> bool:
    """``transformers``' ``Conv1D`` (by the core's layer table; transformers is not imported)."""
    return isinstance(module, nn.Module) and layer_axes(module) is _CONV1D


def _is_layer(module: Any) -> bool:
    """A linear or convolution layer of any kind, ``Conv1D`` included."""
    return isinstance(module, _LAYERS) or _is_conv1d(module)


def _torch_pruning() -> Any:
    try:
        import torch_pruning  # type: ignore[import-untyped]
    except ImportError as error:  # pragma: no cover - exercised by monkeypatching sys.modules
        raise ImportError(install_hint) from error
    return torch_pruning


def _as_inputs(model: nn.Module, example_inputs: Any) -> Inputs:
    """``(args, kwargs)`` to call ``model`` with: a dict is keyword inputs, a tuple or list
    positional ones, anything else the one positional input; ``use_cache=False`` is added for
    a model whose forward takes ``use_cache`` (see the module docstring)."""
    if isinstance(example_inputs, Mapping):
        args: tuple[Any, ...] = ()
        kwargs = {str(k): v for k, v in example_inputs.items()}
    elif isinstance(example_inputs, (tuple, list)):
        args, kwargs = tuple(example_inputs), {}
    else:
        args, kwargs = (example_inputs,), {}
    try:
        takes_cache = "use_cache" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        takes_cache = False
    if takes_cache and "use_cache" not in kwargs:
        kwargs["use_cache"] = False
    return args, kwargs


def _tensors(out: Any) -> list[torch.Tensor]:
    """Every tensor of a model's output (a tensor, tuple, list, dict or ``ModelOutput``)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    if isinstance(out, Mapping):
        return [t for o in out.values() for t in _tensors(o)]
    return []


def _call(model: nn.Module, inputs: Inputs) -> Any:
    return model(*inputs[0], **inputs[1])


def _conv1d_pruner(tp: Any) -> Any:
    """A Torch-Pruning pruner for ``Conv1D``: weight (in, out), bias (out)."""

    class Conv1DPruner(tp.pruner.BasePruningFunc):  # type: ignore[misc]
        def prune_out_channels(self, layer: Any, idxs: Any) -> Any:
            keep = sorted(set(range(layer.weight.shape[1])) - {int(i) for i in idxs})
            layer.weight = self._prune_parameter_and_grad(layer.weight, keep, 1)
            if layer.bias is not None:
                layer.bias = self._prune_parameter_and_grad(layer.bias, keep, 0)
            layer.nf = len(keep)
            return layer

        def prune_in_channels(self, layer: Any, idxs: Any) -> Any:
            keep = sorted(set(range(layer.weight.shape[0])) - {int(i) for i in idxs})
            layer.weight = self._prune_parameter_and_grad(layer.weight, keep, 0)
            layer.nx = len(keep)
            return layer

        def get_out_channels(self, layer: Any) -> int:
            return int(layer.weight.shape[1])

        def get_in_channels(self, layer: Any) -> int:
            return int(layer.weight.shape[0])

    return Conv1DPruner()


def _is_depthwise(module: nn.Module) -> bool:
    return isinstance(module, _CONV) and module.groups > 1 and (
        module.groups == module.in_channels == module.out_channels)


def _slice_zero(weight: torch.Tensor, idx: int) -> bool:
    return not bool(weight[idx].any())


def _bias_zero(module: nn.Module, idx: int) -> bool:
    bias = getattr(module, "bias", None)
    return bias is None or float(bias[idx]) == 0.0


def _out_weight(module: nn.Module) -> torch.Tensor:
    """Weight with output channels along dim 0 (the core's layer table says where they are:
    dim 1 of transposed convs and of ``Conv1D``)."""
    weight = cast(torch.Tensor, module.weight).detach()
    dim = out_dim(module)
    return weight.movedim(dim, 0) if dim else weight


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
    if _is_layer(module):
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


def _output_modules(model: nn.Module, inputs: Inputs) -> set[nn.Module]:
    """Leaf modules whose output tensor is (part of) the model's output."""
    produced: dict[int, nn.Module] = {}
    handles = [m.register_forward_hook(
        lambda mod, _i, out: produced.__setitem__(id(out), mod) if isinstance(
            out, torch.Tensor) else None)
        for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            out = _call(model, inputs)
    finally:
        for h in handles:
            h.remove()
    return {produced[id(o)] for o in _tensors(out) if id(o) in produced}


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
            consumer = _is_layer(module) and not is_out and not _is_depthwise(module)
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


def _differs(want: Any, small: nn.Module, inputs: Inputs) -> str:
    """Why ``small``'s outputs are not ``want`` ("" when they are, up to float rounding)."""
    try:
        got = _call(small, inputs)
    except Exception as err:  # the forward itself fails: reshapes into heads, ...
        return f"its forward fails ({type(err).__name__}: {str(err)[:120]})"
    if _shapes(want) != _shapes(got):
        return f"outputs of shapes {_shapes(got)}, not {_shapes(want)}"
    for a, b in zip(_tensors(want), _tensors(got), strict=True):
        if a.is_floating_point() and not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
            return f"outputs differ by up to {float((a - b).abs().max()):.3g}"
    return ""


def _check_outputs(dense: nn.Module, small: nn.Module, inputs: Inputs) -> None:
    """A last guard: the shrunk model must give the dense model's outputs (the same shapes, and
    values equal up to float rounding: removed units added exact zeros)."""
    with torch.no_grad():
        why = _differs(_call(dense, inputs), small, inputs)
    if why:
        raise ShrinkError(f"shrink: the shrunk model gives {why}; nothing is returned (please "
                          "report this model)")


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
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, (nn.Linear, *_CONV)) or _is_conv1d(m)]


def shrink(model: nn.Module, example_inputs: Any, *, repeats: int = 20) -> ShrinkReport:
    """A smaller copy of ``model`` without its dead channels, and the savings measured.

    Parameters
    ----------
    model : nn.Module
        A (possibly pruned) model; it is not changed.
    example_inputs : Tensor, tuple of Tensors, or dict
        Inputs to trace the model with and to measure FLOPs and latency on; a dict holds
        keyword inputs (``input_ids``, ``attention_mask`` ...).
    repeats : int
        Timed forward passes per model for the latency median.

    Returns
    -------
    ShrinkReport
        ``.model`` the new model; parameters, FLOPs, state_dict bytes and CPU latency before and
        after; channels removed per layer; channels kept and why.
    """
    tp = _torch_pruning()
    inputs = _as_inputs(model, example_inputs)
    training = model.training
    dense = dense_copy(model)
    dense.eval()
    small = copy.deepcopy(dense)
    outputs = _output_modules(small, inputs)
    custom = {type(m): _conv1d_pruner(tp) for m in small.modules() if _is_conv1d(m)}
    try:
        dg = tp.DependencyGraph().build_dependency(
            small, example_inputs=inputs, forward_fn=_call, output_transform=_tensors,
            customized_pruners=custom, verbose=False)
    except Exception as err:  # Torch-Pruning's own errors: name the model and the cause
        raise ShrinkError(f"shrink: Torch-Pruning could not trace {type(model).__name__} on the "
                          f"example inputs ({type(err).__name__}: {err}); nothing is "
                          "returned") from None
    removed: dict[str, int] = {}
    kept: list[tuple[str, int, str]] = []
    partly: dict[str, int] = {}
    with torch.no_grad():
        try:
            want = _call(dense, inputs)
            _remove_dead(dg, small, outputs, removed, kept, partly,
                         lambda: _differs(want, small, inputs))
        except Exception as err:
            raise ShrinkError(f"shrink: removing dead channels of {type(model).__name__} failed "
                              f"({type(err).__name__}: {err}); nothing is returned") from None
    _check_outputs(dense, small, inputs)
    small.train(training)
    before = measure(dense, inputs[0], repeats, inputs[1])
    after = measure(small, inputs[0], repeats, inputs[1])
    return ShrinkReport(model=small, before=before, after=after, removed=removed, kept=kept,
                        partly_zero=partly)


def _save_modules(modules: set[Any]) -> list[tuple[nn.Module, dict[str, Any]]]:
    """What Torch-Pruning's pruners change on each module: its parameters, buffers and
    attributes (``out_features``, ``nf`` ...)."""
    return [(m, {k: dict(v) if k in ("_parameters", "_buffers") else v
                 for k, v in vars(m).items()}) for m in modules if isinstance(m, nn.Module)]


def _restore_modules(saved: list[tuple[nn.Module, dict[str, Any]]]) -> None:
    for module, state in saved:
        module.__dict__.update(state)


def _remove_dead(dg: Any, small: nn.Module, outputs: set[nn.Module],
                 removed: dict[str, int], kept: list[tuple[str, int, str]],
                 partly: dict[str, int], check: Any) -> None:
    """Remove every removable dead channel of ``small`` in place; record what happened.

    Each layer's group is removed, then ``check()`` runs the model: a removal that breaks the
    forward or changes the outputs (``check()`` returns why) is taken back and reported.

    Channels are reported by their index in the original model (``positions`` follows each
    layer's surviving output channels as groups are pruned).
    """
    roots = _roots(small)
    positions = {root: list(range(_out_weight(root).shape[0])) for _, root in roots}
    original = {root: len(p) for root, p in positions.items()}
    for name, root in roots:
        weight = _out_weight(root)
        flat = weight.reshape(weight.shape[0], -1)
        zero_rows = (flat == 0).all(dim=1)
        partly_zero = int(((flat == 0).any(dim=1) & ~zero_rows).sum())
        if partly_zero:
            partly[name] = partly_zero
        candidates = [int(i) for i in torch.nonzero(zero_rows).reshape(-1)]
        if not candidates:
            continue
        if root not in dg.module2node:
            kept += [(name, positions[root][idx], "not reached when tracing the example "
                      "inputs") for idx in candidates]
            continue
        handler = dg.get_pruner_of_module(root).prune_out_channels
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
            members = {item.dep.target.module for item in group.items}
            saved = _save_modules(members)
            group.prune()
            broken = check()
            if broken:  # e.g. units of an attention projection: heads no longer split evenly
                _restore_modules(saved)
                kept += [(name, positions[root][idx], f"removing them breaks the model: "
                          f"{broken}") for idx in go]
                continue
            for item in group.items:
                module = item.dep.target.module
                if module in positions and (dg.is_out_channel_pruning_fn(item.dep.handler)
                                            or _is_depthwise(module)):
                    gone = {int(i) for i in item.idxs}
                    positions[module] = [p for i, p in enumerate(positions[module])
                                         if i not in gone]
        elif go:
            kept += [(name, positions[root][idx], "every channel of the layer is dead; one "
                      "must stay") for idx in go]
    for name, root in roots:
        n_removed = original[root] - len(positions[root])
        if n_removed:
            removed[name] = n_removed
