"""Malformed plans: every refusal is the project's own error, names the
step and the field, quotes a value as a short excerpt, and leaves the model as it was.

The last two tests fuzz the parser and ``Plan.apply`` with hypothesis (derandomized, a bounded
number of examples).
"""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.session import assert_exact_state, exact_state
from prune_explorer.session import InvalidPlanError, InvalidStepError, Plan, Session
from prune_explorer.session.steps.methods import METHODS

BIG = int("7" * 400)  # beyond the range of a float


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 10), torch.nn.Conv2d(4, 8, 3))


def _document(*steps: dict, version: int = 2) -> str:
    return json.dumps({"format": "prune-explorer-plan", "version": version, "steps": list(steps)})


def _step(method: str, target: str = "0.weight", **fields: object) -> dict:
    return {"method": method, "target": target, **fields}


def _fraction(value: object) -> dict:
    return {"fraction": value}


# -- the parser ------------------------------------------------------------------------------------
_DEEP = "[" * 5000 + "]" * 5000
PARSE_ERRORS = [
    ("huge-fraction", _document(_step("l1_unstructured", amount=_fraction(BIG))), 0, "amount",
     r"steps\[0\]: amount.fraction must be a number in \[0, 1\]; got an integer of 400 digits"),
    ("huge-n", _document(_step("ln_structured", amount=_fraction(0.5), n=BIG, dim=0)), 0, "n",
     r"steps\[0\]: n must be a number .*within the range of a float.*; got an integer of 400 "
     r"digits$"),
    ("huge-seed", _document(_step("random_unstructured", amount=_fraction(0.5), seed=BIG)), 0,
     "seed", r"steps\[0\]: seed must be an int in \[0, 2\*\*63\); got an integer of 400 digits"),
    ("duplicate-in-step",
     _document(_step("l1_unstructured", amount=_fraction(0.5))).replace(
         '"method": "l1_unstructured"', '"method": "l1_unstructured", "method": "identity"'),
     0, "method", r"^Plan.from_json: steps\[0\]: field 'method' appears twice in one object$"),
    ("deep-in-step",
     _document(_step("l1_unstructured", amount=_fraction(0.5))).replace(
         '{"fraction": 0.5}', _DEEP),
     0, "amount", r"^Plan.from_json: steps\[0\]: the document is nested too deeply to be read"),
    ("deep-in-second-step",
     _document(_step("identity"), _step("identity", target="DEEP")).replace('"DEEP"', _DEEP),
     1, "target", r"^Plan.from_json: steps\[1\]: the document is nested too deeply"),
]


@pytest.mark.parametrize(("text", "step", "field", "message"), [c[1:] for c in PARSE_ERRORS],
                         ids=[c[0] for c in PARSE_ERRORS])
def test_parser_names_the_step_and_field(text, step, field, message):
    with pytest.raises(InvalidPlanError, match=message) as info:
        Plan.from_json(text)
    assert (info.value.step, info.value.field) == (step, field)


@pytest.mark.parametrize("field", ["method", "target", "pattern", "dim"])
def test_a_huge_value_is_quoted_as_a_short_excerpt(field):
    step = _step("semi_structured", pattern="2:4", dim=1)
    step[field] = "x" * 1_000_000
    with pytest.raises(InvalidStepError) as info:  # a long target is refused by Plan.apply
        Plan.from_json(_document(step)).apply(_model())
    message = str(info.value)
    assert len(message) < 400, message[:500]
    assert "(1000002 characters)" in message
    assert info.value.field == field


