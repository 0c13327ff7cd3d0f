"""Running a :class:`~prune_explorer.session.loop.schedule.Schedule` on a session.

Each round is one transaction of ordinary session steps:

1. prune ``targets`` to the round's absolute target: one ``global_unstructured`` step over
   all of them (``scope="global"``) or one step per tensor (``scope="local"``), with torch's
   relative ``amount = (s[t] - s[t-1]) / (1 - s[t-1])`` of what is still unpruned, so the
   rounds compound through ``PruningContainer`` exactly as repeated ``torch.nn.utils.prune``
   calls do (``s[-1]``: the sparsity the targets have when the run starts). A round whose
   amount is 0 prunes nothing;
2. ``evaluate(model)`` (the round's *accuracy before*);
3. lottery ticket only: ``rewind`` every weight to the kept ones (masks unchanged);
4. ``fine_tune``: one call ``train(model, epochs)``;
5. ``evaluate(model)`` (*accuracy after*).

A lottery ticket's round 0 instead trains the dense model, keeping the weights to rewind to
first (``rewind_to="init"``) or after ``train(model, k)`` (``rewind_to=k``; then
``train(model, epochs_per_round - k)``).

Stop and Ctrl-C
---------------
``should_stop()`` is asked before every round and before every training call; when it says
True, the round in progress is rolled back and the run ends. Ctrl-C (``KeyboardInterrupt``) at
any moment does the same and then raises :class:`RunInterrupted`. Either way the model is
exactly as at the end of the last completed round, or as before the run, and
:attr:`ScheduleRun.outcome` says which.

Per epoch
---------
When ``train`` takes a keyword ``progress`` (as :func:`prune_explorer.demo.train` does), the
session calls ``train(model, epochs, progress=f)``, and ``train`` calls ``f(epochs_done)``
after each epoch: ``on_epoch`` then reports every epoch and ``should_stop`` is asked there too
(``f`` raises to stop; the round is rolled back). Otherwise a training call runs to its end
before Stop is seen, and ``on_epoch`` is called before and after it. ``progress`` only
observes: replays call ``train(model, epochs)``.

Threads
-------
When every target is small (at most ``prune.engine.SMALL`` entries, as the demo models'
are), the session's own work in a round -- the pruning steps, the masks read for the table --
runs on one intra-op thread of the calling thread, restored right after (``train`` and
``evaluate`` run with the caller's setting). Ops on tensors that small gain nothing from a
second thread, and on a shared CPU every parallel region waits for a time slice: a global
step on ``DigitsMLP`` took 310 ms at 2 threads against 19 ms at 1 under a load of 8 on 2
cores. The masks are the same either way (they come from integer keys and comparisons).

Optimizers
----------
``train`` builds its own optimizer on each call (``torch.optim.Adam(model.parameters())``): the
pruned entries of a ``*_orig`` get a zero gradient (the forward pre-hook multiplies them by 0),
so a fresh Adam or SGD leaves them where they are, and they never reach the output. Momentum
or Adam moments carried over from before a prune, or weight decay, do move them -- harmlessly:
the mask keeps them out of every forward pass and commit writes them as zeros -- but then the
model is no longer what a fresh optimizer gives, and a replay must do the same. A rewind writes
*every* entry of each ``*_orig`` back, pruned ones included.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import torch
from torch import nn

from prune_explorer.prune.engine import SMALL

from ..errors import InterruptedAfterCommit, InvalidStepError
from ..steps.methods import GLOBAL_METHODS
from ..steps.step import Step
from ..steps.training import TrainFunction, TrainingStep, check_train
from ..tensors.packed import PackedMask
from ..transaction.interrupts import thread_state_kept
from .results import RoundResult, RunInterrupted, ScheduleRun
from .schedule import Schedule, relative_amount


class FineTuningPart(Protocol):
    """What the runner uses of the session's fine-tuning part
    (:class:`~prune_explorer.session.loop.fine_tuning.FineTuning`)."""

    @property
    def undo_kept_bytes(self) -> int:
        """Bytes the history keeps for undo."""

    def apply_training(self, step: TrainingStep, where: str,
                       train: TrainFunction | None) -> Step:
        """Run a training step inside the current transaction."""

    def enforce_undo_cap(self) -> None:
        """Let go of the oldest copies past the cap."""

    def record_run(self, run: ScheduleRun) -> None:
        """Keep ``run`` in the session's runs."""

