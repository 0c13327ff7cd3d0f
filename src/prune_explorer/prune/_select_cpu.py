"""Where the k smallest keys end, on a CPU: piecewise bracketing on the calling thread.

The CPU path of :func:`._select.select` (its docstring tells the algorithm and the tie rule): a
strided sample brackets the cut; one pass counts the keys below the bracket and gathers the few
inside it, a :data:`PIECE` at a time -- under torch's parallel grain, so every operation runs
on the calling thread and nothing waits for a second core, which a busy machine may not give
(torch's parallel operations wait at a barrier for all their threads). 2-byte magnitudes take
one histogram of their bit patterns instead, its partial histograms shared out over threads
(:func:`map_groups`). Each piece is a few vectorised operations and host reads: fast on a CPU
core, slow on a GPU, where :mod:`._select_device` takes over.
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

__all__ = ["CHUNK", "INT_OF", "PIECE", "holders", "key_of", "keys_into", "locate_cut",
           "map_groups"]

T = TypeVar("T")
R = TypeVar("R")

#: Entries of a piece in the CPU passes: under torch's parallel grain (32768; a reduction
#: of exactly that many is parallel already), so every operation on a piece runs on the
#: calling thread. torch's own parallel operations wait at a barrier for every thread; on a
#: busy machine one descheduled thread stalls them all, once per operation (and between
#: them, its threads spin on a core). A multiple of 1024: pieces stay aligned.
PIECE = 31 * 1024
#: At most this many workers: each operation on a piece holds the GIL while it is dispatched,
#: so more threads would queue for it (and the passes are bound by memory bandwidth anyway).
_MAX_WORKERS = 4
_WORKER = "prune-explorer-pieces"
_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()
# a forked child has none of the parent's worker threads: it starts its own pools
os.register_at_fork(after_in_child=_pools.clear)


def map_groups(fn: Callable[[T], R], groups: Sequence[T], *, threads: bool = True) -> list[R]:
    """``[fn(g) for g in groups]``, run by ``torch.get_num_threads()`` threads (at most
    :data:`_MAX_WORKERS`) taking the next group as they free up (``threads=False``, one
    thread, or inside a worker: here, in order). Used by the 2-byte histogram only."""
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

#: Entries of the strided sample that brackets the cut (a piece: sorted on this thread).
_SAMPLE = PIECE
#: Entries per piece when scanning (1 MiB of float32: stays in cache).
CHUNK = 1 << 18
#: The integer dtype of each floating dtype's bit patterns.
INT_OF = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
          torch.float64: torch.int64}


def locate_cut(
    keys: Sequence[torch.Tensor], k: int, *, largest: bool, magnitude: bool, torch_rule: bool,
    held: Sequence[torch.Tensor | None] | None = None,
) -> tuple[torch.Tensor, tuple[int, ...] | None] | None:
    """Where the ``k`` smallest (or ``largest``) entries across ``keys`` end (``1 <= k <
    total`` when ``largest``): the cut value and, where a tie straddles it, per key tensor the
    flat index of the last taken tie (as :class:`._select.Selection` takes them). None where
    the sorting reference must decide: the cut among NaN keys, or a straddling tie under
    ``torch_rule``. ``held`` (from :func:`holders`): where a cut is returned, each buffer
    in it holds ``|keys[i]|``."""
    total = sum(x.numel() for x in keys)
    # the k largest start at the (total - k + 1)-th smallest (keys hold no NaN when largest)
    rank = total - k + 1 if largest else k
    found = _order_statistic(keys, rank, magnitude, held)
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
    ``groups``, the pieces of groups that end before it are not read at all. (On the CPU each
    ``_radix.CHUNK`` is read a :data:`PIECE` at a time: on the calling thread.)"""
    chunks = [(i, j * _radix.CHUNK, c) for i, x in enumerate(keys)
              for j, c in enumerate(x.reshape(-1).split(_radix.CHUNK))]
    left, start = n, 0
    if groups is not None:
        for count in groups.counts:
            if count >= left:
                break
            left -= count
            start += groups.size
    pieces = ((i, offset + o, piece) for i, offset, c in chunks[start:]
              for o, piece in zip(range(0, max(c.numel(), 1), PIECE if c.device.type == "cpu"
                                        else max(c.numel(), 1)),
                                  c.split(PIECE) if c.device.type == "cpu" else [c],
                                  strict=True))
    buffer: torch.Tensor | None = None
    for i, offset, piece in pieces:
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


