"""The k smallest keys across every rank, found from small all-reduced histograms.

Used by :mod:`._sharded` for parameters sharded over processes (DTensors). Nothing the size of a
shard ever leaves its rank; what is communicated is a few fixed-size histograms per call.

Keys
----
Every unstructured key is a non-negative float (``|w|``, ``|importance|`` or a random draw in
[0, 1)), and for non-negative floats the integer bit pattern orders exactly as the value does
(NaN, after ``abs``, above ``inf`` -- torch's order too). So each rank views its key buffer as
integers (``int16``/``int32``/``int64`` for 2/4/8-byte floats) and the search runs on bits:

1. **Value.** Pass by pass, from the top bits down (:data:`BITS` bits a pass), every rank counts
   its keys that match the prefix found so far, by their next digit; the histograms are
   all-reduced and every rank reads the same digit off the same cumulative sum. After
   ``ceil(31 / BITS)`` passes (float32) every rank knows the k-th smallest key ``v`` and how many
   keys lie strictly below it.
2. **Ties.** If the entries equal to ``v`` are more than the cut needs, the same search runs on
   their *global flat index* (the position in one-process order: flat index within the
   parameter plus the sizes of the parameters listed before it), so the tied entries taken are
   the lowest-index ones -- the default tie rule of one process.

Random draws are selected largest first: their key is ``top - bits``. Negative integers mark
entries that take no part (already pruned); they match no prefix. A pass reads every local key
with a few vectorised operations and no gather; once a rank has at most :data:`CHUNK` keys
under the prefix it keeps just those for the remaining passes.

Bytes sent per call: ``2**BITS * 8`` per pass -- 3 passes for float32 keys, plus, only where a
tie straddles the cut, ``ceil(log2(total entries) / BITS)`` passes for the index -- whatever
the size of the shards (:data:`STATS` counts them).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist

__all__ = [
    "BITS",
    "CHUNK",
    "STATS",
    "Cut",
    "KeySet",
    "Straddle",
    "count_alive",
    "count_alive_runs",
    "cuts_found",
    "draw_stream",
    "find_cut",
    "found",
    "histogram",
    "int_view",
    "magnitude_keys",
    "radix_select",
    "recording",
    "row_slabs",
    "write_kept",
]

#: Bits resolved per histogram pass (2**BITS bins of int64 each).
BITS = 11
#: Entries handled at a time: every temporary is at most this long.
CHUNK = 1 << 20

_INT_OF = {2: torch.int16, 4: torch.int32, 8: torch.int64}
#: The smallest NaN bit pattern (just above inf's) of each floating dtype.
NAN_BITS = {torch.float16: 0x7C01, torch.bfloat16: 0x7F81, torch.float32: 0x7F800001,
            torch.float64: 0x7FF0000000000001}


@dataclass
class _Stats:
    """Collective traffic of the sharded calls since the last :meth:`reset` (for benchmarks)."""

    collectives: int = 0
    bytes: int = 0

    def reset(self) -> None:
        self.collectives = 0
        self.bytes = 0


#: Running count of collectives and bytes all-reduced or gathered by the sharded code.
STATS = _Stats()


def all_reduce(t: torch.Tensor, group: object, op: object = None) -> torch.Tensor:
    """Sum (or ``op``) ``t`` over ``group`` in place; counted in :data:`STATS`."""
    if group is not None:
        if op is None:
            dist.all_reduce(t, group=group)
        else:
            dist.all_reduce(t, op=op, group=group)
        STATS.collectives += 1
        STATS.bytes += t.numel() * t.element_size()
    return t


def count_alive(mask: torch.Tensor) -> int:
    """How many entries of the flat ``mask`` equal 1 (read a chunk at a time)."""
    return sum(int(torch.count_nonzero(c == 1)) for c in mask.split(CHUNK))


def count_alive_runs(mask: torch.Tensor, run: int) -> list[int]:
    """For each run of ``run`` consecutive entries of the flat ``mask``, how many equal 1 (read
    about a chunk at a time)."""
    if not run or not mask.numel():
        return []
    rows = mask.view(-1, run)
    if run > CHUNK:  # long runs: each a chunk at a time
        return [count_alive(r) for r in rows]
    step = CHUNK // run
    counts: list[int] = []
    for i in range(0, rows.shape[0], step):
        counts += (rows[i:i + step] == 1).sum(1).tolist()
    return counts


def row_slabs(x: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
    """(first row, view) of ``x`` (at least 1-D) in slabs of whole rows (dim 0) of at most
    about :data:`CHUNK` entries (at least one row each)."""
    step = max(1, CHUNK // max(x[:1].numel(), 1))
    for i in range(0, x.shape[0], step):
        yield i, x[i:i + step]


def int_view(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``x`` (a flat floating tensor) viewed as integers, and how many value bits they carry."""
    size = x.element_size()
    return x.view(_INT_OF[size]), 8 * size - 1


