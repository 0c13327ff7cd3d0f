"""The Fine-tune tab without a browser: set the controls, click Run, wait for the background
thread, then read the chart, the progress, the status line and the session's history."""

from __future__ import annotations

import threading

import pytest
import torch

from prune_explorer.session import Schedule
from prune_explorer.widgets import Explorer
from prune_explorer.widgets.tabs.fine_tune import NEEDS_TRAIN
from prune_explorer.widgets.tabs.registry import TAB_TITLES

FINE_TUNE_TAB = TAB_TITLES.index("Fine-tune")


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


_X = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
_Y = torch.randint(0, 3, (64,), generator=torch.Generator().manual_seed(2))


def train(model: torch.nn.Module, epochs: int) -> None:
    """A few deterministic SGD steps per epoch on fixed random data."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(epochs):
        for _ in range(3):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(_X), _Y).backward()
            optimizer.step()


@torch.no_grad()
def evaluate(model: torch.nn.Module) -> float:
    return float((model(_X).argmax(1) == _Y).float().mean())


def explorer(**kwargs) -> Explorer:
    """An explorer on the tiny model, showing the Fine-tune tab (its chart draws only then)."""
    kwargs.setdefault("train", train)
    kwargs.setdefault("evaluate", evaluate)
    ex = Explorer(tiny_model(), debounce=None, **kwargs)
    ex.ui.tabs.selected_index = FINE_TUNE_TAB
    return ex


def set_schedule(ex: Explorer, kind: str, *, target: float = 0.75, epochs: int = 1,
                 rounds: int = 2, rewind: int = 0) -> None:
    ui = ex.ui
    ui.fine_tune_schedule.value = kind
    ui.fine_tune_target.value = target
    ui.fine_tune_epochs.value = epochs
    ui.fine_tune_rounds.value = rounds
    ui.fine_tune_rewind.value = rewind


def run(ex: Explorer) -> None:
    ex.ui.fine_tune_run.click()
    assert ex.fine_tune_pane.wait(timeout=120)


@pytest.fixture
def ex():
    explorer_ = explorer()
    yield explorer_
    explorer_.close()


def test_without_train_the_tab_says_how_to_enable_it_and_offers_no_button():
    ex = Explorer(tiny_model(), debounce=None)
    try:
        assert ex.ui.tabs.titles[FINE_TUNE_TAB] == "Fine-tune"
        assert "fine_tune_run" not in ex.ui
        assert ex.fine_tune_pane.box.children == (ex.ui.fine_tune_note,)
        assert "train=train" in ex.ui.fine_tune_note.value
        assert "from prune_explorer.demo import" in NEEDS_TRAIN
        ex.fine_tune_pane.do_run()  # nothing to run, nothing happens
        assert ex.session.steps == ()
    finally:
        ex.close()


def test_train_must_be_callable():
    with pytest.raises(TypeError, match=r"train must be a function train\(model, epochs\).*"
                                        r"got int"):
        Explorer(tiny_model(), train=3)


def test_the_controls_show_what_each_schedule_takes_and_what_run_will_do(ex):
    ui = ex.ui
    set_schedule(ex, "one_shot", target=0.9, epochs=4)
    assert ui.fine_tune_rounds.layout.display == "none"
    assert ui.fine_tune_rewind.layout.display == "none"
    assert "one-shot, 4 epochs: prunes to 90.0%." in ui.fine_tune_plan.value
    set_schedule(ex, "iterative", target=0.875, epochs=2, rounds=3)
    assert ui.fine_tune_rounds.layout.display == ""
    assert ui.fine_tune_epochs.description == "epochs/round"
    assert "iterative, 3 rounds, 6 epochs: prunes to 50.0%, 75.0%, 87.5%." in (
        ui.fine_tune_plan.value)
    set_schedule(ex, "lottery_ticket", target=0.75, epochs=2, rounds=2, rewind=1)
    assert ui.fine_tune_rewind.layout.display == ""
    assert "rewind to epoch 1" in ui.fine_tune_plan.value
    assert ex.fine_tune_pane.current_schedule() == Schedule.lottery_ticket(
        0.75, rounds=2, epochs_per_round=2, rewind_to=1)
    ui.fine_tune_rewind.value = 0
    assert ex.fine_tune_pane.current_schedule().rewind_to == "init"
    assert not ui.fine_tune_run.disabled


def test_settings_the_schedule_refuses_turn_run_off_with_the_schedules_words(ex):
    set_schedule(ex, "lottery_ticket", epochs=2, rewind=5)
    assert ex.ui.fine_tune_run.disabled
    assert "rewind_to must be" in ex.ui.fine_tune_plan.value
    ex.ui.fine_tune_rewind.value = 1
    assert not ex.ui.fine_tune_run.disabled


def test_a_run_draws_each_round_lands_in_the_history_and_keeps_the_table(ex):
    set_schedule(ex, "iterative", target=0.75, epochs=1, rounds=2)
    run(ex)
    session = ex.session
    (done,) = session.runs
    assert [r.index for r in done.rounds] == [1, 2]
    pane = ex.fine_tune_pane
    assert pane.last_run is done
    line = pane.plot.lines[done.label]
    assert line.get_xdata().tolist() == [r.realized for r in done.rounds]
    assert line.get_ydata().tolist() == [r.accuracy_after for r in done.rounds]
    assert pane.plot.baseline is not None
    assert pane.baseline[0][0] == 0.0
    assert ex.ui.fine_tune_chart.value
    assert ex.ui.fine_tune_chart.layout.display == ""
    assert ex.ui.fine_tune_table.value.count("<tr") == 1 + 2
    # every round's steps are session steps, in the history of each tensor, undoable
    methods = [step.method for step in session.steps]
    assert methods == ["global_unstructured", "fine_tune"] * 2
    name = ex.tensor
    assert ex.ui.history.max == len(session.history(name)) - 1 == 4
    assert ex.status.kind == "ok"
    assert "finished round 2 of 2" in ex.status.text
    assert not ex.ui.fine_tune_run.disabled
    assert ex.ui.fine_tune_stop.disabled
    assert ex.ui.fine_tune_progress.layout.visibility == "hidden"


def test_the_chart_gains_each_point_as_its_round_ends():
    seen = []
    holder = {}

    def watching_train(model, epochs):
        plot = holder["ex"].fine_tune_pane.plot
        seen.append(0 if plot is None or not plot.lines else
                    len(next(iter(plot.lines.values())).get_xdata()))
        text = holder["ex"].ui.fine_tune_progress_text.value
        seen.append(text)
        train(model, epochs)

    ex = holder["ex"] = explorer(train=watching_train)
    try:
        set_schedule(ex, "iterative", target=0.875, epochs=1, rounds=3)
        run(ex)
    finally:
        ex.close()
    points, texts = seen[0::2], seen[1::2]
    assert points == [0, 1, 2]  # round k trains while the chart shows rounds 1..k-1
    assert texts[1].startswith("round 2 of 3 · epoch 0 of 1 (1 of 3 epochs)")


def test_stop_ends_the_run_after_the_training_in_progress_keeping_the_last_round():
    holder = {}
    calls = []

    def train_then_stop(model, epochs):
        calls.append(epochs)
        if len(calls) == 2:  # during round 2's training, as a click would
            holder["ex"].ui.fine_tune_stop.click()
            assert holder["ex"].ui.fine_tune_stop.disabled
        train(model, epochs)

    ex = holder["ex"] = explorer(train=train_then_stop)
    try:
        set_schedule(ex, "iterative", target=0.875, epochs=1, rounds=3)
        run(ex)
        (done,) = ex.session.runs
        assert done.stopped
        assert [r.index for r in done.rounds] == [1, 2]
        assert len(calls) == 2
        assert "stopped after round 2 of 3" in ex.status.text
        assert "exactly as at the end of round 2" in ex.status.text
        assert list(ex.fine_tune_pane.plot.lines) == [done.label + " (stopped)"]
        assert [s.method for s in ex.session.steps] == ["global_unstructured", "fine_tune"] * 2
        # a new run starts after a stopped one
        set_schedule(ex, "one_shot", target=0.9, epochs=1)
        calls.clear()
        calls.append("not the second")
        run(ex)
        assert len(ex.session.runs) == 2
        assert not ex.session.runs[-1].stopped
    finally:
        ex.close()


def test_a_failing_training_is_reported_and_leaves_the_model_as_before_the_round():
    def broken(model, epochs):
        raise RuntimeError("out of data")

    ex = explorer(train=broken)
    try:
        before = {k: v.clone() for k, v in ex.model.state_dict().items()}
        set_schedule(ex, "one_shot", target=0.5, epochs=1)
        run(ex)
        assert ex.status.kind == "error"
        assert "Fine-tune failed" in ex.status.text
        assert "out of data" in ex.status.text
        assert ex.session.steps == ()
        after = ex.model.state_dict()
        assert after.keys() == before.keys()
        assert all(torch.equal(before[k], after[k]) for k in before)
        assert not ex.ui.fine_tune_run.disabled
    finally:
        ex.close()


def test_no_tensor_chosen_is_an_error_in_the_status_line(ex):
    ex.ui.fine_tune_targets.value = ()
    ex.ui.fine_tune_run.click()
    assert ex.fine_tune_pane.wait(timeout=5)
    assert ex.status.kind == "error"
    assert "choose at least one tensor" in ex.status.text
    assert ex.session.runs == ()


def test_runs_made_from_code_show_when_the_tab_is_opened(ex):
    ex.ui.tabs.selected_index = 0
    ex.session.fine_tune_schedule(Schedule.one_shot(0.5, epochs=1), train, evaluate)
    assert ex.fine_tune_pane.plot is None  # hidden: not drawn
    ex.ui.tabs.selected_index = FINE_TUNE_TAB
    assert list(ex.fine_tune_pane.plot.lines) == ["one-shot, 1 epoch"]
    assert ex.ui.fine_tune_chart.layout.display == ""


def test_a_run_while_the_tab_is_hidden_is_drawn_once_it_is_shown(ex):
    set_schedule(ex, "iterative", target=0.75, epochs=1, rounds=2)
    ex.ui.tabs.selected_index = 1  # History: watch the rounds land
    run(ex)
    assert ex.fine_tune_pane.plot is None
    assert ex.ui.fine_tune_chart.layout.display == "none"
    ex.ui.tabs.selected_index = FINE_TUNE_TAB
    assert len(ex.fine_tune_pane.plot.lines[ex.session.runs[-1].label].get_xdata()) == 2


def test_the_chart_keeps_every_run_and_a_dict_evaluate_gives_its_first_value():
    ex = explorer(evaluate=lambda m: {"accuracy": evaluate(m), "other": -1.0})
    try:
        for target in (0.5, 0.75):
            set_schedule(ex, "one_shot", target=target, epochs=1)
            run(ex)
        set_schedule(ex, "gradual", target=0.9, epochs=2)
        run(ex)
        plot = ex.fine_tune_pane.plot
        assert list(plot.lines) == ["one-shot, 1 epoch", "gradual cubic, 2 epochs"]
        assert len(plot.lines["one-shot, 1 epoch"].get_xdata()) == 2
        assert all(0.0 <= y <= 1.0 for line in plot.lines.values() for y in line.get_ydata())
    finally:
        ex.close()


def test_close_during_a_run_stops_it():
    started = threading.Event()
    release = threading.Event()

    def slow(model, epochs):
        started.set()
        release.wait(30)
        train(model, epochs)

    ex = explorer(train=slow)
    set_schedule(ex, "iterative", target=0.875, epochs=1, rounds=3)
    ex.ui.fine_tune_run.click()
    assert started.wait(30)
    assert ex.fine_tune_pane.running
    assert not ex.ui.fine_tune_stop.disabled
    release.set()
    ex.close()
    assert not ex.fine_tune_pane.running
    assert len(ex.session.runs[-1].rounds) < 3


def test_other_actions_are_refused_while_a_run_is_in_progress():
    started = threading.Event()
    release = threading.Event()

    def slow(model, epochs):
        started.set()
        release.wait(30)
        train(model, epochs)

    ex = explorer(train=slow)
    try:
        set_schedule(ex, "one_shot", target=0.5, epochs=1)
        ex.ui.fine_tune_run.click()
        assert started.wait(30)
        ex.ui.apply.click()  # returns at once: the kernel stays free for Stop
        assert ex.status.kind == "error"
        assert ex.status.text == ("Apply failed: a fine-tune run is in progress; press Stop on "
                                  "its tab and try again")
        release.set()
        assert ex.fine_tune_pane.wait(timeout=60)
        assert [s.method for s in ex.session.steps] == ["global_unstructured", "fine_tune"]
        ex.ui.apply.click()  # free again
        assert len(ex.session.steps) == 3
    finally:
        release.set()
        ex.close()


def test_with_a_train_that_reports_epochs_stop_ends_within_the_round_and_rolls_it_back():
    holder = {}
    seen = []

    def reporting(model, epochs, progress=None):
        for epoch in range(1, epochs + 1):
            train(model, 1)
            seen.append(holder["ex"].ui.fine_tune_progress_text.value)
            if len(seen) == 3:  # the last epoch of round 1: the state the run must end in
                holder["end of round 1"] = {k: v.clone() for k, v in model.state_dict().items()}
            if len(seen) == 4:  # round 2, epoch 1 of 3: as a click would
                holder["ex"].ui.fine_tune_stop.click()
            if progress is not None:
                progress(epoch)

    ex = holder["ex"] = explorer(train=reporting)
    try:
        set_schedule(ex, "iterative", target=0.75, epochs=3, rounds=2)
        run(ex)
        (done,) = ex.session.runs
        assert [r.index for r in done.rounds] == [1]
        assert done.stopped
        assert "stopped after round 1 of 2" in ex.status.text
        assert seen[3].startswith("round 2 of 2 · epoch 0 of 3 (3 of 6 epochs)")
        assert len(seen) == 4  # not a fifth epoch
        assert [s.method for s in ex.session.steps] == ["global_unstructured", "fine_tune"]
        kept, now = holder["end of round 1"], ex.model.state_dict()
        assert kept.keys() == now.keys()
        assert all(torch.equal(kept[k], now[k]) for k in kept)  # round 2 rolled back exactly
    finally:
        ex.close()


def test_the_explorer_refreshes_once_per_round_and_the_chart_draws_once_per_round(
        monkeypatch):
    import prune_explorer.widgets.tabs.fine_tune as fine_tune

    ex = explorer()
    try:
        refreshes: list[int] = []
        charts: list[int] = []
        refresh, render = ex.refresh, fine_tune.render_png

        def counted_refresh() -> None:
            refreshes.append(len(ex.session.steps))
            refresh()

        def counted_render(*args, **kwargs):
            charts.append(len(ex.session.steps))
            return render(*args, **kwargs)

        monkeypatch.setattr(ex, "refresh", counted_refresh)
        monkeypatch.setattr(fine_tune, "render_png", counted_render)
        set_schedule(ex, "iterative", target=0.875, epochs=1, rounds=3)
        run(ex)
        # each round is 2 steps (prune, fine_tune): one refresh after each round's 2
        assert refreshes == [2, 4, 6]
        # the baseline before the first round, then one chart as each round ends
        assert charts == [0, 2, 4, 6]
        assert ex.ui.summary.value.count("6 steps") == 1
    finally:
        ex.close()
