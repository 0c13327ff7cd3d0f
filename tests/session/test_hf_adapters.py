"""peft adapters on a pruned model: merging into a base layer still pruned by a hook would lose
the LoRA delta, so it is refused with the route (commit first); after a merge, or any module
replaced behind the session's back, every session method raises the session's own
``ModelChangedError``, never a raw ``AttributeError``. Llama from a small config."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from helpers import hf_models
from prune_explorer import Session
from prune_explorer.session import ModelChangedError
from prune_explorer.session.model.saving import PruningNotMergedError

peft = pytest.importorskip("peft", reason="needs peft (test extra)")

BASE = "base_model.model.model.layers.0.mlp.up_proj.base_layer.weight"


def lora_session() -> tuple[nn.Module, Session]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers' own deprecations
        model = peft.get_peft_model(hf_models.llama(), peft.LoraConfig(
            r=4, target_modules=["up_proj"], init_lora_weights=False))
    s = Session(model)
    s.apply(BASE, "l1_unstructured", amount=0.5)
    return model, s


def test_merging_into_a_pruned_base_layer_is_refused_and_changes_nothing():
    model, s = lora_session()
    want = hf_models.outputs(model, "llama")
    for merge in (model.merge_and_unload, model.base_model.merge_and_unload, model.merge_adapter):
        with pytest.raises(PruningNotMergedError, match=r"up_proj.base_layer.weight.*commit"):
            merge()
    torch.testing.assert_close(hf_models.outputs(model, "llama"), want, rtol=0, atol=0)
    assert len(s.report()) == len(s.names)


def test_commit_then_merge_keeps_the_delta_and_the_session_says_the_model_changed():
    model, s = lora_session()
    want = hf_models.outputs(model, "llama")
    s.commit()
    merged = model.merge_and_unload()
    torch.testing.assert_close(hf_models.outputs(merged, "llama"), want, rtol=1e-5, atol=1e-5)
    for call in (s.report, s.commit, s.zeros, lambda: s.mask(BASE), lambda: s.preview(
            BASE, "l1_unstructured", amount=0.1), lambda: s.apply(BASE, "l1_unstructured",
                                                                   amount=0.1)):
        with pytest.raises(ModelChangedError, match=r"changed outside the session.*merge"):
            call()


def test_a_module_replaced_behind_the_session_is_model_changed():
    model = hf_models.llama()
    s = Session(model)
    s.apply("model.layers.0.mlp.up_proj.weight", "l1_unstructured", amount=0.5)
    model.model.layers[0].mlp = nn.Identity()  # the whole MLP replaced
    with pytest.raises(ModelChangedError, match=r"mlp.gate_proj' is no longer in the model"):
        s.report()
    with pytest.raises(ModelChangedError, match="changed outside the session"):
        s.undo()
    model2 = hf_models.llama()
    s2 = Session(model2)
    s2.apply("model.layers.0.mlp.up_proj.weight", "l1_unstructured", amount=0.5)
    model2.model.layers[0].mlp.up_proj = nn.Linear(32, 64, bias=False)  # same name, new layer
    with pytest.raises(ModelChangedError, match="changed outside the session"):
        s2.undo()
