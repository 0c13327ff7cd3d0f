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
- ``tied`` (optional) maps each tied tensor of the model the plan was made on (one parameter
  under several names, as GPT-2's ``transformer.wte.weight`` and ``lm_head.weight``) to its
  other names: ``{"transformer.wte.weight": ["lm_head.weight"]}``; ``{}`` when the model has
  none. :attr:`Session.plan` fills it, so the snippet of a plan read back keeps the tie. A file
  without it (written before plans carried it, or by ``Plan(steps)`` without ``tied=``) still
  loads: its snippet then finds the ties on ``model`` when it runs (a ``tied_names`` function
  it defines), so a tied head is pruned with its embedding all the same.
- A schedule's steps that train (:mod:`~prune_explorer.session.steps.training`) have no target
  and no seed: ``{"method": "fine_tune", "epochs": 10}`` (replayed by calling the training
  function: :meth:`Plan.apply` with ``train=``), ``{"method": "keep_weights"}`` and
  ``{"method": "rewind"}`` (a lottery ticket's). Plans without them read as before.

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
from ..steps.training import TrainFunction, TrainingStep
from .format import (
    PLAN_FORMAT,
    PLAN_VERSION,
    InvalidPlanError,
    InvalidPlanStepError,
    load_document,
    plan_to_dict,
    steps_from_dict,
    tied_from_dict,
)

__all__ = ["PLAN_FORMAT", "PLAN_VERSION", "InvalidPlanError", "InvalidPlanStepError", "Plan"]


class PlanSession(Protocol):
    """What runs a plan: :class:`~prune_explorer.session.Session` (this is the part of its API
    :meth:`Plan.apply` and :meth:`Plan.validate` use)."""

    def apply_all(self, steps: Iterable[Step], *, where: str = "Session.apply_all",
                  progress: Callable[[int, int], object] | None = None,
                  train: TrainFunction | None = None) -> list[Step]:
        """Apply ``steps`` in order as one transaction (``train`` runs fine_tune steps)."""

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
        tied, and the JSON carries them (``"tied"``). Not part of the plan's value (``==``).
        None: not known (a plan file without ``"tied"``: its snippet finds the ties on the model
        it runs on).

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
        self._tied = None if tied is None else {
            name: tuple(aliases) for name, aliases in tied.items()}
        self._find_ties = False  # read from a file that does not say: the snippet finds them
        for step in steps:
            self.append(step)

    def append(self, step: Step) -> None:
        """Add ``step`` at the end."""
        if not isinstance(step, Step):
            raise TypeError(f"Plan.append: step must be a Step; got {type(step).__name__}")
        self._steps.append(step)

    @property
    def tied(self) -> dict[str, tuple[str, ...]] | None:
        """The tied tensors the plan carries (address -> its other names), None if not known."""
        return None if self._tied is None else dict(self._tied)

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
        return plan_to_dict(self._steps, self._tied)

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
        steps = steps_from_dict(data, where)
        if "tied" not in data:  # a file written before plans carried ties
            plan = cls(steps)
            plan._find_ties = True
            return plan
        return cls(steps, tied=tied_from_dict(data["tied"], where))

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
        Tied tensors given to the plan (:attr:`Session.plan` gives them, and its JSON keeps
        them) stay tied; a plan read from a file that does not list them finds them on
        ``model`` when the snippet runs.
        """
        return to_snippet(self._steps, self._tied, find_ties=self._find_ties)

    def save_snippet(self, path: str | PathLike[str]) -> tuple[Path, Path | None]:
        """Write :meth:`to_snippet` to ``path`` and, when steps were computed from calibration
        (``importance=``, ``wanda_rows``, ``sparsegpt``), their tensors beside it in
        ``<path stem>.safetensors`` (no pickle), whose SHA-256 the snippet checks before use.

        Returns the two paths (the second None when no file was needed). Calibrated steps must
        be those a session ran (``Session.plan``), which recorded what they computed.

        Examples
        --------
        >>> import tempfile, torch
        >>> from prune_explorer import Session
        >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 3)))
        >>> _ = s.calibrate([torch.randn(8, 4)])
        >>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5, importance="wanda")
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     code, tensors = s.plan.save_snippet(f"{folder}/plan.py")
        ...     print(code.name, tensors.name)
        plan.py plan.safetensors
        """
        import hashlib

        from safetensors.torch import save

        from ..codegen.calibrated_lines import replay_file_tensors

        code = Path(path)
        tensors = replay_file_tensors(self._steps)
        if not tensors:
            code.write_text(self.to_snippet(), encoding="utf-8")
            return code, None
        data = save(tensors)
        beside = code.with_suffix(".safetensors")
        text = to_snippet(self._steps, self._tied,
                          (beside.name, hashlib.sha256(data).hexdigest()),
                          find_ties=self._find_ties)
        beside.write_bytes(data)
        code.write_text(text, encoding="utf-8")
        return code, beside

    def validate(self, model: nn.Module, *, train: TrainFunction | None = None) -> None:
        """Check the plan against ``model`` by dry-running it; ``model`` is left as it was.

        Raises the same errors as :meth:`apply`. Costs one full application, training
        included when ``train`` is given; without it the training steps (``fine_tune``,
        ``keep_weights``, ``rewind``) are left out of the dry run.
        """
        steps = self._steps if train is not None else [
            step for step in self._steps if not isinstance(step, TrainingStep)]
        session = RUNNER.start(model, seed=0)
        with session.transaction(dry_run=True):
            session.apply_all(steps, where="Plan.apply", train=train)

    def apply(self, model: nn.Module, *, seed: int | None = 0,
              train: TrainFunction | None = None) -> PlanSession:
        """Apply every step to ``model`` in place and return the :class:`Session` that did it.

        A plan with ``fine_tune`` steps (a schedule's) needs ``train``, the training function
        ``train(model, epochs)`` the session was given: the same function on the same model
        gives the same weights and masks.

        All or nothing (:meth:`Session.apply_all`): if a step is invalid for this model
        (unknown tensor, bad ``dim``...) or anything fails, even an interrupt, the steps already
        applied are undone, commits included, and the error names the step index. The returned
        session can ``undo``/``reset``/``report`` as usual.
        """
        session = RUNNER.start(model, seed=seed)
        session.apply_all(self._steps, where="Plan.apply", train=train)
        return session

