"""prune-explorer: explore, teach and plan neural-network pruning in PyTorch.

Layers, bottom to top (each usable without the ones above it):

``prune_explorer.prune``
    Our implementation of the documented ``torch.nn.utils.prune`` API (imports only torch).
``prune_explorer.session``
    Pure-Python model of an exploration: preview, history, undo, plans, reports.
``prune_explorer.viz``
    matplotlib pictures of masks and reports.
``prune_explorer.widgets``
    The ipywidgets explorer.

Heavy layers are imported lazily, so ``from prune_explorer import prune`` costs only torch.

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> layer = torch.nn.Linear(4, 2)
>>> _ = prune.l1_unstructured(layer, "weight", amount=0.5)
>>> int(layer.weight_mask.sum())
4
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "prune": ("prune_explorer.prune", None),
    "session": ("prune_explorer.session", None),
    "viz": ("prune_explorer.viz", None),
    "widgets": ("prune_explorer.widgets", None),
    "demo": ("prune_explorer.demo", None),
    "Session": ("prune_explorer.session", "Session"),
    "Plan": ("prune_explorer.session", "Plan"),
    "Step": ("prune_explorer.session", "Step"),
    "Explorer": ("prune_explorer.widgets", "Explorer"),
    "explore": ("prune_explorer.widgets", "explore"),
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'prune_explorer' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
