"""Which k entries a pruning method takes: one routine, :func:`select`, for every method.

The tie rule
------------
``torch.nn.utils.prune`` takes the k entries to prune with ``torch.topk``; when entries of equal
key straddle the cut, which of them ``topk`` returns depends on its internal partial sort. We
offer two rules, chosen per call with ``ties=`` or for a block with :func:`tie_break`:

``"index"`` (the default)
    The selected entries are the first ``k`` of a **stable** sort of the keys -- ascending for
    ``largest=False``, descending for ``largest=True``; NaN ranks above every number (as in
    ``torch.sort`` and ``torch.topk``). In words: the same count as torch, and among the entries
    tied at the cut, those with the lowest flat index are taken first. "Flat index" is the
    position in the vector torch would pass to ``topk``: ``t.view(-1)`` for a fresh tensor, the
    surviving entries in flat order for an already-pruned one, the concatenation of those
    vectors in parameter order for ``global_unstructured``. The rule is the same for every
    tensor size and dtype.

    * ``l1_unstructured``: pruned = the first k of ``sort(|scores|, stable=True)``.
    * ``random_unstructured``: the draws are torch's (``torch.rand_like``, same stream after the
      same seed); pruned = the first k of ``sort(draws, descending=True, stable=True)``.

    To get the same masks on stock torch, pass an ``importance_scores`` that holds a stable rank
    (distinct integers, so ``topk`` has nothing left to break; use float64 above 2**24 entries):

    >>> import torch
    >>> def stable_rank(keys, descending=False):
    ...     order = torch.sort(keys.flatten(), descending=descending, stable=True).indices
    ...     rank = torch.empty(order.numel(), dtype=torch.float64)
    ...     rank[order] = torch.arange(order.numel(), dtype=torch.float64)
    ...     return rank.view(keys.shape)
    >>> w = torch.tensor([[0.5, -0.5], [0.5, 0.1]])
    >>> stable_rank(w.abs()).tolist()  # L1: prune with importance_scores=this
    [[1.0, 2.0], [3.0, 0.0]]

    For ``random_unstructured``, draw ``torch.rand_like(w)`` after the same seed and prune with
    ``l1_unstructured(..., importance_scores=stable_rank(draws, descending=True))``. Only a tie
    that straddles the cut needs this; elsewhere both rules give the same set.

``"torch"``
    Exactly torch's choice: whenever a tie straddles the cut (or NaN keys are involved) we call
    ``torch.topk`` on the same vector torch would -- at torch's speed in those cases.

How it is fast
--------------
Above :data:`SMALL` entries of a floating dtype we never sort everything. A strided sample (no
RNG: the global generator must not advance) brackets the cut value; counting entries below and
inside the bracket (vectorised comparisons over cache-sized pieces) narrows it to a few entries,
whose exact order statistic gives the threshold ``v`` and how many entries equal to ``v`` are
taken. 2-byte floats need no sample: one histogram of their bit patterns gives ``v`` at once.
If the bracket misses, it is widened; the last resort brackets everything, so the answer is
always exact. The taken entries equal to ``v`` are the lowest-index ones, a prefix in flat
order: the selection records only where it ends (:attr:`Selection.through`), found by
counting a piece at a time, so a tie of any size costs no index list. All work happens on the
keys' own device. Smaller tensors are simply sorted (stable).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from . import _radix

__all__ = ["SMALL", "TIE_RULES", "Selection", "get_tie_break", "resolve_ties", "select",
           "tie_break"]

#: At or below this many entries the keys are simply sorted (or ``topk``-ed in torch mode).
SMALL = 1 << 17

#: The tie rules :func:`select` knows.
TIE_RULES = ("index", "torch")

_SAMPLE = 1 << 16
_CHUNK = 1 << 18  # entries per piece when scanning (1 MiB of float32: stays in cache)
_FAST_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_INT_OF = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
           torch.float64: torch.int64}

_TIE_BREAK: ContextVar[str] = ContextVar("prune_explorer_tie_break", default="index")


def get_tie_break() -> str:
    """The tie rule in force where ``ties=`` is not given: ``"index"`` unless inside
    :func:`tie_break`."""
    return _TIE_BREAK.get()


def _check_rule(where: str, rule: object) -> str:
    if not isinstance(rule, str) or rule not in TIE_RULES:
        raise ValueError(f"{where}: ties must be one of {TIE_RULES}; got {rule!r}")
    return rule


@contextlib.contextmanager
def tie_break(rule: str) -> Iterator[None]:
    """Use tie rule ``rule`` (``"index"`` or ``"torch"``) for the calls inside the block.

    Scoped: the previous rule comes back when the block ends, and threads started elsewhere are
    not affected. A ``ties=`` keyword on a method or function takes precedence.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> with prune.tie_break("torch"):
    ...     m = prune.l1_unstructured(torch.nn.Linear(4, 4), "weight", amount=0.5)
    >>> prune.get_tie_break()
    'index'
    """
    token = _TIE_BREAK.set(_check_rule("tie_break", rule))
    try:
        yield
    finally:
        _TIE_BREAK.reset(token)


def resolve_ties(ties: str | None) -> str:
    """``ties`` if given, else the rule of the enclosing :func:`tie_break` block."""
    return _TIE_BREAK.get() if ties is None else ties


@dataclass(frozen=True)
class Selection:
    """Which entries of each key tensor :func:`select` took.

    Either a threshold (``value`` set): entries strictly past ``value`` (below it for
    ``largest=False``, above for ``largest=True``), plus those equal to it -- all of them when
    ``through`` is None, else those of the ``i``-th key tensor at flat index ``<= through[i]``
    (tied entries are taken lowest index first, so the taken ones are a prefix: ``-1`` takes
    none); or, with ``value`` None, exactly the ``picks`` (flat indices per key tensor; None
    where none).
    """

    largest: bool
    value: torch.Tensor | None = None
    through: tuple[int, ...] | None = None
    picks: tuple[torch.Tensor | None, ...] = ()
    magnitude: bool = False

    def _picks(self, i: int, device: torch.device) -> torch.Tensor | None:
        p = self.picks[i] if i < len(self.picks) else None
        return None if p is None else p.to(device)

    def _spans(self, i: int, n: int) -> Iterator[tuple[int, int, bool]]:
        """(start, stop, ties taken) flat ranges covering the ``i``-th key tensor of ``n``."""
        last = n - 1 if self.through is None else min(self.through[i], n - 1)
        for start, stop, taken in ((0, last + 1, True), (last + 1, n, False)):
            if stop > start:
                yield start, stop, taken

    def selected(self, keys: torch.Tensor, i: int = 0) -> torch.Tensor:
        """Boolean tensor of ``keys``' shape, True where the ``i``-th key tensor is selected."""
        if self.value is None:
            out = torch.zeros(keys.shape, dtype=torch.bool, device=keys.device)
        else:
            v = self.value.to(keys.device)
            flat = keys.abs().reshape(-1) if self.magnitude else keys.reshape(-1)
            out = torch.empty(keys.shape, dtype=torch.bool, device=keys.device)
            for start, stop, taken in self._spans(i, flat.numel()):
                if self.largest:
                    compare = torch.ge if taken else torch.gt
                else:
                    compare = torch.le if taken else torch.lt
                compare(flat[start:stop], v, out=out.view(-1)[start:stop])
        picks = self._picks(i, keys.device)
        if picks is not None:
            out.view(-1)[picks] = True
        return out

    def write_kept(self, keys: torch.Tensor, out: torch.Tensor, i: int = 0) -> torch.Tensor:
        """Write 1 where the entry is *not* selected and 0 where it is, into ``out``.

        ``out`` is a contiguous floating tensor of the keys' shape and may be ``keys`` itself:
        a pruning mask is then built in place, without a temporary. The work goes through
        cache-sized pieces, so each entry is read and written once from memory.
        """
        if self.value is None:
            out.fill_(1)
        else:
            flat_keys, flat_out = keys.view(-1), out.view(-1)
            v = self.value.to(keys.device)
            for start, stop, taken in self._spans(i, flat_keys.numel()):
                self._write_span(flat_keys[start:stop], flat_out[start:stop], v, taken)
        picks = self._picks(i, out.device)
        if picks is not None:
            out.view(-1)[picks] = 0
        return out

    def _write_span(self, keys: torch.Tensor, out: torch.Tensor, v: torch.Tensor,
                    taken: bool) -> None:
        """:meth:`write_kept` over flat ``keys``/``out`` where entries equal to ``v`` are
        ``taken`` (selected) or not."""
        if self.magnitude and not self.largest and keys.dtype in _INT_OF:
            # kept = |key| past the cut, NaN included (it is never taken): on the bit patterns
            # with the sign bit cleared, which order as |key| does with NaN above inf -- two
            # operations a piece instead of abs, compare and flip
            cut = _key_of(v)
            bits_compare = torch.gt if taken else torch.ge
            buffer = torch.empty(0, dtype=_INT_OF[keys.dtype], device=keys.device)
            for piece, dest in zip(keys.split(_CHUNK), out.split(_CHUNK), strict=True):
                bits_compare(_keys(piece, buffer), cut, out=dest)
            return
        if self.largest:  # kept: below the cut (keys hold no NaN here: they are draws)
            compare = torch.lt if taken else torch.le
        else:  # selected: up to the cut, then flipped (not "keys > v": NaN is never taken)
            compare = torch.le if taken else torch.lt
        buffer = torch.empty(0, dtype=keys.dtype, device=keys.device)
        for piece, dest in zip(keys.split(_CHUNK), out.split(_CHUNK), strict=True):
            if self.magnitude:
                piece = torch.abs(piece, out=buffer.resize_(piece.shape))
            compare(piece, v, out=dest)
            if not self.largest:
                dest.neg_().add_(1)


