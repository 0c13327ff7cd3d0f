"""The History, Global vs local, Commit and Export tabs, driven as a user would.

Stock ``torch.nn.utils.prune`` on a copy of the model is the oracle for every mask; the session
is the oracle for its own tables (history, comparison, plan).
"""

from __future__ import annotations

import base64
import copy
import datetime
import re

import pandas as pd
import pytest
import torch
import torch.nn.utils.prune as torch_prune

from helpers.widgets import assert_same_state, mlp, state
from prune_explorer.session import Plan, Step
from prune_explorer.widgets import Explorer

HISTORY, COMPARE, COMMIT, EXPORT = 1, 2, 3, 4










@pytest.fixture
def ex():
    explorer = Explorer(mlp(), debounce=None)
    yield explorer
    explorer.close()


# -- History ----------------------------------------------------------------------------------


def test_history_slider_walks_the_steps_and_highlights_what_each_pruned(ex):
    ex.ui.amount.value = 0.25
    ex.ui.apply.click()
    ex.ui.method.value = "ln_structured"
    ex.ui.apply.click()
    ex.ui.tabs.selected_index = HISTORY
    history = ex.session.history("0.weight")
    assert (ex.ui.history.min, ex.ui.history.max, ex.ui.history.value) == (0, 2, 2)
    pictures = {}
    for k in (2, 0, 1):
        ex.ui.history.value = k
        assert ex.history_pane.shown == k
        assert torch.equal(ex.history_pane.newly_pruned, history.newly_pruned(k))
        pictures[k] = ex.ui.history_image.value
        assert f'<tr style="background:#fff3b0" data-row="{k}">' in ex.ui.history_steps.value
    assert len(set(pictures.values())) == 3  # each step draws its own picture
    assert int(ex.history_pane.newly_pruned.sum()) == 24  # step 1: 0.25 * 96
    assert "step 1: L1 magnitude, 25% of 0.weight · 24 entries" in ex.ui.history_label.value
    title = ex.history_pane.title.splitlines()
    assert title[:2] == ["0.weight · state after step 1", "L1 magnitude, 25% of 0.weight"]
    assert title[2] == "sparsity 0.0% before → 25.0% after"  # a step taken, not a preview
    ex.ui.history.value = 2
    assert "Ln-norm structured (n=2, dim=0), 25% of 0.weight" in ex.ui.history_label.value
    table = ex.ui.history_steps.value
    for method in ("as found", "L1 magnitude", "Ln-norm structured"):
        assert f"<td style=\"padding:2px 8px\">{method}</td>" in table


def test_history_follows_undo_and_the_picker(ex):
    ex.ui.apply.click()
    ex.ui.apply.click()
    ex.ui.tabs.selected_index = HISTORY
    assert ex.ui.history.max == 2
    ex.ui.undo.click()
    assert (ex.ui.history.max, ex.history_pane.shown) == (1, 1)
    ex.ui.tensor.value = "2.weight"
    assert (ex.ui.history.max, ex.history_pane.shown) == (0, 0)
    assert int(ex.history_pane.newly_pruned.sum()) == 0
    assert "2.weight" in ex.ui.history_label.value


def test_history_of_a_tensor_pruned_before_the_session_marks_entry_zero():
    model = mlp()
    torch_prune.l1_unstructured(model[0], "weight", amount=10)
    ex = Explorer(model, debounce=None)
    ex.ui.tabs.selected_index = HISTORY
    assert ex.history_pane.shown == 0
    assert int(ex.history_pane.newly_pruned.sum()) == 10
    assert "already pruned when the session started" in ex.ui.history_label.value
    ex.close()


def test_history_renders_only_when_its_tab_is_shown(ex):
    ex.ui.apply.click()
    assert ex.history_pane.shown is None
    assert ex.ui.history_image.value == b""
    ex.ui.tabs.selected_index = HISTORY
    assert ex.history_pane.shown == 1
    assert ex.ui.history_image.value[:4] == b"\x89PNG"


# -- Global vs local --------------------------------------------------------------------------