__all__ = ["run_schedule"]

SCOPES = ("global", "local")


class _Stopped(BaseException):
    """Raised inside a round when ``should_stop()`` says so (never escapes; a BaseException
    so that a training loop's ``except Exception`` does not swallow it)."""


def takes_progress(train: Callable[..., object]) -> bool:
    """Whether ``train`` takes a ``progress`` keyword (see the module docstring)."""
    try:
        parameters = inspect.signature(train).parameters
    except (TypeError, ValueError):  # a builtin or an odd callable: call it plainly
        return False
    found = parameters.get("progress")
    return found is not None and found.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                inspect.Parameter.POSITIONAL_OR_KEYWORD)


@contextlib.contextmanager
def own_work_threads(small: bool) -> Iterator[None]:
    """The session's own work in a round: on one intra-op thread when every target is
    ``small``, the calling thread's setting given back on any exit (see "Threads" in the
    module docstring); else as it is."""
    if not small:
        yield
        return
    with thread_state_kept():
        torch.set_num_threads(1)
        yield


def _sparsity(masks: Sequence[PackedMask]) -> float:
    total = sum(m.numel for m in masks)
    return sum(m.pruned for m in masks) / total if total else 0.0


def _iou(before: Sequence[PackedMask], after: Sequence[PackedMask]) -> float:
    inter = union = 0
    for a, b in zip(before, after, strict=True):
        ka, kb = a.unpack().reshape(-1).cpu(), b.unpack().reshape(-1).cpu()
        inter += int((ka & kb).sum())
        union += int((ka | kb).sum())
    return inter / union if union else 1.0


