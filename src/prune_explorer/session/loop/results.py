"""What a schedule run did: one :class:`RoundResult` per round, gathered in a
:class:`ScheduleRun`.

Examples
--------
>>> from prune_explorer.session import Schedule
>>> run = ScheduleRun(Schedule.one_shot(0.5, epochs=2), scope="global",
...                   method="l1_unstructured", targets=("fc.weight",), accuracy_start=0.9)
>>> run.add(RoundResult(index=1, target=0.5, realized=0.5, amount=0.5, accuracy_before=0.6,
...                     accuracy_after=0.85, epochs=2, iou_with_previous=None, kept_bytes=64))
>>> run.finish(stopped=False)
>>> run.outcome
'finished round 1 of 1; the model is as at the end of round 1'
>>> run.table()[["round", "target", "realized sparsity", "accuracy after"]]
   round  target  realized sparsity  accuracy after
0      1     0.5                0.5            0.85
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .schedule import Schedule

__all__ = ["RUN_COLUMNS", "RoundResult", "RunInterrupted", "ScheduleRun"]

#: Columns of :meth:`ScheduleRun.table`.
RUN_COLUMNS = ["round", "target", "realized sparsity", "amount", "accuracy before",
               "accuracy after", "epochs", "mask IoU with previous", "kept for undo (bytes)"]


@dataclass(frozen=True)
class RoundResult:
    """One round of a schedule, as it ran.

    Attributes
    ----------
    index : int
        The round's number: from 1 (the first pruning), except a lottery ticket's round 0,
        which only trains the dense network.
    target : float
        The absolute sparsity the round prunes to (share of the targets' entries).
    realized : float
        The sparsity the masks have after the round's pruning: torch rounds each tensor's (or,
        for global pruning, the union's) count of entries to prune, so it can differ from
        ``target`` by a rounding step.
    amount : float
        The relative amount given to the pruning method: the share of the entries still
        unpruned (0.0 where the round prunes nothing, e.g. a lottery ticket's round 0).
    accuracy_before : float or None
        ``evaluate(model)`` right after the round's pruning, before any rewind or training
        (None without ``evaluate``).
    accuracy_after : float or None
        ``evaluate(model)`` after the round's training.
    epochs : int
        Epochs the round trained.
    iou_with_previous : float or None
        Intersection over union of the kept entries (all targets together) after this round
        and after the previous one (None for the first round).
    kept_bytes : int
        Bytes the history keeps so this round can be undone exactly (the weights before its
        fine-tune and rewind, and the masks before its pruning, packed as bits).
    """

    index: int
    target: float
    realized: float
    amount: float
    accuracy_before: float | None
    accuracy_after: float | None
    epochs: int
    iou_with_previous: float | None
    kept_bytes: int = 0


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a schedule run. The model is exactly as at the end of the last completed
    round, or as before the run; ``run.outcome`` (also the message) says which, and ``run`` is
    the :class:`ScheduleRun` (also the last of ``Session.runs``)."""

    def __init__(self, run: ScheduleRun) -> None:
        super().__init__(run.outcome)
        self.run = run


class ScheduleRun:
    """The record of one :meth:`Session.fine_tune_schedule
    <prune_explorer.session.Session.fine_tune_schedule>` call: the schedule, its rounds so far,
    and whether it stopped early.

    A run is a measurement, not model state: undoing its steps leaves the record (the chart of
    every run still shows it).
    """

    def __init__(self, schedule: Schedule, *, scope: str, method: str,
                 targets: tuple[str, ...], accuracy_start: float | None) -> None:
        self.schedule = schedule
        self.scope = scope
        self.method = method
        self.targets = targets
        self.accuracy_start = accuracy_start
        self._rounds: list[RoundResult] = []
        self._stopped = False
        self._finished = False

    # -- filled in while it runs ------------------------------------------------------------------
    def add(self, result: RoundResult) -> None:
        """Record a completed round."""
        self._rounds.append(result)

    def finish(self, *, stopped: bool) -> None:
        """Mark the run as over (``stopped``: before its last round)."""
        self._stopped = stopped
        self._finished = True

    # -- what users read --------------------------------------------------------------------------
    @property
    def rounds(self) -> tuple[RoundResult, ...]:
        """The completed rounds, in order."""
        return tuple(self._rounds)

    @property
    def label(self) -> str:
        """The schedule in words with its epoch budget (for a legend), e.g.
        ``"gradual cubic, 10 epochs"``."""
        return self.schedule.label

    @property
    def epochs_total(self) -> int:
        """Epochs the schedule trains in all (its budget; :attr:`epochs_done` is what ran)."""
        return self.schedule.epochs_total

    @property
    def epochs_done(self) -> int:
        """Epochs the completed rounds trained."""
        return sum(r.epochs for r in self._rounds)

    @property
    def stopped(self) -> bool:
        """True when Stop or Ctrl-C ended the run before its last round."""
        return self._stopped

    @property
    def finished(self) -> bool:
        """True once the run is over (completed or stopped)."""
        return self._finished

    @property
    def outcome(self) -> str:
        """One sentence: how far the run went and what state the model is in.

        Rounds are numbered as :attr:`RoundResult.index`: from 1, except a lottery ticket's
        round 0 (the dense training).
        """
        last, first = self.schedule.rounds, self.schedule.first_round
        if not self._finished:
            return f"running: {len(self._rounds)} round(s) done of rounds {first} to {last}"
        if not self._rounds:
            return (f"stopped during round {first} of {last}; the model is exactly as before "
                    "the run")
        done = self._rounds[-1].index
        if not self._stopped:
            return (f"finished round {done} of {last}; the model is as at the end of round "
                    f"{done}")
        return (f"stopped after round {done} of {last}; the model is exactly as at the end "
                f"of round {done}")

    def table(self) -> pd.DataFrame:
        """One row per completed round (columns: :data:`RUN_COLUMNS`)."""
        rows = [[r.index, r.target, r.realized, r.amount, r.accuracy_before, r.accuracy_after,
                 r.epochs, r.iou_with_previous, r.kept_bytes] for r in self._rounds]
        return pd.DataFrame(rows, columns=RUN_COLUMNS)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "finished" if self._finished else "running"
        return f"ScheduleRun({self.label!r}, {len(self._rounds)} rounds done, {state})"
