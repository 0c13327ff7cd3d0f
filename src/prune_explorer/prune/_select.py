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

That is the CPU path (:mod:`._select_cpu`). Keys on any other device (a GPU) go through
:mod:`._select_device` instead: the same answer in a fixed number of launches and host reads,
whatever the size (a CPU tensor too inside ``_select_device.forced()``, for tests).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import math
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from . import _radix, _select_device
from ._select_cpu import CHUNK as _CHUNK
from ._select_cpu import INT_OF as _INT_OF
from ._select_cpu import PIECE as _PIECE
from ._select_cpu import holders, key_of, keys_into, locate_cut

__all__ = ["SMALL", "TIE_RULES", "FirstK", "Selection", "get_tie_break", "report_straddle",
           "resolve_ties", "select", "sorted_for_cut", "stable_order", "tie_break"]

#: At or below this many entries the keys are simply sorted (or ``topk``-ed in torch mode).
SMALL = 1 << 17

#: The tie rules :func:`select` knows.
TIE_RULES = ("index", "torch")

_FAST_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

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
    #: Per key tensor, a buffer the selection left holding ``|keys|`` (its ``scratch``, CPU
    #: path), or None: :meth:`write_kept` into that buffer compares it in place.
    held: tuple[torch.Tensor | None, ...] = ()
    #: Per key tensor, a buffer the selection left holding the integer keys of ``|keys|``
    #: (its ``scratch``, device path, ``magnitude`` and not ``largest``), or None:
    #: :meth:`write_kept` into that buffer compares them in place, without making them again.
    int_keys: tuple[torch.Tensor | None, ...] = ()

    @functools.cached_property
    def _cut_key(self) -> torch.Tensor:
        """The integer key of ``|value|`` (0-d, on the value's device): made once for every
        tensor and span :meth:`write_kept` compares."""
        assert self.value is not None
        return _radix.magnitude_keys(self.value.reshape(1), clamp=False)[0][0]

    def _picks(self, i: int, device: torch.device) -> torch.Tensor | None:
        p = self.picks[i] if i < len(self.picks) else None
        return None if p is None else p.to(device)

    @staticmethod
    def _set_picks(out: torch.Tensor, picks: torch.Tensor, value: float) -> None:
        """``value`` at the picked entries of the flat ``out``: flat indices, or bool flags
        of ``out``'s size (the device path's, set without a host sync)."""
        if picks.dtype == torch.bool:
            out.masked_fill_(picks, value)
        else:
            out.index_fill_(0, picks, value)

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
            if self.largest and flat.is_floating_point():  # NaN ranks above every number
                out.view(-1).logical_or_(torch.isnan(flat))
        picks = self._picks(i, keys.device)
        if picks is not None:
            self._set_picks(out.view(-1), picks, True)
        return out

    def write_kept(self, keys: torch.Tensor, out: torch.Tensor, i: int = 0) -> torch.Tensor:
        """Write 1 where the entry is *not* selected and 0 where it is, into ``out``.

        ``out`` is a contiguous floating tensor of the keys' shape and may be ``keys`` itself:
        a pruning mask is then built in place, without a temporary. The work goes through
        cache-sized pieces, so each entry is read and written once from memory (on the
        device path: whole spans, one operation each).
        """
        picks = self._picks(i, out.device)
        if self.value is None and picks is not None and picks.dtype == torch.bool:
            # flags of every entry (the device path's): the mask is their negation, one pass
            torch.logical_not(picks, out=out.view(-1))
            return out
        if self.value is None:
            out.fill_(1)
        else:
            flat_keys, flat_out = keys.view(-1), out.view(-1)
            v = self.value.to(keys.device)
            held = self._holds(i, flat_out)
            int_keys = self._int_keys(i, flat_out)
            for start, stop, taken in self._spans(i, flat_keys.numel()):
                if int_keys is not None:  # kept: the keys past the cut, compared in place
                    compare = torch.gt if taken else torch.ge
                    compare(int_keys[start:stop], self._cut_key.to(out.device),
                            out=flat_out[start:stop])
                    continue
                source = flat_out if held else flat_keys
                self._write_span(source[start:stop], flat_out[start:stop], v, taken, held)
        if picks is not None:
            self._set_picks(out.view(-1), picks, 0)
        return out

    def _int_keys(self, i: int, out: torch.Tensor) -> torch.Tensor | None:
        """The integer keys the selection left for the ``i``-th key tensor (see
        :attr:`int_keys`: in the flat ``out`` itself, or a piece of one buffer for every key
        tensor), flat, or None."""
        buffer = self.int_keys[i] if i < len(self.int_keys) else None
        if buffer is None or buffer.numel() != out.numel():
            return None
        if buffer.data_ptr() == out.data_ptr() and buffer.element_size() == out.element_size():
            return out.view(buffer.dtype)
        return buffer.reshape(-1)

    def split(self, keys: Sequence[torch.Tensor]) -> Selection:
        """This selection over the concatenation of ``keys`` (one key tensor) as a selection
        over each of them: the cut as it is, the last taken tie per tensor, picks as views
        of one flag buffer and the integer keys as pieces of the concatenated ones -- a
        fixed number of operations, whatever the number of tensors."""
        sizes = [x.numel() for x in keys]
        through = None
        if self.through is not None:
            through, start = [], 0
            for n in sizes:
                through.append(min(max(self.through[0] - start, -1), n - 1))
                start += n
        picks: tuple[torch.Tensor | None, ...] = ()
        p = self.picks[0] if self.picks else None
        if p is not None:
            flags = p if p.dtype == torch.bool else torch.zeros(
                sum(sizes), dtype=torch.bool, device=p.device).index_fill_(0, p, True)
            picks = tuple(flags.split(sizes))
        int_keys: tuple[torch.Tensor | None, ...] = ()
        if self.int_keys and self.int_keys[0] is not None:
            int_keys = tuple(self.int_keys[0].split(sizes))
        return dataclasses.replace(self, through=None if through is None else tuple(through),
                                   picks=picks, int_keys=int_keys, held=())

    def _holds(self, i: int, out: torch.Tensor) -> bool:
        """Whether the flat ``out`` is the buffer the selection left holding ``|keys|``."""
        held = self.held[i] if i < len(self.held) else None
        return held is not None and held.dtype == out.dtype and \
            held.numel() == out.numel() and held.data_ptr() == out.data_ptr()

    def _write_span(self, keys: torch.Tensor, out: torch.Tensor, v: torch.Tensor,
                    taken: bool, held: bool = False) -> None:
        """:meth:`write_kept` over flat ``keys``/``out`` where entries equal to ``v`` are
        ``taken`` (selected) or not; ``held``: ``keys`` is ``out``, holding ``|keys|``."""
        whole = _select_device.wanted(keys)  # one operation per span, not per piece
        on_cpu = keys.device.type == "cpu" and out.device.type == "cpu"
        # on the CPU, pieces under torch's parallel grain: every operation runs on this
        # thread (see _select_cpu.PIECE)
        size = _PIECE if on_cpu else _CHUNK
        self._write_pieces([(keys, out)] if whole else
                           list(zip(keys.split(size), out.split(size), strict=True)),
                           v, taken, whole, held)

    def _write_pieces(self, pieces: list[tuple[torch.Tensor, ...]], v: torch.Tensor,
                      taken: bool, whole: bool = False, held: bool = False) -> None:
        """:meth:`_write_span` over (keys, out) ``pieces`` in order (``whole``: the device
        path, one span; ``held``: each keys piece is its out piece, holding ``|keys|``)."""
        keys = pieces[0][0]
        if self.magnitude and not self.largest and keys.dtype in _INT_OF and not held:
            # kept = |key| past the cut, NaN included (it is never taken): on the bit patterns
            # with the sign bit cleared, which order as |key| does with NaN above inf -- two
            # operations a piece instead of abs, compare and flip
            bits_compare = torch.gt if taken else torch.ge
            if whole:  # the cut's key stays on the device; the keys go where the mask goes
                out = pieces[0][1]
                cut: torch.Tensor | int = self._cut_key.to(out.device)
                itype = _INT_OF[keys.dtype]
                into = out.view(itype) if out.element_size() == keys.element_size() else None
                bits_compare(_radix.magnitude_keys(keys, clamp=False, out=into)[0], cut,
                             out=out)
                return
            cut = key_of(v)
            buffer = torch.empty(0, dtype=_INT_OF[keys.dtype], device=keys.device)
            for piece, dest in pieces:
                bits_compare(keys_into(piece, buffer), cut, out=dest)
            return
        if self.largest:  # kept: below the cut (keys hold no NaN here: they are draws)
            compare = torch.lt if taken else torch.le
        else:  # selected: up to the cut, then flipped (not "keys > v": NaN is never taken)
            compare = torch.le if taken else torch.lt
        buffer = torch.empty(0, dtype=keys.dtype, device=keys.device)
        for piece, dest in pieces:
            if self.magnitude and not held:
                piece = torch.abs(piece, out=buffer.resize_(piece.shape))
            compare(piece, v, out=dest)
            if not self.largest:
                dest.neg_().add_(1)


