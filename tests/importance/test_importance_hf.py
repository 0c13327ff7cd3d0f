"""Every criterion through a Session on Hugging Face GPT-2, Llama and BERT built from tiny
configs (random tokens as calibration; no quality claims): tied weights and ``Conv1D`` axes
respected, commit, save and load back."""

from __future__ import annotations

import runpy

import pytest
import torch
import transformers as T

from prune_explorer import Session


def _gpt2() -> torch.nn.Module:
    return T.GPT2LMHeadModel(T.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64,
                                          n_positions=16, bos_token_id=0, eos_token_id=0))


def _llama() -> torch.nn.Module:
    return T.LlamaForCausalLM(T.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=16,
        tie_word_embeddings=True))


def _bert() -> torch.nn.Module:
    return T.BertForMaskedLM(T.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=16))


MODELS = {
    # name: (builder, a tied weight, a Conv1D weight or None, a 2-D Linear-like weight)
    "gpt2": (_gpt2, "transformer.wte.weight", "transformer.h.0.mlp.c_fc.weight",
             "transformer.h.0.attn.c_proj.weight"),
    "llama": (_llama, "model.embed_tokens.weight", None, "model.layers.0.mlp.up_proj.weight"),
    "bert": (_bert, "bert.embeddings.word_embeddings.weight", None,
             "bert.encoder.layer.0.intermediate.dense.weight"),
}


def _batches() -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [{"input_ids": torch.randint(1, 64, (2, 12), generator=generator)} for _ in range(2)]


def _loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    loss = model(**batch, labels=batch["input_ids"]).loss
    assert loss is not None
    return loss


def _logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.arange(1, 11).view(1, 10)).logits


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_every_criterion_runs_commits_saves_and_loads_back(name, tmp_path):
    build, tied, conv1d, linear = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    s = Session(model)
    assert s.tied.get(tied), s.tied  # the embedding is tied to the output layer
    others = [t for t in s.default_targets() if t not in (conv1d, linear)][:2]
    s.calibrate(_batches(), _loss, targets=[tied, linear, *others]
                + ([conv1d] if conv1d else []))
    for importance, target in zip(("wanda", "taylor", "fisher"), [tied, *others], strict=False):
        mask = s.preview(target, "l1_unstructured", amount=0.3, importance=importance)
        s.apply(target, "l1_unstructured", amount=0.3, importance=importance)
        assert torch.equal(mask, s.mask(target))
    for alias in s.tied[tied]:  # every name of the tied tensor sees its mask
        module_name, _, tensor_name = alias.rpartition(".")
        assert torch.equal(getattr(model.get_submodule(module_name), tensor_name + "_mask"),
                           s.mask(tied))
    s.apply(linear, "sparsegpt", sparsity=0.5)
    if conv1d:  # Conv1D stores (in, out): each output unit is a column
        s.apply(conv1d, "wanda_rows", sparsity=0.25)
        kept = s.mask(conv1d)
        assert (kept.sum(0) == kept.shape[0] * 3 // 4).all()
        assert not (kept.sum(1) == kept.shape[1] * 3 // 4).all()
    else:
        s.apply(linear, "wanda_rows", sparsity=0.25)
    want = _logits(model)
    # the snippet replays every step on stock torch, tied names and Conv1D axes included
    code, _ = s.plan.save_snippet(tmp_path / "plan.py")
    torch.manual_seed(0)
    fresh = build().eval()
    runpy.run_path(str(code), init_globals={"model": fresh})
    torch.testing.assert_close(_logits(fresh), want, rtol=0, atol=0)
    for target in s.names:
        module_name, _, tensor_name = target.rpartition(".")
        mask = getattr(fresh.get_submodule(module_name), tensor_name + "_mask", None)
        if mask is not None:
            assert torch.equal(mask, s.mask(target)), target
    s.commit()
    torch.testing.assert_close(_logits(model), want, rtol=0, atol=0)
    plain = s.plain_model()
    plain.save_pretrained(tmp_path / "model")
    loaded = type(model).from_pretrained(tmp_path / "model").eval()
    torch.testing.assert_close(_logits(loaded), want, rtol=0, atol=1e-6)
