"""``Plan``: an ordered list of steps that can be saved, loaded, exported and replayed.

A plan holds only :class:`~prune_explorer.session.steps.step.Step` objects (strings and numbers),
never
live modules, so it round-trips through JSON. Loading is strict -- every step must name a known
method, carry exactly that method's fields with the right types, and errors say which step and
which field -- and uses ``json`` only (no pickle, no eval). Every way a document can be wrong,
down to bytes that are not UTF-8 or nesting that would exhaust Python's stack, is an
:class:`InvalidPlanError` (see :mod:`~prune_explorer.session.plans.format`).

File format (version 2, what :meth:`Plan.to_json` writes), UTF-8 JSON::

    {"format": "prune-explorer-plan", "version": 2,
     "steps": [
       {"method": "ln_structured", "target": "features.0.weight",
        "amount": {"fraction": 0.25}, "n": 2, "dim": 0},
       {"method": "random_unstructured", "target": "fc.weight", "amount": {"count": 3},
        "seed": 7},
       {"method": "global_unstructured", "targets": ["fc1.weight", "fc2.weight"],
        "pruning_method": "l1_unstructured", "amount": {"fraction": 0.5}},
       {"method": "custom_from_mask", "target": "fc.bias",
        "mask": {"shape": [9], "bits": "vwA="}},
       {"method": "remove", "target": "fc.bias"}]}

- ``format`` must be ``"prune-explorer-plan"``; ``version`` the integer 2 (or 1, below).
- Each step has ``method`` (a ``torch.nn.utils.prune`` function name, or one of our two
  patterns ``semi_structured`` / ``block_structured``), ``target`` (a tensor
  address: module name, dot, parameter name) or ``targets`` (a list, for
  ``global_unstructured``), exactly the method's settings, and ``seed`` (an int in
  ``[0, 2**63)``) if and only if it draws random numbers.
- ``amount`` is ``{"fraction": f}`` (share of the entries, ``0 <= f <= 1``) or ``{"count": k}``
  (number of entries), so a writer that prints ``1.0`` as ``1`` cannot change its meaning.
- ``n`` is a number or ``"inf"``, ``"-inf"``, ``"fro"``, ``"nuc"``; ``dim`` an int.
- ``pattern`` is ``"N:M"`` (``semi_structured``); ``block`` a list of ints >= 1
  (``block_structured``, with ``amount`` counting blocks).
- ``mask`` is the shape and the bits, 8 entries a byte, row-major, first entry in the high bit,
  zero padding, base64.

Version 1 is the same except that ``amount`` is a bare number: a float is a fraction and an int
a count (``1.0`` is everything, ``1`` one entry). Version-1 files are read exactly as before.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from os import PathLike
from pathlib import Path
from typing import Any, Protocol

from torch import nn

from ..codegen.snippet import to_snippet
from ..steps.step import Step
from .format import (
    PLAN_FORMAT,
    PLAN_VERSION,
    InvalidPlanError,
    InvalidPlanStepError,
    load_document,
    plan_to_dict,
    steps_from_dict,
)

__all__ = ["PLAN_FORMAT", "PLAN_VERSION", "InvalidPlanError", "InvalidPlanStepError", "Plan"]


class PlanSession(Protocol):
    """What runs a plan: :class:`~prune_explorer.session.Session` (this is the part of its API
    :meth:`Plan.apply` and :meth:`Plan.validate` use)."""

    def apply_all(self, steps: Iterable[Step], *, where: str = "Session.apply_all",
                  progress: Callable[[int, int], object] | None = None) -> list[Step]:
        """Apply ``steps`` in order as one transaction."""

    def transaction(self, *, dry_run: bool = False) -> AbstractContextManager[Any]:
        """All or nothing; ``dry_run`` always rolls back."""


class PlanRunner:
    """Where :meth:`Plan.apply` and :meth:`Plan.validate` find the class that runs a plan.

    A session makes plans (``Session.plan``) and a plan is run by a session: ``session.py``
    sets :attr:`session` to ``Session`` when it is imported (always before a plan can be
    applied: ``prune_explorer.session`` imports it), so ``plans/`` never imports the session.
    """

    def __init__(self) -> None:
        self.session: Callable[..., PlanSession] | None = None

    def start(self, model: nn.Module, *, seed: int | None) -> PlanSession:
        if self.session is None:
            raise RuntimeError("Plan: no session class is registered (import prune_explorer)")
        return self.session(model, seed=seed)


#: The class that runs plans (``Session``, set by ``session.py``).
RUNNER = PlanRunner()


class Plan:
    """An ordered sequence of pruning steps, addressed by tensor name.

    Parameters
    ----------
    steps : iterable of Step, optional
    tied : mapping of str to sequence of str, optional
        Tied tensors of the model the plan is for (address -> its aliases, as
        :attr:`Session.tied`, which :attr:`Session.plan` passes): :meth:`to_snippet` keeps them
        tied. Not part of the plan's value or JSON.

    Examples
    --------
    >>> plan = Plan()
    >>> plan.append(Step("ln_structured", "conv.weight", amount=0.5, n=2, dim=0))
    >>> plan
    Plan([
      Step('ln_structured', 'conv.weight', amount=0.5, n=2, dim=0),
    ])
    """

    def __init__(self, steps: Iterable[Step] = (), *,
                 tied: Mapping[str, Sequence[str]] | None = None) -> None:
        self._steps: list[Step] = []
        self._tied = {name: tuple(aliases) for name, aliases in (tied or {}).items()}
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
        return plan_to_dict(self._steps)

    def to_json(self, indent: int | None = 2) -> str:
        """Serialise to a JSON string (format version 2, see the module docstring)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any, where: str = "Plan.from_dict") -> Plan:
        """Strictly rebuild a plan from :meth:`to_dict` output (version 2) or a version-1 dict.

        Raises
        ------
        InvalidPlanError
            For any problem; when it lies in one step it is an :class:`InvalidPlanStepError`
            (also an :class:`InvalidStepError`) with ``step`` and ``field`` set.
        """
        return cls(steps_from_dict(data, where))

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        """Parse a plan from JSON text, as ``str`` or UTF-8 ``bytes`` (a leading BOM is fine).

        This is the one parser of plan files: :meth:`load`, the CLI and the explorer use it.

        Raises
        ------
        InvalidPlanError
            Anything wrong: not UTF-8, not JSON, nested too deeply, a number out of range,
            NaN/Infinity, duplicate keys, wrong layout. A bad step raises
            :class:`InvalidPlanStepError` (also an ``InvalidStepError``); its message starts
            ``Plan.from_json: steps[i]:`` and names the field, also given as ``.step`` and
            ``.field``.
        """
        return cls.from_dict(load_document(text, "Plan.from_json"), where="Plan.from_json")

    def save(self, path: str | PathLike[str]) -> None:
        """Write :meth:`to_json` to ``path``.

        Under ``torch.distributed`` (e.g. a session on each rank of an FSDP2 model, where every
        rank holds the same plan) only rank 0 writes; the other ranks return without touching
        the file system.
        """
        from ..tensors.sharded import rank

        if rank() == 0:
            Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Plan:
        """Read a plan written by :meth:`save`."""
        return cls.from_json(Path(path).read_bytes())

    # -- use ------------------------------------------------------------------------------------
    def to_snippet(self) -> str:
        """Python code replaying this plan with stock ``torch.nn.utils.prune`` on ``model``.

        Uses only ``torch`` and ``torch.nn.utils.prune``; random steps are seeded with
        ``torch.manual_seed`` exactly as the session ran them, so the masks are identical.
        Tied tensors given to the plan (:attr:`Session.plan` gives them) stay tied.
        """
        return to_snippet(self._steps, self._tied)

    def validate(self, model: nn.Module) -> None:
        """Check the plan against ``model`` by dry-running it; ``model`` is left as it was.

        Raises the same errors as :meth:`apply`. Costs one full application.
        """
        session = RUNNER.start(model, seed=0)
        with session.transaction(dry_run=True):
            session.apply_all(self._steps, where="Plan.apply")

    def apply(self, model: nn.Module, *, seed: int | None = 0) -> PlanSession:
        """Apply every step to ``model`` in place and return the :class:`Session` that did it.

        All or nothing (:meth:`Session.apply_all`): if a step is invalid for this model
        (unknown tensor, bad ``dim``...) or anything fails, even an interrupt, the steps already
        applied are undone, commits included, and the error names the step index. The returned
        session can ``undo``/``reset``/``report`` as usual.
        """
        session = RUNNER.start(model, seed=seed)
        session.apply_all(self._steps, where="Plan.apply")
        return session
