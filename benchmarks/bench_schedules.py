"""Accuracy against sparsity for the four schedules on the demo models (issue 31's table).

For each model, seed and target sparsity, the same trained model (``trained_model(name, seed)``:
30 epochs from ``untrained_model(name, seed)``) is pruned by magnitude -- per tensor
(``--scope local``, the default, as in the issue's table) or with one threshold over all of
them (``--scope global``) -- the weights ``Session.default_targets()`` picks, and

- one-shot, no fine-tune (``Schedule.one_shot(s, 0)``);
- one-shot + 10 epochs (``Schedule.one_shot(s, 10)``);
- gradual cubic over 10 epochs (``Schedule.gradual(s, 10)``: 5 rounds of 2 epochs);
- lottery ticket, 3 rounds, rewind to init (``Schedule.lottery_ticket(s, 3, 30)``), started from
  the untrained model: round 0 trains it 30 epochs (the same training that made the trained
  model), then 3 rounds of prune, rewind, train 30 epochs: 120 epochs, 12x the one-shot's 10.

Training is the demo's deterministic ``train(model, epochs, seed=seed)`` on one thread;
accuracy is ``evaluate`` on the 450 held-out images. Prints the mean over the seeds (and each
seed with ``--each``), and the time per epoch. Asserts nothing.

    PYTHONPATH=src python benchmarks/bench_schedules.py                      # mlp, seeds 0 1 2
    PYTHONPATH=src python benchmarks/bench_schedules.py --model cnn --seeds 0 1 2

``--live`` instead times issue 31's "live" target: a 10-epoch run on the trained DigitsMLP
(``load_mlp()``, 90%, one threshold over the default targets), one-shot, iterative (5 rounds
of 2 epochs) and gradual cubic, through ``Session.fine_tune_schedule`` and through the
explorer's Fine-tune tab (driven headless: set its controls, click Run, wait; the chart drawn
at each round's end), each ``--repeat`` times, interleaved, with the load average beside each
figure; then once the lottery ticket at 98% (3 rounds of 30 epochs, rewind to init: 120 epochs,
12x). Wall times from the call (the click) to the run's end, the part spent inside ``train``
beside it. The first-call costs of a fresh process (torch's first optimizer imports
``torch._dynamo``; the first digits load imports scikit-learn; the first figure) are paid and
reported first, apart::

    PYTHONPATH=src python benchmarks/bench_schedules.py --live --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from prune_explorer.demo import evaluate, train
from prune_explorer.demo.checkpoints import trained_model, untrained_model
from prune_explorer.session import Schedule, Session

COLUMNS = ("one-shot, no fine-tune", "one-shot + 10 epochs", "gradual (cubic, 10 epochs)",
           "lottery ticket (3 rounds, rewind to init)")


def schedules(target: float) -> list[tuple[str, Schedule, bool]]:
    """(column, schedule, starts from the untrained model)."""
    return [
        (COLUMNS[0], Schedule.one_shot(target, 0), False),
        (COLUMNS[1], Schedule.one_shot(target, 10), False),
        (COLUMNS[2], Schedule.gradual(target, 10), False),
        (COLUMNS[3], Schedule.lottery_ticket(target, 3, 30), True),
    ]


def run_one(name: str, seed: int, schedule: Schedule, untrained: bool,
            dense: dict[str, nn.Module], scope: str) -> tuple[float, int, float]:
    """Accuracy at the end, epochs trained, seconds."""
    key = f"{name}/{seed}/{'init' if untrained else 'trained'}"
    if key not in dense:
        dense[key] = untrained_model(name, seed) if untrained else trained_model(name, seed)
    model = type(dense[key])()
    model.load_state_dict(dense[key].state_dict())

    def fit(m: nn.Module, epochs: int) -> None:
        train(m, epochs, seed=seed)

    session = Session(model, undo_bytes=0)  # a benchmark: no undo needed
    start = time.perf_counter()
    run = session.fine_tune_schedule(schedule, fit, evaluate, scope=scope)
    seconds = time.perf_counter() - start
    last = run.rounds[-1]
    assert last.accuracy_after is not None
    return last.accuracy_after, run.epochs_total, seconds


def table(name: str, seeds: list[int], targets: list[float], each: bool, scope: str,
          out: Callable[[str], None] = print) -> dict[tuple[float, str], float]:
    dense: dict[str, nn.Module] = {}
    means: dict[tuple[float, str], float] = {}
    epochs_time: list[tuple[int, float]] = []
    how = "per-tensor" if scope == "local" else "global"
    out(f"\n{name}: mean test accuracy over seeds {seeds} ({how} magnitude)\n")
    out("| target sparsity | " + " | ".join(COLUMNS) + " |")
    out("|---" * (len(COLUMNS) + 1) + "|")
    for target in targets:
        cells = []
        for column, schedule, untrained in schedules(target):
            values = []
            for seed in seeds:
                accuracy, epochs, seconds = run_one(name, seed, schedule, untrained, dense,
                                                    scope)
                values.append(accuracy)
                if epochs:
                    epochs_time.append((epochs, seconds))
                if each:
                    out(f"    {target:.0%} {column} seed {seed}: {accuracy:.1%} "
                        f"({epochs} epochs, {seconds:.1f} s)")
            means[(target, column)] = statistics.mean(values)
            budget = schedule.epochs_total
            note = f" ({budget // 10}x the epochs)" if column == COLUMNS[3] and target == \
                targets[-1] else ""
            cells.append(f"{means[(target, column)]:.1%}{note}")
        out(f"| {target:.0%} | " + " | ".join(cells) + " |")
    total_epochs = sum(e for e, _ in epochs_time)
    total_seconds = sum(s for _, s in epochs_time)
    out(f"\n{total_epochs} epochs trained in schedules in {total_seconds:.1f} s: "
        f"{total_seconds / total_epochs * 1000:.0f} ms per epoch, evaluation and pruning "
        "included")
    return means


LIVE = (("one-shot", "one_shot", 10, 1), ("iterative", "iterative", 2, 5),
        ("gradual (cubic)", "gradual", 10, 1))


def _load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _timed(seconds: list[float]) -> Callable[..., object]:
    """The demo's ``train``, adding the time spent in it to ``seconds[0]``."""
    def fit(model: nn.Module, epochs: int, *, progress: Callable[[int], object] | None = None
            ) -> object:
        start = time.perf_counter()
        try:
            return train(model, epochs, progress=progress)
        finally:
            seconds[0] += time.perf_counter() - start

    return fit