def select(
    keys: Sequence[torch.Tensor], k: int, *, largest: bool = False, ties: str = "index",
    magnitude: bool = False,
) -> Selection:
    """Select the ``k`` smallest (or ``largest``) entries across ``keys``.

    Parameters
    ----------
    keys
        One or more 1-D tensors, read in order as if concatenated (they may live on different
        devices). With ``largest=True`` they must hold no NaN (random draws never do).
    k
        How many entries to select, ``0 <= k <= total``.
    largest
        Select the largest keys instead of the smallest.
    ties
        ``"index"`` or ``"torch"``: how entries tied at the cut are split (see the module
        docstring). In ``"torch"`` mode ``keys`` must be exactly the vector(s) torch passes to
        ``topk``.
    magnitude
        Rank by ``|keys|`` without building that tensor (computed piece by piece, in cache).

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([0.5, 0.1, 0.5, 0.3, 0.5])
    >>> sel = select([x], 3, largest=True)
    >>> sel.selected(x).tolist()
    [True, False, True, False, True]
    >>> select([x], 3).selected(x).tolist()  # 0.1, 0.3, then the first 0.5
    [True, True, False, True, False]
    """
    _check_rule("select", ties)
    total = sum(x.numel() for x in keys)
    if not 0 <= k <= total:
        raise ValueError(f"select: k must be in [0, {total}]; got {k}")
    if k == 0:
        return Selection(largest, picks=())
    dtype = keys[0].dtype
    if total > SMALL and dtype in _FAST_DTYPES:
        found = _by_threshold(keys, k, largest, ties, magnitude)
        if found is not None:
            return found
    return _by_sorting(keys, k, largest, ties, magnitude)


