"""A slow preview shows progress: the picture (or the comparison) is marked stale before the
computation starts, and the busy indicator appears while it runs (after ``busy_delay``, about
300 ms). The slowness is a fake (the session's call waits until the indicator is on show), so
nothing here depends on how fast the machine is."""

from __future__ import annotations

import time
from typing import Any

import pytest

from helpers.widgets import mlp
from prune_explorer.widgets import Explorer

COMPARE = 2


def slow(ex: Explorer, name: str, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Make ``ex.session.<name>`` slow: each call records what the user sees as it starts,
    then waits (at most 10 s) for the busy indicator before doing the real work."""
    real = getattr(ex.session, name)
    calls: list[dict[str, Any]] = []

    def wait_then_run(*args: Any, **kwargs: Any) -> Any:
        seen = {"picture stale": "pe-stale" in ex.ui.preview._dom_classes,
                "readout": ex.ui.metric.value if "metric" in ex.ui else "",
                "comparison stale": "pe-stale" in ex.ui.compare_chart._dom_classes,
                "warnings": ex.ui.compare_warnings.value}
        deadline = time.monotonic() + 10.0
        while ex.ui.busy.layout.display == "none" and time.monotonic() < deadline:
            time.sleep(0.01)
        seen["busy"] = ex.ui.busy.value
        calls.append(seen)
        return real(*args, **kwargs)

    monkeypatch.setattr(ex.session, name, wait_then_run)
    return calls


def test_first_global_preview_is_marked_stale_before_it_starts(monkeypatch):
    ex = Explorer(mlp(), debounce=None, evaluate=lambda model: 0.5, metric_label="accuracy")
    assert ex.status.busy_delay <= 0.3
    assert not ex.preview_pane.stale
    calls = slow(ex, "preview_global", monkeypatch)
    ex.ui.method.value = "global_unstructured"  # the first global move
    assert len(calls) == 1
    assert calls[0]["picture stale"]  # greyed before the work started
    assert "computing…" in calls[0]["readout"]
    assert "working: preview" in calls[0]["busy"]
    assert not ex.preview_pane.stale  # drawn: current again
    assert ex.ui.busy.layout.display == "none"

    ex.ui.amount.value = 0.4  # a slider step of the same preview: no flicker
    assert len(calls) == 2
    assert not calls[1]["picture stale"]
    ex.close()


def test_the_comparison_says_it_is_computing_before_it_starts(monkeypatch):
    ex = Explorer(mlp(), debounce=None)
    calls = slow(ex, "compare_global_local", monkeypatch)
    ex.ui.tabs.selected_index = COMPARE
    assert len(calls) == 1
    assert calls[0]["comparison stale"]
    assert "computing the comparison" in calls[0]["warnings"]
    assert "working: comparing global and local" in calls[0]["busy"]
    assert "pe-stale" not in ex.ui.compare_chart._dom_classes
    assert not ex.compare_pane.stale
    assert "computing" not in ex.ui.compare_warnings.value
    assert ex.compare_pane.frame is not None
    ex.close()