def _schedule(kind: str, target: float, epochs: int, rounds: int) -> Schedule:
    return Schedule.of_kind(kind, target, epochs, rounds)


def live_session(kind: str, target: float, epochs: int, rounds: int) -> tuple[float, float, str]:
    """Wall seconds of the run through the Session, seconds in ``train``, the run's label."""
    from prune_explorer.demo import load_mlp

    in_train = [0.0]
    session = Session(load_mlp())
    schedule = _schedule(kind, target, epochs, rounds)
    start = time.perf_counter()
    run = session.fine_tune_schedule(schedule, _timed(in_train), evaluate)
    return time.perf_counter() - start, in_train[0], run.label


def live_tab(kind: str, target: float, epochs: int, rounds: int) -> tuple[float, float, str, int]:
    """The same through the Fine-tune tab: wall seconds from the click to the run's end,
    seconds in ``train``, the run's label, and how many charts it drew."""
    from prune_explorer.demo import load_mlp
    from prune_explorer.widgets import Explorer
    from prune_explorer.widgets.tabs import fine_tune
    from prune_explorer.widgets.tabs.registry import TAB_TITLES

    in_train = [0.0]
    ex = Explorer(load_mlp(), debounce=None, evaluate=evaluate, train=_timed(in_train))
    try:
        ex.ui.tabs.selected_index = TAB_TITLES.index("Fine-tune")
        ui = ex.ui
        ui.fine_tune_schedule.value = kind
        ui.fine_tune_target.value = target
        ui.fine_tune_epochs.value = epochs
        ui.fine_tune_rounds.value = rounds
        ui.fine_tune_rewind.value = 0
        drawn = [0]
        render = fine_tune.render_png

        def counted(*args: Any, **kwargs: Any) -> bytes:
            drawn[0] += 1
            return render(*args, **kwargs)

        fine_tune.render_png = counted  # type: ignore[assignment]
        try:
            start = time.perf_counter()
            ui.fine_tune_run.click()
            assert ex.fine_tune_pane.wait(timeout=600)
            seconds = time.perf_counter() - start
        finally:
            fine_tune.render_png = render  # type: ignore[assignment]
        run = ex.fine_tune_pane.last_run
        assert run is not None, ex.fine_tune_pane.error
        return seconds, in_train[0], run.label, drawn[0]
    finally:
        ex.close()


