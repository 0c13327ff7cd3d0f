"""A step that names tied tensors through an alias, turned into the step the session runs: each
tied tensor named once, by the address it is listed under (see :mod:`..model.aliases`).

Examples
--------
>>> import torch
>>> from prune_explorer.session import Step
>>> from prune_explorer.session.model.targets import alias_map, discover
>>> model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
>>> model[1].weight = model[0].weight
>>> known = discover(model)
>>> step = Step("l1_unstructured", "1.weight", amount=0.5)
>>> tied_step(step, known, alias_map(known), "example").target
'0.weight'
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from ..model.aliases import check_alias_names
from ..model.targets import TensorInfo
from .step import Step

__all__ = ["tied_step"]


def tied_step(step: Step, known: Mapping[str, TensorInfo], aliases: Mapping[str, str],
              where: str, model: nn.Module | None = None) -> Step:
    """``step`` acting on the listed address of each tied tensor it names through an alias
    (each tensor once), after :func:`check_alias_names` (given ``model``); ``step`` itself
    when it names none."""
    targets = list(dict.fromkeys(aliases.get(t, t) for t in step.targets))
    if targets != list(step.targets):
        step = Step._build(where, step.method, targets if step.is_global else targets[0],
                           step.settings, step.seed,
                           None if step.importance == "magnitude" else step.importance)
    for name in targets:
        if model is not None and name in known and known[name].aliases:
            check_alias_names(model, known[name], where)
    return step
