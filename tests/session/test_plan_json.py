"""Plans -- string addresses, strict JSON round trip, replay on a fresh model."""

from __future__ import annotations

import copy
import json
import re

import pytest
import torch

from helpers.session import assert_exact_state, convnet, exact_state, masks
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
    assert data["version"] == 2
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
        "version": 2,
        "steps": [
            {"method": "ln_structured", "target": "f.weight", "amount": {"fraction": 0.25},
             "n": "inf", "dim": 0},
            {"method": "random_unstructured", "target": "g.weight", "amount": {"count": 3},
             "seed": 9},
            {"method": "global_unstructured", "targets": ["a.weight", "b.weight"],
             "pruning_method": "l1_unstructured", "amount": {"fraction": 0.5}},
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
    (1, _set("n", "l2"), "n", r"n must be a number \(int, float, inf or -inf, not nan, within "
     r"the range of a float\), 'fro' or 'nuc'; got 'l2'"),
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
        ('{"format": "prune-explorer-plan", "version": 3, "steps": []}',
         r"version must be the integer 1 or 2; got 3"),
        ('{"format": "prune-explorer-plan", "version": 1, "steps": {}}', r"steps must be a list"),
        ('{"format": "prune-explorer-plan", "version": 1, "steps": [], "x": 1}',
         r"unexpected field 'x'"),
        ('{"format": "prune-explorer-plan", "version": 1, "version": 1, "steps": []}',
         r"field 'version' appears twice"),
        ('{"format": "prune-explorer-plan", "version": 1, "steps": [{"method": "l1_unstructured",'
         ' "target": "a.b", "amount": NaN}]}', r"steps\[0\]: amount must be a JSON number; got "
         r"NaN, which is not valid JSON"),
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
         r"Plan.apply: steps\[2\]: amount must be at most the number of entries of "
         r"'classifier.bias' still unpruned \(5\); got 6"),
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


# -- no raw Python error from a plan document, and a file format that keeps
# -- the meaning of an amount --------------------------------------------------------------------
def _v1_step(**fields):
    step = {"method": "l1_unstructured", "target": "classifier.weight", "amount": 0.5}
    step.update(fields)
    return ('{"format": "prune-explorer-plan", "version": 1, "steps": [' + json.dumps(VALID[
        "steps"][1]) + ", " + json.dumps(step)[:-1] + "}]}")


def _with_raw(field, raw):
    # A document whose steps[1] has `field` written as the raw JSON text `raw`.
    text = _v1_step(**{field: "RAW"})
    return text.replace('"RAW"', raw)


RAW_ERRORS = [
    ("deep-lists", "[" * 200_000, None, None, r"nested too deeply to be read"),
    ("deep-objects", '{"a": ' * 200_000, None, "a", r"nested too deeply to be read"),
    ("deep-in-step", _with_raw("amount", "[" * 40 + "]" * 40), 1, "amount",
     r"steps\[1\]: the document is nested more than 16 levels deep"),
    ("not-utf8", b'{"format": "prune-explorer-plan", "\xff": 1}', None, None,
     r"the document is not UTF-8 text: byte 35 \(0xff\) is not valid UTF-8"),
    ("utf16", '{"format": "prune-explorer-plan"}'.encode("utf-16"), None, None,
     r"not UTF-8 text: byte 0 \(0xff\)"),
    ("huge-int", _with_raw("amount", "7" * 5000), 1, "amount",
     r"steps\[1\]: amount must be an integer of at most 4300 digits; got an integer of 5000 "
     r"digits"),
    ("huge-seed", _with_raw("seed", "1" * 4301), 1, "seed", r"steps\[1\]: seed must be an "
     r"integer of at most 4300 digits"),
    ("1e400-n", _with_raw("n", "1e400").replace("l1_unstructured", "ln_structured"), 1, "n",
     r"steps\[1\]: n must be a finite number; got 1e400, which is beyond the range of a float"),
    ("-1e400-amount", _with_raw("amount", "-1e400"), 1, "amount",
     r"steps\[1\]: amount must be a finite number; got -1e400"),
    ("infinity", _with_raw("amount", "Infinity"), 1, "amount",
     r"steps\[1\]: amount must be a JSON number; got Infinity, which is not valid JSON"),
    ("huge-version", '{"format": "prune-explorer-plan", "version": 1e999, "steps": []}', None,
     "version", r"^Plan.from_json: version must be a finite number; got 1e999"),
]


@pytest.mark.parametrize(("text", "step", "field", "message"), [r[1:] for r in RAW_ERRORS],
                         ids=[r[0] for r in RAW_ERRORS])
def test_raw_python_errors_become_invalid_plan_errors(text, step, field, message):
    with pytest.raises(InvalidPlanError, match=message) as info:
        Plan.from_json(text)
    assert str(info.value).startswith("Plan.from_json: ")
    assert (info.value.step, info.value.field) == (step, field)
    assert info.value.__suppress_context__ or info.value.__context__ is None  # no raw error


def test_a_step_error_is_an_invalid_plan_error_naming_step_and_field():
    with pytest.raises(InvalidPlanError) as info:
        Plan.from_json(_mutated(2, _set("seed", -1)))
    assert isinstance(info.value, InvalidStepError)
    assert (info.value.step, info.value.field) == (2, "seed")


