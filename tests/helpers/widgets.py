"""Model factories and state checks shared by the widget tests."""

from __future__ import annotations

import ipywidgets as widgets
import torch
from torch import nn


def _tie_free(model: nn.Module, seed: int = 0) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
    return model


def mlp() -> nn.Module:
    return _tie_free(nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 4)))


def cnn() -> nn.Module:
    return _tie_free(nn.Sequential(
        nn.Conv2d(2, 6, 3), nn.ReLU(), nn.Flatten(), nn.Linear(24, 3)
    ))


def state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def assert_same_state(model: nn.Module, expected: dict[str, torch.Tensor]) -> None:
    got = model.state_dict()
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert torch.equal(got[key], value), key


def press(button: widgets.Button) -> None:
    """Click ``button`` as a user can: only when it is on (``Button.click`` would run the
    handlers of a disabled button too, which no browser does)."""
    assert not button.disabled, f"{button.description!r} is off: a user cannot press it"
    button.click()
