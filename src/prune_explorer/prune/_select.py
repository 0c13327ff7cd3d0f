"""Exact selection of the k smallest entries without sorting everything.

``torch.nn.utils.prune`` picks the entries to prune with ``torch.topk``, which on the CPU builds and
partially sorts an array of (value, index) pairs for the whole tensor: seconds for a 16M-element
weight, and several times the tensor's memory.  Pruning only needs the *set* of the k smallest
entries, so we find the k-th smallest value instead and compare every entry against it:

1. Sort a strided sample (about 65k entries) and read off a narrow bracket ``[lo, hi]`` that should
   hold the k-th smallest value.
2. Count the entries below ``lo`` and up to ``hi`` (vectorised, multi-threaded comparisons).  If the
   k-th value is not inside the bracket, widen it and count again; the last resort brackets
   everything, so the answer is always exact and only the speed depends on the sample.
3. Gather the few entries inside the bracket and take their exact order statistic.

The result is a threshold ``v`` and how ties at ``v`` are split.  When the k-th value has no tie
that straddles the cut, the selected set is the same as ``topk``'s: that set is unique.  When it
does, ``topk``'s choice depends on its internal partial sort; callers that must reproduce it
bit-for-bit (the random methods, whose draws are meant to match torch's) ask for ``exact_ties`` and
fall back to ``torch.topk``; the deterministic methods take the tied entries with the lowest flat
index first (same count as torch, documented deviation).

Entries that are NaN rank after every number, as in ``topk``.

All work happens on the tensors' own device; only the sample (and the scalar threshold) is small.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import torch

__all__ = [
    "SMALL",
    "Threshold",
    "get_tie_break",
    "select_smallest",
    "set_tie_break",
    "supports_fast_select",
    "tie_break",
]

#: At or below this many elements, callers use ``torch.topk`` directly (it is fast there, and its
#: tie order then matches torch's exactly).
SMALL = 1 << 17

_SAMPLE = 1 << 16
_CHUNK = 1 << 20  # entries per piece when scanning (4 MiB of float32: stays in cache)
_FAST_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


_TIE_MODES = ("index", "torch")
_TIE_BREAK: ContextVar[str] = ContextVar("prune_explorer_tie_break", default="index")


def get_tie_break() -> str:
    """The current tie rule for the deterministic methods: ``"index"`` or ``"torch"``."""
    return _TIE_BREAK.get()


def _check_mode(mode: str) -> None:
    if mode not in _TIE_MODES:
        raise ValueError(f"tie_break: mode must be one of {_TIE_MODES}; got {mode!r}")


def set_tie_break(mode: str) -> None:
    """Choose how L1 pruning splits entries that tie exactly at the cut on large tensors.

    ``"index"`` (default): the same *count* as torch, lowest flat index first -- fast.
    ``"torch"``: exactly torch's choice, by calling ``torch.topk`` whenever a tie straddles the
    cut -- identical masks always, at torch's speed in those cases. Tensors of at most
    ``SMALL`` entries always get torch's choice.

    Examples
    --------
    >>> from prune_explorer import prune
    >>> prune.set_tie_break("torch"); prune.get_tie_break()
    'torch'
    >>> prune.set_tie_break("index")
    """
    _check_mode(mode)
    _TIE_BREAK.set(mode)


@contextlib.contextmanager
def tie_break(mode: str) -> Iterator[None]:
    """Context manager form of :func:`set_tie_break`.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> with prune.tie_break("torch"):
    ...     m = prune.l1_unstructured(torch.nn.Linear(4, 4), "weight", amount=0.5)
    """
    _check_mode(mode)
    token = _TIE_BREAK.set(mode)
    try:
        yield
    finally:
        _TIE_BREAK.reset(token)


def exact_ties() -> bool:
    """Whether the current tie rule asks for torch's exact choice."""
    return _TIE_BREAK.get() == "torch"


def supports_fast_select(dtype: torch.dtype) -> bool:
    """Whether :func:`select_smallest` handles keys of this dtype (floating point only)."""
    return dtype in _FAST_DTYPES


@dataclass(frozen=True)
class Threshold:
    """Which entries are the k smallest: those ``< value``, plus ties at ``value``.

    Attributes
    ----------
    value
        0-d tensor, the k-th smallest key (on the CPU; compare with ``.to(device)``).
    inclusive
        True when every entry equal to ``value`` is selected (no tie straddles the cut).
    ties
        When ``inclusive`` is False: for each key tensor, the flat indices of the entries equal to
        ``value`` that are selected (``None`` where none are).
    """

    value: torch.Tensor
    inclusive: bool
    ties: tuple[torch.Tensor | None, ...] | None = None

    def selected(self, keys: torch.Tensor, i: int = 0) -> torch.Tensor:
        """Boolean tensor, True where ``keys`` (the ``i``-th key tensor) is among the k smallest."""
        v = self.value.to(keys.device)
        if self.inclusive:
            return keys <= v
        out = keys < v
        ties = self.ties[i] if self.ties is not None else None
        if ties is not None:
            out.view(-1)[ties.to(keys.device)] = True
        return out

    def write_unselected(self, keys: torch.Tensor, out: torch.Tensor, i: int = 0) -> torch.Tensor:
        """Write 1 where the entry is *not* selected, 0 where it is, into ``out`` (may be ``keys``).

        ``out`` is a floating tensor of the keys' shape: this builds a pruning mask in place,
        without a temporary boolean tensor.
        """
        v = self.value.to(keys.device)
        # Not "keys > v": NaN entries are never selected, but ``NaN > v`` is False. So write
        # the selection and flip it (out = 1 - selected): two cheap in-place passes.
        if self.inclusive:
            torch.le(keys, v, out=out)
        else:
            torch.lt(keys, v, out=out)
            ties = self.ties[i] if self.ties is not None else None
            if ties is not None:
                out.view(-1)[ties.to(out.device)] = 1
        return out.neg_().add_(1)


