"""Where the k smallest keys end, on a CPU: piecewise bracketing, counts read back as it goes.

The CPU path of :func:`._select.select` (its docstring tells the algorithm and the tie rule): a
strided sample brackets the cut, cache-sized pieces are counted and the few entries inside the
bracket gathered; 2-byte floats take one histogram of their bit patterns instead. Each piece is
a few vectorised operations and host reads: fast on a CPU core, slow on a GPU, where
:mod:`._select_device` takes over.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import torch

from . import _radix

__all__ = ["CHUNK", "INT_OF", "PIECE", "key_of", "keys_into", "locate_cut", "map_groups",
           "pieces_of"]

T = TypeVar("T")
R = TypeVar("R")

#: Entries of a piece in the passes shared out over threads: under torch's parallel grain
#: (32768), so every operation on a piece runs on its thread alone. torch's own parallel
#: operations wait at a barrier for every thread; on a busy machine one descheduled thread
#: stalls them all, once per operation. Shared out a group at a time, as threads free up, a
#: descheduled thread delays only its own group.
PIECE = 1 << 15
#: Pieces per group (one task for a thread).
_GROUP = 8
#: At most this many workers: each operation on a piece holds the GIL while it is dispatched,
#: so more threads would queue for it (and the passes are bound by memory bandwidth anyway).
_MAX_WORKERS = 4
_WORKER = "prune-explorer-pieces"
_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()
# a forked child has none of the parent's worker threads: it starts its own pools
os.register_at_fork(after_in_child=_pools.clear)


def pieces_of(*flat: torch.Tensor) -> list[list[tuple[torch.Tensor, ...]]]:
    """The flat tensors (same size) cut in aligned :data:`PIECE`-sized pieces, in groups."""
    pieces = list(zip(*(x.split(PIECE) for x in flat), strict=True))
    return [pieces[g:g + _GROUP] for g in range(0, len(pieces), _GROUP)]


def map_groups(fn: Callable[[T], R], groups: Sequence[T], *, threads: bool = True) -> list[R]:
    """``[fn(g) for g in groups]``, run by ``torch.get_num_threads()`` threads (at most
    :data:`_MAX_WORKERS`) taking the next group as they free up (``threads=False``, one
    thread, or inside a worker: here, in order)."""
    workers = min(torch.get_num_threads(), _MAX_WORKERS)
    if not threads or workers <= 1 or len(groups) <= 1 or \
            threading.current_thread().name.startswith(_WORKER):
        return [fn(g) for g in groups]
    with _pools_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix=_WORKER)
    # thread-local modes: the caller's, in every worker
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()

    def run(group: T) -> R:
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            return fn(group)

    return list(pool.map(run, groups))

_SAMPLE = 1 << 16
#: Entries per piece when scanning (1 MiB of float32: stays in cache).
CHUNK = 1 << 18
#: The integer dtype of each floating dtype's bit patterns.
INT_OF = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
          torch.float64: torch.int64}


def locate_cut(
    keys: Sequence[torch.Tensor], k: int, *, largest: bool, magnitude: bool, torch_rule: bool,
) -> tuple[torch.Tensor, tuple[int, ...] | None] | None:
    """Where the ``k`` smallest (or ``largest``) entries across ``keys`` end (``1 <= k <
    total`` when ``largest``): the cut value and, where a tie straddles it, per key tensor the
    flat index of the last taken tie (as :class:`._select.Selection` takes them). None where
    the sorting reference must decide: the cut among NaN keys, or a straddling tie under
    ``torch_rule``."""
    total = sum(x.numel() for x in keys)
    # the k largest start at the (total - k + 1)-th smallest (keys hold no NaN when largest)
    rank = total - k + 1 if largest else k
    found = _order_statistic(keys, rank, magnitude)
    if found is None:
        return None
    value, n_lt, n_eq, tied = found
    n_past = total - n_lt - n_eq if largest else n_lt  # strictly on the selected side
    need = k - n_past
    if need == n_eq:
        return value, None
    if torch_rule:
        return None
    # the taken ties are the first ``need`` equal to value in flat order: find the last one
    if isinstance(tied, tuple):  # (key number, flat index) of every tie, in order
        owner, last = int(tied[0][need - 1]), int(tied[1][need - 1])
    else:
        owner, last = _nth_equal(keys, value, need, magnitude, tied)
    return value, tuple(x.numel() - 1 if i < owner else last if i == owner else -1
                        for i, x in enumerate(keys))


def keys_into(piece: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """The magnitude keys of a flat floating ``piece`` (:func:`._radix.magnitude_keys`: bit
    patterns, sign bit cleared, NaN not clamped), written into ``buffer`` (resized)."""
    return _radix.magnitude_keys(piece, clamp=False, out=buffer.resize_(piece.shape))[0]


def key_of(value: torch.Tensor) -> int:
    """The magnitude key of one (non-NaN) value, as :func:`keys_into` gives it."""
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
        itype = INT_OF.get(piece.dtype) if magnitude else None
        if buffer is None or buffer.device != piece.device or \
                buffer.dtype != (itype or piece.dtype):
            buffer = torch.empty(0, dtype=itype or piece.dtype, device=piece.device)
        if itype is not None:  # |key| == |value| on the bit patterns, sign bit cleared
            equal = keys_into(piece, buffer) == key_of(v)
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
    # pieces (key number, offset in the key, view), in groups shared out over threads (CPU
    # keys) or cache-sized chunks read in order (keys elsewhere)
    on_cpu = all(x.device.type == "cpu" for x in keys)
    size = PIECE if on_cpu else CHUNK
    chunks = [(i, j * size, c) for i, x in enumerate(keys) for j, c in enumerate(x.split(size))]
    groups = [chunks[g:g + _GROUP] for g in range(0, len(chunks), _GROUP)]

    # 1. Bracket from a strided sample.
    stride = max(1, total // _SAMPLE)
    sample = torch.cat([x[::stride].to(cpu) for x in keys])
    if magnitude:
        sample = sample.abs()

    def pieces(group: list[tuple[int, int, torch.Tensor]]
               ) -> Iterator[tuple[int, int, torch.Tensor]]:
        buffer = torch.empty(0, dtype=dtype, device=keys[0].device)
        for i, offset, x in group:  # |x| in the group's own buffer, while it is in cache
            if magnitude:
                if buffer.device != x.device:
                    buffer = torch.empty(0, dtype=dtype, device=x.device)
                x = torch.abs(x, out=buffer.resize_(x.shape))
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
            def count(group: list[tuple[int, int, torch.Tensor]],
                      one: torch.Tensor = lo) -> tuple[int, int]:
                below = equal = 0
                for _, _, x in pieces(group):
                    below += int(torch.count_nonzero(x < one.to(x.device)))
                    equal += int(torch.count_nonzero(x == one.to(x.device)))
                return below, equal

            counted = map_groups(count, groups, threads=on_cpu)
            c_lo, c_eq = sum(c for c, _ in counted), sum(c for _, c in counted)
            if c_lo < rank <= c_lo + c_eq:
                return lo.clone(), c_lo, c_eq, None
            margin *= 16.0
            continue
        def gather(group: list[tuple[int, int, torch.Tensor]], low: torch.Tensor | None = lo,
                   high: torch.Tensor = hi,
                   ) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor, tuple[int, int, int]]]]:
            below_lo, found = 0, []
            for i, offset, x in pieces(group):
                inside = x <= high.to(x.device)
                if low is not None:
                    below = x < low.to(x.device)
                    below_lo += int(torch.count_nonzero(below))
                    inside ^= below  # below is a subset of inside: this leaves lo <= x <= hi
                    del below
                idx = torch.nonzero(inside).view(-1)
                found.append((x[idx].to(cpu), idx.to(cpu), (i, offset, idx.numel())))
                del inside
            return below_lo, found

        gathered = map_groups(gather, groups, threads=on_cpu)
        c_lo = sum(c for c, _ in gathered)
        values = [v for _, found in gathered for v, _, _ in found]
        where = [w for _, found in gathered for _, w, _ in found]
        origin = [o for _, found in gathered for _, _, o in found]
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
    pieces = [c for x in keys for c in x.reshape(-1).split(_radix.CHUNK)]
    size = max(1, -(-len(pieces) // _TIE_GROUPS))
    on_cpu = device.type == "cpu"

    def part(chunks: list[torch.Tensor]) -> torch.Tensor:
        buffer = torch.empty(_radix.CHUNK, dtype=INT_OF[dtype], device=device)

        def bits() -> Iterator[torch.Tensor]:
            for c in chunks:  # on the CPU the keys a PIECE at a time: no thread barrier
                out = buffer[:c.numel()]
                for piece, dest in zip(c.split(PIECE if on_cpu else c.numel() or 1),
                                       out.split(PIECE if on_cpu else c.numel() or 1),
                                       strict=True):
                    _radix.magnitude_keys(piece, clamp=False, out=dest)
                yield out

        return _radix.histogram(bits(), 0, 15, 0, device, ceiling=_radix.NAN_BITS[dtype],
                                markers=False)

    # the groups' histograms shared out over threads (bincount runs on one thread each)
    per_group = torch.stack(map_groups(part, [pieces[g:g + size] for g in
                                              range(0, len(pieces), size)], threads=on_cpu))
    hist = per_group.sum(0)
    cum = hist.cumsum(0)
    j = int(torch.searchsorted(cum, torch.tensor([rank], device=cum.device)))
    if j >= _radix.NAN_BITS[dtype]:
        return None  # the rank falls among NaNs
    value = torch.tensor([j], dtype=torch.int16).view(dtype)[0]
    groups = _TieGroups([int(c) for c in per_group[:, j].tolist()], size)
    return value, int(cum[j - 1]) if j else 0, int(hist[j]), groups
