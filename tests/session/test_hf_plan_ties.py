"""A plan read back from JSON keeps tied parameters (GPT-2's ``lm_head``, BERT's and T5's
decoder): the JSON carries ``tied``, and a file without it (written before) gives a snippet that
finds the ties on the model it runs on. Replayed with stock torch on a fresh copy, both give the
session's logits."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from torch.nn.utils import prune as stock_prune

from helpers import hf_models
from prune_explorer import Session
from prune_explorer.session import InvalidPlanError, Plan


def _replay(snippet: str, model: torch.nn.Module) -> torch.nn.Module:
    exec(snippet, {"model": model, "torch": torch, "prune": stock_prune})  # stock torch only
    return model


def _pruned(name: str) -> tuple[torch.nn.Module, torch.nn.Module, Session]:
    model = hf_models.FACTORIES[name]()
    fresh = copy.deepcopy(model)
    s = Session(model)
    assert s.tied
    s.apply_global([*s.default_targets(), *s.tied], "l1_unstructured", amount=0.5)
    return model, fresh, s


@pytest.mark.parametrize("name", ["gpt2", "bert", "t5"])
def test_a_plan_read_back_from_json_keeps_the_tie_on_stock_torch(name):
    model, fresh, s = _pruned(name)
    document = json.loads(s.plan.to_json())
    assert document["tied"] == {k: list(v) for k, v in s.tied.items()}
    again = Plan.from_json(s.plan.to_json())
    assert again.tied == s.tied
    replayed = _replay(again.to_snippet(), copy.deepcopy(fresh))
    torch.testing.assert_close(hf_models.outputs(replayed, name),
                               hf_models.outputs(model, name), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["gpt2", "t5"])
def test_a_plan_file_written_before_finds_the_ties_on_the_model(name):
    model, fresh, s = _pruned(name)
    document = json.loads(s.plan.to_json())
    del document["tied"]  # as plans were written before they carried it
    old = Plan.from_json(json.dumps(document))
    assert old.tied is None
    assert old == s.plan
    snippet = old.to_snippet()
    assert "TIED = tied_names(model)" in snippet
    replayed = _replay(snippet, copy.deepcopy(fresh))
    torch.testing.assert_close(hf_models.outputs(replayed, name),
                               hf_models.outputs(model, name), rtol=0, atol=0)
    tied_module = replayed.get_submodule(next(iter(s.tied.values()))[0].rpartition(".")[0])
    assert hasattr(tied_module, "weight_mask")  # the head is pruned too, not dense


def test_a_session_plan_with_no_ties_says_so_and_its_snippet_finds_none():
    s = Session(hf_models.llama())
    s.apply("model.layers.0.mlp.up_proj.weight", "l1_unstructured", amount=0.5)
    again = Plan.from_json(s.plan.to_json())
    assert again.tied == {}
    assert "tied_names" not in again.to_snippet()


@pytest.mark.parametrize(("tied", "says"), [
    ([], "tied must map"),
    ({"a.weight": []}, "tied must map"),
    ({"a.weight": ["b..weight"]}, "tied must be a tensor address"),
    ({"a.weight": ["b.weight"], "c.weight": ["b.weight"]}, "names 'b.weight' twice"),
])
def test_a_bad_tied_field_is_refused_naming_it(tied, says):
    text = json.dumps({"format": "prune-explorer-plan", "version": 2, "steps": [],
                       "tied": tied})
    with pytest.raises(InvalidPlanError, match=says) as info:
        Plan.from_json(text)
    assert info.value.field == "tied"
