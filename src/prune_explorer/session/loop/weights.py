"""The weights a fine-tune changes, copied and written back bit for bit.

*The weights* of a model are every parameter (for a pruned tensor: its ``*_orig``, all entries,
pruned ones included) and every buffer (BatchNorm's running statistics...) except the pruning
masks, each tensor once however many names it has. :func:`weight_tensors` lists them; a
:class:`WeightValues` copies their values (plus each module's train/eval mode and each
parameter's ``.grad`` object), and :meth:`WeightValues.restore` writes them back in place with
``copy_``: the same tensor objects, so optimizers, hooks and the session's records still point
at them, and their version counters move (caches keyed on them see the change).

It is the one snapshot of weights: undo of a fine-tune or a rewind restores one, a rewind writes
the one ``keep_weights`` took, and the run's Stop restores one.

Examples
--------
>>> import torch
>>> layer = torch.nn.Linear(3, 2)
>>> before = WeightValues(layer)
>>> with torch.no_grad():
...     _ = layer.weight.add_(1.0)
>>> before.restore()
>>> torch.equal(layer.weight, before.values[0])
True
>>> before.nbytes  # 6 weights and 2 biases in float32
32
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from ..model.hooks import refresh_pruned

__all__ = ["WeightValues", "refresh_all_pruned", "weight_tensors"]


def _is_mask(module: nn.Module, buffer_name: str) -> bool:
    return buffer_name.endswith("_mask") and (buffer_name[:-5] + "_orig") in module._parameters


def _weight_places(model: nn.Module) -> Iterator[tuple[str, nn.Module, str, bool]]:
    """``(qualified name, module, name, is a parameter)`` of each weight, each tensor once."""
    seen: set[int] = set()
    for prefix, module in model.named_modules(remove_duplicate=False):
        for is_param, entries in ((True, module._parameters), (False, module._buffers)):
            for name, tensor in entries.items():
                if tensor is None or id(tensor) in seen or (
                        not is_param and _is_mask(module, name)):
                    continue
                seen.add(id(tensor))
                yield (f"{prefix}.{name}" if prefix else name), module, name, is_param


def weight_tensors(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(qualified name, tensor)`` of every parameter and non-mask buffer, each tensor once.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> layer = prune.l1_unstructured(torch.nn.Linear(2, 1), "weight", amount=1)
    >>> [name for name, _ in weight_tensors(layer)]
    ['bias', 'weight_orig']
    """
    for qualified, module, name, is_param in _weight_places(model):
        yield qualified, _live(module, name, is_param)


def _live(module: nn.Module, name: str, is_param: bool) -> torch.Tensor:
    """The tensor at a weight's place now: a parameter pruned since is at ``name_orig``, one
    committed since back at ``name``; ``Module.to`` may have replaced a buffer."""
    entries: dict[str, Any] = module._parameters if is_param else module._buffers
    if is_param and name.endswith("_orig") and name not in entries:
        name = name[:-5]  # committed (prune.remove) since
    found = entries.get(name)
    if found is None and is_param:
        found = entries[name + "_orig"]
    if not isinstance(found, torch.Tensor):
        raise KeyError(f"WeightValues: {type(module).__name__} no longer has {name!r}")
    return found


def refresh_all_pruned(model: nn.Module) -> None:
    """Recompute every pruned copy (``name = name_orig * name_mask``) as the forward pre-hook
    would: after the weights were written outside a forward pass, the next pruning step ranks
    the weights as they are now, not as the last forward pass saw them."""
    for module in model.modules():
        for key in list(module._parameters):
            if key.endswith("_orig"):
                refresh_pruned(module, key[:-5])


class WeightValues:
    """A copy of a model's weights (see the module docstring) that can be written back.

    Parameters
    ----------
    model : torch.nn.Module

    Attributes
    ----------
    tensors : list of torch.Tensor
        The tensors when the copy was taken (restore writes to the tensors at the same
        places then: see :func:`weight_tensors`).
    values : list of torch.Tensor
        Their values when the copy was taken.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        places = list(_weight_places(model))
        self.names = [qualified for qualified, _, _, _ in places]
        # where each weight lives, not the tensor object: a later prune moves a parameter to
        # name_orig and Module.to replaces buffers
        self.places = [(module, name, is_param) for _, module, name, is_param in places]
        self.tensors = [_live(*place) for place in self.places]
        with torch.no_grad():
            self.values = [tensor.detach().clone() for tensor in self.tensors]
        self.grads = [tensor.grad if isinstance(tensor, nn.Parameter) else None
                      for tensor in self.tensors]
        self.modes = [(module, module.training) for module in model.modules()]
        # the pruned copies (plain attributes, replaced -- never written -- by each forward)
        self.copies = [(module, key[:-5], module.__dict__[key[:-5]])
                       for module in model.modules() for key in module._parameters
                       if key.endswith("_orig") and key[:-5] in module.__dict__]

    @property
    def nbytes(self) -> int:
        """Bytes of tensor data the copy holds."""
        return sum(v.numel() * v.element_size() for v in self.values)

    def restore(self, *, exact: bool = True) -> None:
        """Write the values back in place.

        ``exact`` (undo, rollback): also put back each parameter's ``.grad`` object, each
        module's train/eval mode and the pruned copies as they were. Otherwise (a rewind,
        where the masks may have changed since): recompute the pruned copies.
        """
        live = [_live(*place) for place in self.places]
        with torch.no_grad():
            for tensor, value in zip(live, self.values, strict=True):
                tensor.copy_(value)
        if not exact:
            refresh_all_pruned(self.model)
            return
        for tensor, grad in zip(live, self.grads, strict=True):
            if isinstance(tensor, nn.Parameter):
                tensor.grad = grad
        for module, training in self.modes:
            module.training = training
        for module, name, copy in self.copies:
            if name in module.__dict__:
                module.__dict__[name] = copy

    def __repr__(self) -> str:
        return f"WeightValues({len(self.tensors)} tensors, {self.nbytes:,} bytes)"
