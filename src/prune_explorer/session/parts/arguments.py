"""A public call's arguments, checked and turned into a :class:`~prune_explorer.session.Step`.

A part of :class:`~prune_explorer.session.Session`: ``apply``, the previews and the reports
all build their step here, so every call checks its arguments the same way and draws the seed of
a random step on the caller's thread (previews only peek at it).

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 2))
>>> s = Session(model)
>>> mask = s.preview("0.weight", "random_unstructured", amount=0.5)  # peeks at the next seed
>>> step = s.apply("0.weight", "random_unstructured", amount=0.5)  # draws that seed
>>> torch.equal(mask, model[0].weight_mask)
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prune_explorer.prune.layers import DEFAULT_GROUP_DIM, reduction_dim

from ..errors import InvalidStepError
from ..model.targets import unknown_target
from ..state import SessionState
from ..steps.methods import check_method, check_settings, is_random
from ..steps.step import Step

__all__ = ["Arguments", "as_list"]


class Arguments:
    """Checking names and building steps from call arguments (a part of ``Session``)."""

    def __init__(self, state: SessionState) -> None:
        self._state = state

    def check_name(self, name: Any, where: str) -> str:
        # An alias of a tied tensor is that tensor (listed under its first address).
        name = self._state._aliases.get(name, name) if isinstance(name, str) else name
        if not isinstance(name, str) or name not in self._state._known:
            if isinstance(name, str):
                raise unknown_target(name, self._state._known, where, "name",
                                     self._state._model)
            raise InvalidStepError(f"{where}: name must be a tensor address string; got {name!r}",
                                   "name")
        return name

    def make_step(
        self,
        where: str,
        method: Any,
        target: Any,
        settings: Mapping[str, Any],
        seed: Any,
        single: bool = False,
        draw: bool = True,
    ) -> Step:
        # draw=False (previews): use the seed the next action will draw, without drawing it,
        # so previews on any thread never change the session.
        spec = check_method(method, where)
        importance = settings.get("importance")
        settings = {k: v for k, v in settings.items() if k != "importance"}
        if single and spec.name == "global_unstructured":
            raise InvalidStepError(
                f"{where}: method 'global_unstructured' acts on several tensors; use "
                f"{where}_global(targets, method, amount=...)",
                "method",
            )
        if single and spec.name == "remove":
            raise InvalidStepError(
                f"{where}: method 'remove' makes pruning permanent; use Session.commit(names)",
                "method",
            )
        if single and spec.name == "semi_structured" and "dim" not in settings:
            settings = {**settings, "dim": self.group_dim(target)}
        clean = check_settings(spec, settings, where)
        if seed is None and is_random(spec, clean):
            journal = self._state._journal
            seed = journal.draw_seed() if draw else journal.peek_seed()
        return Step._build(where, spec.name, self.canonical(target), clean, seed, importance)

    def canonical(self, target: Any) -> Any:
        """``target`` (an address or a list of them) with every alias of a tied tensor replaced
        by the address the tensor is listed under, a list keeping each tensor once (a tied
        matrix is one tensor: pruned and counted once). Anything else is returned as it is."""
        if isinstance(target, str):
            return self._state._aliases.get(target, target)
        if isinstance(target, list) and any(isinstance(t, str) and t in self._state._aliases
                                            for t in target):
            return list(dict.fromkeys(self._state._aliases.get(t, t) if isinstance(t, str) else t
                                      for t in target))
        return target

    def group_dim(self, target: Any) -> int:
        """The default ``dim`` of ``semi_structured`` on ``target``: the core's rule
        (:func:`prune_explorer.prune.layers.reduction_dim`, the layer's reduction dim), recorded
        in the step so that plans and snippets say which dim they group."""
        if not isinstance(target, str) or target not in self._state._known:
            return DEFAULT_GROUP_DIM  # the step's own check names the bad target
        return reduction_dim(*self._state._locate(target))

    def global_step(
        self, where: str, targets: Any, method: Any, amount: Any, seed: Any, draw: bool = True,
        importance: Any = None,
    ) -> Step:
        """The ``global_unstructured`` step of ``apply_global`` and its previews."""
        settings = {"pruning_method": method, "amount": amount}
        if importance is not None:
            settings["importance"] = importance
        return self.make_step(where, "global_unstructured", as_list(targets), settings, seed,
                              draw=draw)


def as_list(names: Any) -> Any:
    """``names`` as a list, strings and non-iterables kept as they are (the Step check rejects
    them with a clear message)."""
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        return names
    return list(names)
