"""Every sized picture of the explorer is drawn for the room its size probe reports (issue 35):
History, Global vs local, the Zoom and the Magnitudes view, like the Explore picture -- as
wide as the column, at the browser's pixel ratio, with text no smaller than the Explore
picture's in the same room. The probe's numbers are set here as a browser would report them
(the browser tests measure the real page)."""

from __future__ import annotations

import pytest
import torch

from helpers.pictures import explorer_pictures, picture_misfits
from helpers.widgets import mlp
from prune_explorer.widgets import Explorer
from prune_explorer.widgets.tabs.explore.zoom import FRAME_PX
from prune_explorer.widgets.tabs.titles import COMPARE_TAB, HISTORY_TAB

ROOM = (640, 560, 1.5)  # CSS px and device pixels per CSS px, as a probe reports them


def png_width(png: bytes) -> int:
    return int.from_bytes(png[16:20], "big")


def report(probe, room=ROOM) -> None:
    probe.width, probe.height, probe.pixel_ratio = room


@pytest.fixture
def ex():
    explorer = Explorer(mlp(), debounce=None)
    report(explorer.explore_pane.probe)
    yield explorer
    explorer.close()


def test_history_is_drawn_for_its_column(ex):
    ex.ui.apply.click()  # a step to show
    ex.ui.tabs.selected_index = HISTORY_TAB
    before = ex.history_pane.image.value
    report(ex.history_pane.probe)
    ex.flush()
    png = ex.history_pane.image.value
    assert png != before
    assert png_width(png) == round(ROOM[0] * ROOM[2])  # sharp at the pixel ratio
    assert ex.history_pane.image.width == str(ROOM[0])  # shown at the column's width
    pictures = explorer_pictures(ex)
    assert pictures["history"]["settled"]
    assert pictures["history"]["text"] >= pictures["explore"]["text"] - 0.01
    assert picture_misfits(ex.history_pane.plot) == []


def test_the_global_vs_local_chart_is_drawn_for_its_column(ex):
    ex.ui.tabs.selected_index = COMPARE_TAB
    report(ex.compare_pane.probe)
    ex.flush()
    assert png_width(ex.compare_pane.chart.value) == round(ROOM[0] * ROOM[2])
    assert ex.compare_pane.chart.width == str(ROOM[0])
    pictures = explorer_pictures(ex)
    assert pictures["compare"]["settled"]
    assert pictures["compare"]["text"] >= pictures["explore"]["text"] - 0.01


def test_zoom_and_magnitudes_follow_their_rooms(ex):
    ex.ui.zoom_toggle.value = True
    panel = ex.explore_pane.panels.magnitudes
    panel.open()
    report(panel.probe, (700, 600, 1.5))
    ex.flush()
    pictures = explorer_pictures(ex)
    assert pictures["zoom"]["css"][0] == ROOM[0] - FRAME_PX  # the Explore picture's column
    assert pictures["magnitudes"]["css"][0] == 700  # its panel's width
    assert 'width="700"' in panel.picture.value
    for name in ("zoom", "magnitudes"):
        assert pictures[name]["text"] >= pictures["explore"]["text"] - 0.01, name


def test_a_room_a_few_pixels_off_draws_nothing_again(ex):
    ex.ui.apply.click()
    ex.ui.tabs.selected_index = HISTORY_TAB
    report(ex.history_pane.probe)
    ex.flush()
    png = ex.history_pane.image.value
    report(ex.history_pane.probe, (ROOM[0] + 5, ROOM[1] - 5, ROOM[2]))  # a scroll bar
    ex.flush()
    assert ex.history_pane.image.value is png
    assert torch.is_tensor(ex.history_pane.newly_pruned)
