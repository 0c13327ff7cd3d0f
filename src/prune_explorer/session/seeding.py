"""Seeded random draws that leave the caller's random state alone.

Every pruning call the session makes runs inside :func:`as_torch_would`: seeded like this, and with
``prune.tie_break("torch")``, so that even where exact ties straddle a cut on a large tensor the
session's masks are the ones stock ``torch.nn.utils.prune`` gives -- the promise behind
``Plan.to_snippet()``.

A random pruning step records an integer seed. To compute its mask the session runs the torch call
right after ``torch.manual_seed(seed)``, inside ``torch.random.fork_rng`` so the global RNG state
(CPU and CUDA) is the same afterwards. An exported snippet calls ``torch.manual_seed(seed)`` right
before the same call, so stock torch draws the same numbers.

Examples
--------
>>> import torch
>>> from prune_explorer.session.seeding import seeded
>>> state = torch.random.get_rng_state()
>>> with seeded(3):
...     a = torch.rand(2)
>>> with seeded(3):
...     b = torch.rand(2)
>>> torch.equal(a, b), torch.equal(state, torch.random.get_rng_state())
(True, True)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["as_torch_would", "seeded"]


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """Run the block after ``torch.manual_seed(seed)``, restoring all RNG states afterwards.

    ``seed=None`` runs the block as is (deterministic methods draw nothing).
    """
    if seed is None:
        yield
        return
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def as_torch_would(seed: int | None) -> Iterator[None]:
    """:func:`seeded`, with ties at a cut split exactly as ``torch.nn.utils.prune`` splits them."""
    from prune_explorer import prune

    with prune.tie_break("torch"), seeded(seed):
        yield
