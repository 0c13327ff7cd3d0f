"""A tie across tensor names: module ``embed``'s ``weight`` *is* module ``head``'s ``embedding``.

A pruning hook reads ``<its name>_orig`` and ``<its name>_mask`` from its module, so the alias
gets a copy of the listed hook acting on its own name, holding the very same ``_orig`` parameter
and ``_mask`` buffer. Checked through apply (either name, either name listed), commit, undo,
reset, a failed transaction, ``load_pruned_state_dict``, ``plain_model`` and the snippet on stock
torch. The oracle is the unpruned model with the shared parameter multiplied by the mask.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from helpers.session_models import tied_under_two_names
from helpers.snippet_replay import replay_on_stock_torch
from prune_explorer import Session
from prune_explorer.session import Plan, Step
from prune_explorer.session.errors import InvalidStepError
from prune_explorer.session.model import aliases as aliases_module
from prune_explorer.session.model.state_dict import load_pruned_state_dict

IDS = torch.arange(15).reshape(3, 5) * 7 % 40
NAMES = {False: ("embed.weight", "head.embedding"), True: ("head.embedding", "embed.weight")}


def outputs(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS)


def split(address: str) -> tuple[str, str]:
    module, _, name = address.rpartition(".")
    return module, name


def assert_tied(model: nn.Module, listed: str, alias: str) -> None:
    """The alias holds the very objects the listed name holds, under its own name."""
    (m, name), (a, other) = split(listed), split(alias)
    module, holder = model.get_submodule(m), model.get_submodule(a)
    if hasattr(module, name + "_mask"):
        assert holder._parameters[other + "_orig"] is module._parameters[name + "_orig"]
        assert holder._buffers[other + "_mask"] is module._buffers[name + "_mask"]
        assert other not in holder._parameters
        hooks = [h for h in holder._forward_pre_hooks.values()
                 if isinstance(h, torch_prune.BasePruningMethod)]
        assert [h._tensor_name for h in hooks] == [other]  # one hook, on its own name
    else:
        assert holder._parameters[other] is module._parameters[name]
        assert other + "_orig" not in holder._parameters
        assert other + "_mask" not in holder._buffers
        assert not holder._forward_pre_hooks


def oracle(model: nn.Module, listed: str, mask: torch.Tensor) -> torch.Tensor:
    twin = copy.deepcopy(model)  # keeps the tie
    with torch.no_grad():
        twin.get_parameter(listed).mul_(mask)
    return outputs(twin)


@pytest.mark.parametrize("head_first", [False, True])
def test_the_tie_is_one_tensor_listed_under_its_first_name(head_first):
    listed, alias = NAMES[head_first]
    s = Session(tied_under_two_names(head_first=head_first))
    assert s.tied == {listed: (alias,)}
    assert listed in s.names
    assert alias not in s.names
    assert s.info(alias) == s.info(listed)


@pytest.mark.parametrize("head_first", [False, True])
@pytest.mark.parametrize("through", ["listed", "alias"])
@pytest.mark.parametrize(("method", "settings"), [
    ("l1_unstructured", {"amount": 0.4}),
    ("random_unstructured", {"amount": 0.3, "seed": 5}),
    ("ln_structured", {"amount": 0.25, "n": 2, "dim": 0}),
])
def test_pruning_through_either_name_prunes_both_and_commit_keeps_outputs(
        head_first, through, method, settings):
    listed, alias = NAMES[head_first]
    model = tied_under_two_names(head_first=head_first)
    unpruned = copy.deepcopy(model)
    s = Session(model)
    step = s.apply(listed if through == "listed" else alias, method, **settings)
    assert step.target == listed
    assert_tied(model, listed, alias)
    mask = model.get_submodule(split(listed)[0]).get_buffer(split(listed)[1] + "_mask")
    assert 0 < int((mask == 0).sum()) < mask.numel()
    pruned = outputs(model)
    assert torch.equal(pruned, oracle(unpruned, listed, mask))  # both names see the mask
    state = model.state_dict()
    for suffix in ("_orig", "_mask"):  # one tensor under both names in the state_dict
        assert state[alias + suffix].data_ptr() == state[listed + suffix].data_ptr()
    assert s.report().set_index("name").loc[listed, "aliases"] == (alias,)
    s.commit(alias if through == "alias" else listed)
    assert torch.equal(outputs(model), pruned)  # commit never changes the model
    assert_tied(model, listed, alias)
    assert model.get_parameter(alias) is model.get_parameter(listed)


@pytest.mark.parametrize("head_first", [False, True])
def test_undo_reset_and_a_failed_transaction_give_the_tie_back_exactly(head_first):
    listed, alias = NAMES[head_first]
    model = tied_under_two_names(head_first=head_first)
    param = model.get_parameter(listed)
    keys = list(model.state_dict())
    fresh = outputs(model)
    s = Session(model)
    s.apply(alias, "l1_unstructured", amount=0.2)
    after_one = outputs(model)
    s.apply(listed, "ln_structured", amount=0.25, n=1, dim=0)  # a container now
    assert_tied(model, listed, alias)
    assert not torch.equal(outputs(model), after_one)
    s.undo()
    assert_tied(model, listed, alias)
    assert torch.equal(outputs(model), after_one)

    def prune_then_fail() -> None:
        with s.transaction():
            s.apply(listed, "l1_unstructured", amount=0.5)
            raise KeyboardInterrupt  # as a user's interrupt would

    with pytest.raises(KeyboardInterrupt):
        prune_then_fail()
    assert_tied(model, listed, alias)
    assert torch.equal(outputs(model), after_one)
    s.reset()
    assert_tied(model, listed, alias)
    assert model.get_parameter(alias) is param
    assert model.get_parameter(listed) is param
    assert list(model.state_dict()) == keys  # key order too
    assert torch.equal(outputs(model), fresh)


def test_a_pruned_checkpoint_loads_back_tied_and_plain_model_keeps_the_tie():
    listed, alias = NAMES[False]
    model = tied_under_two_names()
    s = Session(model)
    s.apply(alias, "l1_unstructured", amount=0.4)
    s.apply("mid.weight", "l1_unstructured", amount=0.3)
    state = model.state_dict()
    assert {alias + "_orig", alias + "_mask", listed + "_orig", listed + "_mask"} <= set(state)
    fresh = tied_under_two_names(seed=1)
    load_pruned_state_dict(fresh, state)
    assert_tied(fresh, listed, alias)
    assert torch.equal(outputs(fresh), outputs(model))
    assert Session(fresh).tied == {listed: (alias,)}
    plain = s.plain_model()
    assert plain.get_parameter(alias) is plain.get_parameter(listed)
    assert not plain.head._forward_pre_hooks
    assert torch.equal(outputs(plain), outputs(model))


def test_a_checkpoint_whose_names_disagree_is_refused():
    listed, alias = NAMES[False]
    model = tied_under_two_names()
    Session(model).apply(listed, "l1_unstructured", amount=0.4)
    state = dict(model.state_dict())
    state[alias + "_mask"] = torch.ones_like(state[alias + "_mask"])
    with pytest.raises(ValueError, match=r"head\.embedding_mask differs from embed\.weight_mask"):
        load_pruned_state_dict(tied_under_two_names(), state)


def test_the_snippet_keeps_the_tie_on_stock_torch(tmp_path):
    listed, alias = NAMES[False]
    model = tied_under_two_names()
    s = Session(model)
    s.apply(alias, "random_unstructured", amount=0.3)
    s.apply_global([listed, "mid.weight"], amount=0.2)
    snippet = s.plan.to_snippet()
    assert f'share_pruning(model, "{listed}", ["{alias}"])' in snippet
    fresh = tied_under_two_names()
    exec(snippet, {"model": fresh})  # stock torch.nn.utils.prune only
    assert_tied(fresh, listed, alias)
    assert torch.equal(outputs(fresh), outputs(model))
    s.commit()
    committed = tied_under_two_names()
    exec(s.plan.to_snippet(), {"model": committed})  # ends with remove steps
    assert committed.get_parameter(alias) is committed.get_parameter(listed)
    assert torch.equal(outputs(committed), outputs(model))
    replay = replay_on_stock_torch(tmp_path, {"tied": (tied_under_two_names(),
                                                       s.plan.to_snippet())})
    assert replay.errors == {}
    got, want = replay.results["tied"], model.state_dict()
    assert list(got) == list(want)
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_a_plan_naming_the_alias_applies_to_the_listed_tensor():
    listed, alias = NAMES[True]
    plan = Plan.from_json(Plan([Step("l1_unstructured", alias, amount=0.25)]).to_json())
    model = tied_under_two_names(head_first=True)
    s = Session(model)
    s.apply_all(plan)
    assert s.steps == (Step("l1_unstructured", listed, amount=0.25),)
    assert_tied(model, listed, alias)


def test_a_sharded_tie_across_names_is_refused(monkeypatch):
    # A sharded parameter's pruned copy is computed on demand per module and name; a copied
    # hook under another name does not set that up, so such a tie stays refused.
    model = tied_under_two_names()
    s = Session(model)
    monkeypatch.setattr(aliases_module, "is_dtensor", lambda t: True)
    with pytest.raises(InvalidStepError, match=r"sharded \(DTensor\) parameter tied to "
                                               r"'head\.embedding'.*another name"):
        s.apply("embed.weight", "l1_unstructured", amount=0.5)
    assert s.steps == ()
    assert_tied(model, "embed.weight", "head.embedding")