def select(
    keys: Sequence[torch.Tensor], k: int, *, largest: bool = False, ties: str = "index",
    magnitude: bool = False, scratch: Sequence[torch.Tensor | None] | None = None,
) -> Selection:
    """Select the ``k`` smallest (or ``largest``) entries across ``keys``.

    Parameters
    ----------
    keys
        One or more 1-D tensors, read in order as if concatenated (they may live on different
        devices). NaN ranks above every number (:meth:`Selection.selected` takes it first
        with ``largest=True``); :meth:`Selection.write_kept` with ``largest=True`` assumes
        there is none (random draws).
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
    scratch
        Per key tensor None or a contiguous buffer of its size that the selection may
        overwrite (the mask about to be written): the device path keeps its integer keys
        there, the CPU path ``|keys|`` (a buffer of the keys' float32/float64 dtype), which
        :meth:`Selection.write_kept` into that buffer then compares in place. It may be the
        key tensor itself when ``magnitude`` and the keys hold no negative number.

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
    # inside _radix.cuts_found (a session step): whether a tie straddles the cut, found on
    # the way (the taken ties are the lowest-index ones: that is all the session's note needs)
    report: list[bool | torch.Tensor] | None = [] if _radix.recording() else None
    chosen = _select(keys, k, total, largest, ties, magnitude, scratch, report)
    if report:
        _radix.found(_radix.Straddle(report[0]))
    return chosen


def _select(
    keys: Sequence[torch.Tensor], k: int, total: int, largest: bool, ties: str,
    magnitude: bool, scratch: Sequence[torch.Tensor | None] | None,
    report: list[bool | torch.Tensor] | None, direct: bool = True,
) -> Selection:
    """:func:`select` for ``1 <= k <= total``; appends to ``report`` (where given) whether a
    tie straddles the cut (a bool, or a 0-d bool tensor on the keys' device). ``direct``:
    a single key tensor up to DIRECT_MAX on the device path may be sorted."""
    dtype = keys[0].dtype
    device_path = _select_device.wanted(keys[0])
    if device_path and len(keys) > 1 and total > SMALL and dtype in _FAST_DTYPES and \
            len({(x.device, x.dtype) for x in keys}) == 1:
        # several tensors on one device: one concatenation (one launch), then the work of a
        # single key tensor over it -- launches that do not grow with the number of tensors;
        # the integer keys are made in place of the concatenated copy
        # (the bracket, as for several tensors before: the route does not change with size)
        whole = torch.cat([x.reshape(-1) for x in keys])
        one = _select([whole], k, total, largest, ties, magnitude, [whole], report,
                      direct=False)
        return one.split(keys)
    if total > SMALL and dtype in _FAST_DTYPES:
        if largest and k == total:  # everything: past -inf
            if report is not None:
                report.append(False)
            return Selection(largest, value=torch.tensor(-math.inf, dtype=dtype,
                                                         device=keys[0].device),
                             magnitude=magnitude)
        # the cut (value, last taken tie per key tensor); None: the sorting reference decides
        found: tuple[torch.Tensor, tuple[int, ...] | None] | None
        int_keys: list[torch.Tensor | None] = []
        if direct and device_path and len(keys) == 1 and ties == "index" and total <= \
                _select_device.DIRECT_MAX:  # no host read (see DIRECT_MAX): sorted
            return _by_sorting(keys, k, largest, ties, magnitude, flags=True,
                               report=report if report == [] else None)
        if device_path and len({x.device for x in keys}) == 1:
            found = _select_device.locate_cut(keys, k, largest=largest, magnitude=magnitude,
                                              scratch=scratch)
            if found is not None and found[1] is not None and ties == "torch":
                if report is not None:
                    report.append(True)
                found = None
            held: list[torch.Tensor | None] = []
            # the scratch buffers of the keys' width now hold their integer keys
            int_keys = _left_keys(keys, scratch) if magnitude and not largest else []
        else:
            # the CPU path leaves |keys| in the scratch buffers it can use: write_kept into
            # one of them compares it in place
            held = holders(keys, scratch, magnitude)
            found = locate_cut(keys, k, largest=largest, magnitude=magnitude,
                               torch_rule=ties == "torch", held=held)
        if found is not None:
            if report is not None:
                report.append(found[1] is not None)
            return Selection(largest, value=found[0], through=found[1], magnitude=magnitude,
                             held=tuple(held), int_keys=tuple(int_keys))
    return _by_sorting(keys, k, largest, ties, magnitude, flags=device_path,
                       report=report if report == [] else None)


def _left_keys(keys: Sequence[torch.Tensor], scratch: Sequence[torch.Tensor | None] | None
               ) -> list[torch.Tensor | None]:
    """Per key tensor, the integer keys :func:`._select_device.locate_cut` left in its scratch
    buffer (one of the keys' width), or None."""
    out: list[torch.Tensor | None] = []
    for i, x in enumerate(keys):
        buffer = None if scratch is None else scratch[i]
        fits = buffer is not None and buffer.element_size() == x.element_size()
        out.append(_select_device.int_keys_in(buffer, x) if buffer is not None and fits
                   else None)
    return out


def _by_sorting(
    keys: Sequence[torch.Tensor], k: int, largest: bool, ties: str, magnitude: bool,
    flags: bool = False, report: list[bool | torch.Tensor] | None = None,
) -> Selection:
    """The reference: stable sort (index rule) or ``topk`` (torch rule) of the concatenation.
    ``flags``: several key tensors get bool flags, split without a host sync. ``report``:
    as in :func:`_select` (the index rule: the k-th and the next sorted key are equal, NaN
    equal to NaN)."""
    device = keys[0].device
    whole = keys[0] if len(keys) == 1 else torch.cat([x.reshape(-1).to(device) for x in keys])
    if ties == "torch":
        idx = torch.topk(whole.abs() if magnitude else whole, k, largest=largest).indices
    else:
        flat = whole.reshape(-1)
        ranked, tied = (None, None) if _select_device.wanted(flat) else \
            _by_topk(flat, k, largest, magnitude)
        if ranked is not None:
            idx = ranked[:k]
        else:
            ordered = stable_order(flat, largest=largest, magnitude=magnitude)
            idx = ordered.indices[:k]
        if report is not None:
            report.append(_straddles(ordered.values, k) if tied is None else tied)
    if len(keys) == 1:
        return Selection(largest, picks=(idx,))
    if flags:
        taken = torch.zeros(whole.numel(), dtype=torch.bool, device=device).index_fill_(
            0, idx, True)
        return Selection(largest, picks=tuple(
            f.to(x.device) for f, x in zip(taken.split([x.numel() for x in keys]), keys,
                                           strict=True)))
    picks: list[torch.Tensor | None] = []
    start = 0
    for x in keys:
        mine = idx[(idx >= start) & (idx < start + x.numel())] - start
        picks.append(mine if mine.numel() else None)
        start += x.numel()
    return Selection(largest, picks=tuple(picks))


def stable_order(keys: torch.Tensor, *, largest: bool, magnitude: bool
                 ) -> torch.return_types.sort:
    """The stable sort of the flat ``keys`` in the order the index rule takes them: ascending
    (descending for ``largest``) by value, or by ``|keys|`` with ``magnitude``; NaN above
    every number, tied keys in flat order. On the device path ``|keys|`` are sorted as
    integers (:func:`._select_device.sortable`: a GPU's radix sort orders NaNs by their bits,
    these keys make every NaN one key); ``values`` is a fresh tensor of the keys' width."""
    if magnitude:
        keys = _select_device.sortable(keys, True, False) if _select_device.wanted(keys) \
            else keys.abs()
    return torch.sort(keys, descending=largest, stable=True)


class FirstK(NamedTuple):
    """The first ``k`` of one flat key tensor under the index rule, found at once
    (:func:`sorted_for_cut`)."""

    #: the keys' sorted copy (device path), fresh, free to be overwritten; None on the CPU
    scratch: torch.Tensor | None
    #: flat indices in rank order: the first ``k``, then, on the CPU route, the next one (the
    #: first kept: ``topk`` took it to see the cut)
    ranked: torch.Tensor
    k: int

    def zero_first(self, out: torch.Tensor) -> torch.Tensor:
        """``out`` (flat, all ones, on ``ranked``'s device) with the first ``k`` set to 0, in
        one operation: past ``k``, a scatter of ``k`` zeros and a one (no slice of
        ``ranked`` first, an operation of its own)."""
        if self.ranked.shape[0] == self.k:
            return out.index_fill_(0, self.ranked, 0)
        if self.k < _TAIL_MAX:
            key = (self.k, out.dtype, out.device)
            source = _ZEROS_THEN_ONE.get(key)
            if source is None:
                if len(_ZEROS_THEN_ONE) >= 64:
                    _ZEROS_THEN_ONE.clear()
                source = torch.zeros(self.k + 1, dtype=out.dtype, device=out.device)
                source[self.k] = 1
                _ZEROS_THEN_ONE[key] = source  # read only: scatter_ reads its source
            return out.scatter_(0, self.ranked, source)
        return out.index_fill_(0, self.ranked[:self.k], 0)


#: :meth:`FirstK.zero_first`'s sources (k zeros, then a one), by (k, dtype, device), for k
#: below _TAIL_MAX: a few small tensors, the cache cleared when it holds 64.
_ZEROS_THEN_ONE: dict[tuple[int, torch.dtype, torch.device], torch.Tensor] = {}
_TAIL_MAX = 1 << 12


def sorted_for_cut(keys: torch.Tensor, k: int, *, largest: bool, magnitude: bool
                   ) -> FirstK | None:
    """The first ``k`` (``0 < k``) of the single flat key tensor ``keys`` under the index
    rule, where they come at once; None where they do not -- above :data:`SMALL` entries,
    unless on the device path up to :data:`._select_device.DIRECT_MAX`. Inside
    :func:`._radix.cuts_found`, whether a tie straddles the cut is recorded.

    - On the device path: one :func:`stable_order` (no host read, a fixed handful of
      launches); its sorted copy of the keys is the :class:`FirstK`'s ``scratch``.
    - On the CPU, floating keys: ``topk`` of ``k + 1``, several times cheaper than a stable
      sort. When its ``k``-th and next keys differ, no tie straddles the cut and the first
      ``k`` are one set whatever the tie rule: the index rule's. Otherwise (NaN counted equal
      to NaN) the stable sort decides.
    """
    n = keys.numel()
    device_path = _select_device.wanted(keys)
    if n > SMALL and not (n <= _select_device.DIRECT_MAX and device_path):
        return None
    ranked, tied = (None, None) if device_path else _by_topk(keys, k, largest, magnitude)
    if tied is not None and _radix.recording():
        _radix.found(_radix.Straddle(tied))
    if ranked is not None:
        return FirstK(None, ranked, k)
    order = stable_order(keys, largest=largest, magnitude=magnitude)
    if tied is None:
        report_straddle(order.values, k)
    return FirstK(order.values, order.indices[:k], k)


def _by_topk(keys: torch.Tensor, k: int, largest: bool, magnitude: bool
             ) -> tuple[torch.Tensor | None, bool | None]:
    """``(ranked, tied)`` for the flat CPU ``keys`` and ``0 < k``: whether a tie straddles
    the cut of the first ``k`` under the index rule (NaN equal to NaN), and, where none does,
    the flat indices of the first ``k + 1`` in rank order, from ``topk`` -- the first ``k``
    are then one set whatever the tie rule -- at a fraction of a stable sort's cost.
    ``ranked`` is None where a tie straddles (the stable sort decides); both are None where
    ``topk`` is not used: all taken, keys not floating, or not a plain tensor (a tensor
    subclass -- a ``FakeTensor`` while a model is traced, say -- may have no values to read:
    the sort needs none)."""
    if k >= keys.shape[0] or not keys.dtype.is_floating_point or type(keys) is not torch.Tensor:
        return None, None
    top = torch.topk(keys.abs() if magnitude else keys, k + 1, largest=largest)
    last, after = _kth_and_next(top.values, k)
    if last == after or (last != last and after != after):
        return None, True
    return top.indices, False


#: Two adjacent CPU floats, by dtype, as :func:`_kth_and_next` reads them in place.
_PAIRS: dict[torch.dtype, type[ctypes.Array[Any]]] = {torch.float32: ctypes.c_float * 2,
                                                    torch.float64: ctypes.c_double * 2}


def _kth_and_next(values: torch.Tensor, k: int) -> tuple[float, float]:
    """Entries ``k - 1`` and ``k`` of the fresh, contiguous CPU ``values`` (``topk``'s), as
    Python numbers. Float32 and float64 are read in place: a slice and ``tolist`` make a tensor
    and a list, and on a tiny weight that costs several percent of a whole pruning call
    (``benchmarks/bench_launches.py --host``)."""
    dtype = values.dtype
    if dtype not in _PAIRS:
        last, after = values[k - 1:k + 1].tolist()
        return last, after
    pair = _PAIRS[dtype].from_address(values.data_ptr() + (k - 1) * values.itemsize)
    return pair[0], pair[1]


def report_straddle(ordered: torch.Tensor, k: int) -> None:
    """Inside :func:`._radix.cuts_found` (a session step), record whether a tie straddles
    the cut of the first ``k`` of the sorted keys ``ordered``."""
    if _radix.recording():
        _radix.found(_radix.Straddle(_straddles(ordered, k)))


def _straddles(ordered: torch.Tensor, k: int) -> bool | torch.Tensor:
    """Whether the ``k``-th of the sorted keys ``ordered`` equals the next one (NaN equal to
    NaN): a 0-d bool tensor, read by whoever asked; False when all are taken."""
    if k >= ordered.numel():
        return False
    pair = ordered[k - 1:k + 1]
    if pair.is_floating_point():
        return (pair[0] == pair[1]) | torch.isnan(pair).all()
    return pair[0] == pair[1]
