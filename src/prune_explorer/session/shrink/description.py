"""A shrunk model's architecture as JSON (no pickle): what to resize in the original one.

A shrunk model is the original architecture with fewer channels in some layers. Its state_dict
alone does not load into the original class, so :func:`describe` records, as plain JSON, each
layer whose sizes changed and the shape of every tensor of those layers; :func:`rebuild` applies
that description to a freshly built original model (resizing those layers in place, nothing
executed from the file), after which ``load_state_dict(strict=True)`` takes the shrunk weights.

Format (``"format": "prune-explorer-shrunk"``, ``"version": 1``)::

    {
      "format": "prune-explorer-shrunk",
      "version": 1,
      "model": "<how the original was built, e.g. the CLI's --model>",
      "layers": {
        "<module name>": {
          "type": "Conv2d" | "Conv1d" | "Conv3d" | "ConvTranspose1d/2d/3d" | "Linear"
                  | "BatchNorm1d/2d/3d" | "Conv1D",
          "sizes": {"in_channels": 8, "out_channels": 12, "groups": 1}  (Conv*)
                   {"in_features": 32, "out_features": 16}                  (Linear)
                   {"num_features": 12}                                     (BatchNorm*)
                   {"nx": 32, "nf": 112}            (transformers' Conv1D: in, out features)
          "tensors": {"<parameter or buffer name>": [12, 8, 3, 3], ...}
        }, ...
      }
    }

Only layers whose sizes differ from the freshly built model are listed. Everything is checked
before anything changes: the format and version, that each layer exists with that type, that
sizes are positive ints that make such a layer, that the tensors named are the layer's own with
the shapes those sizes give, and that they total at most ``max_bytes`` (by default the model's
own size: a 300-byte file cannot ask for gigabytes).

Examples
--------
>>> import json, torch
>>> from torch import nn
>>> from prune_explorer.session.shrink.description import describe, rebuild
>>> small = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
>>> description = describe(small, nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)))
>>> sorted(description["layers"])
['0', '2']
>>> fresh = rebuild(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)),
...                 json.loads(json.dumps(description)))
>>> fresh.load_state_dict(small.state_dict())
<All keys matched successfully>
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch
from torch import nn

from prune_explorer.prune.validation import excerpt

from ..errors import InvalidDescriptionError

__all__ = ["FORMAT", "VERSION", "InvalidDescriptionError", "describe", "rebuild"]

FORMAT = "prune-explorer-shrunk"
VERSION = 1

_SIZES: dict[type[nn.Module], tuple[str, ...]] = {
    **{cls: ("in_channels", "out_channels", "groups") for cls in (
        nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
        nn.ConvTranspose3d)},
    nn.Linear: ("in_features", "out_features"),
    **{cls: ("num_features",) for cls in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)},
}
#: Library layers, known by class name (no import of the library): ``transformers``' ``Conv1D``
#: (GPT-2's ``c_attn``, ``c_fc``...) keeps its sizes as ``nx`` (in) and ``nf`` (out).
_LIBRARY_SIZES: dict[str, tuple[str, ...]] = {"Conv1D": ("nx", "nf")}
_BY_NAME = [*(cls.__name__ for cls in _SIZES), *_LIBRARY_SIZES]


def _size_keys(module: nn.Module) -> tuple[str, ...] | None:
    """The size attributes of a layer kind shrink resizes, or None for any other module."""
    keys = _SIZES.get(type(module))
    if keys is None:
        keys = _LIBRARY_SIZES.get(type(module).__name__)
        if keys is not None and not all(isinstance(getattr(module, k, None), int)
                                        for k in keys):
            return None
    return keys


def _tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = dict(module.named_parameters(recurse=False))
    out.update({k: v for k, v in module.named_buffers(recurse=False) if v is not None})
    return out


def describe(shrunk: nn.Module, original: nn.Module, model: str = "") -> dict[str, Any]:
    """The JSON-able description of how ``shrunk`` differs from ``original`` (same class)."""
    originals = dict(original.named_modules())
    layers: dict[str, Any] = {}
    for name, module in shrunk.named_modules():
        keys = _size_keys(module)
        if keys is None or name not in originals:
            continue
        sizes = {k: int(getattr(module, k)) for k in keys}
        if sizes == {k: int(getattr(originals[name], k)) for k in keys}:
            continue
        layers[name] = {
            "type": type(module).__name__,
            "sizes": sizes,
            "tensors": {k: list(v.shape) for k, v in _tensors(module).items()},
        }
    return {"format": FORMAT, "version": VERSION, "model": model, "layers": layers}


def _fail(message: str) -> InvalidDescriptionError:
    return InvalidDescriptionError(f"shrunk architecture: {message}")


def _is_count(value: Any, minimum: int) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and (
        int(value) >= minimum)


def _layer_like(module: nn.Module, sizes: dict[str, int]) -> nn.Module:
    """A layer of ``module``'s type and settings with ``sizes``, on the meta device (no memory):
    the shapes its tensors must have. Raises what the layer's constructor raises."""
    keys: dict[str, Any] = {"device": "meta", "dtype": None}
    if isinstance(module, nn.Linear):
        return nn.Linear(sizes["in_features"], sizes["out_features"],
                         bias=module.bias is not None, **keys)
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return type(module)(sizes["num_features"], eps=module.eps, momentum=module.momentum,
                            affine=module.affine,
                            track_running_stats=module.track_running_stats, **keys)
    conv: Any = module
    extra = {"output_padding": conv.output_padding} if conv.transposed else {}
    return type(module)(sizes["in_channels"], sizes["out_channels"], conv.kernel_size,
                        stride=conv.stride, padding=conv.padding, dilation=conv.dilation,
                        groups=sizes["groups"], bias=conv.bias is not None,
                        padding_mode=conv.padding_mode, **extra, **keys)


