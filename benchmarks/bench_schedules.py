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
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("mlp", "cnn"), nargs="+", default=["mlp"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--targets", type=float, nargs="+", default=[0.8, 0.9, 0.95, 0.98])
    parser.add_argument("--scope", choices=("local", "global"), nargs="+", default=["local"])
    parser.add_argument("--each", action="store_true", help="print every seed's result")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread")
    for name in args.model:
        for scope in args.scope:
            table(name, args.seeds, args.targets, args.each, scope)


if __name__ == "__main__":
    main()