def test_compare_tab_shows_the_session_table_and_chart(ex):
    ex.ui.tabs.selected_index = COMPARE
    assert ex.ui.compare_targets.value == ("0.weight", "2.weight")
    expected = ex.session.compare_global_local(["0.weight", "2.weight"], 0.5)
    pd.testing.assert_frame_equal(ex.compare_pane.frame, expected)
    chart = ex.ui.compare_chart.value
    assert chart[:4] == b"\x89PNG"
    assert ex.ui.compare_table.value.count("<tr") == 1 + 3  # header, two tensors, TOTAL
    assert "No layer collapses." in ex.ui.compare_warnings.value
    ex.ui.compare_amount.value = 0.8
    expected = ex.session.compare_global_local(["0.weight", "2.weight"], 0.8)
    pd.testing.assert_frame_equal(ex.compare_pane.frame, expected)
    assert ex.ui.compare_chart.value != chart
    ex.ui.compare_targets.value = ("2.weight",)
    assert list(ex.compare_pane.frame["name"]) == ["2.weight", "TOTAL"]


def test_compare_warns_about_layer_collapse():
    model = mlp()
    with torch.no_grad():
        model[2].weight.mul_(1e-3)  # tiny weights: global pruning takes this layer first
    ex = Explorer(model, debounce=None)
    ex.ui.tabs.selected_index = COMPARE
    ex.ui.compare_amount.value = 0.7
    frame = ex.compare_pane.frame
    assert bool(frame.set_index("name").loc["2.weight", "collapsed_global"])
    warnings = ex.ui.compare_warnings.value
    assert "Layer collapse with global pruning: 2.weight" in warnings
    assert "with local pruning" not in warnings
    ex.close()


def test_compare_with_no_tensor_chosen_is_an_error_message(ex):
    ex.ui.tabs.selected_index = COMPARE
    ex.ui.compare_targets.value = ()
    assert ex.compare_pane.frame is None
    assert ex.status.text == "Global vs local failed: choose at least one tensor"
    ex.ui.apply_local.click()
    assert ex.status.text == "Apply local failed: choose at least one tensor"
    assert ex.session.steps == ()


def test_apply_global_matches_torch_global_unstructured(ex):
    model = ex.model
    copied = copy.deepcopy(model)
    ex.ui.tabs.selected_index = COMPARE
    ex.ui.compare_amount.value = 0.6
    ex.ui.apply_global.click()
    # 0.6 * 128 = 76.8 -> 77
    assert ex.status.text == ("Applied global L1 magnitude, 60% over 2 tensors: 77 entries "
                              "pruned (now 60.2% of these 2 tensors pruned).")
    torch_prune.global_unstructured(
        [(copied[0], "weight"), (copied[2], "weight")], torch_prune.L1Unstructured, amount=0.6
    )
    assert torch.equal(model[0].weight_mask, copied[0].weight_mask)
    assert torch.equal(model[2].weight_mask, copied[2].weight_mask)
    assert ex.session.steps == (Step("global_unstructured", ["0.weight", "2.weight"],
                                     pruning_method="l1_unstructured", amount=0.6),)


def test_apply_local_matches_torch_per_tensor_and_shows_progress(ex):
    model = ex.model
    copied = copy.deepcopy(model)
    seen = []
    ex.ui.progress.observe(lambda c: seen.append(c["new"]), names="value")
    ex.ui.tabs.selected_index = COMPARE
    ex.ui.apply_local.click()
    # 48 of 96 and 16 of 32
    assert ex.status.text == ("Applied L1 magnitude, 50% of each of 2 tensors: 64 entries "
                              "pruned (now 50.0% of these 2 tensors pruned).")
    for index in (0, 2):
        torch_prune.l1_unstructured(copied[index], "weight", amount=0.5)
        assert torch.equal(model[index].weight_mask, copied[index].weight_mask)
    assert [s.method for s in ex.session.steps] == ["l1_unstructured"] * 2
    assert 1 in seen
    assert 2 in seen
    assert ex.ui.progress.layout.display == "none"  # and hides when done


def test_apply_local_is_all_or_nothing(ex, monkeypatch):
    model = ex.model
    original = state(model)
    real_apply = ex.session.apply
    calls = []

    def flaky(name, method, **kwargs):
        calls.append(name)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real_apply(name, method, **kwargs)

    monkeypatch.setattr(ex.session, "apply", flaky)
    ex.ui.tabs.selected_index = COMPARE
    ex.ui.apply_local.click()
    assert ex.status.text == "Apply local failed: RuntimeError: disk on fire"
    assert calls == ["0.weight", "2.weight"]
    assert ex.session.steps == ()
    assert_same_state(model, original)


# -- Commit -----------------------------------------------------------------------------------


