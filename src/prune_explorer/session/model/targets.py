"""Discovery: which tensors of a model can be pruned, by qualified address.

Every parameter of every submodule is prunable by ``torch.nn.utils.prune`` (Linear, Conv*,
ConvTranspose*, Embedding, LSTM/GRU flat weights, norm-layer affine weights, custom modules...).
A tensor that is already pruned shows up under its own name (``"fc.weight"``), not as the
``weight_orig`` parameter that holds its values.

A parameter reachable under several names (tied weights: GPT-2's ``lm_head.weight`` *is*
``transformer.wte.weight``) is one tensor: it is listed once, under the first of its names in
module order, and :attr:`TensorInfo.aliases` holds the others (see
:mod:`prune_explorer.session.model.aliases`).

Examples
--------
>>> import torch
>>> from prune_explorer.session.model.targets import discover
>>> model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
>>> [info.name for info in discover(model).values()]
['0.weight', '0.bias', '2.weight', '2.bias']
>>> discover(model)["0.weight"]
TensorInfo(name='0.weight', module_type='Linear', shape=(2, 3), numel=6)
>>> tied = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
>>> tied[1].weight = tied[0].weight
>>> list(discover(tied)), discover(tied)["0.weight"].aliases
(['0.weight'], ('1.weight',))
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from prune_explorer.prune.validation import quantized_layer, show_value

from ..errors import InvalidStepError
from .hooks import find_hook

__all__ = ["TensorInfo", "alias_map", "discover", "is_lookup_or_norm", "quantized_weights",
           "split_address", "unknown_target"]

# Layers whose weights are tables or per-feature scales, not the matrices people prune by default.
_LOOKUP_OR_NORM: tuple[type[nn.Module], ...] = (
    nn.Embedding, nn.EmbeddingBag, nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm,
    nn.LocalResponseNorm, nn.RMSNorm,
)


@dataclass(frozen=True)
class TensorInfo:
    """A prunable tensor: its address and what it looks like.

    ``name`` is the address (``module_name + "." + tensor_name``, or just ``tensor_name`` for
    a parameter of the root module). ``aliases`` are the other addresses of the same
    parameter (tied weights), in module order; empty for an untied tensor.
    """

    name: str
    module_name: str = field(repr=False)
    tensor_name: str = field(repr=False)
    module_type: str
    shape: tuple[int, ...]
    numel: int
    dtype: torch.dtype = field(repr=False)
    aliases: tuple[str, ...] = field(default=(), repr=False)


def split_address(address: str) -> tuple[str, str]:
    """Split ``"features.0.weight"`` into module name ``"features.0"`` and tensor ``"weight"``."""
    module_name, _, tensor_name = address.rpartition(".")
    return module_name, tensor_name


def _address(module_name: str, tensor_name: str) -> str:
    return f"{module_name}.{tensor_name}" if module_name else tensor_name


def discover(model: nn.Module) -> dict[str, TensorInfo]:
    """All prunable tensors of ``model``, keyed by address, in module then parameter order.

    A parameter held by several modules (tied) is one entry, under its first address -- or the
    first where it is pruned, if stock ``torch.nn.utils.prune`` pruned it under another name
    only -- and the others are its :attr:`TensorInfo.aliases`.
    """
    entries: list[tuple[int, TensorInfo, bool]] = []  # (id of the Parameter, info, pruned)
    for module_name, module in model.named_modules():
        for param_name, param in module.named_parameters(recurse=False, remove_duplicate=False):
            if "." in param_name:  # not prunable, not addressable: see unprunable_names()
                continue
            tensor_name = param_name
            pruned = param_name.endswith("_orig") and find_hook(module, param_name[:-5]) is not None
            if pruned:
                tensor_name = param_name[: -len("_orig")]
            name = _address(module_name, tensor_name)
            entries.append((id(param), TensorInfo(
                name=name,
                module_name=module_name,
                tensor_name=tensor_name,
                module_type=type(module).__name__,
                shape=tuple(param.shape),
                numel=param.numel(),
                dtype=param.dtype,
            ), pruned))
    names: dict[int, list[str]] = {}  # id of the Parameter (its _orig when pruned) -> addresses
    listed: dict[int, tuple[str, bool]] = {}  # -> (the address listed, pruned there)
    for key, info, pruned in entries:
        names.setdefault(key, []).append(info.name)
        if key not in listed or (pruned and not listed[key][1]):
            listed[key] = (info.name, pruned)
    found: dict[str, TensorInfo] = {}
    for key, info, _ in entries:
        if listed[key][0] == info.name:
            others = tuple(n for n in names[key] if n != info.name)
            found[info.name] = replace(info, aliases=others) if others else info
    return found


def is_lookup_or_norm(module: nn.Module) -> bool:
    """Whether ``module`` is an embedding table (token or position) or a normalisation layer:
    a torch one or any subclass, or a class named like one (``LlamaRMSNorm``, ``T5LayerNorm``,
    ``ScaledWordEmbedding``), as library layers often do not subclass torch's.

    Examples
    --------
    >>> is_lookup_or_norm(torch.nn.Embedding(4, 2)), is_lookup_or_norm(torch.nn.Linear(2, 2))
    (True, False)
    """
    name = type(module).__name__
    return isinstance(module, _LOOKUP_OR_NORM) or "Embedding" in name or name.endswith("Norm")


def alias_map(known: dict[str, TensorInfo]) -> dict[str, str]:
    """Every alias address in ``known`` mapped to the address the tensor is listed under.

    Examples
    --------
    >>> model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
    >>> model[1].weight = model[0].weight
    >>> alias_map(discover(model))
    {'1.weight': '0.weight'}
    """
    return {alias: name for name, info in known.items() for alias in info.aliases}


def quantized_weights(model: nn.Module) -> dict[str, str]:
    """The weights of ``model``'s quantized layers (``torch.ao`` ``quantize_dynamic`` and the
    like: packed integers, not parameters, so not in :func:`discover`), by address, each with
    why it cannot be pruned.

    Examples
    --------
    >>> quantized_weights(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    {}
    """
    return {
        _address(module_name, "weight"):
            f"{type(module).__module__}.{type(module).__name__} is a quantized layer: its weight "
            "is packed integers, not a parameter; prune the float model, then quantize"
        for module_name, module in model.named_modules() if quantized_layer(module)
    }


def dotted_parameters(model: nn.Module) -> dict[str, str]:
    """Parameters whose own name holds a ``"."`` (put in ``module._parameters`` by hand:
    ``register_parameter`` refuses such a name), by address, each with why it cannot be pruned.
    They are not in :func:`discover`.

    Examples
    --------
    >>> layer = torch.nn.Linear(2, 2)
    >>> layer._parameters["w.1"] = torch.nn.Parameter(torch.ones(2))
    >>> list(dotted_parameters(torch.nn.Sequential(layer)))
    ['0.w.1']
    """
    return {
        _address(module_name, param_name):
            f"its parameter name {param_name!r} (of {type(module).__name__} {module_name!r}) "
            "holds a '.': torch.nn.utils.prune cannot register its "
            f"{param_name + '_orig'!r}, and the address is ambiguous; rename the parameter"
        for module_name, module in model.named_modules()
        for param_name in module._parameters if "." in param_name
    }


def unknown_target(name: str, known: dict[str, TensorInfo], where: str, field: str = "target",
                   model: nn.Module | None = None) -> InvalidStepError:
    """The error for an address that is not in ``known``, with close matches when there are any
    (or, given the ``model``, why the weight of a quantized layer or a parameter with a dot in
    its name cannot be pruned)."""
    unprunable = {**quantized_weights(model), **dotted_parameters(model)} \
        if model is not None else {}
    if name in unprunable:
        return InvalidStepError(f"{where}: cannot prune {name!r}: {unprunable[name]}", field)
    # no close matches for a name longer than any address (a pasted blob): difflib is slow there
    close = difflib.get_close_matches(name, list(known), n=3) if len(name) <= 1000 else []
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    for suffix, role in (("_orig", "original values"), ("_mask", "mask")):
        if name.endswith(suffix) and name[: -len(suffix)] in known:
            hint = (f"; it is the {role} of the pruned tensor {name[:-len(suffix)]!r}: prune "
                    f"{name[:-len(suffix)]!r} itself to prune it further")
    return InvalidStepError(
        f"{where}: {field} {show_value(name)} is not a prunable tensor of this model{hint} "
        f"(Session.names lists all {len(known)})",
        field,
    )
