"""Issue 36, item 7: the plan reader accepts exactly what the methods accept, by one table.

For every pruning method of the core's parameter table (``METHOD_PARAMETERS``) and every setting a
step records, each value of a corpus of good and bad ones is put in a plan document and read. The
reader accepts it exactly when the core's class for that method accepts it (the core checks the
rule of :func:`prune_explorer.prune.validation.constraint`, the same entry the reader checks);
an accepted step then runs (``Session.apply_all``, ``Plan.to_snippet``), and a refused one is an
``InvalidPlanError`` naming step 0 and the field.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import torch

from prune_explorer.prune.validation import METHOD_PARAMETERS
from prune_explorer.session import InvalidPlanError, InvalidStepError, Plan, Session
from prune_explorer.session.steps.methods import METHODS, prune_class

# A setting that suits the model (an 8 x 4 x 4 Conv1d weight) for each method.
GOOD: dict[str, dict[str, Any]] = {
    "random_unstructured": {"amount": 0.5},
    "l1_unstructured": {"amount": 0.5},
    "random_structured": {"amount": 0.5, "dim": 0},
    "ln_structured": {"amount": 0.5, "n": 2, "dim": 0},
    "semi_structured": {"pattern": "2:4", "dim": 1},
    "block_structured": {"amount": 0.5, "block": [2, 2], "n": 1},
}
# Values each setting is tried with, good and bad (all that fit this model when valid).
CORPUS: dict[str, list[Any]] = {
    "amount": [0.5, 0.0, 1.0, 0, 2, -1, 1.5, math.nan, "0.5", True, None],
    "n": [1, 2, 0, -1, 0.5, "inf", "-inf", "fro", "nuc", "x", True, [2], None],
    "dim": [0, 1, -1, 1.5, "0", True, None],
    "block": [[2, 2], [1], [1, 2, 4], [0, 2], [], "2", [2.5], [True], 2],
    "pattern": ["2:4", "1:2", "0:4", "4:4", "5:4", "2:0", "a", 3, None],
}
# Deliberate: None means torch.norm's default to the core (as in torch); a plan spells n out.
SESSION_REFUSES = [("ln_structured", "n", None)]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv1d(4, 8, 4))


def _json_setting(param: str, value: Any) -> Any:
    if param == "amount":
        is_count = isinstance(value, int) and not isinstance(value, bool)
        return {"count" if is_count else "fraction": value}
    return value


def _document(method: str, settings: dict[str, Any]) -> str:
    step = {"method": method, "target": "0.weight"}
    step.update({k: _json_setting(k, v) for k, v in settings.items()})
    if METHODS[method].random:
        step["seed"] = 3
    return json.dumps({"format": "prune-explorer-plan", "version": 2, "steps": [step]})


def _core_accepts(method: str, settings: dict[str, Any]) -> bool:
    spelled = {k: float(v) if k == "n" and v in ("inf", "-inf") else v  # JSON spellings
               for k, v in settings.items()}
    try:
        prune_class(method)(**spelled)
    except (TypeError, ValueError, RuntimeError, IndexError, OverflowError):
        return False
    return True


CASES = [(method, param, value)
         for method in METHOD_PARAMETERS if method in GOOD
         for param in METHODS[method].settings
         for value in CORPUS[param]]


def test_the_table_covers_every_method_with_settings():
    with_settings = {m for m in METHOD_PARAMETERS
                     if METHODS[m].settings and m != "custom_from_mask"}  # a mask is no JSON value
    assert with_settings == set(GOOD)
    assert {p for m in GOOD for p in METHODS[m].settings} == set(CORPUS)


@pytest.mark.parametrize(("method", "param", "value"), CASES,
                         ids=[f"{m}-{p}-{v!r}" for m, p, v in CASES])
def test_the_reader_accepts_exactly_what_the_method_accepts(method, param, value):
    settings = {**GOOD[method], param: value}
    text = _document(method, settings)
    core = _core_accepts(method, settings) and (method, param, value) not in SESSION_REFUSES
    if not core:
        with pytest.raises(InvalidPlanError) as info:
            Plan.from_json(text)
        assert (info.value.step, info.value.field) == (0, param), str(info.value)
        assert "\n" not in str(info.value)
        return
    plan = Plan.from_json(text)  # the reader accepts what the method accepts
    session = Session(_model())
    session.apply_all(plan)  # and a step it accepts runs
    assert [step.method for step in session.steps] == [method]
    compile(plan.to_snippet(), "snippet", "exec")


def test_session_apply_refuses_nuc_for_block_structured_with_the_field():
    session = Session(_model())
    with pytest.raises(InvalidStepError, match=r"n must be .*'fro'") as info:
        session.apply("0.weight", "block_structured", amount=0.5, block=(2, 2), n="nuc")
    assert info.value.field == "n"
    assert session.steps == ()
