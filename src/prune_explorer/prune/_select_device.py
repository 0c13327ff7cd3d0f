"""Where the k smallest keys end, in a fixed number of kernel launches and host reads: the GPU path.

The CPU path of :mod:`._select` narrows the cut piece by piece, reading counts back to Python
between pieces: cheap on a CPU core, a launch and a host sync per piece on a GPU. This path
gives the same answer -- the cut value ``v`` and, where a tie straddles the cut, the last taken
tie (lowest flat index first, key tensors in order) -- with a number of operations that
depends on the number of key tensors, never on their size:

1. **Keys.** Each key tensor as integers that order as the selection ranks (|x| as its bit
   pattern with the sign bit cleared; every NaN one key, above inf), written into a caller's
   scratch buffer (the mask being built) where it has the right width.
2. **Bracket.** A strided sample (no RNG), sorted once, gives ``lo <= v <= hi`` with high
   probability; one pass per tensor counts the keys below ``lo`` and marks those inside.
   **Host read 1**: the counts. A miss widens the bracket (at most 3 times, then everything).
3. **Cut.** The marked keys (a small fraction) are gathered with sizes now known
   (``nonzero_static``: no sync), sorted, and the cut is read off. **Host read 2**: the cut, how
   many ties are taken and where the last taken one is. If the bracket is a single value, no
   gather: the counts already tell, and one blockwise search finds the last taken tie.

So at most 6 host reads (usually 2) and ``O(tensors)`` launches; extra memory: one bool per
entry (the bracket marks) and the gathered candidates (a fraction of a percent of the entries,
for the sample size here), beyond the scratch. Used for every non-CPU tensor, and for CPU
tensors inside :func:`forced` (tests).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import torch

from . import _radix

__all__ = ["DIRECT_MAX", "HOST_READS", "chunk_for", "forced", "int_keys_in",
           "locate_cut", "read_host", "sortable", "to_host", "wanted"]

#: Up to this many entries, a single key tensor's selection (index tie rule) is one stable
#: sort (:func:`._select.stable_order`: no host read, no more launches than torch's own
#: ``topk`` route) instead of :func:`locate_cut` (a sample sort, a bracket pass, 2 host
#: reads). Above it the bracket's fixed cost is small next to a sort of every entry (on an
#: H200 it was 2.2x torch at 11008x4096; see GPU_FACTS.md).
DIRECT_MAX = 1 << 23

#: Entries of the sorted sample that brackets the cut.
_SAMPLE = 1 << 18
#: Entries per row when a tie's n-th member is located blockwise.
_ROW = 1 << 12
_INT_OF = {2: torch.int16, 4: torch.int32, 8: torch.int64}

_force = False


class _Reads:
    """Host reads (device-to-host transfers) made by this path since the last :meth:`reset`."""

    count = 0

    def reset(self) -> None:
        self.count = 0


#: Counts this path's host reads (the tests check it does not grow with the tensors).
HOST_READS = _Reads()


def wanted(t: torch.Tensor | torch.device) -> bool:
    """Whether selections over ``t`` (a tensor, or any tensor on a device) take this path:
    any non-CPU tensor, or inside :func:`forced`."""
    if _force:
        return True
    if isinstance(t, torch.device):
        return t.type != "cpu"
    return not t.is_cpu  # (a tensor's ``device.type`` builds a string: several times the cost)


@contextlib.contextmanager
def forced(on: bool = True) -> Iterator[None]:
    """Run CPU tensors through this path too (``on=False``: never force) inside the block.

    Process-wide (every thread), for tests and benchmarks; the previous setting comes back
    when the block ends.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> w = torch.tensor([[0.3, -0.1], [0.2, -0.4]])
    >>> with forced():
    ...     m = prune.L1Unstructured(amount=2).compute_mask(w, torch.ones_like(w))
    >>> m.tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    global _force
    before, _force = _force, on
    try:
        yield
    finally:
        _force = before


def chunk_for(device: torch.device, numel: int) -> int:
    """Entries to work on at a time over ``numel`` entries on ``device``: on the CPU path
    :data:`._radix.CHUNK` (cache-sized temporaries), on this path all of them (a piece is a
    launch: a fixed number of launches and syncs, whatever the tensor's size)."""
    return max(1, numel) if wanted(device) else _radix.CHUNK


def read_host(t: torch.Tensor) -> list[int]:
    """``t`` (1-D, integer) read on the host: the one kind of sync this path makes."""
    HOST_READS.count += 1
    return [int(x) for x in t.to("cpu", copy=True).tolist()]


