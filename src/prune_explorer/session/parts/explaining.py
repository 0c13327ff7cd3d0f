"""``Session.why`` and ``Session.compare_criteria``: what a criterion's score is made of, and
where two criteria's masks differ.

A part of :class:`~prune_explorer.session.Session`. The scores are those a step with
``importance=`` passes to the core (:func:`~..steps.calibrated.importance_scores`); the masks of
a comparison are the session's previews of the two steps (:meth:`Previews.preview_step`), so
each is, bit for bit, what Apply with that criterion installs. Records:
:mod:`..analysis.why`.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> _ = torch.manual_seed(0)
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 8)))
>>> _ = s.calibrate([torch.randn(16, 4) * torch.tensor([1.0, 1.0, 10.0, 0.1])])
>>> c = s.compare_criteria("0.weight", "l1_unstructured", amount=0.5, against="wanda")
>>> c.first, c.second, c.counts()["kept_by_first_only"] == c.counts()["kept_by_second_only"]
('magnitude', 'wanda', True)
>>> torch.equal(c.second_mask, s.preview("0.weight", "l1_unstructured", amount=0.5,
...                                      importance="wanda") != 0)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from prune_explorer.importance.criteria import CriterionError, check_criterion, input_spread
from prune_explorer.prune.layers import reduction_dim

from ..analysis.why import CriteriaComparison, WhyData
from ..errors import InvalidStepError
from ..state import SessionState
from ..steps.calibrated import importance_scores, scoring_module
from ..steps.methods import METHODS, check_method
from ..transaction.journal import locked
from .arguments import Arguments, as_list
from .previewing import Previews

__all__ = ["NOT_CALIBRATED", "Explaining"]

#: What to do when nothing is calibrated (the explorer shows it too).
NOT_CALIBRATED = ("nothing is calibrated yet: call session.calibrate(batches) with a few "
                  "batches of the model's inputs (with loss=... for 'taylor' and 'fisher'); "
                  "the statistics are running sums per input feature, not stored activations")


def _criterion(value: Any, where: str, field: str) -> str:
    try:
        return check_criterion(value, where).name
    except CriterionError as err:
        raise InvalidStepError(str(err).replace("importance must", f"{field} must"),
                               field) from None


class Explaining:
    """Why a criterion keeps what it keeps (a part of ``Session``)."""

    def __init__(self, state: SessionState, arguments: Arguments, previews: Previews) -> None:
        self._state = state
        self._lock = state._lock  # what @locked holds
        self._arguments = arguments
        self._previews = previews

    @locked
    def why(self, name: str, importance: str = "wanda") -> WhyData:
        """``|W|``, the input norms ``||X_j||`` and criterion ``importance``'s score of ``name``.

        Parameters
        ----------
        name : str
            A tensor address (an alias of a tied tensor reads that tensor).
        importance : str, default "wanda"
            A criterion of :data:`prune_explorer.importance.CRITERIA`.

        Returns
        -------
        WhyData
            CPU tensors: ``weight`` (``|W|`` as the model sees it), ``input_norms`` (one per
            input feature: the root of calibration's running sum of ``x_j**2``), ``norms``
            (those laid along the weight's input axis, the weight's shape) and ``score`` (the
            scores a step with ``importance=`` prunes by).

        Raises
        ------
        InvalidStepError
            Nothing is calibrated (field ``"calibration"``: the message says what to call), or
            the criterion needs a statistic that was not collected for ``name``.

        Examples
        --------
        >>> import torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(2, 1)))
        >>> s.why("0.weight")
        Traceback (most recent call last):
        ...
        prune_explorer.session.errors.InvalidStepError: Session.why: nothing is calibrated yet: ...
        """
        where = "Session.why"
        name = self._arguments.check_name(name, where)
        importance = _criterion(importance, where, "importance")
        state = self._state
        calibrated = state._calibrated
        if calibrated is None:
            raise InvalidStepError(f"{where}: {NOT_CALIBRATED}", "calibration")
        model = state._model
        module, tensor_name = state._locate(name)
        layer = scoring_module(model, module, tensor_name)
        with torch.no_grad():
            weight = getattr(module, tensor_name).detach()
            score = importance_scores(model, module, tensor_name, importance, calibrated, name,
                                      where)
            stats = calibrated.statistics.stats.get(name)
            per_input = None if stats is None else stats.input_norms()
            norms = input_dim = None
            if per_input is not None:
                per_input = per_input.detach().cpu()
                input_dim = reduction_dim(layer, tensor_name) % weight.dim()
                norms = input_spread(per_input, layer, tensor_name, weight.shape).expand(
                    weight.shape)
            mask = getattr(module, tensor_name + "_mask", None)
            kept = (torch.ones(weight.shape, dtype=torch.bool) if mask is None
                    else mask.detach().cpu() != 0)
            return WhyData(
                name=name, importance=importance, formula=check_criterion(importance,
                                                                          where).formula,
                weight=weight.abs().cpu(), kept=kept, input_norms=per_input, norms=norms,
                input_dim=input_dim, score=score.detach().cpu(),
                rows=0 if stats is None else stats.rows, module_type=type(module).__name__)

    @locked
    def compare_criteria(
        self,
        target: str,
        method: str = "l1_unstructured",
        *,
        against: str,
        importance: str = "magnitude",
        targets: Sequence[str] | None = None,
        seed: int | None = None,
        **settings: Any,
    ) -> CriteriaComparison:
        """The masks of one step with criterion ``importance`` (A) and with ``against`` (B), on
        ``target``, and the entries where they disagree.

        Parameters
        ----------
        target : str
            The tensor compared (an alias reads its tensor).
        method : str, default "l1_unstructured"
            A method that takes ``importance=`` (``l1_unstructured``, ``ln_structured``, or
            ``global_unstructured`` with ``targets`` and ``pruning_method="l1_unstructured"``).
        against, importance : str
            The two criteria (B and A) of :data:`prune_explorer.importance.CRITERIA`.
        targets : sequence of str, optional
            A global step's tensors (``target`` among them).
        seed : int, optional
            As for :meth:`preview`.
        **settings
            The step's other settings (``amount``, ``n``, ``dim``, ``pruning_method``).

        Returns
        -------
        CriteriaComparison
            Each mask is :meth:`preview`'s for that criterion (what Apply installs, bit for
            bit); nothing changes.
        """
        where = "Session.compare_criteria"
        name = self._arguments.check_name(target, where)
        spec = check_method(method, where)
        if not spec.scores:
            with_scores = ", ".join(n for n, s in METHODS.items() if s.scores)
            raise InvalidStepError(
                f"{where}: method must rank entries by a criterion's scores to compare two "
                f"criteria ({with_scores}); got {spec.name!r}", "method")
        if "importance" in settings:
            raise InvalidStepError(f"{where}: give the two criteria as importance= and "
                                   "against=; got importance inside the settings", "importance")
        first = _criterion(importance, where, "importance")
        second = _criterion(against, where, "against")
        kept = []
        for criterion in (first, second):
            step_settings = {**settings, "importance": criterion}
            if spec.name == "global_unstructured":
                step = self._arguments.make_step(where, spec.name, as_list(targets),
                                                 step_settings, seed, draw=False)
            else:
                if targets is not None:
                    raise InvalidStepError(f"{where}: targets is for global_unstructured; got "
                                           f"targets with {spec.name}", "targets")
                step = self._arguments.make_step(where, spec.name, name, step_settings, seed,
                                                 single=True, draw=False)
            masks = self._previews.preview_step(step, where)
            if name not in masks:
                raise InvalidStepError(f"{where}: target {name!r} is not among the global "
                                       f"targets {list(step.targets)}", "target")
            kept.append((masks[name] != 0).cpu())
        return CriteriaComparison(name, spec.name, dict(settings), first, second, kept[0],
                                  kept[1])
