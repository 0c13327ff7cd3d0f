"""No button that then refuses, on the History, Global vs local and Export tabs: each control is
on exactly when its action would succeed (the session's answer), and a control that is off says
why beside it. Driven as a user: a button that is off cannot be pressed (``press``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as torch_prune

from helpers.widgets import mlp, press
from prune_explorer.session import Plan, Step
from prune_explorer.widgets import Explorer

HISTORY, COMPARE, EXPORT = 1, 2, 4


@pytest.fixture
def ex():
    explorer = Explorer(mlp(), debounce=None)
    yield explorer
    explorer.close()


# -- Global vs local ------------------------------------------------------------------------------
def test_compare_buttons_are_off_with_no_tensor_and_say_why(ex):
    ui = ex.ui
    ui.tabs.selected_index = COMPARE
    ui.compare_targets.value = ()
    assert ex.session.global_blocker([], amount=0.5) is not None  # the session refuses it
    assert ui.apply_global.disabled
    assert ui.apply_local.disabled
    assert "Apply global and Apply local are off: no tensor is chosen." in ui.compare_note.value
    with pytest.raises(AssertionError, match="is off"):
        press(ui.apply_global)

    ui.compare_targets.value = ("2.weight",)
    assert not ui.apply_global.disabled
    assert not ui.apply_local.disabled
    assert ui.compare_note.value == ""
    press(ui.apply_local)
    assert ex.status.kind == "ok", ex.status.text
    oracle = mlp()
    torch_prune.l1_unstructured(oracle[2], "weight", amount=0.5)
    assert torch.equal(ex.model[2].weight_mask, oracle[2].weight_mask)


def test_compare_buttons_follow_the_session_blockers(ex, monkeypatch):
    """Whatever the session says: the button is off exactly then, and shows those words."""
    ui = ex.ui
    ui.tabs.selected_index = COMPARE
    why = "targets must all be on one device; got ['cpu', 'meta']"
    monkeypatch.setattr(type(ex.session), "global_blocker", lambda *a, **k: why)
    ui.amount.value = 0.4  # not the tab's: nothing to recompute yet
    ui.compare_amount.value = 0.3
    assert ui.apply_global.disabled
    assert not ui.apply_local.disabled
    assert f"Apply global is off: {why}." in ui.compare_note.value
    assert "Apply local is off" not in ui.compare_note.value
    monkeypatch.undo()
    ui.compare_amount.value = 0.4
    assert not ui.apply_global.disabled
    press(ui.apply_global)
    assert ex.status.kind == "ok", ex.status.text
    assert ex.session.steps[-1].method == "global_unstructured"


# -- History ---------------------------------------------------------------------------------------
def test_history_slider_is_off_until_a_step_changed_the_tensor(ex):
    ui = ex.ui
    ui.tabs.selected_index = HISTORY
    assert ui.history.disabled
    assert f"no step has changed {ex.tensor} yet" in ui.history_note.value
    press(ui.apply)
    assert not ui.history.disabled
    assert ui.history_note.value == ""
    ui.history.value = 0  # the user scrubs back to the tensor as the session found it
    assert ex.history_pane.shown == 0
    press(ui.undo)
    assert ui.history.disabled


# -- Export / import -------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "why"), [
    ("", "the box is empty; paste a plan (JSON) or upload a .json file"),
    ("{not json", "not valid JSON: "),
    ('{"format": "prune-explorer-plan", "version": 1, "steps": [7]}',
     "steps[0]: a step must be a JSON object; got int"),
    (Plan([Step("l1_unstructured", "9.weight", amount=0.5)]).to_json(),
     "steps[0]: target '9.weight' is not a prunable tensor of this model"),
    (Plan([Step("l1_unstructured", "0.weight", amount=0.5),
           Step("ln_structured", "2.weight", amount=1, n=2, dim=5)]).to_json(),
     "steps[1]: dim must be"),
    (Plan([Step("l1_unstructured", "2.weight", amount=33)]).to_json(),
     "steps[0]: amount must be at most the number of entries of '2.weight' still unpruned (32)"),
])
def test_import_is_off_for_a_plan_that_would_be_refused_and_says_why(ex, text, why):
    ui = ex.ui
    ui.tabs.selected_index = EXPORT
    ui.import_text.value = text
    assert ui.import_plan.disabled
    assert why in ui.import_note.value
    assert ui.import_note.value.count("Import plan is off:") == 1
    with pytest.raises(AssertionError, match="is off"):
        press(ui.import_plan)
    # and the refusal it spares the user is that very one
    ui.import_plan.click()
    assert ex.status.kind == "error"
    assert why.split(": ", 1)[-1][:30] in ex.status.text
    assert ex.session.steps == ()


def test_import_comes_on_when_the_session_would_apply_the_plan(ex):
    ui = ex.ui
    ui.tabs.selected_index = EXPORT
    commit = Plan([Step("remove", "0.weight")])
    ui.import_text.value = commit.to_json()
    assert ui.import_plan.disabled  # nothing to make permanent yet
    assert "'0.weight' is not pruned" in ui.import_note.value
    press(ui.apply)  # the session changed: the same plan now applies
    assert ex.session.plan_blocker(commit) is None
    assert not ui.import_plan.disabled
    assert ui.import_note.value == ""
    press(ui.import_plan)
    assert ex.status.text == "Imported a plan of 1 step and applied it."
    assert ex.session.commits


def test_a_plan_that_prunes_then_commits_is_not_refused_beforehand(ex):
    ui = ex.ui
    ui.tabs.selected_index = EXPORT
    plan = Plan([Step("l1_unstructured", "0.weight", amount=0.5), Step("remove", "0.weight")])
    ui.import_text.value = plan.to_json()
    press(ui.import_plan)
    assert ex.status.kind == "ok", ex.status.text
    assert ex.session.plan == plan


def test_copy_and_download_of_an_empty_plan_give_a_plan_that_prunes_nothing(ex):
    ui = ex.ui
    ui.tabs.selected_index = EXPORT
    assert "The plan has no steps yet" in ui.export_note.value
    assert ui.copy_snippet.text == ui.snippet.value != ""
    model = mlp()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    exec(ui.copy_snippet.text, {"model": model})  # runs, prunes nothing
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert Plan.from_json(ui.copy_json.text) == Plan([])
    assert "pe-download-json" in ui.download.value
    press(ui.apply)
    assert "The plan has no steps yet" not in ui.export_note.value
