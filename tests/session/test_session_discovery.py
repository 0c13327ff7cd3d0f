"""Discovery of prunable tensors by qualified address."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.session import assert_same_pruning, convnet, mlp, torch_apply, zoo
from prune_explorer import prune
from prune_explorer.session import Session


def _expected(model: nn.Module) -> list[tuple[str, str, tuple[int, ...], int]]:
    """(address, module type, shape, numel) straight from torch's own parameter listing."""
    out = []
    for name, param in model.named_parameters():
        module_name, _, tensor_name = name.rpartition(".")
        if tensor_name.endswith("_orig"):
            tensor_name = tensor_name[: -len("_orig")]
        module = model.get_submodule(module_name)
        address = f"{module_name}.{tensor_name}" if module_name else tensor_name
        out.append((address, type(module).__name__, tuple(param.shape), param.numel()))
    return out


@pytest.mark.parametrize("factory", [mlp, convnet, zoo])
def test_discovery_matches_named_parameters(factory):
    model = factory()
    s = Session(model)
    got = [(i.name, i.module_type, i.shape, i.numel) for i in map(s.info, s.names)]
    assert got == _expected(model)


def test_zoo_covers_every_layer_kind():
    s = Session(zoo())
    types = {s.info(n).module_type for n in s.names}
    assert types == {
        "Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "Embedding", "LSTM", "GRU",
        "LayerNorm", "BatchNorm2d", "Scaler",
    }
    for name in ["lstm.weight_ih_l1", "lstm.bias_hh_l0", "gru.weight_hh_l0", "ln.weight",
                 "bn.bias", "custom.scale", "custom.inner.weight", "embed.weight"]:
        assert name in s.names
    # buffers (running stats) are not prunable tensors
    assert "bn.running_mean" not in s.names


def test_root_module_parameters_have_bare_names():
    s = Session(nn.Linear(3, 2))
    assert s.names == ("weight", "bias")
    s.apply("weight", "l1_unstructured", amount=2)
    assert int((s.model.weight_mask == 0).sum()) == 2


def test_already_pruned_tensor_is_listed_under_its_own_name_with_its_sparsity():
    model = mlp()
    prune.l1_unstructured(model[0], "weight", amount=9)  # 9 of 30
    s = Session(model)
    assert "0.weight" in s.names
    assert "0.weight_orig" not in s.names
    assert s.info("0.weight").shape == (5, 6)
    row = s.report().set_index("name").loc["0.weight"]
    assert row["zeros"] == 9
    assert row["sparsity"] == pytest.approx(9 / 30)
    assert row["methods"] == ("l1_unstructured",)


def test_parameter_named_orig_without_hook_keeps_its_name():
    module = nn.Module()
    module.w_orig = nn.Parameter(torch.randn(2, 2))
    assert Session(module).names == ("w_orig",)


@pytest.mark.parametrize(
    "address",
    ["lstm.weight_ih_l0", "gru.weight_hh_l0", "conv3.weight", "deconv.weight", "embed.weight",
     "ln.weight", "bn.weight", "custom.scale"],
)
def test_every_discovered_kind_can_be_pruned_like_torch(address):
    model, oracle = zoo(), zoo()
    s = Session(model)
    step = s.apply(address, "l1_unstructured", amount=0.5)

    torch_apply(oracle, step)
    assert_same_pruning(model, oracle)