def test_commit_needs_a_review_then_confirm(ex):
    model = ex.model
    ex.ui.apply.click()
    ex.ui.tensor.value = "2.weight"
    ex.ui.apply.click()
    ex.ui.tabs.selected_index = COMMIT
    assert [v for _, v in ex.ui.commit_target.options] == ["__all__", "0.weight", "2.weight"]
    assert ex.ui.commit_confirm.layout.display == "none"
    assert ex.ui.commit_confirm.disabled
    ex.ui.commit_confirm.click()  # without a review
    assert ex.status.text == "Commit failed: press Review first, then Confirm commit"
    assert "0.weight_orig" in model.state_dict()
    ex.ui.commit_review.click()
    pane = ex.commit_pane
    assert pane.reviewed == ("0.weight", "2.weight")
    assert pane.keys_removed == ["0.weight_orig", "0.weight_mask", "2.weight_orig",
                                 "2.weight_mask"]
    assert pane.keys_added == ["0.weight", "2.weight"]
    details = ex.ui.commit_details.value
    memory = ex.session.memory_report().set_index("name")
    assert "This cannot be undone." in details
    assert "state_dict keys removed: 0.weight_orig, 0.weight_mask" in details
    assert int(memory.loc["TOTAL", "freed"]) == 2 * 4 * (96 + 32)  # float32 orig and mask
    assert "memory 1.5 KiB → 512 B (frees 1.0 KiB)" in details
    assert ex.ui.commit_confirm.layout.display == ""
    assert not ex.ui.commit_confirm.disabled
    ex.ui.commit_confirm.click()
    assert ex.status.text == "Committed 2 tensors; freed 1.0 KiB."
    assert sorted(model.state_dict()) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert pane.reviewed is None
    ex.ui.undo.click()
    assert ex.status.text.startswith("Undo failed: the last action was commit")


def test_commit_one_tensor_and_changing_the_choice_voids_the_review(ex):
    model = ex.model
    ex.ui.apply.click()
    ex.ui.tensor.value = "2.weight"
    ex.ui.apply.click()
    ex.ui.tabs.selected_index = COMMIT
    ex.ui.commit_review.click()
    ex.ui.commit_target.value = "2.weight"
    assert ex.commit_pane.reviewed is None
    assert ex.ui.commit_confirm.disabled
    ex.ui.commit_review.click()
    ex.ui.commit_confirm.click()
    assert "2.weight_orig" not in model.state_dict()
    assert "0.weight_orig" in model.state_dict()
    assert [v for _, v in ex.ui.commit_target.options] == ["__all__", "0.weight"]


def test_session_change_voids_the_review_and_cancel_closes_it(ex):
    ex.ui.apply.click()
    ex.ui.commit_review.click()
    assert ex.commit_pane.reviewed == ("0.weight",)
    ex.ui.apply.click()
    assert ex.commit_pane.reviewed is None
    ex.ui.commit_review.click()
    ex.ui.commit_cancel.click()
    assert ex.commit_pane.reviewed is None
    assert "Commit cancelled." in ex.ui.commit_details.value
    assert "0.weight_orig" in ex.model.state_dict()


def test_after_review_then_cancel_the_status_no_longer_says_press_confirm(ex):
    ex.ui.apply.click()
    ex.ui.commit_review.click()
    assert "press Confirm commit" in ex.status.text
    ex.ui.commit_cancel.click()
    assert "Confirm commit" not in ex.status.text
    assert ex.status.text.startswith("Commit cancelled: nothing was committed")


def test_commit_with_nothing_pruned_says_so(ex):
    ex.ui.commit_review.click()
    assert ex.status.text == "Review commit failed: nothing to commit; no tensor is pruned"
    assert ex.commit_pane.reviewed is None


# -- Export and import ------------------------------------------------------------------------


def test_export_content_is_built_only_while_the_export_tab_is_shown(ex, monkeypatch):
    built = []
    real = Plan.to_snippet
    monkeypatch.setattr(Plan, "to_snippet", lambda self: built.append(1) or real(self))
    for _ in range(3):
        ex.ui.apply.click()
    assert built == []  # three session changes, Export hidden: no snippet, no links
    assert ex.ui.snippet.value == ex.ui.download.value == ""
    ex.ui.tabs.selected_index = EXPORT
    assert len(built) == 1
    assert ex.ui.snippet.value == real(ex.session.plan)
    ex.ui.apply.click()  # while shown, it follows the session
    assert len(built) == 2
    assert ex.ui.snippet.value == real(ex.session.plan)


def test_export_warns_when_the_plan_starts_from_pruning_found_on_the_model():
    model = mlp()
    torch_prune.l1_unstructured(model[0], "weight", amount=0.5)
    ex = Explorer(model, debounce=None)
    ex.ui.tabs.selected_index = EXPORT
    assert "pruning found on the model when the session started (0.weight)" in (
        ex.ui.export_note.value)
    ex.close()


