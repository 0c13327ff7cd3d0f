"""The Fine-tune tab: prune, train, prune again, and watch accuracy against sparsity grow.

Choose a schedule (``pe-fine-tune-schedule``: one-shot, iterative in N rounds, gradual cubic,
lottery ticket rewinding to init or to epoch k), the target sparsity, the epochs, the tensors
and whether one threshold runs over all of them (global) or each is pruned to the target on its
own. *Run* (``pe-fine-tune-run``) calls :meth:`Session.fine_tune_schedule
<prune_explorer.session.Session.fine_tune_schedule>` on a background thread, so the page stays
live: the progress bar (``pe-fine-tune-progress``) shows the round and the epochs (each epoch
when ``train`` reports them through its ``progress=`` keyword, as the demo's does; else each
training call), the chart (``pe-fine-tune-chart``,
:func:`~prune_explorer.viz.plot_accuracy_vs_sparsity`) gains a point as each round ends, and
*Stop* (``pe-fine-tune-stop``) ends the run at the next epoch (or training call): the round in
progress is rolled back, so the model is exactly as at the end of the last completed round, or
as before the run, and the status line says which. Each round's steps land in the History tab
like any step (undo one, and its weights come back bit for bit).

The chart keeps every run of the session (``Session.runs``), each line labelled with its
schedule and epoch budget, beside the "no fine-tune" line: the same targets pruned one-shot to
a few sparsities and evaluated without training (``Session.sensitivity`` on the model as the
last run found it).

The tab needs the explorer's ``train`` (``train(model, epochs)``, training in place) and
``evaluate``: ``explore(model, evaluate=evaluate, train=train)``. Without ``train`` it only
says so (``pe-fine-tune-note``).

Examples
--------
>>> from prune_explorer.demo import evaluate, load_mlp, train
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(load_mlp(), debounce=None, evaluate=evaluate, train=train)
>>> ex.ui.tabs.selected_index = 5  # Fine-tune (the chart is drawn while it is on show)
>>> ex.ui.fine_tune_schedule.value = "iterative"
>>> ex.ui.fine_tune_target.value, ex.ui.fine_tune_rounds.value, ex.ui.fine_tune_epochs.value = (
...     0.75, 2, 1)
>>> ex.ui.fine_tune_run.click()
>>> ex.fine_tune_pane.wait()
True
>>> [r.index for r in ex.session.runs[-1].rounds]
[1, 2]
>>> len(ex.fine_tune_pane.plot.lines)
1
>>> ex.close()
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
from torch import nn

from prune_explorer.session import RoundResult, Schedule, ScheduleRun
from prune_explorer.session.analysis.wording import percent, plural
from prune_explorer.viz import make_figure, plot_accuracy_vs_sparsity, render_png
from prune_explorer.viz.curves import CurvePlot

from ..errors import WidgetInputError
from ..parts.html import esc, frame_table, message
from ..parts.pane import Pane
from ..parts.status import Progress
from .explore.metric import metric_label

if TYPE_CHECKING:
    from ..context import TabContext

__all__ = ["FineTunePane"]

#: The schedules offered, as the dropdown shows them.
SCHEDULES = (("one-shot", "one_shot"), ("iterative", "iterative"),
             ("gradual (cubic)", "gradual"), ("lottery ticket", "lottery_ticket"))

#: Sparsities of the "no fine-tune" line (besides the run's target).
BASELINE_SPARSITIES = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98)

def _width() -> widgets.Layout:
    return widgets.Layout(width="320px")  # one each: a shared Layout hides them all at once

NEEDS_TRAIN = (
    "The Fine-tune tab runs pruning schedules with your training function. Open the explorer "
    "with one: explore(model, evaluate=evaluate, train=train), where train(model, epochs) "
    "trains the model in place (building its optimizer inside) and evaluate(model) returns "
    "the accuracy the chart draws. The demo models ship both: from prune_explorer.demo import "
    "evaluate, train."
)


class _LiveRun:
    """The run in progress, for the chart: its label and the rounds completed so far."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.rounds: list[RoundResult] = []
        self.stopped = False


def _scalar(evaluate: Callable[[nn.Module], Any]) -> Callable[[nn.Module], float]:
    """``evaluate`` as one number: a dict's first value (the readout's first line)."""
    def score(model: nn.Module) -> float:
        value = evaluate(model)
        if isinstance(value, Mapping):
            value = next(iter(value.values()))
        return float(value)

    return score


