"""How the session makes its pruning calls reproduce stock torch exactly.

Two things could make the session's masks differ from those of the exported snippet, which runs
``torch.manual_seed(seed)`` and then the same ``torch.nn.utils.prune`` call:

* random draws -- each random step records an integer seed, and the session draws from a fresh
  ``torch.Generator`` seeded with it (:func:`generator_for`): the very stream the global generator
  yields after ``torch.manual_seed(seed)``. The user's global RNG is never touched, not even by
  previews that a widget runs on a background thread;
* exact ties at a cut on large tensors -- :func:`session_rule` runs the core in its fast default
  rule (``prune.tie_break("index")``: the same count as torch, tied entries of lowest flat index
  first). Each applied step notes whether a tie straddled its cut and how it was split
  (:mod:`prune_explorer.session.ties`), and only for those steps the snippet passes a stable rank
  as ``importance_scores`` so that stock torch splits the tie the same way.

Examples
--------
>>> import torch
>>> from prune_explorer.session.seeding import generator_for
>>> g = generator_for("random_unstructured", 3, torch.device("cpu"))["generator"]
>>> _ = torch.manual_seed(3)
>>> torch.equal(torch.rand(4, generator=g), torch.rand(4))
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["generator_for", "session_rule"]


@contextlib.contextmanager
def session_rule() -> Iterator[None]:
    """Run the core with the session's tie rule: ties at a cut go lowest flat index first.

    Explicit (``prune.tie_break("index")``), so the session never depends on a global setting.
    """
    from prune_explorer import prune

    with prune.tie_break("index"):
        yield


def generator_for(method: str, seed: int | None, device: torch.device) -> dict[str, Any]:
    """``{"generator": g}`` for a random step (``seed`` given), else ``{}``.

    ``g`` is seeded with ``seed`` where torch would draw after ``torch.manual_seed(seed)``: on the
    tensor's device for unstructured draws, on the CPU for random_structured's per-channel draws.
    """
    if seed is None:
        return {}
    where = torch.device("cpu") if method == "random_structured" else torch.device(device)
    return {"generator": torch.Generator(device=where).manual_seed(seed)}
