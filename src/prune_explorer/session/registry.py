"""Discovery: which tensors of a model can be pruned, by qualified address.

Every parameter of every submodule is prunable by ``torch.nn.utils.prune`` (Linear, Conv*,
ConvTranspose*, Embedding, LSTM/GRU flat weights, norm-layer affine weights, custom modules...).
A tensor that is already pruned shows up under its own name (``"fc.weight"``), not as the
``weight_orig`` parameter that holds its values.

Examples
--------
>>> import torch
>>> from prune_explorer.session.registry import discover
>>> model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
>>> [info.name for info in discover(model).values()]
['0.weight', '0.bias', '2.weight', '2.bias']
>>> discover(model)["0.weight"]
TensorInfo(name='0.weight', module_type='Linear', shape=(2, 3), numel=6)
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import torch
from torch import nn

from prune_explorer.prune.validation import show_value

from .errors import InvalidStepError
from .hooks import find_hook

__all__ = ["TensorInfo", "discover", "unknown_target"]


@dataclass(frozen=True)
class TensorInfo:
    """A prunable tensor: its address and what it looks like.

    ``name`` is the address (``module_name + "." + tensor_name``, or just ``tensor_name`` for
    a parameter of the root module).
    """

    name: str
    module_name: str = field(repr=False)
    tensor_name: str = field(repr=False)
    module_type: str
    shape: tuple[int, ...]
    numel: int
    dtype: torch.dtype = field(repr=False)


def _address(module_name: str, tensor_name: str) -> str:
    return f"{module_name}.{tensor_name}" if module_name else tensor_name


def discover(model: nn.Module) -> dict[str, TensorInfo]:
    """All prunable tensors of ``model``, keyed by address, in module then parameter order."""
    found: dict[str, TensorInfo] = {}
    for module_name, module in model.named_modules():
        for param_name, param in module.named_parameters(recurse=False, remove_duplicate=False):
            tensor_name = param_name
            if param_name.endswith("_orig") and find_hook(module, param_name[:-5]) is not None:
                tensor_name = param_name[: -len("_orig")]
            name = _address(module_name, tensor_name)
            found[name] = TensorInfo(
                name=name,
                module_name=module_name,
                tensor_name=tensor_name,
                module_type=type(module).__name__,
                shape=tuple(param.shape),
                numel=param.numel(),
                dtype=param.dtype,
            )
    return found


def unknown_target(name: str, known: dict[str, TensorInfo], where: str, field: str = "target"
                   ) -> InvalidStepError:
    """The error for an address that is not in ``known``, with close matches when there are any."""
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
