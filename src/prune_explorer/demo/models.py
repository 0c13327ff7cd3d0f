"""Two small classifiers for the 8x8 digit images of :func:`sklearn.datasets.load_digits`.

Both are plain :class:`torch.nn.Module` subclasses with named submodules, so the qualified
parameter names shown by the explorer read naturally (``fc1.weight``, ``features.3.weight``,
``classifier.bias`` ...).

Each class records the input layout it expects in ``input_layout``: ``"flat"`` for a batch of
shape ``(N, 64)`` and ``"image"`` for ``(N, 1, 8, 8)``. :func:`prune_explorer.demo.evaluate` and
:func:`prune_explorer.demo.train` read it to shape the data.

Examples
--------
>>> import torch
>>> from prune_explorer.demo.models import DigitsCNN, DigitsMLP
>>> DigitsMLP()(torch.zeros(5, 64)).shape
torch.Size([5, 10])
>>> DigitsCNN()(torch.zeros(5, 1, 8, 8)).shape
torch.Size([5, 10])
>>> [name for name, _ in DigitsCNN().named_parameters()][::2]
['features.0.weight', 'features.3.weight', 'classifier.weight']
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from torch import nn

Layout = Literal["flat", "image"]

N_FEATURES = 64
N_CLASSES = 10


class DigitsMLP(nn.Module):
    """Multilayer perceptron 64 -> 128 -> 64 -> 10 with ReLU activations.

    Layers are named ``fc1``, ``fc2`` and ``fc3`` (17,226 parameters in total).

    Examples
    --------
    >>> import torch
    >>> model = DigitsMLP()
    >>> tuple(model.fc1.weight.shape), tuple(model.fc3.weight.shape)
    ((128, 64), (10, 64))
    >>> model(torch.rand(3, 64)).shape
    torch.Size([3, 10])
    """

    input_layout: ClassVar[Layout] = "flat"

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(N_FEATURES, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits of shape ``(N, 10)`` for inputs of shape ``(N, 64)``."""
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class DigitsCNN(nn.Module):
    """Small convolutional network for ``(N, 1, 8, 8)`` digit images.

    ``features`` is a :class:`torch.nn.Sequential`::

        0 Conv2d(1, 16, 3, padding=1)   -> 16 x 8 x 8
        1 ReLU
        2 MaxPool2d(2)                  -> 16 x 4 x 4
        3 Conv2d(16, 32, 3, padding=1)  -> 32 x 4 x 4
        4 ReLU
        5 MaxPool2d(2)                  -> 32 x 2 x 2

    followed by ``classifier = Linear(128, 10)`` (6,090 parameters in total).

    Examples
    --------
    >>> import torch
    >>> model = DigitsCNN()
    >>> tuple(model.features[3].weight.shape)
    (32, 16, 3, 3)
    >>> model(torch.rand(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """

    input_layout: ClassVar[Layout] = "image"

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(32 * 2 * 2, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits of shape ``(N, 10)`` for inputs of shape ``(N, 1, 8, 8)``."""
        return self.classifier(torch.flatten(self.features(x), start_dim=1))


def infer_layout(model: nn.Module) -> Layout:
    """Return the input layout ``model`` expects: ``"flat"`` or ``"image"``.

    Uses the ``input_layout`` attribute when the model has one; otherwise looks at the first
    :class:`~torch.nn.Linear` or :class:`~torch.nn.Conv2d` submodule (a leading ``Conv2d``
    means images of shape ``(N, 1, 8, 8)``, a leading ``Linear`` means rows of 64 pixels).

    Examples
    --------
    >>> from torch import nn
    >>> infer_layout(DigitsCNN()), infer_layout(nn.Sequential(nn.Linear(64, 10)))
    ('image', 'flat')
    """
    declared = getattr(model, "input_layout", None)
    if declared is not None:
        if declared not in ("flat", "image"):
            raise ValueError(
                f"infer_layout: model.input_layout must be 'flat' or 'image'; got {declared!r}"
            )
        return declared
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            return "image"
        if isinstance(module, nn.Linear):
            return "flat"
    raise ValueError(
        "infer_layout: cannot tell the input layout of a "
        f"{type(model).__name__} (no input_layout attribute, no Linear or Conv2d submodule); "
        "pass layout='flat' or layout='image'"
    )
