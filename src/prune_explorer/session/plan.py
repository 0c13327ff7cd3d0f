"""``Plan``: an ordered list of steps that can be saved, loaded, exported and replayed.

A plan holds only :class:`~prune_explorer.session.step.Step` objects (strings and numbers), never
live modules, so it round-trips through JSON. Loading is strict -- every step must name a known
method, carry exactly that method's fields with the right types, and errors say which step and
which field -- and uses ``json`` only (no pickle, no eval).

JSON layout::

    {"format": "prune-explorer-plan", "version": 1,
     "steps": [{"method": "ln_structured", "target": "features.0.weight",
                "amount": 0.25, "n": 2, "dim": 0}, ...]}

Examples
--------
>>> import torch
>>> from prune_explorer.session import Plan, Step
>>> plan = Plan([Step("l1_unstructured", "0.weight", amount=0.5)])
>>> Plan.from_json(plan.to_json()) == plan
True
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 2))
>>> s = plan.apply(model)
>>> float(model[0].weight_mask.mean())
0.5
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import nn

from .snippet import to_snippet
from .step import Step

if TYPE_CHECKING:
    from .session import Session

__all__ = ["PLAN_FORMAT", "PLAN_VERSION", "InvalidPlanError", "Plan"]

PLAN_FORMAT = "prune-explorer-plan"
PLAN_VERSION = 1


class InvalidPlanError(ValueError):
    """A plan document is malformed outside any single step (not JSON, wrong layout...)."""


def _no_constants(name: str) -> Any:
    raise InvalidPlanError(f"Plan.from_json: {name} is not valid JSON (use a string for n)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidPlanError(f"Plan.from_json: field {key!r} appears twice in one object")
        out[key] = value
    return out


class Plan:
    """An ordered sequence of pruning steps, addressed by tensor name.

    Parameters
    ----------
    steps : iterable of Step, optional

    Examples
    --------
    >>> plan = Plan()
    >>> plan.append(Step("ln_structured", "conv.weight", amount=0.5, n=2, dim=0))
    >>> plan
    Plan([
      Step('ln_structured', 'conv.weight', amount=0.5, n=2, dim=0),
    ])
    """

    def __init__(self, steps: Iterable[Step] = ()) -> None:
        self._steps: list[Step] = []
        for step in steps:
            self.append(step)

    def append(self, step: Step) -> None:
        """Add ``step`` at the end."""
        if not isinstance(step, Step):
            raise TypeError(f"Plan.append: step must be a Step; got {type(step).__name__}")
        self._steps.append(step)

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps, in order."""
        return tuple(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def __iter__(self) -> Iterator[Step]:
        return iter(self._steps)

    def __getitem__(self, index: int) -> Step:
        return self._steps[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plan):
            return NotImplemented
        return self._steps == other._steps

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if not self._steps:
            return "Plan([])"
        shown = [f"  {step!r}," for step in self._steps[:20]]
        if len(self._steps) > 20:
            shown.append(f"  ... ({len(self._steps) - 20} more steps)")
        return "Plan([\n" + "\n".join(shown) + "\n])"

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready document (see the module docstring for the layout)."""
        return {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "steps": [step.to_dict() for step in self._steps],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """Serialise to a JSON string."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any, where: str = "Plan.from_dict") -> Plan:
        """Strictly rebuild a plan from :meth:`to_dict` output."""
        if not isinstance(data, dict):
            raise InvalidPlanError(
                f"{where}: a plan must be a JSON object; got {type(data).__name__}"
            )
        expected = {"format", "version", "steps"}
        for key in data:
            if key not in expected:
                raise InvalidPlanError(
                    f"{where}: unexpected field {key!r}; a plan has: format, version, steps"
                )
        for key in ("format", "version", "steps"):
            if key not in data:
                raise InvalidPlanError(f"{where}: missing field {key!r}")
        if data["format"] != PLAN_FORMAT:
            raise InvalidPlanError(
                f"{where}: format must be {PLAN_FORMAT!r}; got {data['format']!r}"
            )
        if data["version"] != PLAN_VERSION or isinstance(data["version"], bool):
            raise InvalidPlanError(
                f"{where}: version must be {PLAN_VERSION}; got {data['version']!r}"
            )
        if not isinstance(data["steps"], list):
            raise InvalidPlanError(f"{where}: steps must be a list; got {data['steps']!r}")
        return cls(
            Step.from_dict(item, where=f"{where}: steps[{i}]")
            for i, item in enumerate(data["steps"])
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        """Parse a plan from JSON text.

        Raises
        ------
        InvalidPlanError
            Not JSON, wrong layout, duplicate keys, NaN/Infinity literals.
        InvalidStepError
            A step is invalid; the message starts ``Plan.from_json: steps[i]:`` and names the
            field.
        """
        if not isinstance(text, (str, bytes)):
            raise InvalidPlanError(
                f"Plan.from_json: text must be str or bytes; got {type(text).__name__}"
            )
        try:
            data = json.loads(text, object_pairs_hook=_no_duplicates,
                              parse_constant=_no_constants)
        except json.JSONDecodeError as err:
            raise InvalidPlanError(f"Plan.from_json: not valid JSON: {err}") from None
        return cls.from_dict(data, where="Plan.from_json")

    def save(self, path: str | PathLike[str]) -> None:
        """Write :meth:`to_json` to ``path``."""
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Plan:
        """Read a plan written by :meth:`save`."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    # -- use ------------------------------------------------------------------------------------
    def to_snippet(self) -> str:
        """Python code replaying this plan with stock ``torch.nn.utils.prune`` on ``model``.

        Uses only ``torch`` and ``torch.nn.utils.prune``; random steps are seeded with
        ``torch.manual_seed`` exactly as the session ran them, so the masks are identical.
        """
        return to_snippet(self._steps)

    def validate(self, model: nn.Module) -> None:
        """Check the plan against ``model`` by dry-running it; ``model`` is left as it was.

        Raises the same errors as :meth:`apply`. Costs one full application.
        """
        from .session import Session  # the session uses plans; plans are run by a session

        session = Session(model, seed=0)
        with session.transaction(dry_run=True):
            session.apply_all(self._steps, where="Plan.apply")

    def apply(self, model: nn.Module, *, seed: int | None = 0) -> Session:
        """Apply every step to ``model`` in place and return the :class:`Session` that did it.

        All or nothing (:meth:`Session.apply_all`): if a step is invalid for this model
        (unknown tensor, bad ``dim``...) or anything fails, even an interrupt, the steps already
        applied are undone, commits included, and the error names the step index. The returned
        session can ``undo``/``reset``/``report`` as usual.
        """
        from .session import Session

        session = Session(model, seed=seed)
        session.apply_all(self._steps, where="Plan.apply")
        return session