def run_schedule(
    session: Any,
    part: FineTuningPart,
    schedule: Schedule,
    train: TrainFunction,
    evaluate: Callable[[nn.Module], float] | None = None,
    *,
    targets: Sequence[str] | None = None,
    scope: str = "global",
    method: str = "l1_unstructured",
    on_round: Callable[[RoundResult], object] | None = None,
    on_epoch: Callable[[int, int, int], object] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ScheduleRun:
    """Run ``schedule`` on ``session`` (see the module docstring for the rounds).

    Parameters
    ----------
    session : Session
        The session that runs it (its public ``apply``, ``apply_global``, ``transaction``).
    part : FineTuning
        Its fine-tuning part (the training steps, the runs, the cap on undo).
    schedule : Schedule
    train : callable
        ``train(model, epochs)``, training the model in place (build the optimizer inside).
    evaluate : callable, optional
        ``evaluate(model) -> float`` (e.g. accuracy), measured after each round's pruning and
        after its training; without it the accuracies are None.
    targets : sequence of str, optional
        Tensor addresses to prune (default: ``session.default_targets()``).
    scope : {"global", "local"}
        One threshold across all targets, or each tensor pruned to the target on its own.
    method : {"l1_unstructured", "random_unstructured"}
        Magnitude or random pruning.
    on_round : callable, optional
        ``on_round(result)`` after each completed round, with its :class:`RoundResult`.
    on_epoch : callable, optional
        ``on_epoch(round, epochs_done, epochs)`` before and after each training call.
    should_stop : callable, optional
        ``should_stop() -> bool``, asked before each round and each training call.

    Returns
    -------
    ScheduleRun
        Also appended to ``session.runs``.

    Raises
    ------
    RunInterrupted
        Ctrl-C: after rolling back the round in progress (``err.run`` is the run).
    """
    where = "Session.fine_tune_schedule"
    if not isinstance(schedule, Schedule):
        raise TypeError(f"{where}: schedule must be a Schedule (Schedule.one_shot(...), ...); "
                        f"got {type(schedule).__name__}")
    train = check_train(train, where)
    for name, value in (("evaluate", evaluate), ("on_round", on_round),
                        ("on_epoch", on_epoch), ("should_stop", should_stop)):
        if value is not None and not callable(value):
            raise TypeError(f"{where}: {name} must be callable or None; got "
                            f"{type(value).__name__}")
    if scope not in SCOPES:
        raise InvalidStepError(f"{where}: scope must be 'global' or 'local'; got {scope!r}",
                               "scope")
    if method not in GLOBAL_METHODS:
        raise InvalidStepError(f"{where}: method must be one of {GLOBAL_METHODS}; got "
                               f"{method!r}", "method")
    s = session
    names = tuple(s.default_targets() if targets is None else
                  (s._arguments.check_name(t, where) for t in targets))
    if not names:
        raise InvalidStepError(f"{where}: targets must name at least one tensor; got []",
                               "targets")
    stop = should_stop or (lambda: False)

    def masks() -> list[PackedMask]:
        return [s._histories[n][-1].mask for n in names]

    def measure() -> float | None:
        return None if evaluate is None else float(evaluate(s.model))

    per_epoch = takes_progress(train)

    def trained(index: int, epochs: int, done: int, total: int) -> None:
        if stop():
            raise _Stopped
        if on_epoch is not None:
            on_epoch(index, done, total)
        function = train
        if per_epoch:
            def progress(epochs_done: int) -> None:  # called by train after each epoch
                if on_epoch is not None:
                    on_epoch(index, done + epochs_done, total)
                if epochs_done < epochs and stop():
                    raise _Stopped

            def function(model: nn.Module, epochs: int) -> object:
                return train(model, epochs, progress=progress)  # type: ignore[call-arg]
        part.apply_training(TrainingStep.fine_tune(epochs), where, function)
        if on_epoch is not None and not per_epoch:
            on_epoch(index, done + epochs, total)

    with s.lock:
        start = masks()
        accuracy_start = measure()
    small = all(m.numel <= SMALL for m in start)
    run = ScheduleRun(schedule, scope=scope, method=method, targets=names,
                      accuracy_start=accuracy_start)
    previous = {n: m.pruned / m.numel if m.numel else 0.0 for n, m in zip(names, start,
                                                                           strict=True)}
    previous_union = _sparsity(start)
    rewind = schedule.kind == "lottery_ticket"
    rows = zip(schedule.round_numbers, schedule.targets, schedule.epochs, strict=True)
    last_masks = start if schedule.first_round == 1 else None
    pending: RoundResult | None = None
    try:
        for index, target, epochs in rows:
            if stop():
                raise _Stopped
            pending = None
            with s.transaction():
                kept_before = part.undo_kept_bytes
                amount = 0.0
                if rewind and index == 0:  # the dense training, keeping the weights
                    before = measure()
                    k = schedule.rewind_to
                    if k == "init":
                        part.apply_training(TrainingStep.keep_weights(), where, None)
                        trained(index, epochs, 0, epochs)
                    else:
                        assert isinstance(k, int)
                        trained(index, k, 0, epochs)
                        part.apply_training(TrainingStep.keep_weights(), where, None)
                        trained(index, epochs - k, k, epochs)
                else:
                    with own_work_threads(small):
                        if scope == "global":
                            amount = relative_amount(previous_union, target)
                            if amount > 0:
                                s.apply_global(list(names), method, amount=amount)
                        else:
                            for name in names:
                                local = relative_amount(previous[name], target)
                                amount = max(amount, local)
                                if local > 0:
                                    s.apply(name, method, amount=local)
                    before = measure()
                    if rewind:
                        if stop():
                            raise _Stopped
                        part.apply_training(TrainingStep.rewind(), where, None)
                    trained(index, epochs, 0, epochs)
                after = measure()
                now = masks()
                with own_work_threads(small):
                    iou = None if last_masks is None else _iou(last_masks, now)
                pending = RoundResult(
                    index=index, target=target, realized=_sparsity(now), amount=amount,
                    accuracy_before=before, accuracy_after=after, epochs=epochs,
                    iou_with_previous=iou, kept_bytes=part.undo_kept_bytes - kept_before)
            run.add(pending)
            pending = None
            last_masks = now
            if index > 0:
                previous = dict.fromkeys(names, target)
                previous_union = target
            part.enforce_undo_cap()
            if on_round is not None:
                on_round(run.rounds[-1])
    except _Stopped:
        run.finish(stopped=True)
        part.record_run(run)
        return run
    except KeyboardInterrupt as err:
        if isinstance(err, InterruptedAfterCommit) and pending is not None:
            run.add(pending)  # the round took effect before the interrupt
        run.finish(stopped=True)
        part.record_run(run)
        raise RunInterrupted(run) from None
    except BaseException:
        run.finish(stopped=True)
        part.record_run(run)
        raise
    run.finish(stopped=False)
    part.record_run(run)
    return run
