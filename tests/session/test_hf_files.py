"""Hugging Face files: ``load_pruned_state_dict`` reads ``save_pretrained`` output of tied
(GPT-2, OPT, BERT, T5) and renamed (ViT) models, pruned or not; a shrunk model is saved and
loaded by the documented route (``describe_shrunk`` + the state dict, ``rebuild_shrunk`` on a
model built from the saved config), ``Conv1D`` included, with the masked model's outputs."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import transformers as T
from safetensors.torch import load_file

from helpers import hf_models
from prune_explorer import Session
from prune_explorer.session import describe_shrunk, rebuild_shrunk
from prune_explorer.session.model.state_dict import load_pruned_state_dict


def _save(model: torch.nn.Module, folder) -> dict[str, torch.Tensor]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PruningNotSavedWarning: the point of the test
        model.save_pretrained(folder)
    return load_file(folder / "model.safetensors")


@pytest.mark.parametrize("pruned", [False, True], ids=["plain", "pruned"])
@pytest.mark.parametrize("name", ["gpt2", "opt", "bert", "t5", "vit", "llama"])
def test_save_pretrained_output_loads_back_with_its_pruning(name, pruned, tmp_path):
    model = hf_models.FACTORIES[name]()
    s = Session(model)
    if pruned:
        s.apply_global([*s.default_targets(), *s.tied], "l1_unstructured", amount=0.5)
    state = _save(model, tmp_path)
    if name != "llama":  # what the library does: ties saved once, ViT's keys renamed
        assert set(state) != set(model.state_dict())
    fresh = hf_models.FACTORIES[name]()
    load_pruned_state_dict(fresh, state)
    torch.testing.assert_close(hf_models.outputs(fresh, name), hf_models.outputs(model, name),
                               rtol=0, atol=0)
    again = Session(fresh)
    assert again.tied == s.tied
    assert sorted(again.found) == sorted(n for n in s.names if s.methods(n))


def _gpt2_with_biases() -> torch.nn.Module:
    model = hf_models.gpt2()
    with torch.no_grad():  # trained models have non-zero biases
        for key, param in model.named_parameters():
            if key.endswith("bias"):
                param.normal_(generator=torch.Generator().manual_seed(len(key)))
    return model


@pytest.mark.slow
def test_describe_shrunk_knows_conv1d_and_a_shrunk_gpt2_saves_and_loads(tmp_path):
    model = _gpt2_with_biases()
    s = Session(model)
    for layer in (0, 1):
        s.apply(f"transformer.h.{layer}.mlp.c_fc.weight", "ln_structured", amount=16, n=2,
                dim=1, with_bias=True)
    want = hf_models.outputs(model, "gpt2")
    small = s.shrink(hf_models.inputs("gpt2"), repeats=1).model
    description = describe_shrunk(small, model)
    assert description["layers"]["transformer.h.0.mlp.c_fc"] == {
        "type": "Conv1D", "sizes": {"nx": 32, "nf": 112},
        "tensors": {"weight": [32, 112], "bias": [112]}}
    assert description["layers"]["transformer.h.1.mlp.c_proj"]["sizes"] == {"nx": 112, "nf": 32}
    small.save_pretrained(tmp_path)  # the route of docs/real-models.md
    (tmp_path / "shrunk.json").write_text(json.dumps(description))
    with pytest.raises(RuntimeError, match=r"mismatched_sizes|size mismatch"):
        T.GPT2LMHeadModel.from_pretrained(tmp_path)  # the config still has the old sizes
    fresh = T.GPT2LMHeadModel(T.GPT2Config.from_pretrained(tmp_path)).eval()
    rebuild_shrunk(fresh, json.loads((tmp_path / "shrunk.json").read_text()))
    load_pruned_state_dict(fresh, load_file(tmp_path / "model.safetensors"))
    torch.testing.assert_close(hf_models.outputs(fresh, "gpt2"), want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_shrunk_llama_saves_and_loads_by_the_same_route(tmp_path):
    model = hf_models.llama()
    s = Session(model)
    mlp = "model.layers.0.mlp"
    s.apply(f"{mlp}.up_proj.weight", "ln_structured", amount=16, n=2, dim=0)
    dead = ~s.mask(f"{mlp}.up_proj.weight").any(dim=1)
    s.apply(f"{mlp}.gate_proj.weight", "custom_from_mask",
            mask=(~dead)[:, None].expand(64, 32))
    want = hf_models.outputs(model, "llama")
    small = s.shrink(hf_models.inputs("llama"), repeats=1).model
    description = describe_shrunk(small, model)
    assert description["layers"][f"{mlp}.down_proj"]["sizes"] == {
        "in_features": 48, "out_features": 32}
    small.save_pretrained(tmp_path)
    (tmp_path / "shrunk.json").write_text(json.dumps(description))
    fresh = T.LlamaForCausalLM(T.LlamaConfig.from_pretrained(tmp_path)).eval()
    rebuild_shrunk(fresh, json.loads((tmp_path / "shrunk.json").read_text()))
    load_pruned_state_dict(fresh, load_file(tmp_path / "model.safetensors"))
    torch.testing.assert_close(hf_models.outputs(fresh, "llama"), want, rtol=1e-5, atol=1e-5)
