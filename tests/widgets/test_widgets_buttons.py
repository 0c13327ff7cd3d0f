"""No button that then refuses: Apply, Undo and Reset are on exactly when the session would do
them, and a button that is off says why next to it (the session's own answer)."""

from __future__ import annotations

import re

import pytest
import torch

from prune_explorer.session import Session
from prune_explorer.widgets import Explorer


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU(), torch.nn.Linear(12, 4))


def test_reset_after_commit_is_off_with_the_reason_by_the_buttons():
    ex = Explorer(mlp(), debounce=None)
    ex.ui.amount.value = 0.5
    ex.ui.apply.click()
    assert not ex.ui.reset.disabled
    assert not ex.ui.undo.disabled
    ex.session.commit()
    assert ex.ui.reset.disabled  # was offered, then failed on confirm
    assert ex.ui.undo.disabled
    note = ex.ui.button_note.value
    assert "Reset is off: the model cannot go back to how the session found it" in note
    assert "Undo is off: the last action was commit of '0.weight'" in note
    assert ex.ui.reset.tooltip == f"Reset: {ex.session.reset_blocker()}"
    ex.close()


def test_buttons_follow_the_session_answers_step_by_step():
    ex = Explorer(mlp(), debounce=None)
    assert ex.ui.undo.disabled
    assert ex.ui.reset.disabled
    assert "no steps are applied yet" in ex.ui.button_note.value
    ex.ui.apply.click()
    ex.ui.apply.click()
    for _ in range(2):
        session = ex.session
        assert ex.ui.undo.disabled == (session.undo_blocker() is not None)
        assert ex.ui.reset.disabled == (session.reset_blocker() is not None)
        assert not ex.ui.undo.disabled
        ex.ui.undo.click()
        assert ex.status.kind == "ok"
    assert ex.ui.undo.disabled
    assert ex.ui.reset.disabled
    ex.close()


def test_apply_off_says_why_and_comes_back():
    ex = Explorer(mlp(), debounce=None)
    ex.ui.method.value = "ln_structured"
    ex.ui.n.value = "abc"
    assert ex.ui.apply.disabled
    assert "Apply is off: no preview for these settings" in ex.ui.button_note.value
    ex.ui.n.value = "2"
    assert not ex.ui.apply.disabled
    assert "Apply is off" not in ex.ui.button_note.value
    ex.close()


def test_session_blockers_are_the_errors_undo_and_reset_raise():
    s = Session(mlp())
    assert s.undo_blocker() == "nothing to undo; no steps are applied"
    assert s.reset_blocker() == "nothing to reset; no steps are applied"
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    assert s.undo_blocker() is None
    assert s.reset_blocker() is None
    s.commit()
    for call, why in ((s.undo, s.undo_blocker()), (s.reset, s.reset_blocker())):
        assert why is not None
        with pytest.raises(RuntimeError, match=re.escape(why) + "$"):
            call()


def test_commit_review_is_off_until_something_is_pruned():
    ex = Explorer(mlp(), debounce=None)
    assert ex.ui.commit_review.disabled
    assert "nothing to commit" in ex.ui.commit_details.value
    ex.ui.apply.click()
    assert not ex.ui.commit_review.disabled
    assert ex.ui.commit_details.value == ""
    ex.close()


def test_every_control_has_a_tooltip_so_no_label_reads_null():
    from prune_explorer.widgets.tabs.explore.controls import PruningControls

    c = PruningControls()
    for name in ("method", "amount_mode", "amount", "count", "n", "dim", "global_method",
                 "global_targets", "pattern", "block", "layout"):
        assert getattr(c, name).tooltip, name


def test_after_apply_the_picture_shows_the_step_applied_until_the_next_preview_is_asked():
    ex = Explorer(mlp(), debounce=None)
    ex.ui.amount.value = 0.5
    drawn = ex.render_count
    shown = ex.preview_pane.image.value
    ex.ui.apply.click()
    pane = ex.explore_pane
    assert len(ex.session.steps) == 1
    assert pane.showing_applied
    assert ex.render_count == drawn  # no preview of the next step was drawn
    assert ex.preview_pane.picture.label == "step 1, applied"
    assert ex.preview_pane.image.value != shown  # the same cells, relabelled
    assert "Step 1 applied: pruned 48 of 96 entries" in ex.ui.count_line.value
    assert ex.ui.apply.disabled
    assert "Apply is off: the picture shows the step just applied" in ex.ui.button_note.value
    assert not ex.ui.next_preview.disabled
    ex.ui.next_preview.click()
    assert not pane.showing_applied
    assert ex.render_count == drawn + 1
    assert ex.preview_pane.picture.label == "preview of the next step"
    assert not ex.ui.apply.disabled
    assert ex.ui.next_preview.layout.display == "none"
    ex.close()


@pytest.mark.parametrize("ask", ["slider", "undo"])
def test_a_control_or_a_session_change_ends_the_picture_of_the_step_applied(ask):
    ex = Explorer(mlp(), debounce=None)
    ex.ui.apply.click()
    assert ex.explore_pane.showing_applied
    if ask == "slider":
        ex.ui.amount.value = 0.4
    else:
        ex.ui.undo.click()
    assert not ex.explore_pane.showing_applied
    assert ex.preview_pane.picture.label == "preview of the next step"
    assert not ex.ui.apply.disabled
    ex.close()


def test_the_picture_in_words_says_it_shows_the_step_applied():
    ex = Explorer(mlp(), debounce=None)
    ex.ui.apply.click()
    assert "step 1, applied" in ex.ui.picture_text.value
    ex.close()
