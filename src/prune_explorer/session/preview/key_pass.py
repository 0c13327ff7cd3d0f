"""One pass over a CPU tensor's ``|w|`` keys on the calling thread: histogram and window at once.

The global L1 preview (:mod:`.global_cut`) reads each target's magnitude keys (the bit patterns
with the sign bit cleared, :func:`prune_explorer.prune.engine.magnitude_keys`) to count them by
their top bits (the :class:`~.global_cut.KeyHistogram`) and to gather the keys of a range of
bins (the window around the cut the slider's next moves read). :func:`key_pass` does both in
one pass, in NumPy, a block at a time on the calling thread.

Why NumPy on this thread: torch's CPU operations on large pieces open parallel regions, and
each waits at a barrier for every thread of torch's pool; on a busy machine (a shared
JupyterHub, a notebook beside a training job) one descheduled thread stalls every operation
(the core's own CPU passes avoid it the same way, in pieces under torch's parallel grain).
NumPy's element-wise operations and ``bincount`` never start threads. Measured on the 2-core
machine under load: about 10 ns per entry for the histogram and a window of an eighth of the
keys together, against hundreds for torch's ``bincount`` over 1M-entry chunks beside a busy
process.

Already pruned entries (the mask not 1) are neither counted nor gathered. Keys above the
dtype's NaN bit pattern (NaN) are counted in the bin of the smallest NaN pattern, as if clamped
there (the top bin any cut may use lies below it: :func:`.global_cut.global_cut` leaves a cut
at ``inf`` or NaN to the core).

Examples
--------
>>> import torch
>>> w = torch.tensor([0.5, -0.25, 0.0, 2.0, -0.5])
>>> counts, window = key_pass(w, None, shift=23, width=8, window=(0x3E800000, 0x3F000000))
>>> int(counts.sum()), int(counts[0x3F000000 >> 23])  # all five; 0.5 and -0.5 share a bin
(5, 2)
>>> [hex(k) for k in window.tolist()]  # |w| in [0.25, 0.5], flat order
['0x3f000000', '0x3e800000', '0x3f000000']
"""

from __future__ import annotations

import numpy as np
import torch

from prune_explorer.prune import engine

__all__ = ["BLOCK", "cpu_pass_fits", "cut_mask", "dead_flags", "key_pass"]

#: Entries a block of the pass reads at once (1 MiB of float32 keys: stays in cache; large
#: enough that a ``bincount`` over 65,536 bins costs little per entry).
BLOCK = 1 << 18

#: NumPy's unsigned view of each key width (2-byte keys: their bins exceed int16).
_UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_SIGNED = {2: np.int16, 4: np.int32, 8: np.int64}


def cpu_pass_fits(values: torch.Tensor, kept: torch.Tensor | None) -> bool:
    """Whether :func:`key_pass` takes ``values`` (and its mask ``kept``): both plain CPU
    tensors (not DTensors, not on a device), ``values`` floating, and the core's device path
    not forced on the CPU (its tests count that path's operations there)."""
    tensors = [values] if kept is None else [values, kept]
    return values.is_floating_point() and not engine.device_path(values) and all(
        t.device.type == "cpu" and type(t) in (torch.Tensor, torch.nn.Parameter)
        for t in tensors)


def dead_flags(kept: torch.Tensor) -> np.ndarray:
    """The flat NumPy flags of the entries a CPU mask ``kept`` has pruned (``!= 1``), a view
    where the mask's dtype allows (bfloat16, which NumPy lacks, by the bit pattern of 1)."""
    flat = kept.detach().reshape(-1)
    if flat.dtype == torch.bfloat16:
        return flat.view(torch.int16).numpy() != 0x3F80  # 1.0 has exactly this pattern
    return flat.numpy() != 1


