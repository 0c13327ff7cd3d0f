"""Per-tensor history: the mask after every step, stored as bits.

Entry 0 is the tensor as the session found it (all ones unless it was already pruned); entry ``k``
is the mask after the ``k``-th step that touched the tensor. From it you can scrub through the
masks, see which entries a step pruned, and count.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> _ = s.apply("0.weight", "l1_unstructured", amount=2)
>>> _ = s.apply("0.weight", "l1_unstructured", amount=3)
>>> h = s.history("0.weight")
>>> h.pruned_counts()
[0, 2, 5]
>>> int(h.newly_pruned(2).sum())
3
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from ..analysis.wording import ReportFrame
from ..steps.step import Step
from ..tensors.packed import PackedMask, ShardedMask
from ..tensors.sharded import count_nonzero, is_dtensor

__all__ = ["HISTORY_COLUMNS", "HistoryEntry", "TensorHistory", "starting_mask"]

#: Columns of :meth:`TensorHistory.to_frame`.
HISTORY_COLUMNS = ["step", "method", "settings", "seed", "pruned", "sparsity", "newly_pruned"]


def starting_mask(entries: Sequence[HistoryEntry], values: torch.Tensor) -> PackedMask:
    """The kept mask a tensor's next step starts from: its latest entry's, except after a
    ``remove`` step, which made the pruning permanent and left no mask (every entry is kept
    again, the pruned ones as zeros). ``values``: the tensor now (a DTensor if sharded)."""
    last = entries[-1]
    if last.method != "remove":
        return last.mask
    if is_dtensor(values):
        return ShardedMask.ones_like(values)
    return PackedMask.ones(last.mask.shape, values.device)


@dataclass(frozen=True)
class HistoryEntry:
    """The state of one tensor after one step.

    ``index`` counts this tensor's steps (0 = as found); ``step`` is None for entry 0; ``mask``
    is the mask after the step (for a ``remove`` step: the mask that was made permanent).
    """

    index: int
    step: Step | None
    mask: PackedMask

    @property
    def method(self) -> str:
        """Method name, or ``"initial"`` for entry 0."""
        return "initial" if self.step is None else self.step.method

    @property
    def pruned(self) -> int:
        """Entries pruned after this step."""
        return self.mask.pruned

    @property
    def sparsity(self) -> float:
        """Fraction of entries pruned after this step."""
        return self.mask.sparsity


class TensorHistory:
    """The ordered history of one tensor (a read-only snapshot).

    Index it like a list (``history[k]`` is a :class:`HistoryEntry`); ``mask(k)``,
    ``newly_pruned(k)``, ``pruned_counts()``, ``fractions()`` and ``to_frame()`` read it.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import Session
    >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
    >>> _ = s.apply("0.weight", "ln_structured", amount=1, n=1, dim=0)
    >>> s.history("0.weight")
    TensorHistory('0.weight', shape=(2, 4), 2 entries: initial 0%, ln_structured 50%)
    """

    def __init__(self, name: str, entries: Sequence[HistoryEntry]) -> None:
        self.name = name
        self.entries: tuple[HistoryEntry, ...] = tuple(entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, k: int) -> HistoryEntry:
        return self.entries[k]

    def __iter__(self) -> Iterator[HistoryEntry]:
        return iter(self.entries)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the tensor."""
        return self.entries[0].mask.shape

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps that touched this tensor, in order."""
        return tuple(e.step for e in self.entries[1:] if e.step is not None)

    def mask(self, k: int = -1, dtype: torch.dtype = torch.bool) -> torch.Tensor:
        """Mask after step ``k`` (default: the latest), 1/True = kept."""
        return self.entries[k].mask.unpack(dtype)

    def newly_pruned(self, k: int) -> torch.Tensor:
        """Bool tensor of entries kept before step ``k`` and pruned after it.

        For ``k == 0`` these are the entries already pruned when the session found the tensor.
        """
        k = range(len(self.entries))[k]  # normalise negative k, IndexError if out of range
        after = self.entries[k].mask.unpack()
        if k == 0:
            return ~after
        return self.entries[k - 1].mask.unpack() & ~after

    def newly_pruned_count(self, k: int) -> int:
        """How many entries :meth:`newly_pruned` ``(k)`` holds, counted on the packed bits."""
        k = range(len(self.entries))[k]
        after = self.entries[k].mask
        if k == 0:
            return after.pruned
        before = self.entries[k - 1].mask
        if type(after) is not PackedMask or type(before) is not PackedMask:
            return count_nonzero(self.newly_pruned(k))  # sharded: counted over every rank
        return after.pruned_since(before)

    def revived_count(self, k: int) -> int:
        """Entries kept after step ``k`` that were pruned before it (0 unless a commit came in
        between: the next mask may keep the committed zeros), counted on the packed bits.

        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        >>> _ = s.apply("0.weight", "l1_unstructured", amount=2)
        >>> s.history("0.weight").revived_count(1)
        0
        """
        k = range(len(self.entries))[k]
        kept_before = self.entries[k - 1].mask.kept if k > 0 else self.entries[k].mask.numel
        return self.entries[k].mask.kept - kept_before + self.newly_pruned_count(k)

    def pruned_counts(self) -> list[int]:
        """Entries pruned after each step (entry 0 first)."""
        return [e.pruned for e in self.entries]

    def fractions(self) -> list[float]:
        """Fraction of entries pruned after each step (entry 0 first)."""
        return [e.sparsity for e in self.entries]

    def to_frame(self) -> pd.DataFrame:
        """One row per entry, columns :data:`HISTORY_COLUMNS`.

        ``settings`` is a dict (custom masks shown as their :class:`PackedMask`), ``seed`` (an
        object column) is the exact int seed, or None for deterministic steps,
        ``newly_pruned`` counts entries pruned by that step.
        """
        rows = []
        for k, entry in enumerate(self.entries):
            step = entry.step
            rows.append(
                {
                    "step": k,
                    "method": entry.method,
                    "settings": {} if step is None else dict(step.settings),
                    "seed": None if step is None else step.seed,
                    "pruned": entry.pruned,
                    "sparsity": entry.sparsity,
                    "newly_pruned": self.newly_pruned_count(k),
                }
            )
        frame = ReportFrame(rows, columns=HISTORY_COLUMNS)
        # Python ints and None: a float64 column (NaN for None) would round seeds above 2**53.
        frame["seed"] = pd.Series([row["seed"] for row in rows], index=frame.index,
                                  dtype=object)
        return frame

    def __repr__(self) -> str:
        shown = ", ".join(f"{e.method} {e.sparsity:.0%}" for e in self.entries[:6])
        more = f", ... ({len(self.entries) - 6} more)" if len(self.entries) > 6 else ""
        return (
            f"TensorHistory({self.name!r}, shape={self.shape}, {len(self.entries)} entries: "
            f"{shown}{more})"
        )