def _by_sorting(
    keys: Sequence[torch.Tensor], k: int, largest: bool, ties: str, magnitude: bool
) -> Selection:
    """The reference: stable sort (index rule) or ``topk`` (torch rule) of the concatenation."""
    device = keys[0].device
    whole = keys[0] if len(keys) == 1 else torch.cat([x.reshape(-1).to(device) for x in keys])
    if magnitude:
        whole = whole.abs()
    if ties == "torch":
        idx = torch.topk(whole, k, largest=largest).indices
    else:
        idx = torch.sort(whole, descending=largest, stable=True).indices[:k]
    if len(keys) == 1:
        return Selection(largest, picks=(idx,))
    picks: list[torch.Tensor | None] = []
    start = 0
    for x in keys:
        mine = idx[(idx >= start) & (idx < start + x.numel())] - start
        picks.append(mine if mine.numel() else None)
        start += x.numel()
    return Selection(largest, picks=tuple(picks))


def _by_threshold(
    keys: Sequence[torch.Tensor], k: int, largest: bool, ties: str, magnitude: bool
) -> Selection | None:
    """Threshold selection; None where the sorting reference must decide (torch-mode ties,
    NaN among the selected)."""
    total = sum(x.numel() for x in keys)
    if largest and k == total:
        return Selection(largest, value=torch.tensor(-math.inf, dtype=keys[0].dtype),
                         magnitude=magnitude)
    # the k largest start at the (total - k + 1)-th smallest (keys hold no NaN when largest)
    rank = total - k + 1 if largest else k
    found = _order_statistic(keys, rank, magnitude)
    if found is None:
        return None
    value, n_lt, n_eq, tied = found
    n_past = total - n_lt - n_eq if largest else n_lt  # strictly on the selected side
    need = k - n_past
    if need == n_eq:
        return Selection(largest, value=value, magnitude=magnitude)
    if ties == "torch":
        return None
    # the taken ties are the first ``need`` equal to value in flat order: find the last one
    if isinstance(tied, tuple):  # (key number, flat index) of every tie, in order
        owner, last = int(tied[0][need - 1]), int(tied[1][need - 1])
    else:
        owner, last = _nth_equal(keys, value, need, magnitude, tied)
    through = tuple(x.numel() - 1 if i < owner else last if i == owner else -1
                    for i, x in enumerate(keys))
    return Selection(largest, value=value, through=through, magnitude=magnitude)