def _decode_link(html: str, css: str) -> str:
    match = re.search(rf'class="{css}"[^>]*href="data:[^;]+;charset=utf-8;base64,([^"]+)"', html)
    assert match, html
    return base64.b64decode(match.group(1)).decode("utf-8")


def test_export_shows_and_offers_the_session_plan(ex):
    ex.ui.tabs.selected_index = EXPORT
    ex.ui.apply.click()
    ex.ui.method.value = "random_unstructured"
    ex.ui.tensor.value = "2.weight"
    ex.ui.apply.click()
    plan = ex.session.plan
    assert ex.ui.snippet.value == plan.to_snippet()
    assert ex.ui.json.value == plan.to_json()
    assert Plan.from_json(ex.ui.json.value) == plan
    assert _decode_link(ex.ui.download.value, "pe-download-snippet") == plan.to_snippet()
    assert _decode_link(ex.ui.download.value, "pe-download-json") == plan.to_json()
    assert 'download="pruning_plan.json"' in ex.ui.download.value


def test_exported_snippet_replays_the_masks_with_stock_torch():
    original = mlp()
    ex = Explorer(copy.deepcopy(original), debounce=None)
    ex.ui.apply.click()
    ex.ui.method.value = "random_structured"
    ex.ui.apply.click()
    ex.ui.tabs.selected_index = EXPORT
    model = copy.deepcopy(original)
    exec(ex.ui.snippet.value, {"model": model})  # the snippet binds to `model`
    assert torch.equal(model[0].weight_mask, ex.model[0].weight_mask)
    ex.close()


def test_reimporting_the_sessions_own_plan_asks_and_never_doubles_silently(ex):
    ex.ui.apply.click()
    own = ex.session.plan
    assert len(own) == 1
    masks = ex.session.mask("0.weight").clone()
    ex.ui.tabs.selected_index = EXPORT
    ex.ui.import_text.value = ex.ui.json.value  # the tab's own export, pasted back
    ex.ui.import_plan.click()
    assert ex.export_pane.asking
    assert ex.session.plan == own  # nothing applied yet
    assert "already holds" in ex.ui.import_question.value
    assert ex.ui.import_new.disabled  # nothing new in it
    ex.ui.import_cancel.click()
    assert not ex.export_pane.asking
    assert ex.session.plan == own
    assert torch.equal(ex.session.mask("0.weight"), masks)
    assert ex.status.text == "Import plan cancelled: nothing was applied."


def test_reimporting_an_extended_plan_applies_only_the_new_steps_or_all_when_asked(ex):
    ex.ui.apply.click()
    extended = Plan([*ex.session.plan.steps, Step("ln_structured", "2.weight", amount=1, n=1,
                                                  dim=0)])
    ex.ui.import_text.value = extended.to_json()
    ex.ui.import_plan.click()
    assert ex.ui.import_new.description == "Apply the 1 new step"
    ex.ui.import_new.click()
    assert ex.session.plan == extended  # the held step once, the new one after it
    assert ex.status.text.startswith("Imported a plan of 2 steps and applied 1 step")
    ex.ui.import_plan.click()  # the box still holds it: the session holds all of it now
    assert ex.export_pane.asking
    ex.ui.import_again.click()  # asked for: stacked on purpose
    assert len(ex.session.plan) == 4


def test_import_pasted_plan_applies_it(ex):
    ex.ui.tabs.selected_index = EXPORT
    plan = Plan([Step("l1_unstructured", "0.weight", amount=0.5),
                 Step("ln_structured", "2.weight", amount=1, n=1, dim=0)])
    ex.ui.import_text.value = plan.to_json()
    ex.ui.import_plan.click()
    assert ex.status.text == "Imported a plan of 2 steps and applied it."
    assert ex.session.plan == plan
    assert ex.export_pane.imported == plan
    oracle = mlp()
    torch_prune.l1_unstructured(oracle[0], "weight", amount=0.5)
    torch_prune.ln_structured(oracle[2], "weight", amount=1, n=1, dim=0)
    assert torch.equal(ex.model[0].weight_mask, oracle[0].weight_mask)
    assert torch.equal(ex.model[2].weight_mask, oracle[2].weight_mask)
    # the JSON view shows the session's plan: the imported steps, and the model's ties ({})
    assert ex.ui.json.value == Plan(plan.steps, tied=ex.session.tied).to_json()


