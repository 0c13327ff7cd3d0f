"""Saving like the library does: a plain pruned model round-trips through ``save_pretrained`` /
``from_pretrained`` exactly; saving a model whose pruning the loader would drop warns; a failing
``tie_weights`` says why (transformers GPT-2 from a small config, no download)."""

from __future__ import annotations

import copy
import io
import warnings

import pytest
import torch
import transformers as T

from prune_explorer import Session
from prune_explorer.session.model.saving import PruningNotSavedWarning

FC = "transformer.h.0.mlp.c_fc.weight"
ATTN = "transformer.h.0.attn.c_attn.weight"


def gpt2() -> T.GPT2LMHeadModel:
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
                       bos_token_id=0, eos_token_id=0)
    return T.GPT2LMHeadModel(cfg).eval()


def pruned() -> tuple[T.GPT2LMHeadModel, Session]:
    model = gpt2()
    s = Session(model)
    s.apply(FC, "l1_unstructured", amount=0.5)
    s.apply(ATTN, "ln_structured", amount=8, n=2, dim=1)
    return model, s


def logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.arange(12).view(1, 12)).logits


def assert_same_state(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sorted(sa) == sorted(sb)
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


def test_plain_model_saves_and_loads_exactly_and_leaves_the_session(tmp_path):
    model, s = pruned()
    want = logits(model)
    plain = s.plain_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PruningNotSavedWarning)
        plain.save_pretrained(tmp_path)
    loaded = T.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    assert_same_state(loaded, plain)
    assert int((loaded.transformer.h[0].mlp.c_fc.weight == 0).sum()) == 32 * 128 // 2
    assert torch.equal(logits(loaded), want)
    assert len(s.plan) == 2
    assert hasattr(model.transformer.h[0].mlp.c_fc, "weight_mask")
    s.undo()  # the session's undo is intact


def test_commit_then_save_pretrained_round_trips(tmp_path):
    model, s = pruned()
    want = logits(model)
    s.commit()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PruningNotSavedWarning)
        model.save_pretrained(tmp_path)
    loaded = T.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    assert_same_state(loaded, model)
    assert torch.equal(logits(loaded), want)


def test_save_pretrained_before_commit_warns_naming_the_fix(tmp_path):
    model, _ = pruned()
    with pytest.warns(PruningNotSavedWarning, match=r"save_pretrained: 2 tensors of "
                      r"GPT2LMHeadModel are pruned .*'transformer\.h\.0\.attn\.c_attn\.weight'"
                      r".*Session\.commit\(\).*Session\.plain_model\(\)"):
        model.save_pretrained(tmp_path)
    # what the warning is about: the loader drops the pruning
    loaded = T.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    assert int((loaded.transformer.h[0].mlp.c_fc.weight == 0).sum()) == 0


def test_tie_weights_after_pruning_the_tied_embedding_says_why():
    model = gpt2()
    s = Session(model)
    s.apply("transformer.wte.weight", "l1_unstructured", amount=0.5)
    # the library cannot re-tie a pruned tensor (its name is no parameter now): say why
    with pytest.raises(AttributeError, match=r"tie_weights: 'transformer\.wte\.weight', "
                       r"'lm_head\.weight' are pruned .*Session\.commit\(\)") as info:
        model.tie_weights()
    assert isinstance(info.value.__cause__, AttributeError)  # the library's own error kept


def test_the_guard_is_per_object_and_survives_copies_and_pickles():
    fresh = gpt2()
    Session(fresh)
    assert "save_pretrained" not in vars(gpt2())  # the class is untouched
    twin = copy.deepcopy(fresh)  # (stock torch cannot deep-copy a pruned model: plain_model)
    assert twin.save_pretrained.__self__ is twin
    model, _ = pruned()
    assert "save_pretrained" in vars(model)
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    again = torch.load(buffer, weights_only=False)
    assert torch.equal(logits(again), logits(model))