# -- Plan.apply and Session.apply / preview: rules that need the model ---------------------------
APPLY_ERRORS = [
    ("semi-dim", {"method": "semi_structured", "pattern": "2:4", "dim": 5}, "dim",
     r"dim must be in \[-2, 1\] for '0.weight' of shape \(10, 8\); got 5"),
    ("semi-huge-dim", {"method": "semi_structured", "pattern": "2:4", "dim": BIG}, "dim",
     r"dim must be in \[-2, 1\] .*; got an integer of 400 digits"),
    ("semi-partial-group", {"method": "semi_structured", "pattern": "2:3", "dim": 1}, "pattern",
     r"pattern must be 'N:M' with M dividing the size along dim=1 \(8; groups are never "
     r"partial\); got 'M=3'"),
    ("block-partial", {"method": "block_structured", "amount": 0.5, "block": (3, 3), "n": 1},
     "block", r"block must be sizes that divide the tensor's shape \(10, 8\) \(dim 0: 3 does "
     r"not divide 10"),
    ("block-rank", {"method": "block_structured", "amount": 0.5, "block": (1, 1, 1), "n": 1},
     "block", r"block must be at most 2 sizes for a 2-D tensor"),
    ("block-huge", {"method": "block_structured", "amount": 0.5, "block": (BIG, 1), "n": 1},
     "block", r"block must .*\(dim 0: an integer of 400 digits does not divide 10"),
    ("block-count", {"method": "block_structured", "amount": 21, "block": (1, 4), "n": 1},
     "amount", r"amount must be at most the number of blocks of '0.weight' still unpruned "
     r"\(20\); got 21"),
    ("huge-count", {"method": "l1_unstructured", "amount": BIG}, "amount",
     r"amount must be at most the number of entries of '0.weight' still unpruned \(80\); got "
     r"an integer of 400 digits"),
]


def _settings(case: dict) -> dict:
    return {k: v for k, v in case.items() if k != "method"}


@pytest.mark.parametrize(("case", "field", "message"), [c[1:] for c in APPLY_ERRORS],
                         ids=[c[0] for c in APPLY_ERRORS])
def test_plan_apply_names_the_step_and_field_and_changes_nothing(case, field, message):
    fields = _settings(case)
    if "amount" in fields:
        fields["amount"] = {"count" if isinstance(fields["amount"], int) else "fraction":
                            fields["amount"]}
    if "block" in fields:
        fields["block"] = list(fields["block"])
    plan = Plan.from_json(_document(_step("identity", target="1.weight"),
                                    _step(case["method"], **fields)))
    model = _model()
    before = exact_state(model)
    with pytest.raises(InvalidStepError, match=r"^Plan.apply: steps\[1\]: " + message) as info:
        plan.apply(model)
    assert info.value.field == field
    assert_exact_state(before, exact_state(model))


@pytest.mark.parametrize("action", ["apply", "preview"])
@pytest.mark.parametrize(("case", "field", "message"), [c[1:] for c in APPLY_ERRORS],
                         ids=[c[0] for c in APPLY_ERRORS])
def test_session_names_the_field_and_changes_nothing(action, case, field, message):
    model = _model()
    session = Session(model, seed=0)
    session.apply("0.weight", "l1_unstructured", amount=0.0)  # pruned, but nothing masked
    before = exact_state(model)
    with pytest.raises(InvalidStepError, match=rf"^Session.{action}: " + message) as info:
        getattr(session, action)("0.weight", case["method"], **_settings(case))
    assert info.value.field == field
    assert_exact_state(before, exact_state(model))
    assert len(session.history("0.weight")) == 2


# -- fuzzing -----------------------------------------------------------------------------------
_HUGE = st.one_of(st.sampled_from([10**400, -(10**400), 2**1024, 2**63]),
                  st.integers(min_value=-(10**400), max_value=10**400))
_NUMBERS = st.one_of(st.integers(-3, 100), _HUGE, st.floats(allow_nan=False,
                                                             allow_infinity=False))
_JUNK = st.one_of(st.none(), st.booleans(), _NUMBERS, st.text(max_size=8),
                  st.lists(st.integers(-3, 12), max_size=4), st.just({"a": [[[[1]]]]}))
