"""What each dimension of a layer's weight means: the one table of layer axes.

A weight is a tensor; which of its dims indexes the layer's *output units* (what structured
pruning and shrink remove) and which is the *reduction* dim (the input features or channels that
a matrix multiply sums over, where N:M hardware groups its entries) depends on the layer kind:

=====================  ===============================  ========  ==================
layer kind             weight dims                      out dim   reduction (in) dim
=====================  ===============================  ========  ==================
``Linear``             (out features, in features)      0         1 (= -1)
``Conv1D``             (in features, out features)      1         0
``Conv1d/2d/3d``       (out ch, in ch, kernel...)       0         1
``ConvTranspose*d``    (in ch, out ch, kernel...)       1         0
=====================  ===============================  ========  ==================

``Conv1D`` is the layer of Hugging Face ``transformers`` (GPT-2's ``c_attn``, ``c_fc``, ...): it
computes ``x @ weight + bias``, so its weight is stored (in, out), the transpose of ``Linear``.
For convolutions the reduction dim of the implicit matrix multiply is ``in ch · kernel``; N:M
groups run along the input channels (dim 1) at each kernel position, the order channels-last
kernels and NVIDIA's sparsity tools use.

The pictures (axis labels), the explorer's wording of structured units, the default ``dim`` of
``semi_structured`` and shrink all read this table. Layers are recognised by class name along
the class's MRO (so subclasses of ``nn.Linear`` count as ``Linear``); ``transformers`` is never
imported. This module imports only torch.

Examples
--------
>>> import torch
>>> from prune_explorer.prune.layers import layer_axes, reduction_dim
>>> layer_axes("Conv1D").dims, layer_axes("Conv1D").out_dim
(('in features', 'out features'), 1)
>>> conv = torch.nn.Conv2d(8, 4, 3)
>>> reduction_dim(torch.nn.Linear(8, 4), "weight"), reduction_dim(conv, "weight")
(1, 1)
>>> reduction_dim(torch.nn.Linear(8, 4), "bias")  # no layer rule: the last dim
-1
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

__all__ = ["LAYER_AXES", "LayerAxes", "layer_axes", "out_dim", "reduction_dim"]

#: The ``dim`` of ``semi_structured`` for a tensor of no known layer kind (and for bare tensors).
DEFAULT_GROUP_DIM = -1


@dataclass(frozen=True)
class LayerAxes:
    """The meaning of a layer's weight dims.

    Attributes
    ----------
    dims : tuple of str
        A name for each dim of the weight (``()`` for layers with only 1-D parameters).
    out_dim : int or None
        The weight dim that indexes output units (features, channels), or None.
    in_dim : int or None
        The reduction dim: the input features or channels the layer sums over, or None.
    vector : str
        What the one dim of its 1-D parameters (bias, norm scale) indexes.
    """

    dims: tuple[str, ...]
    out_dim: int | None
    in_dim: int | None
    vector: str = ""


_LINEAR = LayerAxes(("out features", "in features"), 0, 1, "out features")


def _conv(rank: int) -> LayerAxes:
    kernel = {1: ("k",), 2: ("kh", "kw"), 3: ("kd", "kh", "kw")}[rank]
    return LayerAxes(("out ch", "in ch", *kernel), 0, 1, "out ch")


def _conv_transpose(rank: int) -> LayerAxes:
    conv = _conv(rank)
    return LayerAxes(("in ch", "out ch", *conv.dims[2:]), 1, 0, "out ch")


#: Layer kind (class name) -> its axes. The one table; see the module docstring.
LAYER_AXES: dict[str, LayerAxes] = {
    "Linear": _LINEAR,
    "LazyLinear": _LINEAR,
    # transformers.pytorch_utils.Conv1D: y = x @ weight + bias, weight (in, out)
    "Conv1D": LayerAxes(("in features", "out features"), 1, 0, "out features"),
    "Bilinear": LayerAxes(("out features", "in1 features", "in2 features"), 0, None,
                          "out features"),
    "Embedding": LayerAxes(("token", "embedding dim"), None, None),
    "EmbeddingBag": LayerAxes(("token", "embedding dim"), None, None),
    "Conv1d": _conv(1),
    "Conv2d": _conv(2),
    "Conv3d": _conv(3),
    "ConvTranspose1d": _conv_transpose(1),
    "ConvTranspose2d": _conv_transpose(2),
    "ConvTranspose3d": _conv_transpose(3),
    "BatchNorm1d": LayerAxes((), None, None, "channel"),
    "BatchNorm2d": LayerAxes((), None, None, "channel"),
    "BatchNorm3d": LayerAxes((), None, None, "channel"),
    "LayerNorm": LayerAxes((), None, None, "feature"),
    "GroupNorm": LayerAxes((), None, None, "channel"),
}


def layer_axes(layer: nn.Module | type | str | None) -> LayerAxes | None:
    """The axes of a layer (a module, its class, or a class name), or None if unknown.

    A module or class is looked up by the names along its MRO, so subclasses of known layers
    (``NonDynamicallyQuantizableLinear``) share their base's axes.

    Examples
    --------
    >>> import torch
    >>> layer_axes(torch.nn.MultiheadAttention(8, 2).out_proj).out_dim
    0
    >>> layer_axes("MyLayer") is None
    True
    """
    if layer is None:
        return None
    if isinstance(layer, str):
        return LAYER_AXES.get(layer)
    cls = layer if isinstance(layer, type) else type(layer)
    for base in cls.__mro__:
        if base.__name__ in LAYER_AXES:
            return LAYER_AXES[base.__name__]
    return None


def _weight_axes(module: nn.Module, name: str) -> LayerAxes | None:
    axes = layer_axes(module)
    if name != "weight" or axes is None:
        return None
    weight = getattr(module, name, None)
    rank = getattr(weight, "ndim", None)
    return axes if rank == len(axes.dims) else None


def reduction_dim(module: nn.Module, name: str) -> int:
    """The default ``dim`` of ``semi_structured`` for ``module.name``: the layer's reduction
    (input) dim for the weight of a known layer kind, else -1.

    Examples
    --------
    >>> import torch
    >>> reduction_dim(torch.nn.ConvTranspose2d(4, 8, 3), "weight")
    0
    """
    axes = _weight_axes(module, name)
    return axes.in_dim if axes is not None and axes.in_dim is not None else DEFAULT_GROUP_DIM


def out_dim(module: nn.Module, name: str = "weight") -> int | None:
    """The dim of ``module.name`` that indexes the layer's output units (None if unknown).

    Examples
    --------
    >>> import torch
    >>> out_dim(torch.nn.Linear(8, 4)), out_dim(torch.nn.ConvTranspose1d(4, 8, 3))
    (0, 1)
    """
    axes = _weight_axes(module, name)
    return None if axes is None else axes.out_dim