def first_calls(out: Callable[[str], None] = print) -> None:
    """Pay and print the first-call costs of a fresh process, before any timed run."""
    from prune_explorer.demo.data import load_digits_split
    from prune_explorer.viz import make_figure, render_png

    start = time.perf_counter()
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    optimizer = time.perf_counter() - start
    start = time.perf_counter()
    load_digits_split()
    digits = time.perf_counter() - start
    start = time.perf_counter()
    render_png(make_figure(figsize=(2, 2), dpi=50)[0])
    figure = time.perf_counter() - start
    out(f"first-call costs, once per process ({_load()}): first optimizer (imports "
        f"torch._dynamo) {optimizer:.2f} s, first digits load (imports scikit-learn) "
        f"{digits:.2f} s, first figure {figure:.2f} s")


def live(repeat: int, out: Callable[[str], None] = print) -> None:
    first_calls(out)
    out("\n10-epoch runs on DigitsMLP (load_mlp(), 90%, global); wall s (s in train), load "
        "average 1/5/15 min")
    for label, kind, epochs, rounds in LIVE:
        walls: dict[str, list[float]] = {"session": [], "tab": []}
        for i in range(repeat):
            seconds, in_train, name = live_session(kind, 0.9, epochs, rounds)
            walls["session"].append(seconds)
            out(f"  {label:16s} session #{i + 1}: {seconds:5.2f} s ({in_train:.2f} in train)  "
                f"{_load()}  [{name}]")
            seconds, in_train, name, drawn = live_tab(kind, 0.9, epochs, rounds)
            walls["tab"].append(seconds)
            out(f"  {label:16s} tab     #{i + 1}: {seconds:5.2f} s ({in_train:.2f} in train, "
                f"{drawn} charts)  {_load()}")
        out(f"  {label:16s} median: session {statistics.median(walls['session']):.2f} s, tab "
            f"{statistics.median(walls['tab']):.2f} s")
    out("\nlottery ticket at 98% (3 rounds of 30 epochs, rewind to init: 120 epochs, 12x):")
    seconds, in_train, name = live_session("lottery_ticket", 0.98, 30, 3)
    out(f"  session: {seconds:.2f} s ({in_train:.2f} in train)  {_load()}  [{name}]")
    seconds, in_train, name, drawn = live_tab("lottery_ticket", 0.98, 30, 3)
    out(f"  tab:     {seconds:.2f} s ({in_train:.2f} in train, {drawn} charts)  {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("mlp", "cnn"), nargs="+", default=["mlp"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--targets", type=float, nargs="+", default=[0.8, 0.9, 0.95, 0.98])
    parser.add_argument("--scope", choices=("local", "global"), nargs="+", default=["local"])
    parser.add_argument("--each", action="store_true", help="print every seed's result")
    parser.add_argument("--live", action="store_true",
                        help="time 10-epoch runs through the Session and the Fine-tune tab")
    parser.add_argument("--repeat", type=int, default=3, help="--live: runs per schedule")
    args = parser.parse_args()
    if args.live:
        print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, "
              f"{torch.get_num_threads()} threads")
        live(args.repeat)
        return
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread")
    for name in args.model:
        for scope in args.scope:
            table(name, args.seeds, args.targets, args.each, scope)


if __name__ == "__main__":
    main()
