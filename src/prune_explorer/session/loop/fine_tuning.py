"""The session's side of the loop: a fine-tune (and a rewind) is a step like a pruning step.

:class:`FineTuning` is a part of :class:`~prune_explorer.session.Session` (``state.py``). It
runs the three training steps of :mod:`~prune_explorer.session.steps.training` inside the session's
transaction, records each as an action of the journal with a snapshot of the weights before it
(:class:`~prune_explorer.session.loop.weights.WeightValues`), and appends a history entry to
every tensor (its mask unchanged: the step changed its values). So undo, reset, the plan and the
snippet need nothing new, and a failed or interrupted training leaves the model exactly as
before it.

What undo keeps
---------------
Undoing a fine-tune exactly needs the weights from before it: a copy of the model's parameters
and buffers (:attr:`ScheduleRun.rounds[i].kept_bytes <RoundResult.kept_bytes>` says how much
each round keeps; ``Session.undo_kept_bytes`` the total). ``Session(model,
undo_bytes=N)`` (or setting ``Session.undo_bytes``) caps it: once a new step would take
the total past ``N``, the oldest copies are let go, and undo stops there with one line saying
why, instead of restoring something approximate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from torch import nn

from ..errors import InvalidStepError
from ..events import SessionEvent
from ..history.tensor_history import HistoryEntry
from ..steps.step import Step
from ..steps.training import TrainFunction, TrainingStep, check_train
from ..transaction.journal import Action
from .results import ScheduleRun
from .runner import run_schedule
from .weights import WeightValues, refresh_all_pruned

if TYPE_CHECKING:
    from ..parts.stepping import Stepping
    from ..state import SessionState
    from .schedule import Schedule

__all__ = ["FineTuning", "check_undo_bytes"]



class _WeightsUndo:
    """Undo of a fine-tune or a rewind: the weights before it."""

    def __init__(self, values: WeightValues) -> None:
        self.values = values

    @property
    def nbytes(self) -> int:
        return self.values.nbytes

    def restore(self) -> None:
        self.values.restore()

    def counterpart(self) -> _WeightsUndo:
        return _WeightsUndo(WeightValues(self.values.model))


class _KeptUndo:
    """Undo of a keep_weights: the weights kept before it (or none)."""

    nbytes = 0

    def __init__(self, owner: FineTuning, kept: WeightValues | None) -> None:
        self.owner, self.kept = owner, kept

    def restore(self) -> None:
        self.owner._kept_weights = self.kept

    def counterpart(self) -> _KeptUndo:
        return _KeptUndo(self.owner, self.owner._kept_weights)


class FineTuning:
    """Fine-tuning, keeping and rewinding weights, and schedules, as session steps: a part of
    :class:`~prune_explorer.session.Session` (see ``state.py``), working on its state."""

    def __init__(self, state: SessionState, stepping: Stepping, undo_bytes: int | None) -> None:
        self._s = state
        self._stepping = stepping
        self._undo_bytes = undo_bytes
        self._kept_weights: WeightValues | None = None  # what a rewind writes back
        self._runs: list[ScheduleRun] = []

    # -- the cap on what undo keeps ---------------------------------------------------------------
    @property
    def undo_bytes(self) -> int | None:
        """The cap (None: none)."""
        return self._undo_bytes

    def set_undo_bytes(self, value: int | None) -> None:
        """Set the cap and let go of what it no longer allows."""
        with self._s._lock:
            self._undo_bytes = value
            self.enforce_undo_cap()

    @property
    def undo_kept_bytes(self) -> int:
        """Bytes of value copies the history keeps now."""
        with self._s._lock:
            return sum(a.kept_bytes for a in self._s._journal.actions)

    @property
    def kept_weights_bytes(self) -> int:
        """Bytes of the weights kept by the last ``keep_weights`` step (0 if none)."""
        with self._s._lock:
            return 0 if self._kept_weights is None else self._kept_weights.nbytes

    def enforce_undo_cap(self) -> None:
        """Let go of the oldest copies past the cap (after the outermost transaction only: a
        rollback needs every copy until then)."""
        journal = self._s._journal
        if self._undo_bytes is None or journal.depth:
            return
        actions = journal.actions
        total = sum(a.kept_bytes for a in actions)
        if total <= self._undo_bytes:
            return
        cut = -1
        for index, action in enumerate(actions):
            if total <= self._undo_bytes:
                break
            total -= action.kept_bytes
            cut = index
        for action in actions[: cut + 1]:
            if action.snapshots is not None:
                action.dropped = (
                    f"its {'weights' if action.kind == 'train' else 'state'} before it were "
                    f"let go: the history keeps at most Session.undo_bytes = "
                    f"{self._undo_bytes:,} bytes for undo and the later steps need them; "
                    "raise Session.undo_bytes (or set it to None) before the next steps to "
                    "keep more")
                action.snapshots = None

    # -- one training step ------------------------------------------------------------------------
    def fine_tune(self, train: TrainFunction, epochs: int) -> Step:
        """Call ``train(model, epochs)`` as one undoable step; returns the step.

        The step lands in the history (an entry on every tensor, masks unchanged) and the
        plan; :meth:`undo` restores every weight bit for bit (see :attr:`undo_bytes`). If
        ``train`` raises (Ctrl-C too), the weights are exactly as before.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 2))
        >>> before = model[0].weight.detach().clone()
        >>> def train(model, epochs):
        ...     with torch.no_grad():
        ...         model[0].weight.mul_(0.5)
        >>> s = Session(model)
        >>> s.fine_tune(train, epochs=1)
        TrainingStep.fine_tune(epochs=1)
        >>> _ = s.undo()
        >>> torch.equal(model[0].weight, before)
        True
        """
        where = "Session.fine_tune"
        step = _checked_step(where, lambda: TrainingStep.fine_tune(epochs))
        with self._stepping.transaction():
            done = self.apply_training(step, where, check_train(train, where))
        self.enforce_undo_cap()
        return done

    def apply_training(self, step: TrainingStep, where: str,
                       train: TrainFunction | None) -> Step:
        """Run ``step`` inside the current transaction and record it."""
        state, journal = self._s, self._s._journal
        names = tuple(state._known)
        self._stepping.check_in_sync(names, where)
        if step.method == "keep_weights":
            action = Action("train", step, [_KeptUndo(self, self._kept_weights)], ())
            journal.record(action)
            self._kept_weights = WeightValues(state._model)
        else:
            if step.method == "fine_tune" and train is None:
                raise InvalidStepError(
                    f"{where}: a fine_tune step needs train=, the training function "
                    "train(model, epochs) to run it; got None", "train")
            if step.method == "rewind" and self._kept_weights is None:
                raise InvalidStepError(
                    f"{where}: rewind writes back the weights a keep_weights step kept; no "
                    "keep_weights step came before it", "method")
            action = Action("train", step, [_WeightsUndo(WeightValues(state._model))], names)
            journal.record(action)
            if step.method == "fine_tune":
                assert train is not None
                train(state._model, step.epochs)
                self._stepping.check_in_sync(names, where)  # train must not prune or remove
                refresh_all_pruned(state._model)
            else:
                assert self._kept_weights is not None
                self._kept_weights.restore(exact=False)
            for name in names:
                history = state._histories[name]
                history.append(HistoryEntry(len(history), step, history[-1].mask))
            self._stepping.resee(names)
        journal.emit(SessionEvent("apply", action.names, (step,)))
        return step

    # -- schedules --------------------------------------------------------------------------------
    def fine_tune_schedule(
        self,
        session: Any,
        schedule: Schedule,
        train: TrainFunction,
        evaluate: Callable[[nn.Module], float] | None = None,
        *,
        targets: Sequence[str] | None = None,
        scope: str = "global",
        method: str = "l1_unstructured",
        on_round: Callable[[Any], object] | None = None,
        on_epoch: Callable[[int, int, int], object] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> ScheduleRun:
        """Run ``schedule``: rounds of pruning ``targets`` and training with ``train``.

        See :mod:`prune_explorer.session.loop.runner` for the rounds, the arguments and what
        Stop and Ctrl-C leave. Each round is one transaction of ordinary steps (the pruning,
        a ``rewind`` for a lottery ticket, a ``fine_tune``), each in the history, the plan and
        undo. Returns the :class:`ScheduleRun`, also kept in :attr:`runs`.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> from prune_explorer.session import Schedule
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(8, 4)))
        >>> run = s.fine_tune_schedule(Schedule.iterative(0.75, rounds=2, epochs_per_round=1),
        ...                            train=lambda model, epochs: None)
        >>> [(r.index, r.target, r.realized) for r in run.rounds]
        [(1, 0.5, 0.5), (2, 0.75, 0.75)]
        >>> run.outcome
        'finished round 2 of 2; the model is as at the end of round 2'
        """
        return run_schedule(session, self, schedule, train, evaluate, targets=targets,
                            scope=scope, method=method, on_round=on_round, on_epoch=on_epoch,
                            should_stop=should_stop)

    @property
    def runs(self) -> tuple[ScheduleRun, ...]:
        """Every schedule run of this session, in order (stopped ones too)."""
        with self._s._lock:
            return tuple(self._runs)

    def record_run(self, run: ScheduleRun) -> None:
        """Keep ``run`` in :attr:`runs`."""
        with self._s._lock:
            self._runs.append(run)


def check_undo_bytes(value: Any, where: str) -> int | None:
    """``value`` if it is None or an int >= 0."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 0):
        raise ValueError(f"{where}: undo_bytes must be None (no cap) or an int >= 0 (bytes); "
                         f"got {value!r}")
    return value


def _checked_step(where: str, make: Callable[[], TrainingStep]) -> TrainingStep:
    try:
        return make()
    except InvalidStepError as err:
        raise InvalidStepError(str(err).replace("TrainingStep", where, 1), err.field) from None
