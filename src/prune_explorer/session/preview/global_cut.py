"""Where a global L1 step cuts, from small per-tensor histograms of ``|w|``: no order is kept.

A global L1 step over tensors ``t_1 .. t_T`` prunes the ``k`` smallest ``|w|`` of their unpruned
entries, ties at the cut taken in tensor order, lowest flat index first within a tensor (the
core's "index" rule, :mod:`prune_explorer.prune._select`). Everything a slider needs to know
about that cut is: the cut value ``v``, and per tensor how many entries lie below ``v`` and how
many of those equal to ``v`` are taken. That comes from counting, not sorting:

* **Keys.** ``|w|`` as integers: the bit pattern with the sign bit cleared (non-negative floats
  order as their bits do; every NaN is one key above ``inf``). See
  :func:`prune_explorer.prune.engine.magnitude_keys`.
* **Histogram, once per tensor state** (:class:`KeyHistogram`): the count of unpruned keys by
  their top value bits -- all 15 of a bfloat16/float16 key (256 KiB of counts), the top 16 of a
  wider one: for float32 the exponent and 8 mantissa bits (512 KiB), whatever the tensor's size.
  One streamed pass over the tensor: on the CPU in NumPy on the calling thread
  (:func:`.key_pass.key_pass`: no parallel region for a busy machine to stall), on a GPU the
  whole tensor at once (a fixed number of launches and syncs per tensor, whatever its size). The
  :class:`~prune_explorer.session.preview.order_cache.OrderCache` keeps it and drops it when the
  tensor's state changes, like an order.
* **Cut, per slider move** (:func:`global_cut`): the summed histograms' cumulative sum gives the
  bin of the ``k``-th key. For 2-byte floats the bin *is* the value. For float32 the keys of a
  *window* of bins around the cut's bin (an eighth of them, :data:`WINDOW_SHARE`, kept with the
  histogram) are gathered: on the CPU by a first preview in the histogram's own pass, the
  window placed by a strided sample (:func:`predicted_window`), so that preview costs one pass
  per target, as the core's selection does; else, or where the sample misplaced it, by one
  more pass. The slider's next moves nearby read their bin there, with no pass. A cut outside
  gathers a new window (one pass);
  after :data:`REGATHER` windows, every key is sorted once (:class:`~.sorted_keys.SortedKeys`:
  every unpruned key, sorted and delta-coded in about 0.6 B each, kept with the histogram), so
  from then on no slider move passes over a tensor, wherever the cut goes. (That sort costs
  about ten passes: done on the first cut, it made the Global tab's first move on GPT-2-small
  take many seconds.) A selection over the bin's keys of every target finishes. float64 keys
  do not compress: their cut's bin is gathered by one pass.
* **Masks, only when asked** (:meth:`GlobalCut.mask`): one pass over that tensor: pruned where
  the key is below ``v``, and at the first ``take`` keys equal to ``v``.

Extra memory: the histograms, float32's sorted keys (about 0.6 B/param kept; building them
holds an eighth of a tensor's keys in full width at a time, 0.5 B per entry of that tensor),
and the chunk-sized temporaries of a pass. These are
the core's masks bit for bit (``prune.global_masks`` with the session's tie rule), and what an
apply right after the preview installs.

Examples
--------
>>> import torch
>>> from torch import nn
>>> from prune_explorer import prune
>>> model = nn.Sequential(nn.Linear(300, 200), nn.Linear(200, 300)).to(torch.bfloat16)
>>> pairs = [(model[0], "weight"), (model[1], "weight")]
>>> hists = [KeyHistogram(m, n) for m, n in pairs]
>>> cut = global_cut(pairs, hists, 60_000)
>>> expected = prune.global_masks(pairs, prune.L1Unstructured, amount=60_000)
>>> all(torch.equal(cut.mask(i), expected[i]) for i in range(2))
True
>>> cut.pruned(0) + cut.pruned(1)
60000
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from prune_explorer.prune import engine

from .compact_keys import SortedKeys
from .key_pass import cpu_pass_fits, cut_mask, dead_flags, key_pass

__all__ = ["GlobalCut", "KeyHistogram", "global_cut", "predicted_window"]

#: Value bits the cached histogram resolves (2**WIDTH bins of int64).
WIDTH = 16

#: Keys (over all targets) a float32 cut gathers around its bin for the next moves: this
#: share of the targets' unpruned keys (0.5 B per entry as int32), at least ``MIN_WINDOW``.
WINDOW_SHARE = 1 / 8
MIN_WINDOW = 1 << 20

#: Keys of the strided sample :func:`predicted_window` places a first cut's window by.
SAMPLE = 1 << 15

#: Windows a float32 histogram gathers (one pass each) before it sorts every key instead.
REGATHER = 3


class _Source:
    """What ranks one target's entries: the tensor whose ``|values|`` are the keys (the
    parameter, or its ``_orig`` once pruned) and the current mask (None when not pruned), with
    their versions when read."""

    def __init__(self, module: nn.Module, name: str) -> None:
        orig = module._parameters.get(name + "_orig")
        if orig is not None:
            self.values = orig.detach()
            self.kept: torch.Tensor | None = module._buffers[name + "_mask"]
        else:
            self.values = getattr(module, name).detach()
            self.kept = None
        self.versions = self._versions()

    def _versions(self) -> tuple[int, ...]:
        return tuple(t._version for t in (self.values, self.kept) if t is not None)

    @property
    def changed(self) -> bool:
        return self._versions() != self.versions

    def chunks(self) -> Iterator[torch.Tensor]:
        """The keys in flat order, in pieces of at most ``CHUNK`` (on the device path, one
        piece: :func:`~prune_explorer.prune.engine.chunk_for`); already pruned entries -1
        (their NaN then clamped to one key; not clamped where nothing is pruned). Each piece
        is written into the same buffer: read it before asking for the next."""
        flat = self.values.reshape(-1)
        alive = None if self.kept is None else self.kept.reshape(-1)
        step = engine.chunk_for(flat.device, flat.numel())  # the device path: all at once
        buffer = torch.empty(min(flat.numel(), step),
                             dtype=engine.int_view(flat[:0])[0].dtype, device=flat.device)
        for start in range(0, flat.numel(), step):
            stop = start + step
            piece = flat[start:stop]
            keys, _ = engine.magnitude_keys(piece, clamp=alive is not None,
                                            out=buffer[:piece.numel()])
            if alive is not None:
                keys.masked_fill_(alive[start:stop].to(keys.device) != 1, -1)
            yield keys


class KeyHistogram:
    """Counts of one tensor's unpruned ``|w|`` keys by their top :data:`WIDTH` value bits.

    Attributes
    ----------
    counts : torch.Tensor
        int64, ``2**width`` bins, on the CPU.
    cum : numpy.ndarray
        Their cumulative sum.
    shift : int
        Value bits below the binned ones (0 for 2-byte floats: each bin is one value).
    alive : int
        Unpruned entries.
    """

    def __init__(self, module: nn.Module, name: str, state: tuple[Any, ...] = (),
                 window: tuple[int, int] | None = None) -> None:
        source = _Source(module, name)
        values = source.values
        self.dtype = values.dtype
        self.bits = 8 * values.element_size() - 1
        self.width = min(WIDTH, self.bits)
        self.shift = self.bits - self.width
        self._window: tuple[int, int, torch.Tensor] | None = None  # float32: bins a..b, keys
        if cpu_pass_fits(values, source.kept):  # NumPy on this thread, window in the pass
            gather = None if window is None or self.dtype != torch.float32 else window
            counts, keys = key_pass(values, source.kept, shift=self.shift, width=self.width,
                                    window=None if gather is None else self._key_range(*gather))
            if gather is not None and keys is not None:
                self._window = (*gather, keys)
            assert counts is not None  # asked for
            self.counts = torch.from_numpy(counts)
            self.cum = np.cumsum(counts)
        else:
            with torch.no_grad():
                self.counts = engine.histogram(source.chunks(), self.shift, self.width, 0,
                                               values.device,
                                               ceiling=engine.NAN_BITS[values.dtype],
                                               markers=source.kept is not None).cpu()
            self.cum = self.counts.cumsum(0).numpy()  # CPU: read one bin at a time
        self.alive = int(self.cum[-1])
        self.numel = values.numel()
        self._state = state
        self._sorted: SortedKeys | None = None  # float32: every key, sorted (when needed)
        self._gathers = 0  # windows left behind
        self._bin: tuple[int, torch.Tensor] | None = None  # the last bin gathered or read
        self._zeros: int | None = None

    def exact_zeros(self, source: _Source) -> int:
        """Unpruned entries exactly 0 (key 0, the smallest: a cut takes them first). Bin 0 itself
        where each bin is one value (2-byte floats) or bin 0 is empty; else counted in one pass
        over ``source``, once per histogram (bin 0 also holds the subnormals)."""
        if self._zeros is None:
            first = int(self.counts[0])
            if self.shift and first:
                with torch.no_grad():
                    first = sum(int(torch.count_nonzero(k == 0)) for k in source.chunks())
            self._zeros = first
        return self._zeros

    def below(self, j: int) -> int:
        """Unpruned keys in the bins below ``j``."""
        return int(self.cum[j - 1]) if j else 0

    def bin_keys(self, source: _Source, j: int, sort: bool = True,
                 window: tuple[int, int] | None = None) -> torch.Tensor:
        """The keys (CPU) of bin ``j``.

        float32 with ``sort``: ascending. The first call gathers the keys of the bins
        ``window`` (``(first, last)``, holding ``j``; default just ``j``) by one pass and keeps
        them; a later call for a bin in that window reads them (no pass); a call outside it
        gathers a new window, up to :data:`REGATHER` windows; after that the tensor's
        :class:`~.sorted_keys.SortedKeys` (about 0.6 B/key) are built once, from which every
        later call, for any bin, reads only that bin's run (a tensor of at most one ``CHUNK``
        of entries gathers windows instead: a pass costs what decoding does). float64 keys do
        not compress (neighbours differ in most of their 52 mantissa bits), so a new bin is
        gathered by one pass, in flat order; so is it for a float32 one without ``sort``
        whose keys are not sorted yet: one cut, as an apply without a preview needs, costs a
        pass, not a sort.
        """
        large = self.numel > engine.CHUNK
        if self._sorted is None and sort and self.dtype == torch.float32:
            if self._window is not None and not self._window[0] <= j <= self._window[1]:
                self._window = self._bin = None  # the cut left the window
                self._gathers += 1
            if self._window is None and (self._gathers < REGATHER or not large):
                first, last = window if window is not None else (j, j)
                self._window = (first, last, self._gather(source, first, last))
            if self._window is not None:
                if self._bin is None or self._bin[0] != j:  # the last bin read, kept
                    keys = self._window[2].numpy()  # NumPy: no parallel region per move
                    self._bin = (j, torch.from_numpy(np.sort(keys[(keys >> self.shift) == j])))
                return self._bin[1]
            self._sorted = SortedKeys(source.chunks, self.counts, self.shift, torch.int32)
        if self._sorted is not None:
            stop = int(self.cum[j])
            return self._sorted.run(stop - int(self.counts[j]), stop)
        if self._bin is None or self._bin[0] != j:
            self._bin = None  # free the old bin first
            self._bin = (j, self._gather(source, j, j))
        return self._bin[1]

    def _key_range(self, first: int, last: int) -> tuple[int, int]:
        """The keys of bins ``first .. last``: ``(low, high)``, both included."""
        return first << self.shift, min(((last + 1) << self.shift) - 1, (1 << self.bits) - 1)

    def _gather(self, source: _Source, first: int, last: int) -> torch.Tensor:
        """The keys (CPU, flat order) of bins ``first .. last``, by one pass."""
        if cpu_pass_fits(source.values, source.kept):
            keys = key_pass(source.values, source.kept, window=self._key_range(first, last))[1]
            assert keys is not None
            return keys
        with torch.no_grad():
            if first == last:
                found = [k[(k >> self.shift) == first].cpu() for k in source.chunks()]
            else:  # pruned entries are -1: below any window
                low, top = first << self.shift, ((last + 1) << self.shift) - 1
                found = [k[(k >= low) & (k <= min(top, torch.iinfo(k.dtype).max))].cpu()
                         for k in source.chunks()]
        return torch.cat(found) if found else torch.zeros(0, dtype=torch.int64)

    def __repr__(self) -> str:
        return (f"KeyHistogram({self.numel:,} entries, alive={self.alive:,}, dtype={self.dtype}, "
                f"{self.counts.numel()} bins)")


class GlobalCut:
    """A global L1 cut: key ``value``; per target the entries below it (``less``), equal to it
    (``equal``) and, of those, taken (``take``: the first ones in flat order)."""

    def __init__(self, sources: Sequence[_Source], value: int, less: list[int],
                 equal: list[int], take: list[int], alive: list[int],
                 hists: Sequence[KeyHistogram]) -> None:
        self._sources = list(sources)
        self._hists = list(hists)
        self.value = value
        self.less, self.equal, self.take, self.alive = less, equal, take, alive

    def pruned(self, i: int) -> int:
        """Unpruned entries of target ``i`` the cut prunes."""
        return self.less[i] + self.take[i]

    def kept(self, i: int) -> int:
        """Entries of target ``i`` the cut keeps (its mask's count of ones)."""
        return self.alive[i] - self.pruned(i)

    def zeros_after(self, i: int) -> int:
        """Entries of target ``i`` exactly 0 once the cut's mask is installed (what
        ``Session.report()`` counts as ``zeros``), without a mask: the already pruned, plus the
        cut or the unpruned exact zeros, whichever is more (zeros have the smallest key)."""
        hist = self._hists[i]
        return hist.numel - self.alive[i] + max(self.pruned(i),
                                                hist.exact_zeros(self._sources[i]))

    @property
    def straddles(self) -> bool:
        """Whether entries equal to the cut value are both pruned and kept."""
        return sum(self.take) < sum(self.equal) and sum(self.take) > 0

    def mask(self, i: int) -> torch.Tensor:
        """Target ``i``'s mask (1 = kept; the dtype and device the core gives), built now from
        its values as they were when the cut was found: per piece, kept where the key is at or
        above the cut value, then the first ``take`` keys equal to it pruned."""
        return self.mask_and_bits(i)[0]

    def mask_and_bits(self, i: int) -> tuple[torch.Tensor, tuple[torch.Tensor, int] | None]:
        """:meth:`mask` of target ``i``, with, where the CPU pass builds a first pruning's
        mask, the same mask packed on the way (``(bytes, kept count)``, as
        :class:`~prune_explorer.session.tensors.packed.PackedMask` stores it): the history's
        bits without another pass over the mask. None elsewhere."""
        source = self._sources[i]
        if source.changed:
            raise RuntimeError(
                f"GlobalCut.mask: target {i} was written to after the cut was found "
                f"(versions {source.versions} -> {source._versions()}); preview again")
        values, kept = source.values, source.kept
        dtype = values.dtype if kept is None else kept.dtype
        out = torch.empty(values.shape, dtype=dtype, device=values.device)
        if out.numel() == 0:  # nothing to cut (split() of an empty tensor still gives a piece)
            return out, None
        if cpu_pass_fits(values, kept) and out.is_floating_point():  # NumPy, this thread
            packed = None if kept is not None else np.empty((out.numel() + 7) // 8, np.uint8)
            count = cut_mask(values, kept, self.value, self.take[i], out,
                             every_tie=self.take[i] == self.equal[i], bits=packed)
            return out, (None if packed is None or count is None
                         else (torch.from_numpy(packed), count))
        ints, bits = engine.int_view(values.reshape(-1))
        alive = None if kept is None else kept.reshape(-1).to(out.device)
        clear = (1 << bits) - 1
        left = self.take[i]
        buffer = torch.empty(0, dtype=ints.dtype, device=ints.device)
        step = engine.chunk_for(out.device, out.numel())  # the device path: all at once
        with torch.no_grad():
            for start, piece in zip(range(0, ints.numel(), step),
                                    out.view(-1).split(step), strict=True):
                part = ints[start:start + step]
                keys = torch.bitwise_and(part, clear, out=buffer.resize_(part.shape))
                torch.ge(keys, self.value, out=piece)  # NaN keys lie above: kept, as the core
                live = None if alive is None else alive[start:start + step] == 1
                if live is not None:  # already pruned: 1 here, times the old mask below
                    piece.masked_fill_(~live, 1)
                if left:
                    tied = keys == self.value
                    if live is not None:
                        tied &= live
                    hits = torch.nonzero(tied).view(-1)[:left]
                    piece[hits] = 0
                    left -= hits.numel()
            if kept is not None:  # as the core: what was pruned stays pruned
                out.mul_(kept.to(out.device))
        return out, None

    def __repr__(self) -> str:
        return (f"GlobalCut({len(self.less)} targets, value bits {self.value:#x}, "
                f"pruned {sum(self.less) + sum(self.take):,})")


def predicted_window(pairs: Sequence[tuple[nn.Module, str]], amount: float | int
                     ) -> tuple[int, int] | None:
    """Bins ``(first, last)`` of float32 keys around where the global L1 cut of ``amount``
    (a share or a count of the unpruned entries) falls over ``pairs``, holding about
    :data:`WINDOW_SHARE` of their unpruned keys (at least :data:`MIN_WINDOW`), from a strided
    sample of :data:`SAMPLE` keys (no RNG). A first preview gathers them in the histograms'
    own pass (:class:`KeyHistogram` ``window``): one pass per target instead of two. Where the
    sample misses (the cut's bin outside), :meth:`KeyHistogram.bin_keys` gathers a window as
    before. None: not every target float32 on the CPU (see :func:`.key_pass.cpu_pass_fits`)."""
    sources = [_Source(m, n) for m, n in pairs]
    if not sources or any(s.values.dtype != torch.float32 or not cpu_pass_fits(s.values, s.kept)
                          for s in sources):
        return None
    total = sum(s.values.numel() for s in sources)
    stride = max(1, total // SAMPLE)
    parts = []
    for s in sources:
        ints = engine.int_view(s.values.reshape(-1))[0].numpy()[::stride]
        keys = np.bitwise_and(ints, 0x7FFFFFFF)
        parts.append(keys if s.kept is None else keys[~dead_flags(s.kept)[::stride]])
    seen = sum(-(-s.values.numel() // stride) for s in sources)
    sample = np.sort(np.concatenate(parts))
    m = sample.size
    if m == 0:
        return None
    alive = total * m / seen  # estimated
    share = min(1.0, max(WINDOW_SHARE, MIN_WINDOW / max(alive, 1.0)))
    q = amount if isinstance(amount, float) else amount / max(alive, 1.0)
    low = min(max(q - share / 2, 0.0), 1.0 - share)
    high = low + share
    shift = 31 - WIDTH
    first = 0 if low <= 0 else int(sample[min(int(low * m), m - 1)]) >> shift
    last = (1 << WIDTH) - 1 if high >= 1 else int(sample[min(int(high * m), m - 1)]) >> shift
    return first, last


def _first_bin(hists: Sequence[KeyHistogram], pruned: int) -> int:
    """The first bin where the targets' summed cumulative counts reach ``pruned``: a binary
    search over the histograms' own cumulative counts (no summed histogram is built)."""
    cums = [h.cum for h in hists]
    lo, hi = 0, len(cums[0]) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(int(c[mid]) for c in cums) >= pruned:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _window(hists: Sequence[KeyHistogram], j: int) -> tuple[int, int]:
    """Bins around ``j`` holding at most :data:`WINDOW_SHARE` of the targets' unpruned keys
    (at least :data:`MIN_WINDOW`, and at least bin ``j``): grown one bin at a time on the side
    that has gathered fewer keys so far, so that moves either way find their bin in it."""
    counts = hists[0].counts.numpy().copy()
    for h in hists[1:]:  # in place: no (targets x bins) array
        counts += h.counts.numpy()
    budget = max(MIN_WINDOW, int(WINDOW_SHARE * sum(h.alive for h in hists)))
    first = last = j
    total = int(counts[j])
    down = up = 0  # keys added below and above bin j
    while True:
        can_down, can_up = first > 0, last + 1 < len(counts)
        if not (can_down or can_up):
            return first, last
        grow_down = can_down and (down <= up or not can_up)
        more = int(counts[first - 1] if grow_down else counts[last + 1])
        if total + more > budget:
            return first, last
        total += more
        if grow_down:
            first, down = first - 1, down + more
        else:
            last, up = last + 1, up + more


def global_cut(pairs: Sequence[tuple[nn.Module, str]], hists: Sequence[KeyHistogram],
               pruned: int, sort: bool = True) -> GlobalCut | None:
    """The cut that prunes the ``pruned`` smallest unpruned ``|w|`` across ``pairs`` (with
    their histograms ``hists``, in the same order). None where the core must decide: targets of
    different dtypes, or a cut among NaN. ``sort``: whether a float32 target may sort its keys
    for this cut and the next ones (:meth:`KeyHistogram.bin_keys`): a slider's cuts, yes; a
    single one (an apply), no."""
    if len({h.dtype for h in hists}) != 1:
        return None
    sources = [_Source(m, n) for m, n in pairs]
    alive = [h.alive for h in hists]
    if pruned <= 0:
        zero = [0] * len(hists)
        return GlobalCut(sources, -1, zero, zero, zero, alive, hists)
    first = hists[0]
    j = _first_bin(hists, pruned)
    below = sum(h.below(j) for h in hists)
    less = [h.below(j) for h in hists]
    if j >= engine.NAN_BITS[first.dtype] >> first.shift:
        return None  # at inf or NaN: the core's rules for NaN decide
    if first.shift == 0:  # the bin is the value
        value = j
        equal = [int(h.counts[j]) for h in hists]
    else:
        # The cut is the (pruned - below)-th smallest key of the bin over all targets. NumPy:
        # a few small single-threaded operations (small torch ops each start a parallel
        # region, which a busy machine turns into a wait).
        window = _window(hists, j) if sort else None
        keys = [h.bin_keys(s, j, sort, window).numpy()
                for h, s in zip(hists, sources, strict=True)]
        rank = pruned - below - 1
        value = int(np.partition(np.concatenate(keys), rank)[rank])
        less = [le + int(np.count_nonzero(k < value)) for le, k in zip(less, keys, strict=True)]
        equal = [int(np.count_nonzero(k == value)) for k in keys]
    need = pruned - sum(less)
    take = []
    for eq in equal:
        take.append(min(eq, need))
        need -= take[-1]
    return GlobalCut(sources, value, less, equal, take, alive, hists)