def key_pass(values: torch.Tensor, kept: torch.Tensor | None, *,
             shift: int | None = None, width: int = 0,
             window: tuple[int, int] | None = None,
             ) -> tuple[np.ndarray | None, torch.Tensor | None]:
    """Count and gather ``|values|``'s keys in one pass (``values`` a CPU floating tensor,
    ``kept`` its mask or None; see :func:`cpu_pass_fits`).

    Parameters
    ----------
    shift, width
        The histogram: counts by ``key >> shift`` over ``2**width`` bins (None: no histogram).
    window
        ``(low, high)``: also gather the keys with ``low <= key <= high``, in flat order
        (None: none).

    Returns
    -------
    counts : numpy.ndarray or None
        int64, ``2**width`` bins.
    keys : torch.Tensor or None
        The gathered keys (the dtype of ``engine.int_view``), on the CPU.
    """
    flat = values.detach().reshape(-1)
    size = flat.element_size()
    ints = engine.int_view(flat)[0].numpy().view(_UNSIGNED[size])
    clear = (1 << (8 * size - 1)) - 1
    dead = None if kept is None else dead_flags(kept)
    bins = 1 << width
    counts = None if shift is None else np.zeros(bins + 1, dtype=np.int64)  # +1: pruned
    block = min(BLOCK, max(ints.size, 1))
    keys_buffer = np.empty(block, dtype=ints.dtype)
    flags = np.empty(block, dtype=bool)
    above = np.empty(block, dtype=bool)
    found: list[np.ndarray] = []
    low, high = (0, 0) if window is None else window
    for start in range(0, ints.size, block):
        piece = ints[start:start + block]
        keys = np.bitwise_and(piece, clear, out=keys_buffer[:piece.size])
        pruned = None if dead is None else dead[start:start + block]
        if window is not None:
            inside = np.greater_equal(keys, low, out=flags[:piece.size])
            np.logical_and(inside, np.less_equal(keys, high, out=above[:piece.size]),
                           out=inside)
            if pruned is not None:
                np.logical_and(inside, ~pruned, out=inside)
            found.append(np.compress(inside, keys))
        if counts is not None and shift is not None:
            digits = np.right_shift(keys, shift, out=keys) if shift else keys
            if pruned is not None:
                np.putmask(digits, pruned, bins)
            if size == 8:  # bincount takes no uint64; the digits fit in 17 bits
                digits = digits.view(np.int64)
            counts += np.bincount(digits, minlength=bins + 1)
    hist = None
    if counts is not None and shift is not None:
        hist = counts[:-1]
        top = engine.NAN_BITS[values.dtype] >> shift  # NaN patterns: as if clamped there
        if top + 1 < hist.size:
            hist[top] += hist[top + 1:].sum()
            hist[top + 1:] = 0
    gathered = None
    if window is not None:
        joined = np.concatenate(found) if found else np.zeros(0, dtype=ints.dtype)
        gathered = torch.from_numpy(joined.view(_SIGNED[size]))
    return hist, gathered


def cut_mask(values: torch.Tensor, kept: torch.Tensor | None, value: int, take: int,
             out: torch.Tensor, *, every_tie: bool = False, bits: np.ndarray | None = None
             ) -> int | None:
    """Write the mask of a global cut at key ``value`` into ``out`` (a CPU floating tensor of
    ``values``' shape; see :func:`cpu_pass_fits`), in one pass, a block at a time: 1 where the
    key is at or above ``value`` (NaN lies above: kept, as the core), 0 below it and at the
    first ``take`` unpruned keys equal to it (flat order; ``every_tie``: ``take`` is all of
    them, pruned with no search); already pruned entries keep ``kept``'s value (what was
    pruned stays pruned, as the core).

    Written as bit patterns (1.0's, or 0): NumPy has no bfloat16, its integers do.

    ``bits`` (a first pruning only: ``kept`` None): a uint8 array of ``ceil(n / 8)`` bytes
    that also receives the mask packed (``np.packbits`` order, 1 = kept) from the flags each
    block has in cache -- the history's bits without a second pass over the mask; the kept
    count is then returned (else None).

    Examples
    --------
    >>> import torch
    >>> w = torch.tensor([0.5, -0.25, 0.25, 2.0, 0.25])
    >>> out = torch.empty(5)
    >>> cut_mask(w, None, 0x3E800000, 1, out)  # at |0.25|: the first of the three pruned
    >>> out.tolist()
    [1.0, 0.0, 1.0, 1.0, 1.0]
    """
    flat = values.detach().reshape(-1)
    size = flat.element_size()
    ints = engine.int_view(flat)[0].numpy().view(_UNSIGNED[size])
    clear = (1 << (8 * size - 1)) - 1
    patterns = engine.int_view(out.view(-1))[0].numpy()
    # 1.0's bit pattern as a scalar of the patterns' own integer type: flags times it stay
    # in that type (a Python int would make NumPy widen each block, then cast it back)
    one = patterns.dtype.type(int(engine.int_view(torch.ones(1, dtype=out.dtype))[0]))
    if bits is not None and kept is not None:
        raise ValueError("cut_mask: bits is for a first pruning only (kept is None); got a "
                         "kept mask")
    count = 0
    dead = None if kept is None else dead_flags(kept)
    old = None if kept is None else engine.int_view(kept.detach().reshape(-1))[0].numpy()
    block = min(BLOCK, max(ints.size, 1))
    keys_buffer = np.empty(block, dtype=ints.dtype)
    flags = np.empty(block, dtype=bool)
    tied = np.empty(block, dtype=bool)
    left = 0 if every_tie else take
    for start in range(0, ints.size, block):
        piece = ints[start:start + block]
        n = piece.size
        keys = np.bitwise_and(piece, clear, out=keys_buffer[:n])
        kept_here = (np.greater if every_tie else np.greater_equal)(keys, value, out=flags[:n])
        pruned = None if dead is None else dead[start:start + block]
        if left:
            equal = np.equal(keys, value, out=tied[:n])
            if pruned is not None:
                np.logical_and(equal, ~pruned, out=equal)
            hits = np.flatnonzero(equal)[:left]
            kept_here[hits] = False
            left -= hits.size
        dest = patterns[start:start + n]
        np.multiply(kept_here, one, out=dest)
        if pruned is not None and old is not None:
            np.copyto(dest, old[start:start + n], where=pruned)
        if bits is not None:  # BLOCK is a multiple of 8: each block packs to whole bytes
            packed = np.packbits(kept_here)
            bits[start // 8:start // 8 + packed.size] = packed
            count += int(np.count_nonzero(kept_here))
    return count if bits is not None else None
