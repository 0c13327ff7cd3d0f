"""Errors sit next to the control they are about and over the picture; stale numbers are
marked; the readout is named after what evaluate measures."""

from __future__ import annotations

import re

import pytest
import torch

from helpers.pictures import picture_misfits
from prune_explorer.widgets import Explorer


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU(), torch.nn.Linear(12, 4))


def test_a_bad_n_is_reported_under_n_and_over_the_picture():
    ex = Explorer(mlp(), debounce=None)
    ex.ui.method.value = "ln_structured"
    ex.ui.n.value = "abc"
    c = ex.controls
    assert "n must be a number" in ex.ui.input_error.value
    assert ex.ui.input_error.layout.display == ""
    assert "n must be a number" in ex.ui.control_error.value
    order = int(ex.ui.control_error.layout.order)
    assert order == 2 * list(c.box.children).index(c.n) + 1  # right under the n box
    assert ex.ui.input_error in ex.explore_pane.box.children[1].children[0].children  # head
    assert "the message is by the controls" in ex.ui.status.value  # said once, pointed to
    assert "n must be a number" in ex.status.text
    ex.ui.n.value = "2"
    assert ex.ui.input_error.layout.display == "none"
    assert ex.ui.control_error.layout.display == "none"
    ex.close()


def test_the_slider_apply_and_count_line_sit_over_the_picture():
    ex = Explorer(mlp(), debounce=None)
    head, image = ex.explore_pane.box.children[1].children[:2]
    slider_row = head.children[0]
    assert ex.ui.amount in slider_row.children
    buttons = [b for w in slider_row.children for b in getattr(w, "children", ())]
    assert all(b in buttons for b in (ex.ui.apply, ex.ui.undo, ex.ui.reset))
    assert ex.ui.count_line in head.children
    assert image is ex.ui.preview
    ex.ui.amount.value = 0.5
    assert "prunes 48 of 96 entries left" in ex.ui.count_line.value
    assert "→ 50.0% of 0.weight pruned" in ex.ui.count_line.value
    ex.close()


def test_the_readout_is_named_and_marked_stale_until_current():
    calls = []

    def accuracy(model):
        calls.append(1)
        return 0.9

    ex = Explorer(mlp(), debounce=None, evaluate=accuracy, metric_label="test accuracy")
    ex.ui.amount.value = 0.5
    assert ex.ui.metric.value.startswith("<div>test accuracy: now 90.0%")
    assert not ex.metric.stale
    ex.ui.method.value = "ln_structured"
    ex.ui.n.value = "abc"  # the preview fails: the old numbers are not of these settings
    assert ex.metric.stale
    assert "pe-stale" in ex.ui.metric._dom_classes
    assert "not of the current settings" in ex.ui.metric.value
    ex.ui.n.value = "2"
    assert not ex.metric.stale
    ex.close()


def test_a_pending_evaluation_says_computing():
    ex = Explorer(mlp(), debounce=None, evaluate=lambda m: 0.5)
    ex.metric.request(ex.version + 1, None)  # as a preview does, before the result
    # synchronous runner: the result is in, the mark is gone; a request alone marks it
    assert not ex.metric.stale
    ex.metric.mark_stale("computing…")
    assert "score: now 50.0%" in ex.ui.metric.value
    assert "computing…" in ex.ui.metric.value
    ex.close()


def test_the_demo_evaluate_names_itself_test_accuracy():
    from prune_explorer.demo import evaluate
    from prune_explorer.widgets.tabs.explore.metric import metric_label

    assert metric_label(evaluate) == "test accuracy"


def test_switching_tensors_marks_the_old_picture_and_readout_until_the_new_ones():
    seen = []
    ex = Explorer(mlp(), debounce=None, evaluate=lambda m: 0.5)
    ex.preview_pane.image.observe(
        lambda c: seen.append(("image", ex.preview_pane.stale, ex.metric.stale)), names="value")
    ex.preview_pane.image.observe(
        lambda c: seen.append(("class", ex.preview_pane.stale, ex.metric.stale)),
        names="_dom_classes")
    ex.select("2.weight")
    # marked stale first (class change), then the new picture comes in still marked, then
    # the marks go; at the end both are current
    assert seen[0][:2] == ("class", True)  # the old picture is marked before anything else
    assert ("image", True, True) in seen  # the new one arrives while both are still marked
    assert not ex.preview_pane.stale
    assert not ex.metric.stale
    ex.close()


def test_presentation_hides_the_details_and_enlarges_the_picture_text():
    ex = Explorer(mlp(), debounce=None)
    probe = ex.explore_pane.probe
    probe.width, probe.height, probe.pixel_ratio = 600, 600, 1.0
    title = ex.preview_pane.picture.ax.title
    before = title.get_fontsize() * ex.preview_pane.picture.figure.dpi
    ex.ui.presentation.value = True
    assert ex.ui.preview_info.layout.display == "none"
    assert ex.explore_pane.panels.box.layout.display == "none"
    after = title.get_fontsize() * ex.preview_pane.picture.figure.dpi
    assert after >= 1.2 * before
    ex.ui.presentation.value = False
    assert ex.ui.preview_info.layout.display == ""
    ex.close()


@pytest.mark.parametrize("room", [(310, 260, 1.5), (600, 420, 1.0)],
                         ids=["projector-column", "1024x768-column"])
def test_presentation_never_shrinks_the_matrix_in_the_same_room(room):
    # A projector at 150 % beside the file browser gives the picture a column about 310 CSS px
    # wide: larger tick labels and legend there took the cells' room (issue 35: 8.4 % of the
    # screen without Presentation, 7.0 % with it)
    ex = Explorer(mlp(), debounce=None)
    probe = ex.explore_pane.probe
    probe.width, probe.height, probe.pixel_ratio = room

    def matrix() -> float:
        words = ex.preview_pane.picture.describe()
        found = re.search(r"matrix: ([0-9.]+) x ([0-9.]+) px", words)
        assert found is not None, words
        return float(found.group(1)) * float(found.group(2))

    plain = matrix()
    ex.ui.presentation.value = True
    assert matrix() >= plain, room
    assert picture_misfits(ex.preview_pane.picture) == [], room  # the legend whole
    ex.close()
