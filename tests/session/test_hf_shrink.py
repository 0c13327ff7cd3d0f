"""Shrink on language models (transformers GPT-2 and Llama from small configs, random weights, no
download): keyword inputs, outputs that are not plain tensors, ``Conv1D`` shrunk like ``Linear``,
``with_bias=True`` so that trained (non-zero) biases do not block it, and nothing skipped
silently."""

from __future__ import annotations

import copy

import pytest
import torch
import transformers as T

from prune_explorer import Session
from prune_explorer.session import InvalidStepError
from prune_explorer.session.shrink.depgraph import ShrinkError

FC = "transformer.h.{}.mlp.c_fc"


def gpt2() -> T.GPT2LMHeadModel:
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
                       bos_token_id=0, eos_token_id=0)
    model = T.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # trained models have non-zero biases
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    return model


def llama() -> T.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                        bos_token_id=0, eos_token_id=0)
    return T.LlamaForCausalLM(cfg).eval()


def inputs() -> dict[str, torch.Tensor]:
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs()).logits


def test_gpt2_conv1d_units_with_their_bias_shrink_and_outputs_stay():
    model = gpt2()
    s = Session(model)
    for layer in (0, 1):
        s.apply(f"{FC.format(layer)}.weight", "ln_structured", amount=16, n=2, dim=1,
                with_bias=True)
    fc = model.transformer.h[0].mlp.c_fc
    dead = (fc.weight_mask == 0).all(dim=0)
    assert int(dead.sum()) == 16
    assert torch.equal(fc.bias_mask == 0, dead)  # the bias of exactly the pruned units
    assert [step.method for step in s.plan] == ["ln_structured", "custom_from_mask"] * 2
    want = logits(model)
    report = s.shrink(inputs(), repeats=1)
    assert report.removed == {FC.format(0): 16, FC.format(1): 16}
    small = report.model
    assert tuple(small.transformer.h[0].mlp.c_fc.weight.shape) == (32, 128 - 16)
    assert tuple(small.transformer.h[0].mlp.c_proj.weight.shape) == (128 - 16, 32)
    assert small.transformer.h[0].mlp.c_fc.nf == 128 - 16
    torch.testing.assert_close(logits(small), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits(model), want, rtol=0, atol=0)  # session model unchanged


def test_gpt2_without_with_bias_names_the_bias_that_blocks_each_unit():
    model = gpt2()
    s = Session(model)
    s.apply(f"{FC.format(0)}.weight", "ln_structured", amount=4, n=2, dim=1)
    report = s.shrink(inputs(), repeats=1)
    assert report.removed == {}
    assert len(report.kept) == 4
    assert {reason for _, _, reason in report.kept} == {f"{FC.format(0)}: bias is not zero"}


def test_attention_units_that_cannot_go_are_reported_not_raised():
    model = gpt2()
    s = Session(model)
    s.apply("transformer.h.1.attn.c_attn.weight", "ln_structured", amount=4, n=2, dim=1,
            with_bias=True)
    s.apply(f"{FC.format(1)}.weight", "ln_structured", amount=8, n=2, dim=1, with_bias=True)
    want = logits(model)
    report = s.shrink(inputs(), repeats=1)
    assert report.removed == {FC.format(1): 8}
    attn = [(name, reason) for name, _, reason in report.kept if "attn" in name]
    assert len(attn) == 4
    assert all("removing them breaks the model" in reason for _, reason in attn)
    torch.testing.assert_close(logits(report.model), want, rtol=1e-5, atol=1e-5)


def test_llama_mlp_units_shrink_with_keyword_inputs_and_cache_outputs():
    model = llama()
    mlp = model.model.layers[0].mlp
    s = Session(model)
    s.apply("model.layers.0.mlp.gate_proj.weight", "ln_structured", amount=16, n=2, dim=0,
            with_bias=True)  # Llama has no biases: nothing more to prune
    assert len(s.plan) == 1
    dead = (mlp.gate_proj.weight_mask == 0).all(dim=1)
    keep = torch.ones_like(mlp.up_proj.weight)
    keep[dead] = 0
    s.apply("model.layers.0.mlp.up_proj.weight", "custom_from_mask", mask=keep)
    want = logits(model)
    report = s.shrink(inputs(), repeats=1)  # use_cache=False is passed: no cache to trace
    assert report.removed == {"model.layers.0.mlp.gate_proj": 16,
                              "model.layers.0.mlp.up_proj": 16}
    assert tuple(report.model.model.layers[0].mlp.down_proj.weight.shape) == (32, 64 - 16)
    torch.testing.assert_close(logits(report.model), want, rtol=1e-5, atol=1e-5)


def test_with_bias_is_undoable_replayed_by_the_snippet_and_refused_off_the_output_dim():
    model = gpt2()
    fresh = copy.deepcopy(model)
    s = Session(model)
    s.apply(f"{FC.format(0)}.weight", "ln_structured", amount=8, n=1, dim=1, with_bias=True)
    snippet = s.plan.to_snippet()
    replay = copy.deepcopy(fresh)
    exec(compile(snippet, "snippet", "exec"), {"model": replay})
    fc, fc2 = model.transformer.h[0].mlp.c_fc, replay.transformer.h[0].mlp.c_fc
    assert torch.equal(fc2.bias_mask, fc.bias_mask)
    assert torch.equal(fc2.weight_mask, fc.weight_mask)
    assert s.undo().method == "custom_from_mask"
    assert not hasattr(fc, "bias_mask")
    s.undo()
    assert not hasattr(fc, "weight_mask")
    with pytest.raises(InvalidStepError, match=r"with_bias=True .*Conv1D: dim=1\); got "
                       r"ln_structured with dim=0") as info:
        s.apply(f"{FC.format(0)}.weight", "ln_structured", amount=8, n=1, dim=0,
                with_bias=True)
    assert info.value.field == "with_bias"
    assert not hasattr(fc, "weight_mask")  # nothing happened
    assert len(s.plan) == 0


def test_a_torch_pruning_failure_is_a_shrink_error_naming_the_model(monkeypatch):
    import torch_pruning as tp

    def broken(*_args, **_kwargs):
        raise AttributeError("'tuple' object has no attribute 'grad_fn'")

    monkeypatch.setattr(tp.DependencyGraph, "build_dependency", broken)
    s = Session(gpt2())
    with pytest.raises(ShrinkError,
                       match=r"could not trace GPT2LMHeadModel .*AttributeError") as info:
        s.shrink(inputs(), repeats=1)
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__
