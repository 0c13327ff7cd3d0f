"""What a commit (``prune.remove``) changes: bytes before and after, state_dict keys, result.

:func:`review_commit` answers "what would committing these tensors do?" without changing anything;
``Session.commit`` builds its :class:`CommitResult` from the same review, so the numbers a widget
shows before confirming are the numbers the commit reports.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
>>> review = s.review_commit()
>>> review.names, review.freed, review.keys_removed
(('0.weight',), 64, ('0.weight_orig', '0.weight_mask'))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from ..analysis.frames import memory_report
from ..errors import InvalidStepError
from ..events import SessionEvent
from ..model.hooks import find_hook
from ..model.targets import TensorInfo
from ..state import SessionState
from ..steps.checks import check_step
from ..steps.step import Step
from ..transaction.journal import locked
from .stepping import Stepping

__all__ = ["CommitResult", "CommitReview", "Commits", "review"]


@dataclass(frozen=True)
class CommitResult:
    """What :meth:`Session.commit` made permanent and the memory it released.

    ``bytes_before``/``bytes_after`` count, for the committed tensors, the ``_orig`` parameter,
    the ``_mask`` buffer and the pruned copy before, and the remaining parameter after.
    """

    names: tuple[str, ...]
    bytes_before: int
    bytes_after: int

    @property
    def freed(self) -> int:
        """Bytes released (``bytes_before - bytes_after``)."""
        return self.bytes_before - self.bytes_after

    def __repr__(self) -> str:
        return (
            f"CommitResult({len(self.names)} tensors made permanent, "
            f"{self.bytes_before:,} -> {self.bytes_after:,} bytes, freed {self.freed:,})"
        )


@dataclass(frozen=True)
class CommitReview:
    """What committing ``names`` would do: per-tensor bytes (``rows``: name, before, after,
    freed), totals, and the ``state_dict`` keys that disappear and appear."""

    names: tuple[str, ...]
    rows: tuple[tuple[str, int, int, int], ...]
    keys_removed: tuple[str, ...]
    keys_added: tuple[str, ...]

    @property
    def bytes_before(self) -> int:
        """Bytes of the ``_orig``, ``_mask`` and pruned copy of the tensors now."""
        return sum(r[1] for r in self.rows)

    @property
    def bytes_after(self) -> int:
        """Bytes of the plain parameters after the commit."""
        return sum(r[2] for r in self.rows)

    @property
    def freed(self) -> int:
        """Bytes the commit releases."""
        return self.bytes_before - self.bytes_after

    def result(self) -> CommitResult:
        """The :class:`CommitResult` the commit reports."""
        return CommitResult(self.names, self.bytes_before, self.bytes_after)

    def __repr__(self) -> str:
        return (f"CommitReview({len(self.names)} tensors, {self.bytes_before:,} -> "
                f"{self.bytes_after:,} bytes, removes {len(self.keys_removed)} keys)")


def review(model: nn.Module, known: Mapping[str, TensorInfo], names: Sequence[str]
           ) -> CommitReview:
    """The :class:`CommitReview` of committing ``names`` (pruned tensors; checked by the caller)."""
    memory = memory_report(model, known).set_index("name")
    keys = set(model.state_dict())
    rows = tuple(
        (n, int(memory.loc[n, "bytes_before"]), int(memory.loc[n, "bytes_after"]),
         int(memory.loc[n, "freed"]))
        for n in names
    )
    # a tied tensor's aliases hold the same _orig and _mask: their keys go too
    every = [a for n in names for a in (n, *known[n].aliases)]
    removed = tuple(k for n in every for k in (f"{n}_orig", f"{n}_mask") if k in keys)
    added = tuple(n for n in every if n not in keys)
    return CommitReview(tuple(names), rows, removed, added)


class Commits:
    """Review and commit (``prune.remove``) of several tensors at once (a part of ``Session``)."""

    def __init__(self, state: SessionState, stepping: Stepping) -> None:
        self._state = state
        self._lock = state._lock
        self._stepping = stepping

    @locked
    def review_commit(self, names: str | Iterable[str] | None = None) -> CommitReview:
        """What :meth:`commit` of ``names`` would do (bytes, state_dict keys); changes nothing.

        Raises :class:`InvalidStepError` for a name that is unknown, listed twice or not pruned.
        """
        chosen = self._commit_names(names, "Session.review_commit")
        return review(self._state._model, self._state._known, [s.targets[0] for s in chosen])

    def commit(self, names: str | Iterable[str] | None = None) -> CommitResult:
        """Make pruning permanent with ``prune.remove`` (not undoable); all or nothing.

        Parameters
        ----------
        names : str or iterable of str, optional
            Tensors to commit; default: every currently pruned tensor.

        Returns
        -------
        CommitResult
            The tensors committed and the bytes before/after (``freed`` = ``_orig`` + mask).
        """
        with self._stepping.transaction():
            return self.commit_in_transaction(names, "Session.commit")

    def _commit_names(self, names: Any, where: str) -> list[Step]:
        if names is None:
            state = self._state
            chosen = [n for n in state._known if find_hook(*state._locate(n)) is not None]
        elif isinstance(names, str):
            chosen = [names]
        elif isinstance(names, Iterable):
            chosen = list(names)
        else:
            raise InvalidStepError(
                f"{where}: names must be a tensor address, a list of them or None; got {names!r}",
                "names",
            )
        steps: list[Step] = []
        for name in chosen:
            if isinstance(name, str):  # an alias of a tied tensor commits that tensor
                name = self._state._aliases.get(name, name)
            step = Step._build(where, "remove", name, {}, None)
            check_step(self._state._model, self._state._known, step, where)
            if step in steps:
                raise InvalidStepError(f"{where}: names lists {name!r} twice", "names")
            steps.append(step)
        return steps

    def commit_in_transaction(self, names: Any, where: str) -> CommitResult:
        steps = self._commit_names(names, where)
        if not steps:
            return CommitResult((), 0, 0)
        chosen = tuple(s.targets[0] for s in steps)  # remove steps: one tensor each
        result = review(self._state._model, self._state._known, chosen).result()
        for step in steps:
            self._stepping.run(step, where)
        self._state._journal.commits.append(result)
        self._state._journal.emit(SessionEvent("commit", chosen, tuple(steps)))
        return result
