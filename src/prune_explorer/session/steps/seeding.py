"""How the session makes its pruning calls reproduce stock torch exactly.

Two things could make the session's masks differ from those of the exported snippet, which runs
``torch.manual_seed(seed)`` and then the same ``torch.nn.utils.prune`` call:

* random draws -- each random step records an integer seed, and the session draws from a fresh
  ``torch.Generator`` seeded with it (:func:`generator_for`): the very stream the global generator
  yields after ``torch.manual_seed(seed)``. The user's global RNG is never touched, not even by
  previews that a widget runs on a background thread;
* exact ties at a cut -- every call names its tie rule explicitly (:func:`ties_for`, the
  ``ties=`` keyword of the core, see ``prune_explorer.prune._select``): :data:`TIES`, the core's
  fast "index" rule (the same count as torch, tied entries of lowest flat index first). Each
  applied step notes whether a tie straddled its cut and how it was split
  (:mod:`prune_explorer.session.codegen.tie_split`), and only for those steps the snippet passes a
  stable rank
  as ``importance_scores`` so that stock torch splits the tie the same way.

Examples
--------
>>> import torch
>>> from prune_explorer.session.steps.seeding import generator_for, ties_for
>>> g = generator_for("random_unstructured", 3, torch.device("cpu"))["generator"]
>>> _ = torch.manual_seed(3)
>>> torch.equal(torch.rand(4, generator=g), torch.rand(4))
True
>>> ties_for("l1_unstructured"), ties_for("ln_structured")
({'ties': 'index'}, {})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from prune_explorer.prune.validation import METHOD_PARAMETERS

__all__ = ["TIES", "core_kwargs", "draws_for", "generator_for", "ties_for"]

#: The tie rule of every pruning call the session makes: "index" (the same count as torch; among
#: entries tied at the cut, the lowest flat index first). It needs no fallback to a full sort, so
#: previews and applies stay fast on tie-heavy weights (bf16, fp16, default init); the snippet
#: reproduces it on stock torch where a tie straddles the cut (session/snippet_ties.py).
TIES = "index"


def ties_for(method: str) -> dict[str, Any]:
    """``{"ties": TIES}`` for the methods that take a tie rule, else ``{}``."""
    return {"ties": TIES} if "ties" in METHOD_PARAMETERS.get(method, ("", ()))[1] else {}


def generator_for(method: str, seed: int | None, device: torch.device) -> dict[str, Any]:
    """``{"generator": g}`` for a random step (``seed`` given), else ``{}``.

    ``g`` is seeded with ``seed`` where torch would draw after ``torch.manual_seed(seed)``: on the
    tensor's device for unstructured draws, on the CPU for random_structured's per-channel draws.
    """
    if seed is None:
        return {}
    where = torch.device("cpu") if method == "random_structured" else torch.device(device)
    return {"generator": torch.Generator(device=where).manual_seed(seed)}


def core_kwargs(
    method: str, settings: Mapping[str, Any], seed: int | None, device: torch.device
) -> dict[str, Any]:
    """The keyword arguments of the core's call for ``method``: the step's ``settings`` (a
    packed mask unpacked onto ``device``), plus :func:`generator_for` and :func:`ties_for`.

    Every pruning call the session makes (apply, preview, global or not) takes its keywords
    from here, so previews and applies cannot drift apart.

    Examples
    --------
    >>> import torch
    >>> kw = core_kwargs("random_unstructured", {"amount": 0.5}, 7, torch.device("cpu"))
    >>> sorted(kw)
    ['amount', 'generator', 'ties']
    """
    kwargs = dict(settings)
    if "mask" in kwargs:
        kwargs["mask"] = kwargs["mask"].unpack(device=device)
    kwargs.update(generator_for(method, seed, device))
    kwargs.update(ties_for(method))
    return kwargs


def draws_for(seed: int, count: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The ``count`` uniform draws a ``random_unstructured`` step seeded with ``seed`` ranks.

    The core draws one value per unpruned entry (flat order), in the tensor's dtype and on its
    device, from :func:`generator_for`'s generator, and prunes the largest draws.
    """
    generator = generator_for("random_unstructured", seed, device)["generator"]
    return torch.rand(count, generator=generator, dtype=dtype, device=device)