class FineTunePane(Pane):
    """Schedule controls, Run and Stop, the progress bar, the chart of every run and the last
    run's table.

    Attributes
    ----------
    train : callable or None
        The explorer's training function (None: the tab only says how to give one).
    running : bool
        True while a run is in progress.
    last_run : ScheduleRun or None
        The run the Run button started last, once it is over (None while a run is in
        progress, or when it failed).
    plot : CurvePlot or None
        What the chart drew last.
    baseline : list of (float, float) or None
        The "no fine-tune" points of the last run's start.
    error : str or None
        Why the last Run did not start or failed.
    """

    def __init__(self, explorer: TabContext, *, train: Callable[[nn.Module, int], object] | None,
                 evaluate: Callable[[nn.Module], Any] | None,
                 metric_label: str | None = None) -> None:
        self.ex = explorer
        ui = explorer.ui
        if train is not None and not callable(train):
            raise TypeError(f"Explorer: train must be a function train(model, epochs) or None; "
                            f"got {type(train).__name__}")
        self.train = train
        self.evaluate = None if evaluate is None else _scalar(evaluate)
        self.label = _label(evaluate, metric_label)
        self.running = False
        self.last_run: ScheduleRun | None = None
        self.plot: CurvePlot | None = None
        self.baseline: list[tuple[float, float]] | None = None
        self.error: str | None = None
        self._live: _LiveRun | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._earlier: list[ScheduleRun] = []  # the session's runs when this one started
        self._shown: tuple[Any, ...] | None = None  # what the chart shows (see _chart_key)
        self._draw_lock = threading.Lock()  # the worker's and the tab's redraws, one at a time
        self._epochs_before = 0  # epochs of the rounds completed in the run in progress
        self.note = ui.add("fine_tune_note", widgets.HTML(value=""))
        if train is None:
            self.note.value = message("info", NEEDS_TRAIN)
            self.box = widgets.VBox([self.note])
            return
        names = list(explorer.session.names)
        self.schedule = ui.add("fine_tune_schedule", widgets.Dropdown(
            options=SCHEDULES, value="one_shot", description="schedule", layout=_width()))
        self.target = ui.add("fine_tune_target", widgets.FloatSlider(
            value=0.9, min=0.0, max=0.99, step=0.01, readout_format=".0%",
            continuous_update=False, description="target", layout=_width()))
        self.epochs = ui.add("fine_tune_epochs", widgets.BoundedIntText(
            value=2, min=0, max=10_000, description="epochs", layout=_width()))
        self.rounds = ui.add("fine_tune_rounds", widgets.BoundedIntText(
            value=3, min=1, max=100, description="rounds", layout=_width()))
        self.rewind = ui.add("fine_tune_rewind", widgets.BoundedIntText(
            value=0, min=0, max=10_000, description="rewind to", layout=_width(),
            tooltip="the epoch of round 0 whose weights each round rewinds to (0: init)"))
        self.scope = ui.add("fine_tune_scope", widgets.ToggleButtons(
            options=[("global", "global"), ("each tensor", "local")], value="global",
            tooltips=["one magnitude threshold over all the chosen tensors",
                      "each chosen tensor pruned to the target on its own"]))
        self.targets = ui.add("fine_tune_targets", widgets.SelectMultiple(
            options=names, value=tuple(explorer.session.default_targets()), rows=5,
            description="tensors", layout=_width()))
        self.run_button = ui.add("fine_tune_run", widgets.Button(
            description="Run", button_style="primary",
            tooltip="prune and train by the schedule (on a background thread)"))
        self.stop_button = ui.add("fine_tune_stop", widgets.Button(
            description="Stop", button_style="warning", disabled=True,
            tooltip="end the run: the round in progress is undone, the model keeps the last "
                    "completed round"))
        self.plan = ui.add("fine_tune_plan", widgets.HTML(value=""))  # what Run will do
        self.progress = ui.add("fine_tune_progress", widgets.IntProgress(
            value=0, min=0, max=1, description="", layout=widgets.Layout(width="320px")))
        self.progress_text = ui.add("fine_tune_progress_text", widgets.HTML(value=""))
        self.chart = ui.add("fine_tune_chart", widgets.Image(
            format="png", layout=widgets.Layout(flex="0 0 auto")))
        self.table = ui.add("fine_tune_table", widgets.HTML(value=""))
        settings = widgets.VBox([self.schedule, self.target, self.epochs, self.rounds,
                                 self.rewind])
        which = widgets.VBox([self.scope, self.targets])
        actions = widgets.VBox([widgets.HBox([self.run_button, self.stop_button]), self.plan,
                                widgets.HBox([self.progress, self.progress_text])])
        self.box = widgets.VBox([
            widgets.HBox([settings, which, actions],
                         layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start")),
            self.note,
            widgets.HBox([self.chart, self.table],
                         layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start")),
        ])
        for widget in (self.schedule, self.target, self.epochs, self.rounds, self.rewind):
            widget.observe(lambda _: self.refresh_settings(), names="value")
        self.run_button.on_click(lambda _: self.do_run())
        self.stop_button.on_click(lambda _: self.do_stop())
        self.refresh_settings()
        self._show_progress(None)
        self.chart.layout.display = "none"  # until there is something to draw

    # -- settings ---------------------------------------------------------------------------------
    def current_schedule(self) -> Schedule:
        """The schedule the controls describe.

        Raises
        ------
        WidgetInputError
            Settings the schedule refuses (the schedule's own words).
        """
        kind, target = self.schedule.value, float(self.target.value)
        epochs, rounds, rewind = int(self.epochs.value), int(self.rounds.value), \
            int(self.rewind.value)
        try:
            return Schedule.of_kind(kind, target, epochs, rounds,
                                    rewind_to="init" if rewind == 0 else rewind)
        except ValueError as err:
            raise WidgetInputError(str(err)) from None

    def refresh_settings(self) -> None:
        """Show the controls the chosen schedule takes and say what Run will do."""
        kind = self.schedule.value
        self.epochs.description = ("epochs/round" if kind in ("iterative", "lottery_ticket")
                                   else "epochs")
        self.rounds.layout.display = "" if kind in ("iterative", "lottery_ticket") else "none"
        self.rewind.layout.display = "" if kind == "lottery_ticket" else "none"
        try:
            schedule = self.current_schedule()
        except WidgetInputError as err:
            self.plan.value = message("error", str(err))
            self.run_button.disabled = True
            return
        self.run_button.disabled = self.running
        self.plan.value = message("info", describe_schedule(schedule))

    # -- Run and Stop -----------------------------------------------------------------------------
    def do_run(self) -> None:
        """Start the schedule on a background thread (the Run button)."""
        if self.train is None or self.running:
            return
        try:
            schedule = self.current_schedule()
            names = list(self.targets.value)
            if not names:
                raise WidgetInputError("Fine-tune: choose at least one tensor")
        except WidgetInputError as err:
            self.error = str(err)
            self.ex.status.error(err, "Fine-tune", source="fine_tune")
            return
        self.error = None
        self.last_run = None
        self._stop.clear()
        self._earlier = list(self.ex.session.runs)
        self._live = _LiveRun(schedule.label)
        self._epochs_before = 0
        self._set_running(True)
        self._show_progress((schedule.first_round, 0, schedule.epochs[0], schedule))
        self._thread = threading.Thread(
            target=self._work, args=(schedule, names, str(self.scope.value)),
            name="prune-explorer-fine-tune", daemon=True)
        self._thread.start()

    def do_stop(self) -> None:
        """Ask the run to end (the Stop button): after the epoch in progress when ``train``
        reports epochs (takes ``progress=``, as the demo's does), else after the training call
        in progress; the round in progress is rolled back."""
        if not self.running:
            return
        self._stop.set()
        self.stop_button.disabled = True
        self.ex.status.show("working", "Fine-tune: stopping… (at the end of the epoch in "
                                       "progress, or of the training call when train does not "
                                       "report epochs)")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the run in progress to end; True once none is running."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.running

    def _set_running(self, running: bool) -> None:
        self.running = running
        # the run owns the session between its rounds too: Apply, Undo... wait for it
        self.ex.reserve("a fine-tune run" if running else None)
        self.stop_button.disabled = not running
        for widget in (self.schedule, self.target, self.epochs, self.rounds, self.rewind,
                       self.scope, self.targets):
            widget.disabled = running
        if running:
            self.run_button.disabled = True
        else:
            self.refresh_settings()

    def _work(self, schedule: Schedule, names: list[str], scope: str) -> None:
        try:
            self.ex.status.run(
                "Fine-tune", lambda progress: self._run(schedule, names, scope, progress),
                done=lambda run: f"Fine-tune, {run.label}: {run.outcome}.")
        finally:
            self._live = None
            self._set_running(False)
            self._show_progress(None)
            self._redraw()  # nothing to do unless the run stopped, failed or was hidden

    def _run(self, schedule: Schedule, names: list[str], scope: str,
             progress: Progress) -> ScheduleRun:
        assert self.train is not None
        session = self.ex.session
        if self.evaluate is not None:
            self.baseline = self._baseline(names, scope, schedule.target)
        self._redraw()
        total = max(1, schedule.epochs_total)

        def on_epoch(index: int, done: int, epochs: int) -> None:
            self._show_progress((index, done, epochs, schedule))
            progress(self._epochs_before + done, total)

        # The explorer refreshes once per round (its summary, the History tab...), not after
        # each of the round's steps: the round's session changes are one batch.
        batch = contextlib.ExitStack()
        batch.enter_context(self.ex.batch())

        def on_round(result: RoundResult) -> None:
            nonlocal batch
            batch.close()  # the round's refresh
            batch = contextlib.ExitStack()
            batch.enter_context(self.ex.batch())
            self._on_round(result)

        try:
            run = session.fine_tune_schedule(
                schedule, self.train, self.evaluate, targets=names, scope=scope,
                on_round=on_round, on_epoch=on_epoch, should_stop=self._stop.is_set)
        finally:
            batch.close()
        self.last_run = run
        self.table.value = frame_table(
            run.table(), css_class="pe-fine-tune-frame",
            percent_columns=("target", "realized sparsity", "accuracy before",
                             "accuracy after", "mask IoU with previous"))
        return run

    def _on_round(self, result: RoundResult) -> None:
        live = self._live
        if live is not None:
            live.rounds.append(result)
        self._epochs_before += result.epochs
        self._redraw()

    def _baseline(self, names: list[str], scope: str,
                  target: float) -> list[tuple[float, float]]:
        """One-shot pruning of ``names`` (one global threshold) to a few sparsities, evaluated
        without training, on the model as it is now (the session's sensitivity sweep)."""
        assert self.evaluate is not None
        amounts = sorted({*BASELINE_SPARSITIES, round(target, 4)})
        frame = self.ex.session.sensitivity(self.evaluate, targets=names, amounts=amounts,
                                            scopes=("global",), progress=False)
        return [(float(x), float(y)) for x, y in zip(frame["sparsity"], frame["score"],
                                                     strict=True)]

    # -- drawing ----------------------------------------------------------------------------------
    def invalidate(self) -> None:
        """Redraw the chart if it is on show and misses a run or a round (runs made from
        code, or rounds that ended while the tab was hidden)."""
        if self.train is not None:
            self._redraw()

    def _chart_runs(self) -> list[Any]:
        live = self._live
        if live is not None:  # the session is busy with it: no need to ask
            return [*self._earlier, live]
        return list(self.ex.session.runs)

    def _redraw(self) -> None:
        """Draw every run and the baseline, unless the chart on show has them already or the
        tab is hidden (:meth:`invalidate` draws it once shown)."""
        if not self.ex.shows(self):
            return
        with self._draw_lock:
            runs = self._chart_runs()
            # a run's line changes with its label, its rounds and whether it stopped; the
            # finished run replacing the live one draws the same line
            key = (tuple((run.label, run.stopped, len(run.rounds)) for run in runs),
                   id(self.baseline))
            if key == self._shown:
                return
            if not runs and self.baseline is None:
                self.chart.layout.display = "none"
            else:
                # fixed margins: a constrained layout would double the cost of each redraw
                fig, ax = make_figure(figsize=(6.4, 4.2), dpi=80, layout=None)
                fig.subplots_adjust(left=0.12, right=0.97, bottom=0.12, top=0.92)
                self.plot = plot_accuracy_vs_sparsity(ax, runs, baseline=self.baseline,
                                                      metric_label=self.label)
                self.chart.value = render_png(fig, compress_level=1)
                self.chart.layout.display = ""
            self._shown = key

    def _show_progress(self, where: tuple[int, int, int, Schedule] | None) -> None:
        if where is None:
            self.progress.layout.visibility = "hidden"
            self.progress_text.value = ""
            return
        index, done, epochs, schedule = where
        total = max(1, schedule.epochs_total)
        self.progress.max = total
        self.progress.value = min(total, self._epochs_before + done)
        self.progress.layout.visibility = "visible"
        self.progress_text.value = esc(
            f"round {index} of {schedule.rounds} · epoch {done} of {epochs} "
            f"({self._epochs_before + done} of {plural(schedule.epochs_total, 'epoch')})")

    def close(self) -> None:
        """Stop the run in progress (after its training call) and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)


def describe_schedule(schedule: Schedule) -> str:
    """What a schedule will do, in one line.

    >>> describe_schedule(Schedule.iterative(0.875, rounds=3, epochs_per_round=2))
    'iterative, 3 rounds, 6 epochs: prunes to 50.0%, 75.0%, 87.5%.'
    """
    targets = [percent(t) for t, n in zip(schedule.targets, schedule.round_numbers,
                                          strict=True) if n > 0]
    return f"{schedule.label}: prunes to {', '.join(targets)}."


def _label(evaluate: Any, label: str | None) -> str:
    return "accuracy" if evaluate is None else metric_label(evaluate, label)