#: Entries of a block of the bracketing pass: its flags are searched a word (8) at a time.
_BLOCK = 8 * PIECE


def holders(keys: Sequence[torch.Tensor], scratch: Sequence[torch.Tensor | None] | None,
            magnitude: bool) -> list[torch.Tensor | None]:
    """Per key tensor, its ``scratch`` buffer as a flat buffer for ``|keys[i]|``, where the
    selection of ``|keys|`` writes them there (:func:`locate_cut`'s ``held``): contiguous, of
    the keys' dtype (4 or 8 bytes), size and device; else None."""
    out: list[torch.Tensor | None] = []
    for i, x in enumerate(keys):
        s = None if scratch is None or not magnitude else scratch[i]
        fits = s is not None and s.dtype == x.dtype and x.element_size() >= 4 and \
            s.device == x.device and s.numel() == x.numel() and s.is_contiguous()
        out.append(s.view(-1) if fits and s is not None else None)
    return out


def _order_statistic(
    keys: Sequence[torch.Tensor], rank: int, magnitude: bool,
    held: Sequence[torch.Tensor | None] | None = None,
) -> tuple[torch.Tensor, int, int, tuple[torch.Tensor, torch.Tensor] | _TieGroups | None] | None:
    """The ``rank``-th smallest key (1-based), the counts of keys below and equal to it, and
    where the equal ones are: (key number, flat index) pairs in order, how many per group of
    pieces (:class:`_TieGroups`, 2-byte floats), or None when the bracket was a single value
    (then they must be looked up).

    With ``magnitude`` the keys are ``|keys|``, computed a piece at a time into ``held[i]``
    (see :func:`holders`) or a block-sized buffer. None when that rank falls among NaN
    entries.
    """
    total = sum(x.numel() for x in keys)
    dtype = keys[0].dtype
    if magnitude and dtype in (torch.float16, torch.bfloat16) and len(
            {x.device for x in keys}) == 1:
        return _order_statistic_16(keys, rank)
    held = list(held) if held is not None and magnitude else [None] * len(keys)

    # 1. Bracket from a strided sample (of at most _SAMPLE entries).
    stride = max(1, -(-total // max(_SAMPLE - len(keys), 1)))
    sample = _joined([x.reshape(-1)[::stride] for x in keys], dtype)
    if magnitude:
        for piece in sample.split(PIECE):
            piece.abs_()
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
        lo = hi = None
        if attempt < 3:  # the last resort: everything that is not NaN
            lo, hi = sample_stat(q * m - margin), sample_stat(q * m + margin)
        hi = inf if hi is None else hi
        if lo is not None and bool(lo == hi):  # one value fills the bracket: count, no gather
            c_lo, c_eq = _count_pass(keys, magnitude, held, lo)
            if c_lo < rank <= c_lo + c_eq:
                return lo.clone(), c_lo, c_eq, None
        else:
            c_lo, found = _bracket_pass(keys, magnitude, held, lo, hi)
            values = _joined([v for _, _, _, v in found], dtype)
            if c_lo < rank <= c_lo + values.numel():
                # 3. The rank-th smallest is among the few gathered entries; finish exactly.
                value, n_lt, equal = _kth_smallest(values, rank - c_lo, total)
                return value, c_lo + n_lt, equal.numel(), _tied_at(found, equal)
        margin *= 16.0
    return None  # the rank falls among NaNs


def _joined(parts: Sequence[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """The concatenation of the flat ``parts`` (any device) on the CPU, copied a piece at a
    time (``torch.cat`` of as many entries is one parallel operation)."""
    out = torch.empty(sum(p.numel() for p in parts), dtype=dtype)
    start = 0
    for part in parts:
        for piece in part.split(PIECE):
            out[start:start + piece.numel()].copy_(piece)
            start += piece.numel()
    return out


def _kth_smallest(values: torch.Tensor, rank: int,
                  above: int) -> tuple[torch.Tensor, int, torch.Tensor]:
    """The ``rank``-th smallest of the flat ``values`` (on the CPU, no NaN; gathered from
    ``above`` keys), how many lie below it, and where those equal to it are (ascending).
    Above :data:`PIECE` values (``torch.kthvalue`` would copy them in one parallel
    operation) they are bracketed again like the keys, as long as that halves them."""
    if values.numel() > PIECE and values.numel() < above // 2:
        found = _order_statistic([values], rank, False)
        if found is not None and isinstance(found[3], tuple):
            return found[0], found[1], found[3][1]
        if found is not None:  # a single value filled the bracket: its positions
            return found[0], found[1], _rank_of(values, found[0])[1]
    value = torch.kthvalue(values, rank).values
    below, equal = _rank_of(values, value)
    return value, below, equal


def _rank_of(values: torch.Tensor, value: torch.Tensor) -> tuple[int, torch.Tensor]:
    """How many of the flat ``values`` lie below ``value``, and where those equal to it are
    (ascending), a piece at a time."""
    below, equal = 0, []
    flags = torch.empty(min(PIECE, values.numel()), dtype=_flag_dtype(values))
    for start in range(0, values.numel(), PIECE):
        piece = values[start:start + PIECE]
        f = flags[:piece.numel()]
        below += int(torch.lt(piece, value, out=f).sum())
        equal.append(torch.nonzero(torch.eq(piece, value, out=f)).view(-1) + start)
    return below, torch.cat(equal)


def _tied_at(found: Sequence[tuple[int, int, torch.Tensor, torch.Tensor]],
             equal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(key number, flat index) of the gathered entries at ``equal`` (ascending positions in
    the concatenation of ``found``'s keys), in order."""
    ends = torch.tensor([v.numel() for _, _, _, v in found], dtype=torch.int64).cumsum(0)
    block = torch.searchsorted(ends, equal, right=True)
    owner = torch.empty_like(equal)
    where = torch.empty_like(equal)
    for b in torch.unique_consecutive(block).tolist():  # the few blocks that hold them
        i, start, at, _ = found[b]
        mine = block == b
        owner[mine] = i
        where[mine] = at[equal[mine] - (int(ends[b - 1]) if b else 0)] + start
    return owner, where


def _blocks(keys: Sequence[torch.Tensor], held: Sequence[torch.Tensor | None]
            ) -> Iterator[tuple[int, int, torch.Tensor, torch.Tensor | None]]:
    """(key number, start, keys, their slice of ``held[i]`` or None) of each block of every
    key tensor, in flat order: :data:`_BLOCK` entries on the CPU (:data:`CHUNK`
    elsewhere)."""
    for i, (x, into) in enumerate(zip(keys, held, strict=True)):
        x = x.reshape(-1)
        size = _BLOCK if x.device.type == "cpu" else CHUNK
        for start in range(0, x.numel(), size):
            yield i, start, x[start:start + size], \
                None if into is None else into[start:start + size]


def _split(x: torch.Tensor, size: int) -> list[torch.Tensor]:
    """``x.split(size)`` for a flat ``x``, without its Python-side cost where ``x`` is
    contiguous (one call a piece adds up over thousands of pieces)."""
    n = x.numel()
    full = n - n % size
    if full == 0 or not x.is_contiguous():
        return list(x.split(size))
    pieces = list(x[:full].view(-1, size).unbind(0))
    if full < n:
        pieces.append(x[full:])
    return pieces


class _Buffers:
    """Piece-sized work buffers of one dtype and device, reused from piece to piece."""

    def __init__(self, x: torch.Tensor) -> None:
        self.device, self.dtype = x.device, x.dtype
        self.size = PIECE if x.device.type == "cpu" else CHUNK
        # 0/1 flags: floating, so comparisons into them and sums of them take torch's
        # vectorised paths (comparisons into bool do not); float32 at least, so a piece's
        # count is exact
        flags = _flag_dtype(x)
        self.up = torch.empty(self.size, dtype=flags, device=x.device)
        self.low = torch.empty(self.size, dtype=flags, device=x.device)
        self.mag = torch.empty(self.size, dtype=x.dtype, device=x.device)
        # a block's inside-the-bracket flags, read 8 at a time (one int64 word)
        self.inside = torch.empty(max(self.size, _BLOCK) + 8, dtype=torch.bool,
                                  device=x.device)
        self.eight = torch.arange(8, device=x.device)

    def fits(self, x: torch.Tensor) -> bool:
        return x.device == self.device and x.dtype == self.dtype

    def pieces(self, part: torch.Tensor, dest: torch.Tensor | None, magnitude: bool
               ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """(keys, up, low) per piece of ``part``: the keys as they are, or ``|keys|`` written
        into ``dest`` (or a work buffer); ``up``/``low`` flag buffers of the piece's size."""
        dests = _split(dest, self.size) if dest is not None else None
        for j, piece in enumerate(_split(part, self.size)):
            m = piece.numel()
            full = m == self.size
            up, low = (self.up, self.low) if full else (self.up[:m], self.low[:m])
            if magnitude:
                into = dests[j] if dests is not None else self.mag if full else self.mag[:m]
                piece = torch.abs(piece, out=into)
            yield piece, up, low


def _flag_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype of 0/1 flags of ``x``'s pieces (see :class:`_Buffers`)."""
    return x.dtype if x.element_size() >= 4 else torch.float32


def _count_pass(keys: Sequence[torch.Tensor], magnitude: bool,
                held: Sequence[torch.Tensor | None], value: torch.Tensor) -> tuple[int, int]:
    """How many keys lie below ``value`` and how many equal it (one pass, a piece at a
    time)."""
    below = equal = 0
    work: _Buffers | None = None
    for _, _, part, dest in _blocks(keys, held):
        if work is None or not work.fits(part):
            work = _Buffers(part)
        v = value.to(part.device)
        for piece, up, low in work.pieces(part, dest, magnitude):
            below += int(torch.lt(piece, v, out=low).sum())
            equal += int(torch.eq(piece, v, out=up).sum())
    return below, equal


def _bracket_pass(
    keys: Sequence[torch.Tensor], magnitude: bool, held: Sequence[torch.Tensor | None],
    lo: torch.Tensor | None, hi: torch.Tensor,
) -> tuple[int, list[tuple[int, int, torch.Tensor, torch.Tensor]]]:
    """How many keys lie below ``lo`` (None: no bound), and (key number, block start, offsets
    in the block, keys) of those with ``lo <= key <= hi``, a block at a time in flat order.

    A piece at a time (under torch's parallel grain: every operation runs on the calling
    thread), two comparisons into 0/1 floats count the keys below and flag those inside; a
    block's flags are then searched a word (8 flags) at a time, which reads an eighth of
    them, and the flagged entries gathered (a small fraction), a piece of candidates at a
    time.
    """
    cpu = torch.device("cpu")
    below = 0
    found: list[tuple[int, int, torch.Tensor, torch.Tensor]] = []
    work: _Buffers | None = None
    for i, start, part, dest in _blocks(keys, held):
        if work is None or not work.fits(part):
            work = _Buffers(part)
        inside, eight = work.inside, work.eight
        high, bottom = hi.to(part.device), None if lo is None else lo.to(part.device)
        n = part.numel()
        flags = _split(inside[:n], work.size)
        for j, (piece, up, low) in enumerate(work.pieces(part, dest, magnitude)):
            torch.le(piece, high, out=up)
            if bottom is not None:
                below += int(torch.lt(piece, bottom, out=low).sum())
                up.sub_(low)  # below is a subset of up-to-hi: this leaves lo..hi
            flags[j].copy_(up)
        # the flagged entries: the words (8 flags) holding one, then the flags in them
        words8 = -(-n // 8) * 8
        inside[n:words8] = False
        words = torch.nonzero(inside[:words8].view(torch.int64)).view(-1)
        for w in _split(words, work.size // 8):  # at most a piece of candidates at a time
            at = torch.add(eight, w.unsqueeze(1), alpha=8).view(-1)
            at = torch.masked_select(at, torch.index_select(inside, 0, at))
            values = torch.index_select(part, 0, at)
            if magnitude:
                values.abs_()
            found.append((i, start, at.to(cpu), values.to(cpu)))
    return below, found


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
