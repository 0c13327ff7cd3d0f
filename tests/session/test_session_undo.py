"""Exact undo, reset, and commit (permanent, not undoable, says so)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as torch_prune

from helpers.session import (
    assert_exact_state,
    assert_same_pruning,
    convnet,
    exact_state,
    mlp,
    torch_apply,
    zoo,
)
from prune_explorer import prune
from prune_explorer.session import CommitResult, NotUndoableError, Session

SEQUENCE = [
    ("apply", ("features.2.weight", "ln_structured"), {"amount": 2, "n": 2, "dim": 0}),
    ("apply", ("features.2.weight", "random_unstructured"), {"amount": 0.2}),
    ("apply", ("classifier.bias", "l1_unstructured"), {"amount": 2}),
    ("apply_global", (["features.0.weight", "features.2.weight", "classifier.weight"],),
     {"amount": 0.4}),
    ("apply", ("features.2.weight", "identity"), {}),
    ("apply", ("features.2.weight", "custom_from_mask"),
     {"mask": torch.arange(216).reshape(6, 4, 3, 3) % 7 != 0}),
    ("apply", ("features.0.weight", "random_structured"), {"amount": 1, "dim": 1}),
]


def test_each_undo_restores_the_exact_state_before_the_step():
    model = convnet()
    s = Session(model)
    states = [exact_state(model)]
    for kind, args, kwargs in SEQUENCE:
        getattr(s, kind)(*args, **kwargs)
        states.append(exact_state(model))
    for expected in reversed(states[:-1]):
        s.undo()
        assert_exact_state(expected, exact_state(model))
    assert s.steps == ()


def test_undoing_the_first_step_brings_back_the_original_parameter_object_and_values():
    model = convnet()
    weight = model.features[2].weight
    values = weight.detach().clone()
    s = Session(model)
    s.apply("features.2.weight", "l1_unstructured", amount=0.5)
    s.apply("features.2.weight", "ln_structured", amount=1, n=1, dim=0)
    assert "weight" not in model.features[2]._parameters
    s.undo()
    s.undo()
    assert model.features[2].weight is weight
    assert torch.equal(weight, values)
    assert not hasattr(model.features[2], "weight_orig")
    assert not hasattr(model.features[2], "weight_mask")
    assert not torch_prune.is_pruned(model)
    assert list(model.features[2].state_dict()) == ["weight", "bias"]


def test_undo_restores_container_contents_and_order():
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=3)
    s.apply("0.weight", "ln_structured", amount=1, n=2, dim=0)
    (container,) = model[0]._forward_pre_hooks.values()
    children = tuple(container)
    s.apply("0.weight", "random_unstructured", amount=0.3)
    assert len(container) == 3
    s.undo()
    (hook,) = model[0]._forward_pre_hooks.values()
    assert hook is container
    assert tuple(hook) == children
    assert [type(m).__name__ for m in hook] == ["L1Unstructured", "LnStructured"]
    # the restored state keeps working: a new step behaves exactly as on a torch-only model
    oracle = mlp()
    torch_apply(oracle, s.steps[0])
    torch_apply(oracle, s.steps[1])
    torch_apply(oracle, s.apply("0.weight", "l1_unstructured", amount=0.5))
    assert_same_pruning(model, oracle)


def test_undo_then_forward_matches_the_forward_before_the_step():
    model = zoo()
    s = Session(model)
    x = torch.randn(3, 2, 4)
    before = model["lstm"](x)[0].detach()
    s.apply("lstm.weight_ih_l0", "l1_unstructured", amount=0.9)
    assert not torch.equal(model["lstm"](x)[0], before)
    s.undo()
    assert torch.equal(model["lstm"](x)[0].detach(), before)


def test_reset_returns_to_how_the_session_found_the_model_including_earlier_pruning():
    model = convnet()
    prune.l1_unstructured(model.features[0], "weight", amount=0.3)
    prune.ln_structured(model.features[0], "weight", amount=1, n=1, dim=0)
    found = exact_state(model)
    s = Session(model)
    events = []
    s.on_change(events.append)
    for kind, args, kwargs in SEQUENCE:
        getattr(s, kind)(*args, **kwargs)
    with pytest.warns(UserWarning, match=r"\['features.0.weight'\] stay pruned"):
        s.reset()
    assert_exact_state(found, exact_state(model))
    assert s.steps == ()
    assert [len(s.history(n)) for n in s.names] == [1] * len(s.names)
    assert events[-1].kind == "reset"
    with pytest.warns(UserWarning, match="done outside the session"):
        s.reset()  # nothing to do: no error, no event, but it says what stays
    assert events[-1].kind == "reset"
    assert len([e for e in events if e.kind == "reset"]) == 1


def test_undo_with_nothing_to_undo_says_so():
    s = Session(mlp())
    with pytest.raises(NotUndoableError, match=r"Session.undo: nothing to undo; no steps are "
                                               r"applied"):
        s.undo()


def test_commit_matches_torch_remove_and_is_not_undoable():
    model, oracle = mlp(), mlp()
    s = Session(model)
    torch_apply(oracle, s.apply("0.weight", "l1_unstructured", amount=0.5))
    torch_apply(oracle, s.apply("2.weight", "ln_structured", amount=1, n=2, dim=1))
    result = s.commit(["0.weight"])
    torch_prune.remove(oracle[0], "weight")
    assert_same_pruning(model, oracle)
    assert result.names == ("0.weight",)
    state = exact_state(model)
    with pytest.raises(NotUndoableError, match=r"Session.undo: the last action was commit of "
                                               r"'0.weight', which is not undoable"):
        s.undo()
    with pytest.raises(NotUndoableError, match=r"Session.reset: the model cannot go back to how "
                                               r"the session found it because commit"):
        s.reset()
    assert_exact_state(state, exact_state(model))
    # steps after a commit can still be undone, back to the commit
    s.apply("4.weight", "l1_unstructured", amount=2)
    s.undo()
    assert_exact_state(state, exact_state(model))
    assert [step.method for step in s.steps] == ["l1_unstructured", "ln_structured", "remove"]


def test_commit_default_commits_every_pruned_tensor_and_reports_memory():
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    s.apply("2.bias", "l1_unstructured", amount=1)
    expected_before = expected_after = 0
    for module, name in [(model[0], "weight"), (model[2], "bias")]:
        orig = getattr(module, name + "_orig")
        mask = getattr(module, name + "_mask")
        copy = getattr(module, name)
        expected_before += (orig.numel() * orig.element_size() + mask.numel() * mask.element_size()
                            + copy.numel() * copy.element_size())
        expected_after += copy.numel() * copy.element_size()
    result = s.commit()
    assert isinstance(result, CommitResult)
    assert result.names == ("0.weight", "2.bias")
    assert (result.bytes_before, result.bytes_after) == (expected_before, expected_after)
    assert result.freed == (30 + 30 + 4 + 4) * 4  # orig + mask of each, float32
    assert not torch_prune.is_pruned(model)
    assert s.memory_report()["name"].tolist() == ["TOTAL"]
    assert s.commits == (result,)


def test_commit_checks_all_names_before_committing_any():
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    state = exact_state(model)
    with pytest.raises(ValueError, match=r"Session.commit: target '2.weight' is not pruned, so "
                                         r"there is no pruning to make permanent"):
        s.commit(["0.weight", "2.weight"])
    with pytest.raises(ValueError, match=r"Session.commit: target 'nope' is not a prunable tensor"):
        s.commit(["0.weight", "nope"])
    with pytest.raises(ValueError, match=r"Session.commit: names lists '0.weight' twice"):
        s.commit(["0.weight", "0.weight"])
    assert_exact_state(state, exact_state(model))
    assert len(s.steps) == 1
    s.undo()  # still undoable: nothing was committed


def test_pruning_again_after_commit_matches_torch():
    model, oracle = mlp(), mlp()
    s = Session(model)
    torch_apply(oracle, s.apply("0.weight", "l1_unstructured", amount=0.5))
    s.commit("0.weight")
    torch_prune.remove(oracle[0], "weight")
    torch_apply(oracle, s.apply("0.weight", "random_unstructured", amount=0.5))
    assert_same_pruning(model, oracle)
    history = s.history("0.weight")
    assert [e.method for e in history] == ["initial", "l1_unstructured", "remove",
                                           "random_unstructured"]
    assert torch.equal(history.mask(2), history.mask(1))  # remove keeps the committed mask


def test_failure_inside_torch_rolls_back(monkeypatch):
    model = convnet()
    s = Session(model)
    s.apply("features.0.weight", "l1_unstructured", amount=0.5)
    state = exact_state(model)

    real = prune.ln_structured

    def broken(module, name, **kwargs):
        real(module, name, **kwargs)  # changes the module, then fails
        raise RuntimeError("boom")

    monkeypatch.setattr(prune, "ln_structured", broken)
    with pytest.raises(RuntimeError, match="boom"):
        s.apply("features.0.weight", "ln_structured", amount=1, n=1, dim=0)
    assert_exact_state(state, exact_state(model))
    assert len(s.steps) == 1


def test_model_pruned_with_stock_torch_is_understood_and_reset_exactly():
    model, oracle = convnet(), convnet()
    for m in (model, oracle):
        torch_prune.l1_unstructured(m.features[0], "weight", amount=0.3)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            torch_prune.random_unstructured(m.classifier, "bias", amount=2)
    found = exact_state(model)
    s = Session(model)
    assert s.methods("features.0.weight") == ("l1_unstructured",)
    torch_apply(oracle, s.apply("features.0.weight", "ln_structured", amount=1, n=2, dim=0))
    torch_apply(oracle, s.apply_global(["features.0.weight", "classifier.bias"], amount=0.5))
    assert_same_pruning(model, oracle)
    with pytest.warns(UserWarning, match="'features.0.weight', 'classifier.bias'"):
        s.reset()
    assert_exact_state(found, exact_state(model))


def test_commit_with_nothing_to_commit_changes_nothing():
    s = Session(mlp())
    events = []
    s.on_change(events.append)
    result = s.commit()
    assert (result.names, result.freed) == ((), 0)
    assert events == []
    assert s.commits == ()
    with pytest.raises(ValueError, match=r"Session.commit: names must be a tensor address, a list "
                                         r"of them or None; got 3"):
        s.commit(3)
