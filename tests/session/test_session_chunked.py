"""The session reads masks a chunk at a time (``_radix.CHUNK`` entries, or a slab of whole rows):
with a tiny chunk, packing, unpacking and per-slice counts give what whole-tensor code gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from prune_explorer.prune import _radix, engine
from prune_explorer.session import PackedMask
from prune_explorer.session.model.sharded import count_alive, nonzero_summary

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
