"""A tensor's unpruned ``|w|`` keys in ascending order, in about 0.6 byte per key.

A global L1 cut over float32 tensors knows from the key histograms
(:mod:`~prune_explorer.session.preview.global_cut`) which bin of top value bits it falls in, but
needs
the keys of that bin to find the exact value and how many of each tensor lie below or on it.
:class:`SortedKeys` holds every unpruned key of one tensor, sorted, so the keys of any bin are
a contiguous run found from the histogram's cumulative counts: a slider move reads one bin's run
and never passes over the tensor, wherever the cut moves.

The keys are stored as the differences between neighbours (sorted keys are dense: most
differences are below 15): four bits each; 15 sends to a byte (in order, one per such
difference), whose 255 sends to the few differences kept in full (by position). Every
:data:`STRIDE`-th key is kept in full, with the count of bytes used before it, to start
decoding from. N(0, 0.02) and default-init float32 weights: about 0.6 B/key (6 % of the
differences need their byte, 0.3 % their full value: the sparse tails).

Built once per tensor state, in parts of at most :data:`PART` of the keys (by key range, one
streamed pass each; the part's full-width keys are sorted in place by NumPy, in a mapping of
their own that goes back to the system at the end), so building holds no more than an eighth of
the tensor in full-width keys at once.

Examples
--------
>>> import torch
>>> keys = torch.tensor([7, 300, 5, 5, 9000, 6], dtype=torch.int32)
>>> code = SortedKeys(lambda: iter([keys]), torch.tensor([6]), 31, torch.int32)
>>> code.run(0, 6).tolist(), code.run(2, 4).tolist()
([5, 5, 6, 7, 300, 9000], [6, 7])
>>> code
SortedKeys(6 keys, 2 differences in a byte, 2 in full)
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator

import numpy as np
import torch

__all__ = ["PART", "STRIDE", "SortedKeys"]

#: Largest share of a tensor's keys held in full width while building (a part).
PART = 1 / 8
#: Every STRIDE-th key is kept in full: decoding a run starts at most this far before it.
STRIDE = 4096
_NIBBLE = 15  # a difference of at least this is looked up in the bytes
_BYTE = 255  # a difference of at least this is looked up in the large ones
_PIECE = 1 << 20  # differences computed this many at a time


class SortedKeys:
    """Sorted non-negative integer keys, delta-coded (see the module docstring).

    Parameters
    ----------
    chunks : callable
        Returns an iterator over the keys in pieces (any order; negative keys are skipped:
        markers of pruned entries), each call a fresh pass.
    counts : torch.Tensor
        The keys' histogram by ``key >> shift`` (int64): says how many keys each part holds.
    shift : int
        Key bits below the histogram's bins.
    dtype : torch.dtype
        Integer dtype of the keys.
    """

    def __init__(self, chunks: Callable[[], Iterator[torch.Tensor]], counts: torch.Tensor,
                 shift: int, dtype: torch.dtype) -> None:
        counts = counts.cpu()
        self.size = int(counts.sum())
        self.dtype = dtype
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        self.nibbles = _mapped(-(-self.size // 2), np.dtype(np.uint8))  # two per byte
        self.marks = np.zeros(-(-self.size // STRIDE), dtype=np_dtype)
        self.escapes_before = np.zeros(self.marks.size, dtype=np.int64)  # at marks
        bytes_: list[np.ndarray] = []
        large_at: list[np.ndarray] = []
        large: list[np.ndarray] = []
        done, last, escapes = 0, 0, 0  # keys coded so far; the last of them; nibbles of 15
        parts = list(_parts(counts, max(1, int(PART * self.size))))
        most = max((size for _, _, size in parts), default=0)
        buffer = _mapped(most, np_dtype)  # one buffer for every part, returned at the end
        diffs = np.empty(min(_PIECE, most), dtype=np_dtype)
        for lo, hi, size in parts:
            if not size:
                continue
            part = buffer[:size]
            _gather(chunks(), lo << shift, None if hi is None else hi << shift, part)
            part.sort()  # in place
            for at in range(0, size, _PIECE):  # differences a piece at a time, in one buffer
                piece = part[at:at + _PIECE]
                where = done + at
                diff = diffs[:piece.size]
                diff[0] = piece[0] - (last if at == 0 else part[at - 1])
                np.subtract(piece[1:], piece[:-1], out=diff[1:])
                escaped = np.flatnonzero(diff >= _NIBBLE)
                marks = np.arange(-(-where // STRIDE) * STRIDE, where + piece.size, STRIDE)
                self.marks[marks // STRIDE] = piece[marks - where]
                self.escapes_before[marks // STRIDE] = escapes + np.searchsorted(
                    escaped, marks - where)
                escapes += escaped.size
                wide = diff[escaped]
                big = np.flatnonzero(wide >= _BYTE)
                large_at.append(escaped[big] + where)
                large.append(wide[big])
                bytes_.append(np.minimum(wide, _BYTE).astype(np.uint8))
                np.minimum(diff, _NIBBLE, out=diff)
                _put_nibbles(self.nibbles, where, diff)
            last = int(part[-1])
            done += size
        del buffer, diffs
        self.bytes = np.concatenate(bytes_) if bytes_ else np.zeros(0, dtype=np.uint8)
        self.large_at = np.concatenate(large_at) if large_at else np.zeros(0, dtype=np.int64)
        self.large = np.concatenate(large) if large else np.zeros(0, dtype=np_dtype)

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return sum(a.nbytes for a in (self.nibbles, self.marks, self.escapes_before, self.bytes,
                                      self.large_at, self.large))

    def run(self, start: int, stop: int) -> torch.Tensor:
        """The keys at sorted positions ``[start, stop)``, ascending (CPU)."""
        if start >= stop:
            return torch.zeros(0, dtype=self.dtype)
        mark = start // STRIDE
        first = mark * STRIDE
        packed = self.nibbles[first // 2:(stop + 1) // 2]  # first is even
        nibbles = np.empty(2 * packed.size, dtype=self.marks.dtype)
        np.bitwise_and(packed, 15, out=nibbles[0::2], casting="unsafe")
        np.right_shift(packed, 4, out=nibbles[1::2], casting="unsafe")
        diffs = nibbles[1:stop - first]  # of positions first + 1 .. stop - 1
        escaped = np.flatnonzero(diffs == _NIBBLE)
        begin = int(self.escapes_before[mark]) + int(nibbles[0] == _NIBBLE)
        diffs[escaped] = self.bytes[begin:begin + escaped.size]
        lo, hi = np.searchsorted(self.large_at, [first + 1, stop])
        diffs[self.large_at[lo:hi] - (first + 1)] = self.large[lo:hi]
        keys = np.cumsum(diffs, dtype=self.marks.dtype)
        keys += self.marks[mark]
        out = np.concatenate([self.marks[mark:mark + 1], keys])[start - first:]
        return torch.from_numpy(out)

    def __repr__(self) -> str:
        return (f"SortedKeys({self.size:,} keys, {self.bytes.size:,} differences in a byte, "
                f"{self.large.size:,} in full)")


def _put_nibbles(packed: np.ndarray, where: int, values: np.ndarray) -> None:
    """Write ``values`` (each < 16) as the nibbles of positions ``where``, ``where + 1``, ...
    of ``packed`` (low nibble first; the bytes start at zero)."""
    if values.size == 0:
        return
    if where % 2:  # the first goes in the high nibble of a byte begun before
        packed[where // 2] |= np.uint8(values[0] << 4)
        values, where = values[1:], where + 1
    pairs = values.size // 2
    at = where // 2
    packed[at:at + pairs] = values[0:2 * pairs:2] | (values[1:2 * pairs:2] << 4)
    if values.size % 2:
        packed[at + pairs] = values[-1]


def _mapped(size: int, dtype: np.dtype) -> np.ndarray:
    """An array of ``size`` in pages of its own (an anonymous mapping): the whole of it goes
    back to the system when it is dropped, instead of lingering in the heap between smaller
    allocations (the part buffer is transient, the deltas may be dropped any time)."""
    return np.frombuffer(mmap.mmap(-1, max(1, size * dtype.itemsize)), dtype=dtype, count=size)


def _parts(counts: torch.Tensor, most: int) -> Iterator[tuple[int, int | None, int]]:
    """Bin ranges ``[lo, hi)`` (``hi`` None: to the top) of about ``most`` keys each (a single
    bin may hold more), with their key counts."""
    cum = counts.cumsum(0)
    total = int(cum[-1])
    lo = 0
    while True:
        below = int(cum[lo - 1]) if lo else 0
        hi = int(torch.searchsorted(cum, torch.tensor([below + most]), right=True))
        hi = max(hi, lo + 1)
        if hi >= counts.numel() or int(cum[hi - 1]) == total:  # the last keys: no upper
            yield lo, None, total - below  # bound (unclamped NaN keys lie above their bin)
            return
        yield lo, hi, int(cum[hi - 1]) - below
        lo = hi


def _gather(chunks: Iterator[torch.Tensor], lo: int, hi: int | None, out: np.ndarray) -> None:
    """Write the keys in ``[lo, hi)`` (``hi`` None: no bound) into ``out``, which they fill."""
    filled = 0
    inside = above = np.empty(0, dtype=bool)  # reused for every piece
    for keys in chunks:
        if keys.device.type != "cpu":  # select there, bring the few home
            chosen = keys >= lo
            if hi is not None:
                chosen &= keys < hi
            found = keys[chosen].cpu().numpy()
            count = found.size
        else:  # NumPy's compress is many times faster than torch's boolean indexing on CPU
            flat = keys.numpy()
            if inside.size < flat.size:
                inside, above = np.empty(flat.size, dtype=bool), np.empty(flat.size, dtype=bool)
            here = inside[:flat.size]
            np.greater_equal(flat, lo, out=here)
            if hi is not None:
                np.logical_and(here, np.less(flat, hi, out=above[:flat.size]), out=here)
            count = int(np.count_nonzero(here))
        if filled + count > out.size:
            raise RuntimeError(f"SortedKeys: the tensor holds more keys in [{lo}, {hi}) than "
                               f"its histogram counts ({out.size}); was it written to meanwhile?")
        if keys.device.type != "cpu":
            out[filled:filled + count] = found
        else:
            np.compress(here, flat, out=out[filled:filled + count])
        filled += count
    if filled != out.size:
        raise RuntimeError(f"SortedKeys: found {filled} keys in [{lo}, {hi}), the histogram "
                           f"counts {out.size}; was the tensor written to meanwhile?")