@pytest.mark.parametrize(("text", "message"), [
    ("", "Import plan failed: the box is empty; paste a plan (JSON) or upload a .json file"),
    ("{not json", "Import plan failed: not valid JSON: "),
    ('{"format": "prune-explorer-plan", "version": 3, "steps": []}',
     "Import plan failed: version must be the integer 1 or 2; got 3"),
    ("[" * 200_000, "Import plan failed: the document is nested too deeply"),
    ('{"format": "prune-explorer-plan", "version": 1, "steps": [{"method": "ln_structured", '
     '"target": "0.weight", "amount": 0.5, "n": 1e400, "dim": 0}]}',
     "Import plan failed: steps[0]: n must be a finite number; got 1e400"),
    ('{"format": "prune-explorer-plan", "version": 1, "steps": [{"method": "l1_unstructured", '
     '"target": "0.weight", "amount": 1.5}]}',
     "Import plan failed: steps[0]: amount must be a float in [0, 1] or an int "
     ">= 0; got 1.5"),
])
def test_bad_plans_are_reported_and_change_nothing(ex, text, message):
    ex.ui.apply.click()
    before, steps = state(ex.model), ex.session.steps
    ex.ui.import_text.value = text
    ex.ui.import_plan.click()
    assert ex.status.kind == "error"
    assert ex.status.text.startswith(message)
    assert "Traceback" not in ex.ui.status.value
    assert ex.session.steps == steps
    assert_same_state(ex.model, before)


def test_plan_that_fails_on_this_model_changes_nothing(ex):
    plan = Plan([Step("l1_unstructured", "0.weight", amount=0.5),
                 Step("ln_structured", "2.weight", amount=1, n=2, dim=5)])
    before = state(ex.model)
    ex.ui.import_text.value = plan.to_json()
    ex.ui.import_plan.click()
    assert ex.status.kind == "error"
    assert "steps[1]" in ex.status.text
    assert "dim" in ex.status.text
    assert ex.session.steps == ()
    assert_same_state(ex.model, before)
    plan = Plan([Step("l1_unstructured", "9.weight", amount=0.5)])
    ex.ui.import_text.value = plan.to_json()
    ex.ui.import_plan.click()
    assert "'9.weight' is not a prunable tensor of this model" in ex.status.text
    assert_same_state(ex.model, before)


def _upload(ex: Explorer, name: str, content: bytes) -> None:
    ex.ui.import_upload.value = ({
        "name": name, "type": "application/json", "size": len(content),
        "content": memoryview(content), "last_modified": datetime.datetime(2024, 1, 1),
    },)


def test_upload_fills_the_import_box_and_imports(ex):
    plan = Plan([Step("l1_unstructured", "2.weight", amount=3)])
    _upload(ex, "my_plan.json", plan.to_json().encode("utf-8"))
    assert ex.ui.import_text.value == plan.to_json()
    assert ex.status.text == "Loaded my_plan.json; press Import plan to apply it."
    ex.ui.import_plan.click()
    assert ex.session.plan == plan


def test_upload_with_a_byte_order_mark_imports(ex):
    plan = Plan([Step("l1_unstructured", "2.weight", amount=3)])
    _upload(ex, "windows.json", b"\xef\xbb\xbf" + plan.to_json().encode("utf-8"))
    assert ex.ui.import_text.value == plan.to_json()
    ex.ui.import_plan.click()
    assert ex.session.plan == plan


def test_upload_that_is_not_utf8_is_an_error(ex):
    _upload(ex, "bad.json", b"\xff\xfe{}")
    assert ex.status.text == (
        "Upload failed: Import plan: file 'bad.json': the document is not UTF-8 text: byte 0 "
        "(0xff) is not valid UTF-8; a plan is JSON in UTF-8"
    )
    assert ex.ui.import_text.value == ""


def test_compare_after_a_step_draws_what_was_pruned_before_and_says_it_previews(ex):
    ex.session.apply("0.weight", "l1_unstructured", amount=0.5)
    ex.ui.tabs.selected_index = 2
    ex.flush()
    frame, plot = ex.compare_pane.frame, ex.compare_pane.plot
    # local = same amount of what is left: 0.5 + 0.5 * 0.5 on the tensor pruned before
    assert frame.loc[frame["name"] == "0.weight", "sparsity_local"].item() == 0.75
    assert [b.get_height() for b in plot.before_bars[1]] == [0.5, 0.0]
    assert "preview of the next step" in plot.global_bars[0].axes.get_title()
    labels = [t.get_text() for t in plot.legend.get_texts()]
    assert "pruned before" in labels
    assert "local (same amount of what is left, per tensor)" in labels
