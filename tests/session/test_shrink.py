"""Shrink: dead channels removed with Torch-Pruning's DepGraph, outputs unchanged, savings
measured; partly-zero and not-quite-dead channels kept and reported."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from prune_explorer.demo import load_cnn, load_mlp
from prune_explorer.session import Session
from prune_explorer.session.shrink.depgraph import shrink


def _kill(s: Session, layer: str, channels: list[int], *, bias: bool = True,
          norms: tuple[str, ...] = ()) -> None:
    """Zero output channels of ``layer`` with masks (weight rows; bias and BN entries too)."""
    weight = s.model.get_submodule(layer).weight
    keep = torch.ones(weight.shape[0], dtype=torch.bool)
    keep[channels] = False
    shape = (-1,) + (1,) * (weight.dim() - 1)
    s.apply(f"{layer}.weight", "custom_from_mask", mask=keep.view(shape).expand_as(weight))
    if bias and s.model.get_submodule(layer).bias is not None:
        s.apply(f"{layer}.bias", "custom_from_mask", mask=keep)
    for norm in norms:
        s.apply(f"{norm}.weight", "custom_from_mask", mask=keep)
        s.apply(f"{norm}.bias", "custom_from_mask", mask=keep)


def _check_same_outputs(s: Session, report, x) -> None:
    s.model.eval()
    report.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(report.model(x), s.model(x))


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_demo_cnn_with_ln_structured_channels_shrinks_and_keeps_its_outputs():
    s = Session(load_cnn())
    s.apply("features.0.weight", "ln_structured", amount=0.5, n=2, dim=0)
    dead0 = (s.mask("features.0.weight").flatten(1).sum(1) == 0)
    s.apply("features.0.bias", "custom_from_mask", mask=~dead0)
    _kill(s, "features.3", [0, 5, 7, 30])
    s.apply("classifier.weight", "l1_unstructured", amount=0.3)  # partly zero: kept
    before = _state(s.model)
    steps = s.steps
    x = torch.randn(5, 1, 8, 8)
    report = shrink(s.model, x, repeats=3)
    assert report.removed == {"features.0": 8, "features.3": 4}
    assert report.model.features[0].out_channels == 8
    assert report.model.features[3].in_channels == 8
    assert report.model.features[3].out_channels == 28
    assert report.model.classifier.in_features == 28 * 4  # flatten follows the channels
    _check_same_outputs(s, report, x)
    assert report.after.parameters < report.before.parameters
    assert report.after.flops < report.before.flops
    assert report.after.state_dict_bytes < report.before.state_dict_bytes
    assert report.before.latency_ms > 0
    # the session and its model are untouched
    assert s.steps == steps
    assert all(torch.equal(s.model.state_dict()[k], v) for k, v in before.items())
    assert report.model is not s.model


def test_session_shrink_delegates_and_leaves_history_alone():
    s = Session(load_mlp())
    _kill(s, "fc1", [1, 2, 3, 50, 127])
    _kill(s, "fc2", [0, 63])
    n_steps = len(s.steps)
    x = torch.randn(7, 64)
    report = s.shrink(x, repeats=2)
    assert report.removed == {"fc1": 5, "fc2": 2}
    assert tuple(report.model.fc2.weight.shape) == (62, 123)
    assert tuple(report.model.fc3.weight.shape) == (10, 62)
    _check_same_outputs(s, report, x)
    assert len(s.steps) == n_steps
    assert "parameters" in repr(report)
    assert "<table" in report._repr_html_()


def test_weights_zero_but_bias_not_zero_are_kept_and_reported():
    s = Session(load_mlp())
    _kill(s, "fc1", [4, 5], bias=False)
    s.apply("fc2.weight", "l1_unstructured", amount=0.5)
    x = torch.randn(3, 64)
    report = shrink(s.model, x, repeats=2)
    assert report.removed == {}
    assert [(n, i) for n, i, _ in report.kept] == [("fc1", 4), ("fc1", 5)]
    assert all("bias is not zero" in reason for _, _, reason in report.kept)
    assert report.partly_zero["fc2"] > 0
    _check_same_outputs(s, report, x)
    assert "bias is not zero" in repr(report)


class ResBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(8)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = torch.relu(self.bn0(self.stem(x)))
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        x = torch.relu(x + y)  # residual add couples stem's and conv2's channels
        return self.head(x.mean(dim=(2, 3)))


def _randomise_bn(model: nn.Module) -> None:
    torch.manual_seed(3)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.5, 0.5)


def test_resnet_block_residual_and_batchnorm():
    torch.manual_seed(0)
    model = ResBlock()
    _randomise_bn(model)
    s = Session(model)
    _kill(s, "conv1", [2, 6], norms=("bn1",))          # inner channels
    _kill(s, "stem", [1], norms=("bn0",))              # residual channel 1: both producers
    _kill(s, "conv2", [1], norms=("bn2",))
    _kill(s, "conv2", [5], norms=())                   # conv2 ch 5 dead, stem ch 5 alive: kept
    x = torch.randn(2, 3, 6, 6)
    report = shrink(s.model, x, repeats=2)
    assert report.model.conv1.out_channels == 6
    assert report.model.bn1.num_features == 6
    assert report.model.stem.out_channels == 7
    assert report.model.conv2.out_channels == 7
    assert report.model.head.in_features == 7
    kept = {(n, i) for n, i, _ in report.kept}
    assert ("conv2", 5) in kept
    _check_same_outputs(s, report, x)


def test_batchnorm_shift_keeps_a_channel_whose_weights_are_zero():
    torch.manual_seed(1)
    model = ResBlock()
    _randomise_bn(model)
    s = Session(model)
    _kill(s, "conv1", [3])  # bn1 not pruned: it shifts the zero channel to a constant
    x = torch.randn(2, 3, 6, 6)
    report = shrink(s.model, x, repeats=2)
    assert report.model.conv1.out_channels == 8
    [(name, idx, reason)] = report.kept
    assert (name, idx) == ("conv1", 3)
    assert "BatchNorm2d shifts zero" in reason
    _check_same_outputs(s, report, x)


class Depthwise(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pw1 = nn.Conv2d(4, 12, 1)
        self.bn1 = nn.BatchNorm2d(12)
        self.dw = nn.Conv2d(12, 12, 3, padding=1, groups=12, bias=False)
        self.bn2 = nn.BatchNorm2d(12)
        self.pw2 = nn.Conv2d(12, 6, 1)
        self.branch = nn.Conv2d(4, 5, 1)
        self.head = nn.Linear(11, 3)

    def forward(self, x):
        y = torch.relu(self.bn1(self.pw1(x)))
        y = torch.relu(self.bn2(self.dw(y)))
        y = self.pw2(y)
        z = torch.cat([y, self.branch(x)], dim=1)  # concatenation: channels 0-5 and 6-10
        return self.head(z.amax(dim=(2, 3)))


def test_depthwise_grouped_conv_and_concatenation():
    torch.manual_seed(2)
    model = Depthwise()
    _randomise_bn(model)
    s = Session(model)
    _kill(s, "pw1", [0, 7, 11], norms=("bn1", "bn2"))  # through the depthwise conv
    _kill(s, "branch", [1, 4])                           # the second half of the concat
    _kill(s, "pw2", [2])
    x = torch.randn(3, 4, 5, 5)
    report = shrink(s.model, x, repeats=2)
    assert report.model.pw1.out_channels == 9
    assert report.model.dw.out_channels == report.model.dw.groups == 9
    assert report.model.pw2.in_channels == 9
    assert report.model.pw2.out_channels == 5
    assert report.model.branch.out_channels == 3
    assert report.model.head.in_features == 8
    _check_same_outputs(s, report, x)


def test_output_layer_is_never_shrunk():
    s = Session(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)))
    _kill(s, "2", [1])
    x = torch.randn(2, 4)
    report = shrink(s.model, x, repeats=1)
    assert report.model[2].out_features == 3
    assert report.kept[0][2] == "feeds the model's output"


class FunctionalTail(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3)
        self.b = nn.Conv2d(6, 4, 1)

    def forward(self, x):
        return torch.flatten(self.b(torch.relu(self.a(x))), 1) * 2.0  # no module at the end


def test_a_layer_feeding_the_output_through_functional_ops_is_not_shrunk():
    torch.manual_seed(0)
    s = Session(FunctionalTail())
    _kill(s, "b", [1])
    _kill(s, "a", [2])
    x = torch.randn(2, 3, 5, 5)
    report = shrink(s.model, x, repeats=1)
    assert report.removed == {"a": 1}
    assert report.kept == [("b", 1, "feeds the model's output")]
    _check_same_outputs(s, report, x)


def test_missing_torch_pruning_says_how_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch_pruning", None)
    with pytest.raises(ImportError, match="pip install torch-pruning"):
        shrink(nn.Linear(2, 2), torch.randn(1, 2))
