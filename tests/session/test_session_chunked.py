"""The session reads masks a chunk at a time (``_radix.CHUNK`` entries, or a slab of whole rows):
with a tiny chunk, packing, unpacking and per-slice counts give what whole-tensor code gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.ops import OpCounter, kernels
from prune_explorer.prune import _radix, _select_device, engine
from prune_explorer.session import PackedMask
from prune_explorer.session.tensors.sharded import count_alive, nonzero_summary

SHAPES = [(), (5,), (7, 3), (4, 5, 6), (0, 3), (3, 0), (40,), (9, 1, 2), (3, 17)]


@pytest.fixture(autouse=True)
def tiny_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_radix, "CHUNK", 16)  # the core's chunks
    monkeypatch.setattr(engine, "CHUNK", 16)  # the session's, read through the core's interface


def _mask(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) > 0.4).float()


@pytest.mark.parametrize("shape", SHAPES)
def test_packing_a_chunk_at_a_time_matches_numpy(shape: tuple[int, ...]) -> None:
    mask = _mask(shape, 1)
    packed = PackedMask.from_tensor(mask)
    flat = mask.reshape(-1).numpy() != 0
    assert packed.kept == int(flat.sum())
    whole = np.packbits(flat).tobytes() if packed.pruned else packed.to_bytes()
    assert packed.to_bytes() == whole
    assert torch.equal(packed.unpack(torch.float32), mask)
    pieces = list(packed.pieces())
    assert all(p.numel() <= 16 for p in pieces)
    assert torch.equal(torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.bool),
                       torch.from_numpy(flat))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.bool, torch.int64])
def test_a_cpu_mask_of_any_dtype_packs_in_numpy_as_nonzero(dtype: torch.dtype) -> None:
    """CPU masks pack a chunk at a time in numpy: -0 is pruned, any other nonzero value (NaN
    too) kept, in every dtype; and no torch operation runs (a parallel region of torch's waits
    for a descheduled thread on a busy machine)."""
    g = torch.Generator().manual_seed(4)
    values = torch.tensor([0.0, -0.0, 1.0, 0.5, -2.0, float("nan")])
    picks = torch.randint(0, len(values), (61,), generator=g)
    mask = values[picks] if dtype.is_floating_point else (values[picks] > 0.7)
    mask = mask.to(dtype)
    with OpCounter() as packing:
        packed = PackedMask.from_tensor(mask)
    assert kernels(packing.ops) == 0, packing.ops
    flat = (mask != 0).numpy()
    assert packed.kept == int(flat.sum())
    assert packed.to_bytes() == np.packbits(flat).tobytes()


@pytest.mark.parametrize("shape", SHAPES)
def test_counts_a_slab_at_a_time_match_whole_tensor_counts(shape: tuple[int, ...]) -> None:
    mask = _mask(shape, 2)
    kept = mask != 0
    count, per_dim = nonzero_summary(mask)
    assert count == int(kept.sum())
    assert count_alive(mask) == count
    for d, counts in enumerate(per_dim):
        others = [i for i in range(kept.dim()) if i != d]
        assert torch.equal(counts, kept.sum(dim=others) if others else kept.long()), d


@pytest.mark.parametrize("shape", [(7, 3), (40,), (3, 17), (301, 33)])
def test_on_the_device_path_a_mask_packs_and_unpacks_at_once(shape: tuple[int, ...]) -> None:
    """On a GPU a piece is a launch: there the whole mask is one piece (the bits are the
    CPU path's, and unpacking gives the mask back), whatever the chunk."""
    mask = _mask(shape, 3)
    cpu = PackedMask.from_tensor(mask)
    with _select_device.forced():
        with OpCounter() as packing:
            packed = PackedMask.from_tensor(mask)
        with OpCounter() as unpacking:
            back = packed.unpack(torch.float32)
        pieces = list(packed.pieces())
    assert packed == cpu
    assert torch.equal(back, mask)
    assert len(pieces) == 1
    assert torch.equal(pieces[0], mask.reshape(-1) != 0)
    # a fixed number of kernels: 16-entry chunks would make one per chunk
    assert kernels(packing.ops) <= 6, packing.ops
    assert kernels(unpacking.ops) <= 4, unpacking.ops