def test_bytes_str_and_a_byte_order_mark_are_read_alike(tmp_path):
    text = json.dumps(VALID)
    plan = Plan.from_json(text)
    assert Plan.from_json(text.encode()) == plan
    assert Plan.from_json(bytearray(text.encode())) == plan
    assert Plan.from_json(b"\xef\xbb\xbf" + text.encode()) == plan
    assert Plan.from_json("\ufeff" + text) == plan
    path = tmp_path / "windows.json"
    path.write_bytes(b"\xef\xbb\xbf" + plan.to_json().replace("\n", "\r\n").encode())
    assert Plan.load(path) == plan
    with pytest.raises(InvalidPlanError, match=r"text must be str or bytes; got int"):
        Plan.from_json(3)


@pytest.mark.parametrize("version", ["1.0", "true", '"1"', "null", "0", "3"])
def test_version_must_be_the_integer_1_or_2(version):
    text = '{"format": "prune-explorer-plan", "version": ' + version + ', "steps": []}'
    with pytest.raises(InvalidPlanError, match=r"version must be the integer 1 or 2; got ") as i:
        Plan.from_json(text)
    assert i.value.field == "version"


@pytest.mark.parametrize(("text", "got"), [
    ('{"steps": []}', "no 'format' field"),
    ('{"format": "prune-explorer-plans", "steps": []}', "'prune-explorer-plans'"),
    ('{"format": 1, "version": 1, "steps": []}', "1"),
    ('{"weights": [1, 2], "x": 3}', "no 'format' field"),
])
def test_a_document_of_another_kind_is_not_a_plan(text, got):
    with pytest.raises(InvalidPlanError, match=r"^Plan.from_json: not a prune-explorer plan: "
                                               r"format must be 'prune-explorer-plan'; got "
                       + re.escape(got) + "$"):
        Plan.from_json(text)


def _drop_point_zero(value):
    # What JSON.stringify and many other writers do: 1.0 is written 1.
    if isinstance(value, dict):
        return {k: _drop_point_zero(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_drop_point_zero(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def test_an_amount_keeps_its_meaning_through_writers_that_drop_point_zero():
    plan = Plan([
        Step("l1_unstructured", "classifier.weight", amount=1.0),  # everything
        Step("l1_unstructured", "features.0.weight", amount=1),  # one entry
        Step("random_unstructured", "features.2.weight", amount=0.0, seed=1),
        Step("global_unstructured", ["features.0.bias", "features.2.bias"],
             pruning_method="l1_unstructured", amount=1.0),
    ])
    rewritten = json.dumps(_drop_point_zero(json.loads(plan.to_json())))
    assert "1.0" not in rewritten
    again = Plan.from_json(rewritten)
    assert again == plan
    assert [type(step.settings["amount"]) for step in again] == [float, int, float, float]
    fresh, model = convnet(), convnet()
    again.apply(fresh)
    plan.apply(model)
    assert float(fresh.classifier.weight_mask.sum()) == 0.0
    assert int((fresh.features[0].weight_mask == 0).sum()) == 1
    for name, mask in masks(model).items():
        assert torch.equal(masks(fresh)[name], mask), name


def test_a_count_written_with_point_zero_is_still_a_count():
    doc = {"format": "prune-explorer-plan", "version": 2, "steps": [
        {"method": "l1_unstructured", "target": "a.w", "amount": {"count": 3.0}}]}
    assert Plan.from_json(json.dumps(doc))[0].settings["amount"] == 3
    assert isinstance(Plan.from_json(json.dumps(doc))[0].settings["amount"], int)


def test_version_1_files_read_exactly_as_before():
    plan = Plan.from_json(json.dumps(VALID))
    assert plan[0].settings["amount"] == 0.5
    assert plan[1].settings["amount"] == 1
    assert isinstance(plan[1].settings["amount"], int)
    one = json.dumps({"format": "prune-explorer-plan", "version": 1, "steps": [
        {"method": "l1_unstructured", "target": "a.w", "amount": 1.0},
        {"method": "l1_unstructured", "target": "a.w", "amount": 1}]})
    everything, single = Plan.from_json(one)
    assert everything == Step("l1_unstructured", "a.w", amount=1.0)
    assert single == Step("l1_unstructured", "a.w", amount=1)
    assert everything != single  # 1 == 1.0 in Python, but not as an amount
    assert Plan.from_json(Plan.from_json(one).to_json()) == Plan.from_json(one)


V2_AMOUNT_ERRORS = [
    (0.5, r'amount must be \{"fraction": a number in \[0, 1\]\} or \{"count": an int >= 0\} in a '
          r"version-2 plan; got 0.5"),
    ({"fraction": 0.5, "count": 1}, r"amount must be \{"),
    ({"percent": 50}, r"amount must be \{"),
    ({"count": 2.5}, r"amount.count must be a whole number; got 2.5"),
    ({"count": "3"}, r"amount.count must be a number; got '3'"),
    ({"fraction": True}, r"amount.fraction must be a number; got True"),
    ({"fraction": 1.5}, r"amount must be a float in \[0, 1\] or an int >= 0; got 1.5"),
    ({"count": -1}, r"amount must be a float in \[0, 1\] or an int >= 0; got -1"),
]


@pytest.mark.parametrize(("amount", "message"), V2_AMOUNT_ERRORS)
def test_version_2_amounts_are_explicit(amount, message):
    doc = {"format": "prune-explorer-plan", "version": 2, "steps": [
        {"method": "identity", "target": "a.w"},
        {"method": "l1_unstructured", "target": "a.w", "amount": amount}]}
    with pytest.raises(InvalidPlanError, match=r"^Plan.from_json: steps\[1\]: " + message) as i:
        Plan.from_json(json.dumps(doc))
    assert (i.value.step, i.value.field) == (1, "amount")
