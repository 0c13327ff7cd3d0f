"""``Session.global_blocker`` and ``Session.plan_blocker`` say exactly what ``apply_global`` and
``apply_all`` would refuse with, before anything runs, and change nothing."""

from __future__ import annotations

import re

import pytest
import torch

from helpers.widgets import assert_same_state, mlp, state
from prune_explorer.session import InvalidStepError, Plan, Session, Step


@pytest.mark.parametrize(("targets", "amount"), [
    ([], 0.5),
    (["0.weight", "9.weight"], 0.5),
    (["0.weight", "2.weight"], 1.5),
    (["0.weight", "2.weight"], 12 * 8 + 8 * 4 + 1),
])
def test_global_blocker_is_the_refusal_of_apply_global(targets, amount):
    s = Session(mlp())
    before = state(s.model)
    why = s.global_blocker(targets, amount=amount)
    assert why is not None
    assert_same_state(s.model, before)
    with pytest.raises(InvalidStepError, match="^" + re.escape(f"Session.apply_global: {why}")
                       + "$"):
        s.apply_global(targets, amount=amount)
    assert s.steps == ()


def test_global_blocker_is_none_when_apply_global_succeeds():
    s = Session(mlp())
    targets, amount = ["0.weight", "2.weight"], 12 * 8 + 8 * 4
    assert s.global_blocker(targets, amount=amount) is None
    s.apply_global(targets, amount=amount)
    assert s.global_blocker(targets, amount=1) is not None  # nothing left to prune
    assert s.global_blocker(targets, amount=0.5) is None


@pytest.mark.parametrize("steps", [
    [Step("remove", "0.weight")],
    [Step("l1_unstructured", "0.weight", amount=0.5), Step("l1_unstructured", "x", amount=1)],
    [Step("ln_structured", "2.weight", amount=5, n=1, dim=0)],
    [Step("l1_unstructured", "0.weight", amount=0.5),
     Step("ln_structured", "2.weight", amount=1, n=2, dim=5)],
])
def test_plan_blocker_is_the_refusal_of_apply_all(steps):
    s = Session(mlp())
    before = state(s.model)
    why = s.plan_blocker(Plan(steps))
    assert why is not None
    assert why.startswith("steps[")
    assert_same_state(s.model, before)
    with pytest.raises(InvalidStepError, match="^" + re.escape(f"Session.apply_all: {why}")
                       + "$"):
        s.apply_all(Plan(steps))
    assert s.steps == ()
    assert_same_state(s.model, before)


def test_plan_blocker_runs_a_plan_that_acts_twice_on_a_tensor_and_leaves_no_trace():
    s = Session(mlp())
    events = []
    s.on_change(events.append)
    before = state(s.model)
    # each fits what is unpruned now; the second does not fit what the first leaves
    steps = [Step("l1_unstructured", "2.weight", amount=20),
             Step("l1_unstructured", "2.weight", amount=20)]
    why = s.plan_blocker(steps)
    assert why is not None
    assert why.startswith("steps[1]: amount must be at most"), why
    with pytest.raises(InvalidStepError) as refused:
        s.apply_all(steps)
    assert str(refused.value) == f"Session.apply_all: {why}"  # the refusal, word for word
    # a commit after a prune of the same tensor, and a second step that fits, pass
    plan = [Step("l1_unstructured", "0.weight", amount=0.5), Step("remove", "0.weight")]
    assert s.plan_blocker(plan) is None
    assert s.plan_blocker([Step("l1_unstructured", "2.weight", amount=20),
                           Step("l1_unstructured", "2.weight", amount=2)]) is None
    # the checks ran the steps in a rolled-back transaction: no trace, no event
    assert s.steps == ()
    assert not s.commits
    assert events == []
    assert_same_state(s.model, before)
    assert not any(m._forward_pre_hooks for m in s.model.modules())
    s.apply_all(plan)
    assert s.commits


def test_plan_blocker_sees_a_model_changed_outside_the_session():
    s = Session(mlp())
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    with torch.no_grad():
        s.model[0].weight_mask.fill_(1.0)  # written behind the session's back
    step = Step("l1_unstructured", "0.weight", amount=0.1)
    why = s.plan_blocker([step])
    assert why is not None
    assert "changed outside the session" in why
    with pytest.raises(RuntimeError, match="^" + re.escape(f"Session.apply_all: {why}") + "$"):
        s.apply_all([step])
    assert s.plan_blocker([Step("l1_unstructured", "2.weight", amount=0.1)]) is None