_PLAUSIBLE = {
    "method": st.sampled_from(sorted(METHODS)),
    "target": st.sampled_from(["0.weight", "0.bias", "1.weight", "2.weight", "0."]),
    "targets": st.lists(st.sampled_from(["0.weight", "0.bias", "1.weight"]), max_size=3),
    "amount": st.one_of(st.fixed_dictionaries({"fraction": _NUMBERS}),
                        st.fixed_dictionaries({"count": _NUMBERS})),
    "n": st.one_of(st.sampled_from([1, 2, "inf", "-inf", "fro", "nuc"]), _HUGE),
    "dim": st.one_of(st.integers(-5, 5), _HUGE),
    "seed": st.integers(0, 2**64),
    "pattern": st.sampled_from(["2:4", "1:2", "2:3", "4:4", "0:8", "5:4", "1:5"]),
    "block": st.lists(st.one_of(st.integers(-1, 12), _HUGE), max_size=5),
    "pruning_method": st.sampled_from(["l1_unstructured", "random_unstructured"]),
    "mask": st.fixed_dictionaries({"shape": st.lists(st.integers(0, 10), max_size=3),
                                   "bits": st.text(max_size=16)}),
    "sparsity": st.one_of(st.sampled_from([0.5, 0.0, 0.99, "2:4", "1:3"]), _NUMBERS),
    "damping": st.one_of(st.sampled_from([0.01, 1e-12, 0.0, -1.0]), _NUMBERS),
    "importance": st.sampled_from(["magnitude", "wanda", "taylor", "fisher", "obd"]),
}


def _rarely(draw: st.DrawFn) -> bool:
    return draw(st.sampled_from([False] * 5 + [True]))  # one in six; shrinks to False


def _value(draw: st.DrawFn, key: str) -> object:
    # mostly a value of the right kind (so the rules that need the model are reached), else junk
    return draw(_JUNK if _rarely(draw) else _PLAUSIBLE[key])


@st.composite
def _steps(draw: st.DrawFn) -> dict:
    method = _value(draw, "method")
    spec = METHODS.get(method) if isinstance(method, str) else None
    keys = ["targets" if method == "global_unstructured" else "target"]
    keys += spec.settings if spec is not None else []
    if spec is None or spec.random or method == "global_unstructured" or _rarely(draw):
        keys.append("seed")
    if spec is not None and spec.scores and _rarely(draw):  # a criterion (needs calibration)
        keys.append("importance")
    if _rarely(draw):  # a field too many
        keys.append(draw(st.sampled_from(sorted(_PLAUSIBLE))))
    if _rarely(draw):  # a field too few
        keys.remove(draw(st.sampled_from(keys)))
    step = {"method": method}
    for key in keys:
        step[key] = _value(draw, key)
    return step


_DOCUMENTS = st.builds(lambda steps, version: _document(*steps, version=version),
                       st.lists(_steps(), min_size=1, max_size=3),
                       st.sampled_from([2, 2, 2, 2, 1, 3]))
_FUZZ = settings(max_examples=300, derandomize=True, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow])


def _broken(text: str, how: int) -> str | bytes:
    # 0: as made; 1: one quote dropped; 2: cut in the middle; 3: a byte that is not UTF-8
    return [text, text.replace('"', "", 1), text[: len(text) // 2],
            text.encode()[:20] + b"\xff" + text.encode()[20:]][how]


@_FUZZ
@given(text=st.one_of(st.builds(_broken, _DOCUMENTS, st.sampled_from([0, 0, 0, 1, 2, 3])),
                      st.binary(max_size=64)))
def test_fuzz_parser_raises_only_plan_errors(text):
    message = ""
    try:
        Plan.from_json(text)
    except InvalidPlanError as err:  # anything else fails the test
        message = str(err)
    assert len(message) < 1000
    assert "\n" not in message


@_FUZZ
@given(text=_DOCUMENTS)
def test_fuzz_plan_apply_raises_only_project_errors_and_refuses_whole(text):
    try:
        plan = Plan.from_json(text)
    except InvalidPlanError:
        return
    model = _model()
    before = exact_state(model)
    try:
        plan.apply(model)
    except (InvalidPlanError, InvalidStepError) as err:  # anything else fails the test
        message = str(err)
    else:
        return
    assert len(message) < 1000
    assert_exact_state(before, exact_state(model))


@pytest.mark.parametrize("kind", ["sparse", "meta"])
def test_a_custom_mask_without_plain_data_is_refused_by_the_session(kind):
    mask = torch.ones(10, 8)
    mask = mask.to_sparse() if kind == "sparse" else torch.empty(10, 8, device="meta")
    model = _model()
    before = exact_state(model)
    with pytest.raises(InvalidStepError, match=rf"^Session.apply: mask must be a dense tensor "
                                               rf"of 0/1 values, not {kind}"):
        Session(model).apply("0.weight", "custom_from_mask", mask=mask)
    assert_exact_state(before, exact_state(model))
