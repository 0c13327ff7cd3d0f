"""Plans -- string addresses, strict JSON round trip, replay on a fresh model."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from _session_helpers import assert_exact_state, convnet, exact_state, masks
from prune_explorer.session import (
    InvalidPlanError,
    InvalidStepError,
    NotUndoableError,
    Plan,
    Session,
    Step,
)

CUSTOM = torch.arange(30).reshape(5, 6) % 4 != 0


def _session_with_every_method():
    s = Session(convnet(), seed=21)
    s.apply("features.0.weight", "identity")
    s.apply("features.0.weight", "random_unstructured", amount=0.2)
    s.apply("features.2.weight", "l1_unstructured", amount=17)
    s.apply("features.2.weight", "random_structured", amount=1, dim=0)
    s.apply("features.0.weight", "ln_structured", amount=0.25, n=float("inf"), dim=1)
    s.apply("classifier.weight", "custom_from_mask", mask=CUSTOM)
    s.apply_global(["features.0.weight", "features.2.weight", "classifier.weight"],
                   "random_unstructured", amount=0.3)
    s.commit(["classifier.weight"])
    s.apply_global(["features.2.weight", "classifier.weight"], amount=0.1)
    s.apply("features.2.bias", "l1_unstructured", amount=0.5)
    return s


def test_json_round_trip_is_exact_and_readable():
    plan = _session_with_every_method().plan
    text = plan.to_json()
    again = Plan.from_json(text)
    assert again == plan
    assert again.to_json() == text
    data = json.loads(text)
    assert data["format"] == "prune-explorer-plan"
    assert data["version"] == 1
    # addresses and numbers only: every leaf is a str, int, float or list of those
    def leaves(value):
        if isinstance(value, dict):
            for v in value.values():
                yield from leaves(v)
        elif isinstance(value, list):
            for v in value:
                yield from leaves(v)
        else:
            yield value
    assert all(isinstance(v, (str, int, float)) for v in leaves(data))


def test_json_layout_of_each_kind_of_step():
    plan = Plan([
        Step("ln_structured", "f.weight", amount=0.25, n=float("inf"), dim=0),
        Step("random_unstructured", "g.weight", amount=3, seed=9),
        Step("global_unstructured", ["a.weight", "b.weight"], pruning_method="l1_unstructured",
             amount=0.5),
        Step("custom_from_mask", "c.bias", mask=torch.tensor([1, 0, 1, 1, 1, 1, 1, 1, 0])),
        Step("remove", "c.bias"),
    ])
    assert plan.to_dict() == {
        "format": "prune-explorer-plan",
        "version": 1,
        "steps": [
            {"method": "ln_structured", "target": "f.weight", "amount": 0.25, "n": "inf",
             "dim": 0},
            {"method": "random_unstructured", "target": "g.weight", "amount": 3, "seed": 9},
            {"method": "global_unstructured", "targets": ["a.weight", "b.weight"],
             "pruning_method": "l1_unstructured", "amount": 0.5},
            # bits 10111111 0(0000000 padding) -> 0xBF 0x00, base64 "vwA="
            {"method": "custom_from_mask", "target": "c.bias",
             "mask": {"shape": [9], "bits": "vwA="}},
            {"method": "remove", "target": "c.bias"},
        ],
    }
    assert Plan.from_json(plan.to_json()) == plan


def test_applying_a_plan_to_an_equal_fresh_model_gives_identical_masks():
    s = _session_with_every_method()
    fresh = convnet()
    replay = s.plan.apply(fresh)
    assert replay.steps == s.steps
    expected, got = masks(s.model), masks(fresh)
    assert list(got) == list(expected)
    for name in expected:
        assert torch.equal(got[name], expected[name]), name
    assert torch.equal(fresh.classifier.weight, s.model.classifier.weight)  # committed values
    # and through JSON
    other = convnet()
    Plan.from_json(s.plan.to_json()).apply(other)
    for name, mask in masks(other).items():
        assert torch.equal(mask, expected[name]), name


def test_save_and_load(tmp_path):
    plan = _session_with_every_method().plan
    path = tmp_path / "plan.json"
    plan.save(path)
    assert Plan.load(path) == plan


# -- strict validation: every bad document names the step and the field ----------------------
VALID = {
    "format": "prune-explorer-plan",
    "version": 1,
    "steps": [
        {"method": "l1_unstructured", "target": "classifier.weight", "amount": 0.5},
        {"method": "ln_structured", "target": "features.0.weight", "amount": 1, "n": 2,
         "dim": 0},
        {"method": "random_unstructured", "target": "features.2.weight", "amount": 0.1,
         "seed": 3},
        {"method": "global_unstructured", "targets": ["features.0.weight", "classifier.weight"],
         "pruning_method": "l1_unstructured", "amount": 0.2},
        {"method": "custom_from_mask", "target": "classifier.bias",
         "mask": {"shape": [5], "bits": "sA=="}},
    ],
}


def _mutated(index, change):
    doc = copy.deepcopy(VALID)
    change(doc["steps"][index])
    return json.dumps(doc)


def _set(key, value):
    return lambda step: step.__setitem__(key, value)


def _del(key):
    return lambda step: step.pop(key)


STEP_ERRORS = [
    (0, _set("method", "l2_unstructured"), "method", r"method must be one of 'identity', "
     r".*; got 'l2_unstructured'"),
    (0, _set("method", 3), "method", r"method must be one of .*; got 3"),
    (0, _set("amount", 1.5), "amount", r"amount must be a float in \[0, 1\] or an int >= 0; "
     r"got 1.5"),
    (0, _set("amount", -2), "amount", r"amount must be .*; got -2"),
    (0, _set("amount", "0.5"), "amount", r"amount must be .*; got '0.5'"),
    (0, _set("amount", True), "amount", r"amount must be .*; got True"),
    (0, _set("amount", None), "amount", r"amount must be .*; got None"),
    (0, _set("amount", "__import__('os').system('true')"), "amount", r"amount must be"),
    (1, _set("n", "l2"), "n", r"n must be a number \(int, float, inf or -inf, not nan\), 'fro' "
     r"or 'nuc'; got 'l2'"),
    (1, _set("n", [2]), "n", r"n must be .*; got \[2\]"),
    (1, _set("dim", 0.0), "dim", r"dim must be an int; got 0.0"),
    (1, _set("dim", "0"), "dim", r"dim must be an int; got '0'"),
    (0, _del("amount"), "amount", r"missing field 'amount'; l1_unstructured needs: method, "
     r"target, amount"),
    (1, _del("target"), "target", r"missing field 'target'"),
    (2, _del("seed"), "seed", r"missing field 'seed'; random_unstructured is random and "
     r"records its seed"),
    (3, _del("pruning_method"), "pruning_method", r"missing field 'pruning_method'"),
    (0, _set("target", 5), "target", r"target must be a tensor address .*; got 5"),
    (0, _set("target", "a..b"), "target", r"target must be a tensor address .*; got 'a..b'"),
    (3, _set("targets", "features.0.weight"), "targets", r"targets must be a list of tensor "
     r"addresses; got 'features.0.weight'"),
    (3, _set("targets", []), "targets", r"targets must be a non-empty list"),
    (3, _set("targets", ["a.w", "a.w"]), "targets", r"targets must not repeat a tensor; 'a.w' "
     r"appears twice"),
    (3, _set("pruning_method", "ln_structured"), "pruning_method", r"pruning_method must be one "
     r"of 'l1_unstructured', 'random_unstructured'; got 'ln_structured'"),
    (0, _set("foo", 1), "foo", r"unexpected field 'foo' for l1_unstructured; its fields are: "
     r"method, target, amount"),
    (0, _set("targets", ["x.w"]), "targets", r"unexpected field 'targets'"),
    (0, _set("seed", 1), "seed", r"seed must be None for l1_unstructured"),
    (0, _set("seed", None), "seed", r"unexpected field 'seed' for l1_unstructured"),
    (2, _set("seed", -1), "seed", r"seed must be an int in \[0, 2\*\*63\); got -1"),
    (2, _set("seed", 1.0), "seed", r"seed must be an int in \[0, 2\*\*63\); got 1.0"),
    (4, _set("mask", [1, 0]), "mask", r"mask must be an object"),
    (4, _set("mask", {"shape": [5], "bits": "***"}), "mask", r"mask.bits is not a valid "
     r"packed mask"),
    (4, _set("mask", {"shape": [5], "bits": "sAA="}), "mask",
     r"mask.bits is not a valid packed mask: a mask of shape \(5,\) needs 1 bytes of bits; "
     r"got 2"),
    (4, _set("mask", {"shape": [5], "bits": "sQ=="}), "mask",
     r"mask.bits is not a valid packed mask: the 3 padding bits after the last entry must be 0"),
    (4, _set("mask", {"shape": ["5"], "bits": "sA=="}), "mask", r"mask.shape must be a list"),
]


@pytest.mark.parametrize(("index", "change", "field", "message"), STEP_ERRORS,
                         ids=[f"{i}-{f}-{n}" for n, (i, _, f, _) in enumerate(STEP_ERRORS)])
def test_bad_step_names_the_step_and_the_field(index, change, field, message):
    with pytest.raises(InvalidStepError, match=rf"^Plan.from_json: steps\[{index}\]: {message}") \
            as info:
        Plan.from_json(_mutated(index, change))
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


def test_the_valid_document_itself_loads():
    plan = Plan.from_json(json.dumps(VALID))
    assert len(plan) == 5
    assert plan[4].settings["mask"].unpack().tolist() == [True, False, True, True, False]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", r"Plan.from_json: not valid JSON"),
        ("[]", r"Plan.from_json: a plan must be a JSON object; got list"),
        ('{"format": "prune-explorer-plan", "version": 1}', r"missing field 'steps'"),
        ('{"format": "x", "version": 1, "steps": []}', r"format must be 'prune-explorer-plan'"),
        ('{"format": "prune-explorer-plan", "version": 2, "steps": []}', r"version must be 1"),
        ('{"format": "prune-explorer-plan", "version": 1, "steps": {}}', r"steps must be a list"),
        ('{"format": "prune-explorer-plan", "version": 1, "steps": [], "x": 1}',
         r"unexpected field 'x'"),
        ('{"format": "prune-explorer-plan", "version": 1, "version": 1, "steps": []}',
         r"field 'version' appears twice"),
        ('{"format": "prune-explorer-plan", "version": 1, "steps": [{"method": "l1_unstructured",'
         ' "target": "a.b", "amount": NaN}]}', r"NaN is not valid JSON"),
    ],
)
def test_bad_documents_are_rejected(text, message):
    with pytest.raises(InvalidPlanError, match=message):
        Plan.from_json(text)


def test_a_step_that_is_not_an_object_names_its_index():
    with pytest.raises(InvalidStepError, match=r"Plan.from_json: steps\[0\]: a step must be a "
                                               r"JSON object; got str"):
        Plan.from_json('{"format": "prune-explorer-plan", "version": 1, "steps": ["x"]}')


# -- checks against the model happen before anything changes ----------------------------------
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (Step("l1_unstructured", "classifer.weight", amount=0.5),
         r"Plan.apply: steps\[2\]: target 'classifer.weight' is not a prunable tensor of this "
         r"model; did you mean 'classifier.weight'"),
        (Step("ln_structured", "features.0.weight", amount=1, n=1, dim=4),
         r"Plan.apply: steps\[2\]: dim must be in \[-4, 3\] for 'features.0.weight' of shape "
         r"\(4, 3, 3, 3\); got 4"),
        (Step("l1_unstructured", "classifier.bias", amount=6),
         r"Plan.apply: steps\[2\]: amount 6 is more than the 5 entries of 'classifier.bias' "
         r"still unpruned"),
        (Step("custom_from_mask", "classifier.bias", mask=torch.ones(4)),
         r"Plan.apply: steps\[2\]: mask must have the shape of 'classifier.bias', \(5,\); got "
         r"shape \(4,\)"),
        (Step("remove", "features.2.weight"),
         r"Plan.apply: steps\[2\]: target 'features.2.weight' is not pruned"),
    ],
)
def test_plan_apply_rolls_back_everything_on_a_bad_step(bad, message):
    plan = Plan([
        Step("l1_unstructured", "features.0.weight", amount=0.5),
        Step("remove", "features.0.weight"),
        bad,
    ])
    model = convnet()
    state = exact_state(model)
    with pytest.raises(InvalidStepError, match=message):
        plan.apply(model)
    assert_exact_state(state, exact_state(model))
    with pytest.raises(InvalidStepError, match=message):
        plan.validate(model)
    assert_exact_state(state, exact_state(model))


def test_validate_leaves_the_model_unchanged_for_a_good_plan():
    model = convnet()
    state = exact_state(model)
    Plan.from_json(json.dumps(VALID)).validate(model)
    assert_exact_state(state, exact_state(model))


def test_plan_holds_only_steps():
    with pytest.raises(TypeError, match=r"Plan.append: step must be a Step; got dict"):
        Plan([{"method": "identity", "target": "a.b"}])


def test_steps_after_the_last_remove_of_an_applied_plan_stay_undoable():
    plan = Plan([
        Step("l1_unstructured", "classifier.weight", amount=0.5),
        Step("remove", "classifier.weight"),
        Step("l1_unstructured", "features.0.weight", amount=0.5),
    ])
    model = convnet()
    s = plan.apply(model)
    assert s.undo() == plan[2]
    assert not hasattr(model.features[0], "weight_mask")
    with pytest.raises(NotUndoableError, match=r"commit of 'classifier.weight'"):
        s.undo()