def to_host(values: Sequence[torch.Tensor]) -> list[float]:
    """The 0-d ``values`` (any devices; numbers, counts up to 2**53, bools) as Python floats,
    in order: one host read per device among them (counted in :data:`HOST_READS`), not one
    per value."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for i, v in enumerate(values):
        groups.setdefault((v.device, v.dtype), []).append(i)
    out = [0.0] * len(values)
    for device in dict.fromkeys(d for d, _ in groups):
        order = [i for (d, _), where in groups.items() if d == device for i in where]
        # one stack and one conversion per dtype, then one transfer for the device
        read = torch.cat([torch.stack([values[i].reshape(()) for i in where]).to(torch.float64)
                          for (d, _), where in groups.items() if d == device])
        HOST_READS.count += 1
        for i, v in zip(order, read.to("cpu", copy=True).tolist(), strict=True):
            out[i] = v
    return out


def sortable(x: torch.Tensor, magnitude: bool, largest: bool,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """Integers (``x``'s width) that order as the selection ranks ``x``'s entries, ascending
    first: ``|x|`` (``magnitude``) or ``x`` (``-0 == 0``), every NaN one key above inf;
    reversed for ``largest``. ``out`` (an integer tensor of ``x``'s size) is written where
    given: it may share ``x``'s memory when ``magnitude`` and ``x`` holds no negative number
    (its keys are then its own bits, NaN aside)."""
    itype = _INT_OF[x.element_size()]
    bits = x.view(itype)
    top = torch.iinfo(itype).max
    nan = _radix.NAN_BITS[x.dtype]
    if magnitude:
        keys = torch.bitwise_and(bits, top, out=out).clamp_(max=nan)
    else:
        # negative floats order reversed as integers: flip their value bits; -0 lands on 0
        flipped = torch.bitwise_xor(bits, top).add_(1)
        keys = torch.where(bits < 0, flipped, bits)
        keys.masked_fill_(torch.isnan(x), nan)
        if out is not None:
            keys = out.copy_(keys)
    return keys.bitwise_not_() if largest else keys


def int_keys_in(scratch: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The flat integer view in which :func:`locate_cut` wrote ``x``'s keys into ``scratch``
    (a buffer of ``x``'s width)."""
    return scratch.reshape(-1).view(_INT_OF[x.element_size()])


def _value_of(key: torch.Tensor, dtype: torch.dtype, magnitude: bool,
              largest: bool) -> torch.Tensor:
    """The key value ``key`` (a 0-d integer tensor of :func:`sortable`) as a ``dtype`` value."""
    bits = torch.bitwise_not(key) if largest else key.clone()
    if not magnitude:  # undo the flip of negative floats
        top = torch.iinfo(bits.dtype).max
        bits = torch.where(bits < 0, torch.bitwise_xor(bits - 1, top), bits)
    return bits.view(dtype)


def _nth_true(flags: torch.Tensor, n: int) -> int:
    """Flat index of the ``n``-th True (1-based) of the flat bool ``flags`` (it has that many):
    rows of :data:`_ROW` are counted, the row that holds it is searched, one host read."""
    size = flags.numel()
    rows = size // _ROW
    tail = flags[rows * _ROW:]
    target = torch.full((1,), n, dtype=torch.int64, device=flags.device)
    if rows:
        head = flags[:rows * _ROW].view(rows, _ROW)
        cum = head.sum(1).cumsum(0)
        row = torch.searchsorted(cum, target)  # == rows: in the tail
        in_head = row < rows
        at = row.clamp(max=rows - 1)
        before = torch.where(at > 0, cum.index_select(0, (at - 1).clamp(min=0)), 0)
        padded = torch.zeros(_ROW, dtype=torch.bool, device=flags.device)
        padded[:tail.numel()] = tail
        line = torch.where(in_head, head.index_select(0, at).view(-1), padded)
        before = torch.where(in_head, before, cum[-1:])
        start = torch.where(in_head, at, rows) * _ROW
    else:
        line, before, start = tail, torch.zeros_like(target), torch.zeros_like(target)
    offset = torch.searchsorted(line.cumsum(0), target - before)
    return read_host(start + offset)[0]


def locate_cut(
    keys: Sequence[torch.Tensor], k: int, *, largest: bool, magnitude: bool,
    scratch: Sequence[torch.Tensor | None] | None = None,
) -> tuple[torch.Tensor, tuple[int, ...] | None] | None:
    """Where the ``k`` smallest (or ``largest``) entries across the flat ``keys`` end
    (``1 <= k <= total``; all on one device, one floating dtype).

    Returns ``(value, through)`` as :class:`._select.Selection` takes them: the cut value (0-d,
    the keys' dtype and device), and None when every entry equal to it is taken, else per key
    tensor the flat index of the last taken one (``-1``: none). None where the cut falls
    among NaN keys. ``scratch`` (per key tensor: None or a contiguous tensor of its size, any
    dtype) may be overwritten; where it has the keys' width the integer keys live there.
    """
    dtype = keys[0].dtype
    itype = _INT_OF[keys[0].element_size()]
    ints = []
    for i, x in enumerate(keys):
        buffer = None if scratch is None else scratch[i]
        out = None
        if buffer is not None and buffer.element_size() == x.element_size():
            out = int_keys_in(buffer, x)
        ints.append(sortable(x.reshape(-1), magnitude, largest, out))
    sizes = [x.numel() for x in ints]
    total = sum(sizes)
    nan_key = _radix.NAN_BITS[dtype]
    if largest:
        nan_key = ~nan_key

    stride = max(1, total // _SAMPLE)
    sample = torch.sort(torch.cat([x[::stride] for x in ints])).values
    m = sample.numel()
    q = k / total
    margin = 3.0 * math.sqrt(max(m * q * (1.0 - q), 1.0)) + 8.0
    lowest = sample.new_full((), torch.iinfo(itype).min)
    highest = sample.new_full((), torch.iinfo(itype).max)
    inside: list[torch.Tensor] = []  # per key tensor: lo <= key <= hi
    for attempt in range(4):
        lo, hi = lowest, highest  # the last attempt brackets everything: it cannot miss
        if attempt < 3:
            j_lo, j_hi = math.floor(q * m - margin), math.ceil(q * m + margin)
            lo = sample[j_lo] if j_lo > 0 else lowest
            hi = sample[j_hi] if j_hi < m - 1 else highest
        counts = []
        for x in ints:
            below = x < lo
            within = torch.le(x, hi).logical_xor_(below)
            counts += [below.sum(), within.sum()]
            inside.append(within)
            del below
        got = read_host(torch.stack([*counts, lo.long(), hi.long()]))
        n_below, n_inside = got[0:-2:2], got[1:-2:2]
        if sum(n_below) < k <= sum(n_below) + sum(n_inside):
            break
        inside = []
        margin *= 16.0
    rank = k - sum(n_below)  # the cut is the rank-th smallest inside the bracket

    if got[-2] == got[-1]:  # one value fills the bracket: the counts tell everything
        inside = []
        if got[-2] == nan_key:
            return None
        value = _value_of(lo, dtype, magnitude, largest)
        if rank == sum(n_inside):
            return value, None
        owner, before = 0, 0
        while before + n_inside[owner] < rank:
            before += n_inside[owner]
            owner += 1
        last = _nth_true(ints[owner] == lo, rank - before)
        return value, _through(sizes, owner, last)

    where = [_positions(w, n) for w, n in zip(inside, n_inside, strict=True)]
    inside = []
    candidates = torch.cat([x.index_select(0, w) for x, w in zip(ints, where, strict=True)])
    flat = torch.cat(where)
    del where
    cut = torch.sort(candidates).values[rank - 1]
    equal = candidates == cut
    need = rank - (candidates < cut).sum()  # ties taken, in concatenation (= tie) order
    tied = equal.cumsum(0)
    pos = torch.searchsorted(tied, need.view(1)).view(())
    cut_key, need_n, n_equal, at, last = read_host(torch.stack(
        [cut.long(), need, tied[-1], pos, flat.index_select(0, pos.view(1)).view(())]))
    if cut_key == nan_key:
        return None
    value = _value_of(cut, dtype, magnitude, largest)
    if need_n == n_equal:
        return value, None
    owner, start = 0, 0
    while start + n_inside[owner] <= at:
        start += n_inside[owner]
        owner += 1
    return value, _through(sizes, owner, last)


def _positions(flags: torch.Tensor, n: int) -> torch.Tensor:
    """Flat indices (ascending) of the ``n`` True entries of the flat bool ``flags``: no host
    sync where ``nonzero_static`` exists for the device (else ``nonzero``, which syncs)."""
    try:
        return torch.nonzero_static(flags, size=n).view(-1)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - a backend without it
        return torch.nonzero(flags).view(-1)


def _through(sizes: Sequence[int], owner: int, last: int) -> tuple[int, ...]:
    """Per key tensor the last taken tie: all before ``owner``, through ``last`` in it."""
    return tuple(n - 1 if i < owner else last if i == owner else -1
                 for i, n in enumerate(sizes))