def _bytes(shape: list[int], like: torch.Tensor) -> int:
    return math.prod(shape) * like.element_size()


def _checked_layers(
    model: nn.Module, description: Any, max_bytes: int | None
) -> list[tuple[nn.Module, dict[str, Any], dict[str, Any]]]:
    if not isinstance(description, dict):
        raise _fail(f"must be a JSON object; got {type(description).__name__}")
    if description.get("format") != FORMAT or description.get("version") != VERSION:
        raise _fail(f"format must be {FORMAT!r} version {VERSION}; got "
                    f"{description.get('format')!r} version {description.get('version')!r}")
    layers = description.get("layers")
    if not isinstance(layers, dict):
        raise _fail("layers must be a JSON object")
    modules = dict(model.named_modules())
    checked = []
    for name, layer in layers.items():
        module = modules.get(name) if isinstance(name, str) else None
        if module is None:
            raise _fail(f"layer {name!r} is not a module of the model")
        keys = _size_keys(module)
        if not isinstance(layer, dict) or layer.get("type") != type(module).__name__ \
                or keys is None:
            raise _fail(f"layer {name!r} must describe a {type(module).__name__} of a kind "
                        f"shrink resizes ({', '.join(_BY_NAME)})")
        sizes, tensors = layer.get("sizes"), layer.get("tensors")
        if not isinstance(sizes, dict) or sorted(sizes) != sorted(keys) or not all(
                _is_count(v, 1) for v in sizes.values()):
            raise _fail(f"layer {name!r}: sizes must give {', '.join(keys)} as ints >= 1; "
                        f"got {excerpt(repr(sizes))}")
        own = _tensors(module)
        if not isinstance(tensors, dict) or sorted(tensors) != sorted(own) or not all(
                isinstance(s, list) and len(s) == own[k].dim() and all(_is_count(d, 0) for d in s)
                for k, s in tensors.items()):
            raise _fail(f"layer {name!r}: tensors must give the shape of each of "
                        f"{sorted(own)} (lists of ints >= 0 of the same rank)")
        try:
            like = _tensors(_layer_like(module, {k: int(v) for k, v in sizes.items()}))
        except (ValueError, TypeError, RuntimeError, OverflowError) as err:
            raise _fail(f"layer {name!r}: sizes {excerpt(repr(sizes))} do not make a "
                        f"{type(module).__name__} ({excerpt(str(err))})") from None
        for key, shape in tensors.items():
            if [int(d) for d in shape] != list(like[key].shape):
                raise _fail(f"layer {name!r}: tensor {key!r} must have the shape its sizes "
                            f"give, {list(like[key].shape)}; got {excerpt(repr(shape))}")
        checked.append((module, sizes, tensors))
    bound = max_bytes if max_bytes is not None else _default_bound(model)
    total = sum(_bytes(shape, _tensors(module)[key])
                for module, _, tensors in checked for key, shape in tensors.items())
    if total > bound:
        raise _fail(f"its layers' tensors total {total:,} bytes, more than max_bytes="
                    f"{bound:,} (by default the size of the model as built: a shrunk model is "
                    "never larger); pass max_bytes to allow more")
    return checked


def _default_bound(model: nn.Module) -> int:
    tensors = [*model.parameters(), *(b for b in model.buffers() if b is not None)]
    return sum(t.numel() * t.element_size() for t in tensors)


def rebuild(model: nn.Module, description: Any, *, max_bytes: int | None = None) -> nn.Module:
    """Resize the layers of ``model`` (a freshly built original) as ``description`` says.

    Everything is checked first -- each layer's name and type, its sizes, that each tensor's
    shape is the one those sizes give, and that the new tensors together take at most
    ``max_bytes`` -- and every new tensor is allocated before the model changes: a description
    refused, or one whose tensors cannot be allocated, raises
    :class:`InvalidDescriptionError` and leaves ``model`` untouched. Nothing is executed from
    the description. Returns ``model``, ready for ``load_state_dict`` of the shrunk weights.

    Parameters
    ----------
    model : torch.nn.Module
        The original architecture, freshly built.
    description : dict
        What :func:`describe` wrote (read back with ``json.load``).
    max_bytes : int, optional
        The most bytes the described tensors may take together. Default: the size of
        ``model``'s own parameters and buffers (a shrunk model is never larger); raise it only
        for a description you trust.
    """
    if max_bytes is not None and not _is_count(max_bytes, 0):
        raise _fail(f"max_bytes must be an int >= 0 or None; got {excerpt(repr(max_bytes))}")
    checked = _checked_layers(model, description, max_bytes)
    new: list[tuple[nn.Module, str, torch.Tensor]] = []
    try:
        for module, _, tensors in checked:
            for key, shape in tensors.items():
                old = getattr(module, key)
                new.append((module, key, torch.zeros(shape, dtype=old.dtype, device=old.device)))
    except (RuntimeError, MemoryError) as err:
        raise _fail(f"its tensors cannot be allocated ({excerpt(str(err))})") from None
    for module, sizes, _ in checked:
        for key, value in sizes.items():
            setattr(module, key, int(value))
    for module, key, tensor in new:
        old = getattr(module, key)
        if isinstance(old, nn.Parameter):
            setattr(module, key, nn.Parameter(tensor, requires_grad=old.requires_grad))
        else:
            module.register_buffer(key, tensor)
    return model
