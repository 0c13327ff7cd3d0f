"""The pattern methods in the session: preview = apply, history, undo, JSON, conformance report,
and a snippet that reproduces the masks on stock torch (run in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from prune_explorer.session import Plan, Session
from prune_explorer.session.analysis.conformance import pattern_report

# Built the same way here and in the snippet's interpreter (torch only). fc1 has many ties.
MODEL_SOURCE = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_parameter('w"\\n', nn.Parameter(torch.randn(4, 8)))

    def build():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(8, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32, 16),
                              nn.Linear(16, 8))
        model.add_module('odd"\\u2028name', Odd())
        with torch.no_grad():
            model[3].weight.copy_(torch.randint(-2, 3, (16, 32)).float())
        return model
    """
)
ODD = 'odd"\u2028name.w"\n'


def build() -> nn.Module:
    namespace: dict = {}
    exec(MODEL_SOURCE, namespace)
    return namespace["build"]()


def _steps(s: Session) -> None:
    s.apply("3.weight", "l1_unstructured", amount=0.3)
    s.apply("3.weight", "semi_structured", pattern="2:4", dim=-1)  # on top: dead entries count
    s.apply("0.weight", "semi_structured", pattern="1:2", dim=1)
    s.apply("0.weight", "block_structured", amount=0.25, block=(2, 2), n=2)
    s.apply("4.weight", "block_structured", amount=3, block=(4, 4), n=1)
    s.apply("4.weight", "semi_structured", pattern="2:4", dim=0)
    s.apply(ODD, "semi_structured", pattern="2:4", dim=-1)
    s.apply(ODD, "block_structured", amount=0.5, block=(2,), n=float("inf"))
    s.apply("3.weight", "block_structured", amount=0.5, block=(4, 8), n="fro")


def test_preview_equals_apply_bit_for_bit_on_every_step():
    s = Session(build())
    calls = []
    s_record = Session(build())
    _steps(s_record)
    for step in s_record.steps:
        calls.append((step.target, step.method, dict(step.settings)))
    for target, method, settings in calls:
        preview = s.preview(target, method, **settings)
        s.apply(target, method, **settings)
        assert torch.equal(preview, s.mask(target)), (target, method)


def test_history_and_undo_restore_the_exact_state():
    s = Session(build())
    s.apply("3.weight", "l1_unstructured", amount=0.3)
    before_mask = s.mask("3.weight").clone()
    before_state = {k: v.clone() for k, v in s.model.state_dict().items()}
    s.apply("3.weight", "semi_structured", pattern="2:4", dim=-1)
    assert s.methods("3.weight") == ("l1_unstructured", "semi_structured")
    counts = s.history("3.weight").pruned_counts()
    assert counts[-1] > counts[-2] > 0
    s.undo()
    assert torch.equal(s.mask("3.weight"), before_mask)
    after = s.model.state_dict()
    assert sorted(after) == sorted(before_state)
    assert all(torch.equal(after[k], v) for k, v in before_state.items())


def test_a_setting_that_does_not_fit_changes_nothing():
    s = Session(build())
    s.apply("3.weight", "l1_unstructured", amount=0.3)
    state = {k: v.clone() for k, v in s.model.state_dict().items()}
    with pytest.raises(ValueError, match="M dividing the size along dim=0"):
        s.apply("0.weight", "semi_structured", pattern="2:3", dim=0)
    with pytest.raises(ValueError, match="pattern must be a string 'N:M'"):
        s.apply("0.weight", "semi_structured", pattern="2/4", dim=0)
    assert len(s.steps) == 1
    assert all(torch.equal(s.model.state_dict()[k], v) for k, v in state.items())


def test_plan_json_round_trip_and_replay():
    s = Session(build())
    _steps(s)
    text = s.plan.to_json()
    plan = Plan.from_json(text)
    assert plan.steps == s.plan.steps
    assert plan.to_json() == text
    replay = Session(build())
    for step in plan.steps:
        replay.apply_step(step)
    for name in {step.target for step in s.steps}:
        assert torch.equal(replay.mask(name), s.mask(name)), name


def test_conformance_report_says_which_tensors_satisfy_two_of_four():
    s = Session(build())
    s.apply("3.weight", "semi_structured", pattern="2:4", dim=-1)
    s.apply("4.weight", "l1_unstructured", amount=0.5)
    report = pattern_report(s, "2:4").set_index("name")
    assert bool(report.loc["3.weight", "satisfies"])
    assert report.loc["3.weight", "nonzero_per_group_max"] <= 2
    assert not report.loc["4.weight", "satisfies"]  # 50 % unstructured: some group keeps 3+
    assert bool(report.loc["4.weight", "applicable"])
    assert not report.loc["0.weight", "applicable"]  # last dim 3 is not a multiple of 4
    assert list(report.reset_index().columns)[:2] == ["name", "shape"]


HARNESS = textwrap.dedent(
    """
    import sys
    import torch
    namespace = {{}}
    exec({model!r}, namespace)
    model = namespace["build"]()
    exec(compile(open({snippet!r}).read(), {snippet!r}, "exec"), {{"model": model}})
    assert "prune_explorer" not in sys.modules
    torch.save({{k: v.clone() for k, v in model.state_dict().items()}}, {out!r})
    """
)


def test_snippet_builds_the_pattern_masks_with_stock_torch(tmp_path):
    s = Session(build())
    _steps(s)
    s.commit(["4.weight"])
    snippet = s.plan.to_snippet()
    assert "prune.custom_from_mask" in snippet
    assert "argsort(dim=-1, stable=True)" in snippet  # the pattern is stated, not a mask dump
    assert all(len(line) <= 100 for line in snippet.splitlines())
    path = tmp_path / "snippet.py"
    path.write_text(snippet)
    out = tmp_path / "state.pt"
    script = HARNESS.format(model=MODEL_SOURCE, snippet=str(path), out=str(out))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    got = torch.load(out, weights_only=True)
    expected = s.model.state_dict()
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize(("field", "value", "message"), [
    ("pattern", "2of4", "pattern must be a string 'N:M'"),
    ("pattern", 24, "pattern must be a string 'N:M'"),
    ("block", [4, True], "block must be a tuple of one or more ints >= 1"),
    ("block", "4,4", "block must be a tuple of one or more ints >= 1"),
])
def test_plan_json_refuses_bad_pattern_settings(field, value, message):
    import json

    from prune_explorer.session.plans.plan import InvalidPlanError

    steps = {"pattern": {"method": "semi_structured", "target": "fc.weight", "pattern": "2:4",
                         "dim": -1},
             "block": {"method": "block_structured", "target": "fc.weight",
                       "amount": {"fraction": 0.5}, "block": [4, 4], "n": 1}}
    step = dict(steps[field], **{field: value})
    text = json.dumps({"format": "prune-explorer-plan", "version": 2, "steps": [step]})
    with pytest.raises(InvalidPlanError, match=message):
        Plan.from_json(text)