def _keys(piece: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """The magnitude keys of a flat floating ``piece`` (:func:`._radix.magnitude_keys`: bit
    patterns, sign bit cleared, NaN not clamped), written into ``buffer`` (resized)."""
    return _radix.magnitude_keys(piece, clamp=False, out=buffer.resize_(piece.shape))[0]


def _key_of(value: torch.Tensor) -> int:
    """The magnitude key of one (non-NaN) value, as :func:`_keys` gives it."""
    return int(_radix.magnitude_keys(value.reshape(1), clamp=False)[0][0])


@dataclass(frozen=True)
class _TieGroups:
    """How many entries equal the found value lie in each group of ``size`` consecutive
    pieces (of ``_radix.CHUNK`` entries, each key tensor split on its own, in key order): what
    the 2-byte histogram tells for free, so :func:`_nth_equal` reads one group only."""

    counts: list[int]
    size: int


#: Groups the 2-byte histogram is kept in (2**15 int64 bins each: 2 MiB in all); finding the
#: last taken tie then reads one group, an eighth of the entries at most.
_TIE_GROUPS = 8


def _nth_equal(keys: Sequence[torch.Tensor], value: torch.Tensor, n: int, magnitude: bool,
               groups: _TieGroups | None = None) -> tuple[int, int]:
    """(key number, flat index) of the ``n``-th entry (1-based, in flat order across ``keys``)
    equal to ``value`` (by magnitude with ``magnitude``); there are at least ``n``. Counts a
    piece at a time and looks for positions only in the piece that holds it; with
    ``groups``, the pieces of groups that end before it are not read at all."""
    pieces = [(i, j * _radix.CHUNK, c) for i, x in enumerate(keys)
              for j, c in enumerate(x.reshape(-1).split(_radix.CHUNK))]
    left, start = n, 0
    if groups is not None:
        for count in groups.counts:
            if count >= left:
                break
            left -= count
            start += groups.size
    buffer: torch.Tensor | None = None
    for i, offset, piece in pieces[start:]:
        v = value.to(piece.device)
        itype = _INT_OF.get(piece.dtype) if magnitude else None
        if buffer is None or buffer.device != piece.device or \
                buffer.dtype != (itype or piece.dtype):
            buffer = torch.empty(0, dtype=itype or piece.dtype, device=piece.device)
        if itype is not None:  # |key| == |value| on the bit patterns, sign bit cleared
            equal = _keys(piece, buffer) == _key_of(v)
        elif magnitude:
            equal = torch.abs(piece, out=buffer.resize_(piece.shape)) == v
        else:
            equal = piece == v
        count = int(torch.count_nonzero(equal))
        if count >= left:
            return i, offset + int(torch.nonzero(equal).view(-1)[left - 1])
        left -= count
    raise AssertionError(f"fewer than {n} keys equal {value}")  # found by the caller: never


def _order_statistic(
    keys: Sequence[torch.Tensor], rank: int, magnitude: bool
) -> tuple[torch.Tensor, int, int, tuple[torch.Tensor, torch.Tensor] | _TieGroups | None] | None:
    """The ``rank``-th smallest key (1-based), the counts of keys below and equal to it, and
    where the equal ones are: (key number, flat index) pairs in order, how many per group of
    pieces (:class:`_TieGroups`, 2-byte floats), or None when the bracket was a single value
    (then they must be looked up).

    None when that rank falls among NaN entries.
    """
    total = sum(x.numel() for x in keys)
    dtype = keys[0].dtype
    if magnitude and dtype in (torch.float16, torch.bfloat16) and len(
            {x.device for x in keys}) == 1:
        return _order_statistic_16(keys, rank)
    cpu = torch.device("cpu")
    # cache-sized pieces: (key number, offset in the key, view)
    chunks = [(i, j * _CHUNK, c) for i, x in enumerate(keys) for j, c in enumerate(x.split(_CHUNK))]

    # 1. Bracket from a strided sample.
    stride = max(1, total // _SAMPLE)
    sample = torch.cat([x[::stride].to(cpu) for x in keys])
    if magnitude:
        sample = sample.abs()
    buffer = torch.empty(0, dtype=dtype, device=keys[0].device)

    def pieces() -> Iterator[tuple[int, int, torch.Tensor]]:
        for i, offset, x in chunks:  # |x| in a reused buffer, while it is in cache
            if magnitude:
                x = torch.abs(x, out=buffer.to(x.device).resize_(x.shape))
            yield i, offset, x

    m = sample.numel()
    q = rank / total
    margin = 3.0 * math.sqrt(max(m * q * (1.0 - q), 1.0)) + 8.0
    inf = torch.tensor(math.inf, dtype=dtype)

    def sample_stat(i: float) -> torch.Tensor | None:
        # the sample's i-th smallest (0-based), or None past either end (= no bound there)
        j = math.floor(i) if i < q * m else math.ceil(i)
        if j <= 0 or j >= m - 1:
            return None
        value = torch.kthvalue(sample, j + 1).values
        return None if bool(torch.isnan(value)) else value  # NaN bounds nothing

    # 2. Count below lo and gather lo <= x <= hi (values and where they are), widening until
    #    the bracket holds the rank.
    for attempt in range(4):
        if attempt < 3:
            lo, hi = sample_stat(q * m - margin), sample_stat(q * m + margin)
        else:  # last resort: everything that is not NaN
            lo, hi = None, None
        hi = inf if hi is None else hi
        if lo is not None and bool(lo == hi):  # one value fills the bracket: count, no gather
            c_lo = c_eq = 0
            for _, _, x in pieces():
                c_lo += int(torch.count_nonzero(x < lo.to(x.device)))
                c_eq += int(torch.count_nonzero(x == lo.to(x.device)))
            if c_lo < rank <= c_lo + c_eq:
                return lo.clone(), c_lo, c_eq, None
            margin *= 16.0
            continue
        c_lo, values, where, origin = 0, [], [], []
        for i, offset, x in pieces():
            inside = x <= hi.to(x.device)
            if lo is not None:
                below = x < lo.to(x.device)
                c_lo += int(torch.count_nonzero(below))
                inside ^= below  # below is a subset of inside: this leaves lo <= x <= hi
                del below
            idx = torch.nonzero(inside).view(-1)
            values.append(x[idx].to(cpu))
            where.append(idx.to(cpu))
            origin.append((i, offset, idx.numel()))
            del inside
        if c_lo < rank <= c_lo + sum(v.numel() for v in values):
            # 3. The rank-th smallest is among the few gathered entries; finish exactly.
            cand = torch.cat(values)
            value = torch.kthvalue(cand, rank - c_lo).values
            n_lt = c_lo + int(torch.count_nonzero(cand < value))
            equal = cand == value
            counts = torch.tensor([c for _, _, c in origin])
            owner = torch.repeat_interleave(torch.tensor([i for i, _, _ in origin]), counts)
            shift = torch.repeat_interleave(torch.tensor([o for _, o, _ in origin]), counts)
            tied = (owner[equal], (torch.cat(where) + shift)[equal])
            return value, n_lt, int(torch.count_nonzero(equal)), tied
        margin *= 16.0
    return None  # the rank falls among NaNs


def _order_statistic_16(
    keys: Sequence[torch.Tensor], rank: int
) -> tuple[torch.Tensor, int, int, _TieGroups] | None:
    """:func:`_order_statistic` of ``|keys|`` for 2-byte floats: every value has its own bin in
    one 15-bit histogram of the bit patterns (``_radix.histogram``, one ``bincount`` a piece),
    so one pass gives the value and the counts below and at it, with no sample and no gather.
    The histogram is summed from up to :data:`_TIE_GROUPS` partial ones, which also tell how
    many entries equal the value in each group of pieces."""
    dtype, device = keys[0].dtype, keys[0].device
    buffer = torch.empty(_radix.CHUNK, dtype=_INT_OF[dtype], device=device)
    pieces = [c for x in keys for c in x.reshape(-1).split(_radix.CHUNK)]
    size = max(1, -(-len(pieces) // _TIE_GROUPS))
    parts = []
    for g in range(0, len(pieces), size):
        bits = (_keys(c, buffer) for c in pieces[g:g + size])
        parts.append(_radix.histogram(bits, 0, 15, 0, device, ceiling=_radix.NAN_BITS[dtype],
                                      markers=False))
    per_group = torch.stack(parts)
    hist = per_group.sum(0)
    cum = hist.cumsum(0)
    j = int(torch.searchsorted(cum, torch.tensor([rank], device=cum.device)))
    if j >= _radix.NAN_BITS[dtype]:
        return None  # the rank falls among NaNs
    value = torch.tensor([j], dtype=torch.int16).view(dtype)[0]
    groups = _TieGroups([int(c) for c in per_group[:, j].tolist()], size)
    return value, int(cum[j - 1]) if j else 0, int(hist[j]), groups
