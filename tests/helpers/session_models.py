"""Small deterministic models for the session and plan tests; imports only torch.

Kept apart from ``helpers.session`` so a fresh interpreter (the snippet test) can build the same
models without importing prune_explorer. Weights are tie-free: every parameter is refilled from a
seeded generator, so mask comparisons do not depend on how ties are broken.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def _quiet(factory: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    # Layer constructors draw their default init from the global RNG; keep the caller's state.
    @functools.wraps(factory)
    def build(*args: Any, **kwargs: Any) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            return factory(*args, **kwargs)

    return build


def fill_tie_free(model: nn.Module, seed: int = 0) -> nn.Module:
    """Refill every parameter with distinct random values (no ties), deterministically."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator, dtype=param.dtype))
    return model


class Scaler(nn.Module):
    """A custom module with its own parameter and a child."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(3, 4))
        self.inner = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * self.scale.sum()


@_quiet
def mlp(seed: int = 0) -> nn.Module:
    """A small MLP: Linear(6, 5) -> ReLU -> Linear(5, 4) -> ReLU -> Linear(4, 3)."""
    model = nn.Sequential(
        nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3)
    )
    return fill_tie_free(model, seed)


@_quiet
def convnet(seed: int = 0) -> nn.Module:
    """A small conv net with named parts: features (2 convs), classifier (Linear)."""
    model = nn.Sequential()
    model.add_module(
        "features",
        nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 6, 3), nn.ReLU()),
    )
    model.add_module("pool", nn.AdaptiveAvgPool2d(1))
    model.add_module("flatten", nn.Flatten())
    model.add_module("classifier", nn.Linear(6, 5))
    return fill_tie_free(model, seed)


@_quiet
def zoo(seed: int = 0) -> nn.Module:
    """One layer of each kind: linear, conv 1-3d, transposed conv, embedding, RNN, norm, custom."""
    model = nn.ModuleDict(
        {
            "linear": nn.Linear(6, 4),
            "conv1": nn.Conv1d(2, 3, 3),
            "conv2": nn.Conv2d(2, 3, 3),
            "conv3": nn.Conv3d(2, 3, 2),
            "deconv": nn.ConvTranspose2d(3, 2, 3),
            "embed": nn.Embedding(10, 4),
            "lstm": nn.LSTM(4, 5, num_layers=2),
            "gru": nn.GRU(4, 3),
            "ln": nn.LayerNorm(4),
            "bn": nn.BatchNorm2d(3),
            "custom": Scaler(),
        }
    )
    return fill_tie_free(model, seed)


@_quiet
def root_linear(seed: int = 0) -> nn.Module:
    """A bare Linear(7, 3): its tensors are addressed "weight" and "bias"."""
    return fill_tie_free(nn.Linear(7, 3), seed)


FACTORIES = {"mlp": mlp, "convnet": convnet, "zoo": zoo, "root_linear": root_linear}


class TableHead(nn.Module):
    """Logits from a table it holds as ``embedding`` (no ``weight``): ``x @ embedding.T``."""

    def __init__(self, table: nn.Parameter) -> None:
        super().__init__()
        self.embedding = table

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.embedding.t()


class TiedUnderTwoNames(nn.Module):
    """A tiny language model whose output head is tied to its input embedding under another
    tensor name: ``embed.weight`` *is* ``head.embedding``. ``head_first`` registers the head
    first, so ``head.embedding`` comes first in module order (the listed name)."""

    def __init__(self, vocab: int = 40, width: int = 8, head_first: bool = False) -> None:
        super().__init__()
        embed = nn.Embedding(vocab, width)
        if head_first:
            self.head = TableHead(embed.weight)
        self.embed = embed
        self.mid = nn.Linear(width, width)
        if not head_first:
            self.head = TableHead(embed.weight)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.mid(self.embed(ids))))


@_quiet
def tied_under_two_names(seed: int = 0, head_first: bool = False) -> nn.Module:
    """:class:`TiedUnderTwoNames` with tie-free weights."""
    return fill_tie_free(TiedUnderTwoNames(head_first=head_first), seed)