def magnitude_keys(x: torch.Tensor, clamp: bool = True,
                   out: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
    """The keys of ``|x|`` (``x`` a flat floating tensor, read not written): its bit patterns
    with the sign bit cleared and, with ``clamp``, every NaN at :data:`NAN_BITS` (one key: NaN
    ties rank by index, above ``inf``), and how many value bits they carry. A new tensor of
    ``x``'s size, or ``out`` (of its integer dtype and size) written."""
    ints, bits = int_view(x)
    keys = torch.bitwise_and(ints, (1 << bits) - 1, out=out)
    return (keys.clamp_(max=NAN_BITS[x.dtype]) if clamp else keys), bits


class KeySet:
    """One rank's keys of one tensor: an integer view plus where its entries sit globally.

    ``starts``/``run`` describe the local entries as runs of ``run`` consecutive global flat
    indices (local flat order); ``offset`` is the tensor's start in the concatenation.
    """

    def __init__(self, keys: torch.Tensor, starts: torch.Tensor, run: int, offset: int) -> None:
        self.keys = keys
        self.starts = starts.to(keys.device)
        self.run = run
        self.offset = offset

    def chunks(self) -> Iterator[tuple[int, torch.Tensor]]:
        """(local start, view) pieces of at most :data:`CHUNK` keys."""
        for i, c in enumerate(self.keys.split(CHUNK)):
            yield i * CHUNK, c

    def global_index(self, local: torch.Tensor) -> torch.Tensor:
        """Global flat indices (in the concatenation) of local flat positions ``local``."""
        return self.starts[local // self.run] + local % self.run + self.offset


@dataclass(frozen=True)
class Cut:
    """The k smallest keys: all ``< value``, and those ``== value`` with global index ``<= last``
    (all of them when ``last`` is None).

    So ``last`` is not None exactly when keys equal to ``value`` straddle the cut (some taken,
    some not): a tie the rule "lowest global index first" split. Found by the sharded path
    (:func:`find_cut`); on one process :func:`._select.select` records a :class:`Straddle`.
    """

    value: int
    last: int | None


@dataclass(frozen=True)
class Straddle:
    """Whether the entries tied at a selection's cut were split (some taken, some not), as
    :func:`._select.select` records it inside :func:`cuts_found` on one process: ``flag`` is
    a bool, or a 0-d bool tensor on the keys' device (read later with the others, at once).

    The taken ties are always the lowest-index ones ("index" rule), so a straddle is all a
    session needs to say how a step split a tie: no second pass over the keys.
    """

    flag: bool | torch.Tensor


_RECORDING = threading.local()
_Found = TypeVar("_Found", "Cut", "Straddle")


@contextlib.contextmanager
def cuts_found() -> Iterator[list[Cut | Straddle]]:
    """Collect, in the list it yields, every cut :func:`find_cut` finds (sharded keys) and
    every :class:`Straddle` :func:`._select.select` finds (keys on one process) in this thread
    inside the block (for callers that want to know how a call split a tie without looking
    again)."""
    stack = _RECORDING.__dict__.setdefault("stack", [])
    found: list[Cut | Straddle] = []
    stack.append(found)
    try:
        yield found
    finally:
        stack.pop()


def recording() -> bool:
    """Whether a :func:`cuts_found` block collects the cuts found in this thread."""
    # the thread's own dict: a getattr that misses would build an AttributeError each call
    return bool(_RECORDING.__dict__.get("stack"))


def found(cut: _Found) -> _Found:
    """Hand ``cut`` to the innermost :func:`cuts_found` block of this thread, if any."""
    stack = _RECORDING.__dict__.get("stack")
    if stack:
        stack[-1].append(cut)
    return cut


def histogram(
    chunks: Iterator[torch.Tensor], shift: int, width: int, prefix: int, device: torch.device,
    *, ceiling: int | None = None, markers: bool = True,
) -> torch.Tensor:
    """Counts (int64, ``2**width`` bins) of the digit ``(key >> shift) - (prefix << width)`` of
    the keys ``chunks`` yields whose bits above ``shift + width`` equal ``prefix``; keys of
    another prefix and negative markers are binned out of range and dropped (no gather).

    ``ceiling``: where the histogram covers the top bits (no ``prefix``) of magnitude keys
    (:func:`magnitude_keys`; ``ceiling`` their NaN key, with ``(ceiling >> shift) < 2**width -
    64``), a piece is counted with at most a shift, an ``&`` and one ``bincount`` in its own
    integer type. With ``markers`` the keys must be clamped to ``ceiling`` and markers be in
    [-64, -1]: they land in bins above the ceiling's, which are cleared at the end. Without
    markers the keys need no clamp: the bins above the ceiling's (NaN bit patterns) are added
    to the ceiling's, as if clamped.
    """
    top = None if ceiling is None or prefix else ceiling >> shift
    whole = top is not None and top < (1 << width) - 64
    hist = torch.zeros(1 << width, dtype=torch.int64, device=device)
    for c in chunks:
        if whole:
            digit = (c >> shift) if shift else c
            if markers:  # in place on the shifted copy: one chunk-sized temporary
                digit = digit.bitwise_and_((1 << width) - 1) if shift else \
                    digit & ((1 << width) - 1)
            hist += torch.bincount(digit, minlength=1 << width)
            continue
        digit = c >> shift
        if digit.dtype == torch.int16:
            digit = digit.int()
        if prefix:
            digit.sub_(prefix << width)
        # digit + 1 of the keys under the prefix; 0 or 2**width + 1 for the others
        digit.clamp_(-1, 1 << width).add_(1)
        hist += torch.bincount(digit, minlength=(1 << width) + 2)[1:-1]
    if whole and top is not None:
        if not markers:
            hist[top] += hist[top + 1:].sum()
        hist[top + 1:] = 0
    return hist


def radix_select(
    chunks: Callable[[], Iterator[torch.Tensor]], k: int, bits: int, group: object,
    device: torch.device, *, prefix: int = 0, below: int = 0, left: int | None = None,
) -> tuple[int, int, int]:
    """The k-th smallest (1-based) of the non-negative integer keys ``chunks()`` yields on all
    ranks of ``group`` (None: this process only), with the global counts of keys below and
    equal to it.

    The search may start part way: ``prefix`` (the top ``bits - left`` bits of the answer,
    already known) and ``below`` (keys under that prefix, counted elsewhere, e.g. from a cached
    histogram); ``chunks()`` then need yield only keys under the prefix.
    """
    left = bits if left is None else left
    equal = 0
    source = chunks
    while left > 0:
        width = min(BITS, left)
        shift = left - width
        hist = histogram(source(), shift, width, prefix, device)
        mine = hist.clone()
        all_reduce(hist, group)
        cum = hist.cumsum(0)
        j = int(torch.searchsorted(cum, torch.tensor([k - below], device=device)))
        if j > 0:
            below += int(cum[j - 1])
        equal = int(hist[j])
        prefix = (prefix << width) | j
        left = shift
        if left and int(mine[j]) <= CHUNK:  # few keys of ours left in the race: keep them only
            kept = [torch.cat([c[(c >> left) == prefix] for c in source()])]
            source = functools.partial(iter, kept)
    return prefix, below, equal


def _tied(ks: KeySet, value: int) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """(chunk start, local positions, global indices) of the keys equal to ``value``."""
    for start, c in ks.chunks():
        pos = torch.nonzero(c == value).view(-1)
        yield start, pos, ks.global_index(pos + start)


def find_cut(keysets: Sequence[KeySet], k: int, bits: int, total: int, group: object) -> Cut:
    """Where the ``k`` smallest keys end across ``keysets`` on every rank (``1 <= k``);
    ``total`` bounds the global flat indices."""
    device = keysets[0].keys.device

    def value_chunks() -> Iterator[torch.Tensor]:
        for ks in keysets:
            for _, c in ks.chunks():
                yield c

    value, below, equal = radix_select(value_chunks, k, bits, group, device)
    need = k - below
    if need == equal:
        return found(Cut(value, None))

    def index_chunks() -> Iterator[torch.Tensor]:
        for ks in keysets:
            for _, _, g in _tied(ks, value):
                yield g

    last, _, _ = radix_select(index_chunks, need, max(1, total.bit_length()), group,
                              device)
    return found(Cut(value, last))


def write_kept(ks: KeySet, out: torch.Tensor, cut: Cut) -> torch.Tensor:
    """Write 1 where the key is *not* among the k smallest, else 0, into ``out`` (flat floating,
    may share memory with the keys); marked (negative) keys get 0."""
    ties: dict[int, torch.Tensor] = {}
    if cut.last is not None:
        for start, pos, g in _tied(ks, cut.value):
            ties[start] = pos[g <= cut.last]
    for (start, c), o in zip(ks.chunks(), out.split(CHUNK), strict=True):
        chosen = c <= cut.value if cut.last is None else c < cut.value
        picked = ties.get(start)
        if picked is not None:
            chosen[picked] = True
        torch.logical_not(chosen, out=o)
    return out


def draw_stream(
    segments: Sequence[tuple[int, torch.Tensor, torch.Tensor | None]], total: int,
    generator: torch.Generator | None,
) -> None:
    """Fill each segment ``(start, target, alive)`` with the draws at stream positions
    ``start, start + 1, ...`` of one uniform [0, 1) stream of ``total`` draws -- what
    ``torch.rand(total)`` would give -- and leave the generator where that call leaves it, on
    every rank alike. ``target`` (flat) takes the draws in order, or, when ``alive`` (a flat
    mask of the same size) is given, only where ``alive`` is 1. Segments come in stream order.

    On the CPU the stream is drawn in pieces of at most :data:`CHUNK` (CPU draws concatenate);
    elsewhere it is drawn whole. ``alive`` is read a chunk at a time.
    """
    if not segments:
        dtype, device = torch.float32, torch.device("cpu")
    else:
        dtype, device = segments[0][1].dtype, segments[0][1].device
    if device.type != "cpu":
        whole = torch.rand(total, dtype=dtype, device=device, generator=generator)
        for start, target, alive in segments:
            if alive is None:
                target.copy_(whole[start:start + target.numel()])
                continue
            for piece, was in zip(target.split(CHUNK), alive.split(CHUNK), strict=True):
                keep = was == 1
                n = int(torch.count_nonzero(keep))
                piece.masked_scatter_(keep, whole[start:start + n])
                start += n
        return
    scratch = torch.empty(min(CHUNK, max(total, 1)), dtype=dtype)

    def draw(n: int) -> torch.Tensor:
        return scratch[:n].uniform_(0, 1, generator=generator)

    pos = 0
    for start, target, alive in segments:
        while pos < start:
            pos += draw(min(start - pos, CHUNK)).numel()
        if alive is None:
            for piece in target.split(CHUNK):
                piece.uniform_(0, 1, generator=generator)
                pos += piece.numel()
            continue
        for piece, was in zip(target.split(CHUNK), alive.split(CHUNK), strict=True):
            keep = was == 1
            n = int(torch.count_nonzero(keep))
            piece.masked_scatter_(keep, draw(n))
            pos += n
    while pos < total:
        pos += draw(min(total - pos, CHUNK)).numel()
