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
                  | "BatchNorm1d/2d/3d",
          "sizes": {"in_channels": 8, "out_channels": 12, "groups": 1}  (Conv*)
                   {"in_features": 32, "out_features": 16}                  (Linear)
                   {"num_features": 12}                                     (BatchNorm*)
          "tensors": {"<parameter or buffer name>": [12, 8, 3, 3], ...}
        }, ...
      }
    }

Only layers whose sizes differ from the freshly built model are listed. Everything is checked
before anything changes: the format and version, that each layer exists with that type, that
sizes are positive ints and tensor shapes lists of non-negative ints naming existing tensors.

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

import numbers
from typing import Any

import torch
from torch import nn

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
_BY_NAME = {cls.__name__: cls for cls in _SIZES}


def _tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = dict(module.named_parameters(recurse=False))
    out.update({k: v for k, v in module.named_buffers(recurse=False) if v is not None})
    return out


def describe(shrunk: nn.Module, original: nn.Module, model: str = "") -> dict[str, Any]:
    """The JSON-able description of how ``shrunk`` differs from ``original`` (same class)."""
    originals = dict(original.named_modules())
    layers: dict[str, Any] = {}
    for name, module in shrunk.named_modules():
        keys = _SIZES.get(type(module))
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


def _checked_layers(
    model: nn.Module, description: Any
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
        if not isinstance(layer, dict) or layer.get("type") != type(module).__name__ \
                or type(module) not in _SIZES:
            raise _fail(f"layer {name!r} must describe a {type(module).__name__} of a kind "
                        f"shrink resizes ({', '.join(_BY_NAME)})")
        sizes, tensors = layer.get("sizes"), layer.get("tensors")
        keys = _SIZES[type(module)]
        if not isinstance(sizes, dict) or sorted(sizes) != sorted(keys) or not all(
                _is_count(v, 1) for v in sizes.values()):
            raise _fail(f"layer {name!r}: sizes must give {', '.join(keys)} as ints >= 1; "
                        f"got {sizes!r}")
        own = _tensors(module)
        if not isinstance(tensors, dict) or sorted(tensors) != sorted(own) or not all(
                isinstance(s, list) and len(s) == own[k].dim() and all(_is_count(d, 0) for d in s)
                for k, s in tensors.items()):
            raise _fail(f"layer {name!r}: tensors must give the shape of each of "
                        f"{sorted(own)} (lists of ints >= 0 of the same rank)")
        checked.append((module, sizes, tensors))
    return checked


def rebuild(model: nn.Module, description: Any) -> nn.Module:
    """Resize the layers of ``model`` (a freshly built original) as ``description`` says.

    Everything is checked first; nothing is executed from the description. Returns ``model``,
    ready for ``load_state_dict`` of the shrunk weights.
    """
    for module, sizes, tensors in _checked_layers(model, description):
        for key, value in sizes.items():
            setattr(module, key, int(value))
        for key, shape in tensors.items():
            old = getattr(module, key)
            new = torch.zeros(shape, dtype=old.dtype, device=old.device)
            if isinstance(old, nn.Parameter):
                setattr(module, key, nn.Parameter(new, requires_grad=old.requires_grad))
            else:
                module.register_buffer(key, new)
    return model
