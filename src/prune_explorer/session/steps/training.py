"""Steps that change the weights instead of the masks: fine-tune, keep the weights, rewind.

A schedule (:mod:`prune_explorer.session.loop`) is a plan of ordinary pruning steps and these
three, so the session's history, undo, plan JSON and snippet treat a round of training as one
more step:

``fine_tune`` (``epochs``)
    Calls the user's ``train(model, epochs)``. Not reproducible from the plan alone: replaying
    it needs the same training function (``Session.apply_all(plan, train=...)``, or the
    snippet's ``train``).
``keep_weights``
    Keeps a copy of every weight (each parameter, ``*_orig`` included, and each buffer except
    the pruning masks) as the point a later ``rewind`` returns to.
``rewind``
    Writes the kept copy back into those tensors, in place: the masks stay as they are, so the
    pruned network restarts from the kept weights (the lottery ticket's rewind).

They have no target (they act on the whole model) and no seed; in JSON they are
``{"method": "fine_tune", "epochs": 10}``, ``{"method": "keep_weights"}`` and
``{"method": "rewind"}``.

Examples
--------
>>> from prune_explorer.session import Step
>>> from prune_explorer.session.steps.training import TrainingStep
>>> step = TrainingStep.fine_tune(10)
>>> step, step.targets, step.settings["epochs"]
(TrainingStep.fine_tune(epochs=10), (), 10)
>>> Step.from_dict(step.to_dict()) == step, isinstance(step, Step)
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from torch import nn

from prune_explorer.prune.validation import show_value

from ..errors import InvalidStepError
from .methods import MethodSpec
from .step import Step

__all__ = ["TRAINING_METHODS", "TrainFunction", "TrainingStep", "check_train"]

#: ``train(model, epochs)``: trains ``model`` in place for ``epochs``; its return value is
#: ignored.
TrainFunction = Callable[[nn.Module, int], object]

#: The steps that train or rewind, with their settings (in JSON order).
TRAINING_METHODS: dict[str, MethodSpec] = {
    spec.name: spec for spec in (
        MethodSpec("fine_tune", ("epochs",), None),
        MethodSpec("keep_weights", (), None),
        MethodSpec("rewind", (), None),
    )
}


class TrainingStep(Step):
    """A step on the weights of the whole model: ``fine_tune``, ``keep_weights`` or
    ``rewind`` (see the module docstring). Build one with :meth:`fine_tune`,
    :meth:`keep_weights` or :meth:`rewind`."""

    __slots__ = ()

    def __init__(self, method: str, **settings: Any) -> None:
        self._init_training("TrainingStep", method, settings)

    def _init_training(self, where: str, method: Any, settings: dict[str, Any]) -> None:
        if not isinstance(method, str) or method not in TRAINING_METHODS:
            raise InvalidStepError(f"{where}: method must be one of "
                                   f"{', '.join(map(repr, TRAINING_METHODS))}; got "
                                   f"{show_value(method)}", "method")
        spec = TRAINING_METHODS[method]
        for key in settings:
            if key not in spec.settings:
                fields = ", ".join(("method", *spec.settings))
                raise InvalidStepError(f"{where}: unexpected field {show_value(key)} for "
                                       f"{method}; its fields are: {fields}", key)
        clean: dict[str, Any] = {}
        for key in spec.settings:
            if key not in settings:
                raise InvalidStepError(f"{where}: missing field {key!r}; {method} needs: "
                                       f"{', '.join(spec.settings)}", key)
            value = settings[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidStepError(f"{where}: {key} must be an int >= 0; got "
                                       f"{show_value(value)}", key)
            clean[key] = value
        self._method = method
        self._target = ()
        self._settings = MappingProxyType(clean)
        self._seed = None
        self._importance = None
        self._ties = None
        self._detail = None
        self._replay = None

    @classmethod
    def fine_tune(cls, epochs: int) -> TrainingStep:
        """Train for ``epochs`` with the training function the session is given."""
        return cls("fine_tune", epochs=epochs)

    @classmethod
    def keep_weights(cls) -> TrainingStep:
        """Keep the weights as they are now, for a later :meth:`rewind`."""
        return cls("keep_weights")

    @classmethod
    def rewind(cls) -> TrainingStep:
        """Write the weights kept by the last ``keep_weights`` back (masks unchanged)."""
        return cls("rewind")

    @property
    def spec(self) -> MethodSpec:
        """The step's entry in :data:`TRAINING_METHODS`."""
        return TRAINING_METHODS[self._method]

    @property
    def epochs(self) -> int:
        """Epochs a ``fine_tune`` trains (0 for the others)."""
        return int(self._settings.get("epochs", 0))

    @classmethod
    def _read(cls, data: dict[str, Any], where: str) -> TrainingStep:
        """The step of the plan-file fields ``data`` (the plan format's reader calls this:
        :func:`prune_explorer.session.plans.format.step_from_dict`)."""
        settings = dict(data)
        method = settings.pop("method", None)
        step = cls.__new__(cls)
        step._init_training(where, method, settings)
        return step

    def _noted(self, ties: str | None, detail: str | None = None,
               replay: Mapping[str, Any] | None = None) -> Step:
        return self

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self._settings.items())
        return f"TrainingStep.{self._method}({settings})"


def check_train(train: Any, where: str) -> TrainFunction:
    """``train`` if it is callable, else an :class:`InvalidStepError` naming it."""
    if not callable(train):
        raise InvalidStepError(
            f"{where}: train must be a function train(model, epochs) that trains the model in "
            f"place; got {type(train).__name__}", "train")
    return train