def select_smallest(
    keys: Sequence[torch.Tensor], k: int, *, exact_ties: bool
) -> Threshold | None:
    """Find the k smallest entries across ``keys`` (flat, contiguous, one floating dtype).

    Parameters
    ----------
    keys
        One or more 1-D tensors, read in order as if concatenated. They may live on different
        devices.
    k
        How many entries to select, ``1 <= k <= total``.
    exact_ties
        If True, return ``None`` when ties at the cut make the selected set ambiguous (the caller
        then reproduces ``torch.topk``'s choice by calling it). If False, ties are resolved
        lowest flat index first.

    Returns
    -------
    Threshold or None
        ``None`` also when the k smallest would have to include NaN entries (callers then use
        ``torch.topk``, which defines that order).

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([0.5, 0.1, 0.9, 0.3])
    >>> thr = select_smallest([x], 2, exact_ties=True)
    >>> thr.selected(x).tolist()
    [False, True, False, True]
    """
    total = sum(x.numel() for x in keys)
    if not 1 <= k <= total:
        raise ValueError(f"select_smallest: k must be in [1, {total}]; got {k}")
    dtype = keys[0].dtype
    cpu = torch.device("cpu")

    # Work through cache-sized pieces: the comparisons, count and gather below then read each
    # piece from cache rather than memory (views, no copies).
    chunks = [c for x in keys for c in x.split(_CHUNK)]

    # 1. Bracket from a strided sample (no RNG: the global generator must not advance).
    stride = max(1, total // _SAMPLE)
    sample = torch.cat([x[::stride].to(cpu) for x in keys])
    m = sample.numel()
    q = k / total
    margin = 3.0 * math.sqrt(max(m * q * (1.0 - q), 1.0)) + 8.0
    inf = torch.tensor(math.inf, dtype=dtype)

    def order_stat(i: float) -> torch.Tensor | None:
        # the sample's i-th smallest (0-based), or None past either end (= no bound there)
        j = math.floor(i) if i < q * m else math.ceil(i)
        if j <= 0 or j >= m - 1:
            return None
        value = torch.kthvalue(sample, j + 1).values
        return None if bool(torch.isnan(value)) else value  # NaN bounds nothing

    # 2. Count below lo and up to hi, and gather the entries between, tensor by tensor, so no
    #    model-sized temporary outlives one tensor. Widen the bracket until it holds the k-th.
    bracket = None
    for attempt in range(4):
        if attempt < 3:
            lo, hi = order_stat(q * m - margin), order_stat(q * m + margin)
        else:  # last resort: everything that is not NaN
            lo, hi = None, None
        hi = inf if hi is None else hi
        if lo is not None and bool(lo == hi):  # one value fills the bracket: count, no gather
            c_lo = sum(int(torch.count_nonzero(x < lo.to(x.device))) for x in keys)
            c_eq = sum(int(torch.count_nonzero(x == lo.to(x.device))) for x in keys)
            if c_lo < k <= c_lo + c_eq:
                need = k - c_lo
                if need == c_eq:
                    return Threshold(lo.clone(), inclusive=True)
                return None if exact_ties else _lowest_index_ties(keys, lo.clone(), need)
            margin *= 16.0
            continue
        c_lo = 0
        parts = []
        for x in chunks:
            inside = x <= hi.to(x.device)
            if lo is not None:
                below = x < lo.to(x.device)
                c_lo += int(torch.count_nonzero(below))
                inside ^= below  # below is a subset of inside: this leaves lo <= x <= hi
                del below
            parts.append(x[inside].to(cpu))
            del inside
        c_hi = c_lo + sum(p.numel() for p in parts)
        if c_lo < k <= c_hi:
            bracket = (lo, hi, c_lo, parts)
            break
        margin *= 16.0
    if bracket is None:  # the k smallest include NaNs: topk's order among them is the reference
        return None
    lo, hi, c_lo, parts = bracket

    # 3. The k-th smallest is among the few gathered entries; finish exactly.
    cand = torch.cat(parts)
    value = torch.kthvalue(cand, k - c_lo).values
    n_lt = c_lo + int(torch.count_nonzero(cand < value))
    n_eq = int(torch.count_nonzero(cand == value))
    need = k - n_lt
    if need == n_eq:
        return Threshold(value, inclusive=True)
    if exact_ties:
        return None
    return _lowest_index_ties(keys, value, need)


def _lowest_index_ties(keys: Sequence[torch.Tensor], value: torch.Tensor, need: int) -> Threshold:
    """Select everything below ``value`` plus the ``need`` lowest-index entries equal to it."""
    ties: list[torch.Tensor | None] = []
    for x in keys:
        if need == 0:
            ties.append(None)
            continue
        idx = torch.nonzero(x == value.to(x.device)).view(-1)[:need]
        need -= idx.numel()
        ties.append(idx if idx.numel() else None)
    return Threshold(value, inclusive=False, ties=tuple(ties))
