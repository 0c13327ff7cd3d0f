"""The session layer: a pure-Python model of a pruning exploration (torch + pandas only).

:class:`Session` prunes a live model with preview, per-tensor history, undo, commit and reports;
:class:`Step` and :class:`Plan` describe pruning with string addresses only, so plans round-trip
through JSON and export to a stock-torch snippet.

Examples
--------
>>> import torch
>>> from prune_explorer.session import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
>>> print(s.plan.to_snippet().splitlines()[-1])
prune.l1_unstructured(model.get_submodule("0"), "weight", amount=0.5)
"""

from .analysis.conformance import pattern_report
from .errors import InterruptedAfterCommit, InvalidStepError, NotUndoableError
from .events import SessionEvent
from .history.tensor_history import HistoryEntry, TensorHistory
from .loop.results import RoundResult, RunInterrupted, ScheduleRun
from .loop.schedule import Schedule
from .model.state_dict import InvalidMaskError, StateDictMismatchError, load_pruned_state_dict
from .model.targets import TensorInfo
from .model.watch import ModelChangedError
from .parts.commits import CommitResult, CommitReview
from .plans.plan import InvalidPlanError, Plan
from .session import Session
from .shrink.description import InvalidDescriptionError
from .shrink.description import describe as describe_shrunk
from .shrink.description import rebuild as rebuild_shrunk
from .steps.step import Step
from .steps.training import TrainingStep
from .tensors.packed import PackedMask

__all__ = [
    "CommitResult",
    "CommitReview",
    "HistoryEntry",
    "InterruptedAfterCommit",
    "InvalidDescriptionError",
    "InvalidMaskError",
    "InvalidPlanError",
    "InvalidStepError",
    "ModelChangedError",
    "NotUndoableError",
    "PackedMask",
    "Plan",
    "RoundResult",
    "RunInterrupted",
    "Schedule",
    "ScheduleRun",
    "Session",
    "SessionEvent",
    "StateDictMismatchError",
    "Step",
    "TensorHistory",
    "TensorInfo",
    "TrainingStep",
    "describe_shrunk",
    "load_pruned_state_dict",
    "pattern_report",
    "rebuild_shrunk",
]
