"""Bit-packed binary masks: how the session stores masks compactly (1 bit per entry).

A pruning mask from ``torch.nn.utils.prune`` is a float tensor as large as the parameter. History
keeps one mask per step, so it stores them as bits instead: 32x smaller than float32.

Examples
--------
>>> import torch
>>> from prune_explorer.session import PackedMask
>>> packed = PackedMask.from_tensor(torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]))
>>> packed
PackedMask(shape=(2, 3), kept=3, pruned=3, 1 byte)
>>> packed.unpack()
tensor([[ True, False,  True],
        [False, False,  True]])
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from prune_explorer.prune import engine
from prune_explorer.prune.engine import contiguous_stride, is_sharded

from .sharded import total_count

__all__ = ["MaskBits", "PackedMask", "ShardedMask", "ones_mask"]

_SHIFTS: dict[torch.device, torch.Tensor] = {}


def _shifts(device: torch.device) -> torch.Tensor:
    # Bit positions of the 8 entries of one byte, most significant first (numpy's "big" order).
    if device not in _SHIFTS:
        _SHIFTS[device] = torch.arange(7, -1, -1, dtype=torch.uint8, device=device)
    return _SHIFTS[device]


def _popcount(array: np.ndarray) -> int:
    """Number of set bits in a uint8 array (np.bitwise_count needs numpy >= 2)."""
    if hasattr(np, "bitwise_count"):
        return int(np.bitwise_count(array).sum())
    return int(np.unpackbits(array).sum())


def _piece(device: torch.device, numel: int) -> int:
    """Entries of a ``numel``-entry mask on ``device`` packed or unpacked at a time
    (:func:`~prune_explorer.prune.engine.chunk_for`: a chunk on the CPU, all of them on the
    device path), rounded up to a multiple of 8 so that pieces pack to whole bytes."""
    step = engine.chunk_for(device, numel)
    return max(8, step + (-step) % 8)


def _pack(kept: torch.Tensor) -> torch.Tensor:
    """Pack a bool tensor into uint8 bytes (big-endian bit order) on the same device."""
    flat = kept.reshape(-1)
    if flat.device.type == "cpu":
        return torch.from_numpy(np.packbits(flat.numpy()))
    pad = (-flat.numel()) % 8
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    bits = flat.view(torch.uint8) if flat.dtype == torch.bool else flat.to(torch.uint8)
    return (bits.view(-1, 8) << _shifts(flat.device)).sum(dim=1, dtype=torch.uint8)


def _pack_on_host(flat: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The bytes (:func:`_pack`) and kept count of the flat CPU mask ``flat`` (bool or
    numeric, nonzero kept), a chunk at a time in numpy: single-threaded work, with no parallel
    region to wait in on a busy machine; the count is the packed bytes' popcount."""
    numel = flat.numel()
    data = np.empty((numel + 7) // 8, dtype=np.uint8)
    wide = flat.dtype.is_floating_point and flat.element_size() == 2  # no numpy bf16
    values = flat.view(torch.int16).numpy() if wide else flat.numpy()
    step = _piece(flat.device, numel)
    kept = np.empty(min(step, numel), dtype=np.bool_)
    count = 0
    for start in range(0, numel, step):
        piece = values[start:start + step]
        if piece.dtype == np.bool_:
            bits = piece
        elif wide:  # the value bits: -0 is 0
            bits = np.not_equal(piece & 0x7FFF, 0, out=kept[:piece.size])
        else:
            bits = np.not_equal(piece, 0, out=kept[:piece.size])
        chunk = np.packbits(bits)
        data[start // 8:start // 8 + chunk.size] = chunk
        count += _popcount(chunk)
    return torch.from_numpy(data), count


def _unpack(data: torch.Tensor, numel: int) -> torch.Tensor:
    """Inverse of :func:`_pack`: a flat bool tensor of ``numel`` entries."""
    if data.device.type == "cpu":
        return torch.from_numpy(np.unpackbits(data.numpy(), count=numel).view(np.bool_))
    bits = (data.unsqueeze(1) >> _shifts(data.device)) & 1
    return bits.view(-1)[:numel].bool()


class PackedMask:
    """An immutable binary mask stored as bits, 1 = entry kept, 0 = entry pruned.

    Build one with :meth:`from_tensor` (any tensor of 0/1 values or bools), :meth:`ones` (nothing
    pruned; stores no bits at all) or :meth:`from_bytes`. Two packed masks are equal when they have
    the same shape and the same bits, wherever they live.

    Examples
    --------
    >>> import torch
    >>> m = PackedMask.from_tensor(torch.tensor([True, False, True]))
    >>> m.kept, m.pruned, m.shape
    (2, 1, (3,))
    >>> m == PackedMask.from_bytes((3,), m.to_bytes())
    True
    >>> PackedMask.ones((2, 2)).unpack(dtype=torch.float32)
    tensor([[1., 1.],
            [1., 1.]])
    """

    __slots__ = ("_data", "_device", "_kept", "_shape")

    def __init__(
        self,
        shape: Sequence[int],
        data: torch.Tensor | None,
        kept: int,
        device: torch.device | str | None = None,
    ) -> None:
        self._shape = tuple(int(s) for s in shape)
        self._data = data
        self._kept = int(kept)
        if data is not None:
            self._device = data.device
        else:
            self._device = torch.device(device if device is not None else "cpu")

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_tensor(cls, mask: torch.Tensor) -> PackedMask:
        """Pack ``mask`` (bool or numeric; nonzero means kept) on the mask's own device.

        A DTensor (a mask sharded over processes) gives a
        :class:`~prune_explorer.session.tensors.packed.ShardedMask` of this rank's shard (a
        collective: its kept count is all-reduced).
        """
        return cls.from_tensors([mask])[0]

    @classmethod
    def from_tensors(cls, masks: Sequence[torch.Tensor]) -> list[PackedMask]:
        """:meth:`from_tensor` of each of ``masks``, their kept counts read back to the host
        at once (one sync for all the masks on one device, not one per mask or chunk).

        Examples
        --------
        >>> import torch
        >>> from prune_explorer.session import PackedMask
        >>> a, b = PackedMask.from_tensors([torch.tensor([1.0, 0.0]), torch.ones(3)])
        >>> (a.kept, a.pruned, b.kept, b.pruned)
        (1, 1, 3, 0)
        """
        packed: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | int]] = []
        for mask in masks:
            if is_sharded(mask):
                continue
            flat = mask.detach().reshape(-1)
            if engine.device_path(flat):  # a fixed number of launches: the mask at once
                kept = flat if flat.dtype == torch.bool else flat != 0
                packed.append((flat, _pack(kept), torch.count_nonzero(kept)))
                continue
            if flat.device.type == "cpu":
                packed.append((flat, *_pack_on_host(flat)))
                continue
            step = _piece(flat.device, flat.numel())
            data = torch.empty((flat.numel() + 7) // 8, dtype=torch.uint8, device=flat.device)
            count = torch.zeros((), dtype=torch.int64, device=flat.device)
            for i, piece in enumerate(flat.split(step)):  # a chunk at a time
                kept = piece if piece.dtype == torch.bool else piece != 0
                count += torch.count_nonzero(kept)  # stays on the device: read below
                data[i * step // 8:(i * step + piece.numel() + 7) // 8] = _pack(kept)
            packed.append((flat, data, count))
        on_device = [c for _, _, c in packed if isinstance(c, torch.Tensor)]
        read = iter(engine.to_host(on_device))  # one read per device
        counts = [int(next(read)) if isinstance(c, torch.Tensor) else c for _, _, c in packed]
        found = iter(zip(packed, counts, strict=True))
        out: list[PackedMask] = []
        for mask in masks:
            if is_sharded(mask):
                out.append(ShardedMask.of(mask))
                continue
            (flat, data, _), n_kept = next(found)
            out.append(cls.from_bits(mask.shape, data, n_kept))
        return out

    @classmethod
    def from_bits(cls, shape: Sequence[int], data: torch.Tensor, kept: int) -> PackedMask:
        """The mask of ``shape`` whose bits ``data`` (uint8, :func:`_pack`'s order) are already
        packed, ``kept`` of them set; a mask that keeps everything stores no bits (as
        :meth:`ones`).

        Examples
        --------
        >>> import torch
        >>> from prune_explorer.session import PackedMask
        >>> PackedMask.from_bits((2, 2), torch.tensor([0b10110000], dtype=torch.uint8), 3)
        PackedMask(shape=(2, 2), kept=3, pruned=1, 1 byte)
        """
        if kept == math.prod(shape):
            return cls(shape, None, kept, data.device)
        return cls(shape, data, kept)

    @classmethod
    def ones(cls, shape: Sequence[int], device: torch.device | str | None = None) -> PackedMask:
        """The mask that prunes nothing (stores no bits)."""
        return cls(shape, None, math.prod(shape), device)

    @classmethod
    def from_bytes(cls, shape: Sequence[int], raw: bytes) -> PackedMask:
        """Rebuild a mask from :meth:`to_bytes` output; raises ``ValueError`` if it cannot fit."""
        shape = tuple(shape)
        numel = math.prod(shape)
        expected = (numel + 7) // 8
        if len(raw) != expected:
            raise ValueError(
                f"a mask of shape {shape} needs {expected} bytes of bits; got {len(raw)}"
            )
        array = np.frombuffer(raw, dtype=np.uint8).copy()
        pad = expected * 8 - numel
        if pad and int(array[-1]) & ((1 << pad) - 1):
            raise ValueError(f"the {pad} padding bits after the last entry must be 0")
        kept = _popcount(array)
        if kept == numel:
            return cls(shape, None, kept)
        return cls(shape, torch.from_numpy(array), kept)

    # -- properties -----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the mask."""
        return self._shape

    @property
    def numel(self) -> int:
        """Number of entries."""
        return math.prod(self._shape)

    @property
    def kept(self) -> int:
        """Number of entries kept (bit set)."""
        return self._kept

    @property
    def pruned(self) -> int:
        """Number of entries pruned (bit clear)."""
        return self.numel - self._kept

    @property
    def sparsity(self) -> float:
        """Fraction of entries pruned (0.0 for an empty tensor)."""
        return self.pruned / self.numel if self.numel else 0.0

    @property
    def device(self) -> torch.device:
        """Device the bits live on."""
        return self._device

    @property
    def nbytes(self) -> int:
        """Bytes of storage used by the bits (0 for an all-ones mask)."""
        return 0 if self._data is None else self._data.numel()

    # -- conversion -----------------------------------------------------------------------------
    def unpack(
        self, dtype: torch.dtype = torch.bool, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """Return the mask as a dense tensor of ``dtype`` (default bool) on ``device``."""
        target = torch.device(device) if device is not None else self._device
        if self._data is None:
            return torch.ones(self._shape, dtype=dtype, device=target)
        out = torch.empty(self.numel, dtype=dtype, device=target)
        step = _piece(target, self.numel)
        for piece, kept in zip(out.split(step), self.pieces(target), strict=True):
            piece.copy_(kept)
        return out.view(self._shape)

    def pieces(self, device: torch.device | str | None = None) -> Iterator[torch.Tensor]:
        """The mask in flat order as bool tensors of at most the core's chunk
        (:data:`prune_explorer.prune.engine.CHUNK`) entries each, unpacked one at a time (on
        the device path one piece: :func:`~prune_explorer.prune.engine.chunk_for`)."""
        target = torch.device(device) if device is not None else self._device
        step = _piece(target, self.numel)
        for start in range(0, self.numel, step):
            n = min(step, self.numel - start)
            if self._data is None:
                yield torch.ones(n, dtype=torch.bool, device=target)
            else:
                bits = self._data[start // 8:(start + n + 7) // 8]
                yield _unpack(bits, n).to(target)

    def pruned_since(self, before: PackedMask) -> int:
        """Entries ``before`` keeps and this mask prunes, counted on the bits (no unpacking).

        Examples
        --------
        >>> import torch
        >>> a = PackedMask.from_tensor(torch.tensor([1, 1, 0, 1]))
        >>> PackedMask.from_tensor(torch.tensor([0, 1, 0, 0])).pruned_since(a)
        2
        """
        if before.shape != self.shape:
            raise ValueError(f"PackedMask.pruned_since: before must have shape {self.shape}; "
                             f"got {before.shape}")
        if self._data is None:
            return 0
        if before._data is None:
            return self.pruned
        cleared = before._data.to(self._device) & ~self._data  # padding bits: 0 in both
        if cleared.device.type == "cpu":
            return _popcount(cleared.numpy())
        return int(torch.bitwise_and(cleared.unsqueeze(1) >> _shifts(cleared.device), 1).sum())

    def to(self, device: torch.device | str) -> PackedMask:
        """The same mask with its bits on ``device``."""
        device = torch.device(device)
        if self._data is None:
            return PackedMask(self._shape, None, self._kept, device)
        return PackedMask(self._shape, self._data.to(device), self._kept)

    def to_bytes(self) -> bytes:
        """The bits as bytes: row-major entries, 8 per byte, first entry in the high bit."""
        if self._data is None:
            full, rest = divmod(self.numel, 8)
            tail = bytes([(0xFF << (8 - rest)) & 0xFF]) if rest else b""
            return b"\xff" * full + tail
        return self._data.cpu().numpy().tobytes()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedMask):
            return NotImplemented
        if self._shape != other._shape or self._kept != other._kept:
            return False
        if self._data is None or other._data is None:
            return self._data is None and other._data is None
        return torch.equal(self._data.cpu(), other._data.cpu())

    def __hash__(self) -> int:
        return hash((self._shape, self._kept, self.to_bytes()))

    def __repr__(self) -> str:
        size = self.nbytes
        unit = "byte" if size == 1 else "bytes"
        where = "" if self._device.type == "cpu" else f", device={self._device}"
        return (
            f"PackedMask(shape={self._shape}, kept={self._kept}, pruned={self.pruned}, "
            f"{size} {unit}{where})"
        )


class MaskBits:
    """Packed masks remembered by the mask buffer they were packed from, each valid while
    that buffer is the same object at the same version (an in-place write bumps it): the
    snapshot an undo needs of a mask the history already holds packs nothing again.

    Examples
    --------
    >>> import torch
    >>> mask = torch.tensor([1.0, 0.0, 1.0])
    >>> bits = MaskBits()
    >>> packed = PackedMask.from_tensor(mask)
    >>> bits.remember(mask, packed)
    >>> bits.pack(mask) is packed
    True
    >>> mask[1] = 1.0  # written in place: packed afresh
    >>> bits.pack(mask) is packed, bits.pack(mask).kept
    (False, 3)
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[weakref.ref[torch.Tensor], int, PackedMask]] = {}

    def remember(self, mask: torch.Tensor, packed: PackedMask) -> None:
        """``packed`` is ``mask`` as it is now."""
        self._by_id = {k: v for k, v in self._by_id.items() if v[0]() is not None}
        self._by_id[id(mask)] = (weakref.ref(mask), mask._version, packed)

    def knows(self, mask: torch.Tensor) -> PackedMask | None:
        """The bits remembered for ``mask``, if it is unchanged since (else None)."""
        hit = self._by_id.get(id(mask))
        if hit is not None and hit[0]() is mask and hit[1] == mask._version:
            return hit[2]
        return None

    def pack(self, mask: torch.Tensor) -> PackedMask:
        """``mask`` packed: the remembered bits if it is unchanged since, else packed now."""
        known = self.knows(mask)
        return PackedMask.from_tensor(mask) if known is None else known

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"MaskBits({len(self._by_id)} masks)"


def ones_mask(t: Any) -> PackedMask:
    """The packed mask of ``t`` that prunes nothing, sharded like ``t`` if it is a DTensor."""
    if is_sharded(t):
        return ShardedMask.ones_like(t)
    return PackedMask.ones(tuple(t.shape), t.device)


class ShardedMask(PackedMask):
    """A mask of a sharded tensor as one rank keeps it: the bits of its own shard, with the
    global shape and the global kept count (the same on every rank).

    :meth:`unpack` gives back a DTensor laid out as the mask was; ``==`` compares this rank's
    bits. The bytes of the whole mask (:meth:`to_bytes`) exist on no rank: gather the mask
    (``DTensor.full_tensor()``) to export it.
    """

    __slots__ = ("_local", "_mesh", "_placements")

    def __init__(self, mask: Any, local: PackedMask, kept: int) -> None:
        super().__init__(tuple(mask.shape), None, kept, local.device)
        self._local = local
        self._mesh = mask.device_mesh
        self._placements = tuple(mask.placements)

    @classmethod
    def of(cls, mask: Any) -> ShardedMask:
        """Pack this rank's shard of DTensor ``mask``; the kept count is all-reduced."""
        local = PackedMask.from_tensor(mask.to_local())
        return cls(mask, local, total_count(mask, local.kept))

    @classmethod
    def ones_like(cls, t: Any) -> ShardedMask:
        """The mask of DTensor ``t`` that prunes nothing (no bits, no communication)."""
        local = t.to_local()
        return cls(t, PackedMask.ones(tuple(local.shape), local.device), t.numel())

    @property
    def nbytes(self) -> int:
        """Bytes of this rank's bits."""
        return self._local.nbytes

    @property
    def local(self) -> PackedMask:
        """This rank's shard, packed."""
        return self._local

    def pieces(self, device: torch.device | str | None = None) -> Iterator[torch.Tensor]:
        """This rank's shard, flat, in bool pieces (:meth:`PackedMask.pieces`)."""
        return self._local.pieces(device)

    def unpack(self, dtype: torch.dtype = torch.bool,
               device: torch.device | str | None = None) -> Any:
        """The mask as a DTensor of ``dtype`` (this rank's shard unpacked; no communication)."""
        from torch.distributed.tensor import DTensor

        local = self._local.unpack(dtype, device)
        return DTensor.from_local(local, self._mesh, self._placements, run_check=False,
                                  shape=torch.Size(self.shape),
                                  stride=contiguous_stride(self.shape))

    def to(self, device: torch.device | str) -> ShardedMask:
        """The same mask with this rank's bits on ``device``."""
        out = ShardedMask.__new__(ShardedMask)
        PackedMask.__init__(out, self.shape, None, self.kept, device)
        out._local, out._mesh, out._placements = (self._local.to(device), self._mesh,
                                                  self._placements)
        return out

    def to_bytes(self) -> bytes:
        raise NotImplementedError(
            f"ShardedMask.to_bytes: the mask of shape {self.shape} is sharded over processes "
            "and no rank holds all its bits; gather it with DTensor.full_tensor() and pack that")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ShardedMask):
            return self.shape == other.shape and self.kept == other.kept and \
                self._local == other._local
        if isinstance(other, PackedMask):  # only "nothing pruned" is known without the bits
            return self.shape == other.shape and self.kept == other.kept == self.numel
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.shape, self.kept))

    def __repr__(self) -> str:
        return (f"ShardedMask(shape={self.shape}, kept={self.kept}, pruned={self.pruned}, "
                f"local shard {self._local.shape}, {self.nbytes} bytes here)")
