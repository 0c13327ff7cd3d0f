"""Live previews never queue stale renders (``LatestOnly``), in both modes.

The background mode is made deterministic with ``flush()`` (runs the newest request now and
waits for a running job) and with events that hold a job while requests pile up.
"""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from prune_explorer.widgets import Explorer, LatestOnly

WAIT = 10.0  # seconds; only reached when something is broken


def test_synchronous_mode_runs_every_request_at_once():
    seen = []
    runner = LatestOnly(seen.append)
    for value in range(3):
        runner.request(value)
        assert seen[-1] == value
    assert (runner.requested, runner.runs, runner.pending) == (3, 3, False)
    assert runner.flush() is False


def test_background_mode_keeps_only_the_newest_request():
    seen = []
    runner = LatestOnly(seen.append, debounce=30.0)  # never runs on its own during the test
    for value in range(10):
        runner.request(value)
    assert seen == []
    assert runner.pending
    assert runner.flush() is True
    assert seen == [9]
    assert (runner.requested, runner.runs) == (10, 1)
    assert runner.flush() is False
    runner.close()


def test_requests_made_while_a_job_runs_collapse_into_one_rerun():
    started, release = threading.Event(), threading.Event()
    seen = []

    def job(value):
        seen.append(value)
        if value == 0:
            started.set()
            assert release.wait(WAIT)

    runner = LatestOnly(job, debounce=0.0)
    runner.request(0)
    assert started.wait(WAIT)
    for value in range(1, 10):  # arrive while job(0) is still running
        runner.request(value)
    release.set()
    runner.flush()
    assert seen == [0, 9]
    runner.close()


def test_background_job_errors_go_to_on_error():
    errors = []
    failed = threading.Event()

    def job(value):
        raise ValueError(f"bad {value}")

    def on_error(err):
        errors.append(str(err))
        failed.set()

    runner = LatestOnly(job, debounce=0.0, on_error=on_error)
    runner.request(1)
    assert failed.wait(WAIT)
    assert errors == ["bad 1"]
    runner.close()


def test_close_stops_the_worker_and_ignores_later_requests():
    seen = []
    runner = LatestOnly(seen.append, debounce=30.0)
    runner.request(1)
    thread = runner._thread
    runner.close()
    assert not thread.is_alive()
    runner.request(2)
    assert runner.flush() is False
    assert seen == []


@pytest.mark.parametrize("bad", [-1, "0.1", True])
def test_bad_debounce_is_rejected(bad):
    with pytest.raises(ValueError, match=r"LatestOnly: debounce must be None or a number of "
                                         r"seconds >= 0; got"):
        LatestOnly(print, debounce=bad)


def _model() -> nn.Module:
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 10))
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
    return model


def test_dragging_the_slider_in_background_mode_renders_only_the_last_position():
    model = _model()
    ex = Explorer(model, debounce=30.0)
    ex.flush()  # the first picture
    renders, png = ex.render_count, ex.ui.preview.value
    for step in range(1, 11):  # a drag: ten positions, faster than any render
        ex.ui.amount.value = step / 20
    assert ex.render_count == renders
    assert ex.ui.preview.value == png
    ex.flush()
    assert ex.render_count == renders + 1
    assert ex.preview_request.settings["amount"] == 0.5
    expected = nn.Sequential(nn.Linear(16, 10))
    expected.load_state_dict(model.state_dict())
    torch_prune.l1_unstructured(expected[0], "weight", amount=0.5)
    assert torch.equal(ex.preview_mask, expected[0].weight_mask)
    assert ex.ui.preview.value != png
    ex.close()


def test_background_mode_with_no_debounce_catches_up_and_reports_errors():
    ex = Explorer(_model(), debounce=0.0)
    ex.ui.amount.value = 0.25
    ex.flush()
    assert ex.preview_request.settings["amount"] == 0.25
    assert int((ex.preview_mask == 0).sum()) == 40  # 0.25 * 160
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = 1000
    ex.flush()
    assert ex.preview_mask is None
    assert ex.status.kind == "error"
    assert "1000" in ex.status.text
    ex.close()


def test_synchronous_errors_go_to_on_error_or_to_the_caller():
    errors = []

    def job(value):
        raise KeyError(value)

    LatestOnly(job, on_error=errors.append).request("x")
    assert [type(e) for e in errors] == [KeyError]
    with pytest.raises(KeyError, match="y"):
        LatestOnly(job).request("y")


def test_close_unsubscribes_and_stops_the_worker():
    ex = Explorer(_model(), debounce=30.0)
    thread = ex._runner._thread
    assert thread is not None
    assert thread.is_alive()
    ex.close()
    assert not thread.is_alive()
    assert len(ex.session._events) == 0
    ex.session.apply("0.weight", "identity")  # no callback into the closed widgets
    assert ex.render_count == 0


def test_a_drag_draws_stale_pictures_at_a_bounded_interval(monkeypatch):
    # While a newer request waits, a finished preview is stale. The explorer skips it only if a
    # picture was drawn less than FRAME_INTERVAL_S ago, so a long drag still animates.
    from helpers.widgets import mlp
    from prune_explorer.widgets import Explorer
    from prune_explorer.widgets.parts.scheduler import LatestOnly
    from prune_explorer.widgets.tabs.explore import pane as explore_pane

    ex = Explorer(mlp(), debounce=None)
    monkeypatch.setattr(LatestOnly, "pending", property(lambda self: True))  # always superseded
    drawn = ex.render_count
    monkeypatch.setattr(explore_pane, "FRAME_INTERVAL_S", 3600.0)  # last picture is "recent"
    ex.ui.amount.value = 0.3
    assert ex.render_count == drawn  # stale and a picture is recent: skipped
    monkeypatch.setattr(explore_pane, "FRAME_INTERVAL_S", 0.0)  # last picture is "old"
    ex.ui.amount.value = 0.4
    assert ex.render_count == drawn + 1  # stale, but the picture was old: drawn
    assert ex.preview_request.settings["amount"] == 0.4
    ex.close()
