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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torch import nn

from .registry import TensorInfo
from .reports import memory_report

__all__ = ["CommitResult", "CommitReview", "review"]


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
    removed = tuple(k for n in names for k in (f"{n}_orig", f"{n}_mask") if k in keys)
    added = tuple(n for n in names if n not in keys)
    return CommitReview(tuple(names), rows, removed, added)
