"""Weights the pruning API cannot prune -- int8, ``torch.ao`` quantized layers, torchao tensors,
meta and offloaded weights -- are never default targets and are refused in one line naming the
tensor and why, by the session, the core and (tests/cli/test_cli_hf.py) the CLI; ``report()``
works on a meta model. Models from small configs (no download)."""

from __future__ import annotations

import importlib.util
import warnings

import pytest
import torch
import transformers as T
from torch import nn

from helpers import hf_models
from prune_explorer import Session, prune
from prune_explorer.prune.validation import UnprunableTensorError
from prune_explorer.session import InvalidStepError

UP = "model.layers.0.mlp.up_proj.weight"
DOWN = "model.layers.0.mlp.down_proj.weight"


def quantized_llama() -> nn.Module:
    with warnings.catch_warnings():  # torch.ao quantization says it is deprecated
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(hf_models.llama(), {nn.Linear},
                                                      dtype=torch.qint8)


def test_an_int8_weight_is_no_default_target_and_every_path_refuses_it():
    s = Session(hf_models.int8_llama())
    assert UP in s.names
    assert "torch.int8" in s.unprunable[UP]
    with pytest.warns(UserWarning, match=r"left out 1 tensor .*'model.layers.0.mlp.up_proj"):
        targets = s.default_targets()
    assert UP not in targets
    assert DOWN in targets
    assert all("embed" not in t for t in targets)
    says = rf"cannot prune '{UP}': its dtype is torch.int8"
    with pytest.raises(InvalidStepError, match=says):
        s.apply(UP, "l1_unstructured", amount=0.5)
    with pytest.raises(InvalidStepError, match=says):
        s.apply_global([DOWN, UP], amount=0.5)
    with pytest.raises(InvalidStepError, match=says):
        s.preview(UP, "l1_unstructured", amount=0.5)
    assert s.steps == ()
    assert not hasattr(s.model.model.layers[0].mlp.down_proj, "weight_mask")
    with pytest.raises(UnprunableTensorError, match="cannot prune 'weight' of Linear: its dtype"):
        prune.l1_unstructured(s.model.model.layers[0].mlp.up_proj, "weight", amount=0.5)


def test_after_quantize_dynamic_default_targets_says_why_and_falls_back_to_nothing():
    s = Session(quantized_llama())
    assert UP in s.unprunable
    assert UP not in s.names
    with pytest.warns(UserWarning, match="quantized layer.*returning \\[\\]"):
        assert s.default_targets() == []  # not the token embedding
    with pytest.raises(InvalidStepError, match=rf"cannot prune '{UP}': .*quantized layer"):
        s.apply(UP, "l1_unstructured", amount=0.5)
    layer = s.model.model.layers[0].mlp.up_proj
    with pytest.raises(UnprunableTensorError, match="quantized layer"):
        prune.l1_unstructured(layer, "weight", amount=0.5)


def test_a_torch_quantized_tensor_is_refused_by_the_core():
    layer = nn.Linear(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = torch.quantize_per_tensor(layer.weight.detach(), 0.1, 0, torch.qint8)
    layer.weight = nn.Parameter(quantized, requires_grad=False)
    with pytest.raises(UnprunableTensorError, match="a quantized tensor"):
        prune.random_unstructured(layer, "weight", amount=0.5)


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="needs torchao")
def test_a_torchao_int8_weight_is_refused():  # pragma: no cover - torchao is optional
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    model = hf_models.llama()
    quantize_(model, Int8WeightOnlyConfig())
    s = Session(model)
    with pytest.warns(UserWarning, match="left out"):
        assert UP not in s.default_targets()
    with pytest.raises(InvalidStepError, match=rf"cannot prune '{UP}': it is a quantized tensor"):
        s.apply(UP, "l1_unstructured", amount=0.5)


def meta_llama() -> nn.Module:
    with torch.device("meta"):
        return T.LlamaForCausalLM(T.LlamaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=64))


def test_a_meta_model_reports_and_refuses_to_prune_in_one_line():
    s = Session(meta_llama())
    with pytest.warns(UserWarning, match="on the meta device"):
        frame = s.report(totals=True)
    assert int(frame["zeros"].sum()) == 0
    assert frame["numel"].iloc[-1] > 0
    says = rf"cannot prune '{UP}': it is on the meta device.*offloaded"
    with pytest.raises(InvalidStepError, match=says):
        s.preview(UP, "l1_unstructured", amount=0.5)
    with pytest.raises(InvalidStepError, match=says):
        s.apply(UP, "l1_unstructured", amount=0.5)


def test_a_mixed_cpu_and_meta_global_step_names_the_offloaded_tensor():
    model = hf_models.llama()
    model.model.layers[0].mlp.up_proj.to("meta")
    s = Session(model)
    with pytest.raises(InvalidStepError, match=rf"cannot prune '{UP}': .*meta device.*offloaded"):
        s.apply_global([DOWN, UP], amount=0.5)
    assert s.steps == ()


def test_an_accelerate_offloaded_weight_is_refused_in_one_line():
    accelerate = pytest.importorskip("accelerate", reason="needs accelerate (test extra)")
    model = hf_models.llama()
    accelerate.cpu_offload(model, execution_device=torch.device("cpu"))
    s = Session(model)
    with pytest.raises(InvalidStepError, match=rf"cannot prune '{UP}': .*accelerate"):
        s.apply(UP, "l1_unstructured", amount=0.5)
