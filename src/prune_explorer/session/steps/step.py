"""``Step``: one pruning action, described by strings and numbers only.

A step names a method, the tensor(s) it acts on by address (``"features.0.weight"``: module
qualified name, a dot, the parameter name) and the method's settings. Random methods also carry the
integer seed that makes their mask reproducible. Steps hold no live objects, so they compare by
value and serialise to JSON.

Examples
--------
>>> from prune_explorer.session import Step
>>> Step("ln_structured", "features.0.weight", amount=0.25, n=2, dim=0)
Step('ln_structured', 'features.0.weight', amount=0.25, n=2, dim=0)
>>> step = Step("global_unstructured", ["fc1.weight", "fc2.weight"],
...             pruning_method="random_unstructured", amount=0.5, seed=7)
>>> step.targets, step.is_random
(('fc1.weight', 'fc2.weight'), True)
>>> Step.from_dict(step.to_dict()) == step
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from prune_explorer.importance.criteria import CriterionError, check_criterion
from prune_explorer.prune.validation import show_value

from ..errors import InvalidStepError
from ..model.targets import split_address
from .methods import METHODS, MethodSpec, check_method, check_seed, check_settings, is_random

__all__ = ["FORMAT", "Step", "StepFormat", "check_address", "split_address"]


class StepFormat:
    """Where :meth:`Step.to_dict` and :meth:`Step.from_dict` find the plan format.

    The format -- every step field, both ways, the versions and the amount forms -- is one
    module above this one, :mod:`prune_explorer.session.plans.format`, which fills this in when
    it is imported (always before a step exists: ``prune_explorer.session`` imports it). A step
    knows no file format, and ``steps/`` does not import ``plans/``.
    """

    def __init__(self) -> None:
        self.writer: Callable[[Step], dict[str, Any]] | None = None
        self.reader: Callable[[Any, str, int | None], Step] | None = None

    def write(self, step: Step) -> dict[str, Any]:
        if self.writer is None:
            raise RuntimeError(_UNLOADED)
        return self.writer(step)

    def read(self, data: Any, where: str, version: int | None) -> Step:
        if self.reader is None:
            raise RuntimeError(_UNLOADED)
        return self.reader(data, where, version)


_UNLOADED = "the plan format (prune_explorer.session.plans.format) is not loaded"

#: The plan format, as :mod:`prune_explorer.session.plans.format` sets it.
FORMAT = StepFormat()


def check_address(value: Any, where: str, field: str = "target") -> str:
    """Validate the syntax of a tensor address (existence is checked against a model later)."""
    rule = "must be a tensor address such as 'features.0.weight' (dot-separated, no empty parts)"
    if not isinstance(value, str) or not value or any(not part for part in value.split(".")):
        raise InvalidStepError(f"{where}: {field} {rule}; got {show_value(value)}", field)
    return value


def _check_targets(spec: MethodSpec, target: Any, where: str) -> str | tuple[str, ...]:
    if spec.name != "global_unstructured":
        return check_address(target, where)
    if isinstance(target, str) or not isinstance(target, Sequence) or not target:
        raise InvalidStepError(
            f"{where}: targets must be a non-empty list of tensor addresses for "
            f"global_unstructured; got {show_value(target)}",
            "targets",
        )
    names = tuple(check_address(t, where, "targets") for t in target)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidStepError(
                f"{where}: targets must not repeat a tensor; {show_value(name)} appears twice",
                "targets",
            )
        seen.add(name)
    return names


class Step:
    """One pruning action on one tensor (or, for ``global_unstructured``, a set of tensors).

    Parameters
    ----------
    method : str
        One of ``"identity"``, ``"random_unstructured"``, ``"l1_unstructured"``,
        ``"random_structured"``, ``"ln_structured"``, ``"custom_from_mask"``,
        ``"global_unstructured"`` or ``"remove"`` (the names of ``torch.nn.utils.prune``), or
        ``"semi_structured"`` / ``"block_structured"`` (our two hardware patterns), or
        ``"wanda_rows"`` / ``"sparsegpt"`` (computed from calibration, installed as masks).
    target : str or sequence of str
        Tensor address, e.g. ``"features.0.weight"``; a list of addresses for
        ``global_unstructured``.
    importance : str, optional
        For methods that take ``importance_scores`` (``l1_unstructured``, ``ln_structured``,
        global with ``pruning_method="l1_unstructured"``): the criterion whose scores rank the
        entries, one of :data:`prune_explorer.importance.CRITERIA` (``"magnitude"``, the
        default, is torch's own ranking; the others need ``Session.calibrate``). Written to
        JSON only when not magnitude, so plans written before read the same.
    seed : int, optional
        Required for random methods (``random_unstructured``, ``random_structured`` and
        ``global_unstructured`` with ``pruning_method="random_unstructured"``), forbidden otherwise.
    **settings
        Exactly the method's settings: ``amount``; ``amount, dim``; ``amount, n, dim``; ``mask``
        (tensor of 0/1, stored bit-packed); ``pruning_method, amount`` (global, where
        ``pruning_method`` is ``"l1_unstructured"`` or ``"random_unstructured"``);
        ``pattern, dim`` (semi_structured); ``amount, block, n`` (block_structured);
        ``sparsity`` (wanda_rows: a fraction of each row or ``"N:M"``); ``sparsity, damping``
        (sparsegpt; ``damping`` defaults to 0.01 of the Hessian's mean diagonal).

    Raises
    ------
    InvalidStepError
        Unknown method, bad address, missing/unexpected/ill-typed setting, missing or stray seed.

    Examples
    --------
    >>> Step("random_unstructured", "fc.weight", amount=0.3, seed=1)
    Step('random_unstructured', 'fc.weight', amount=0.3, seed=1)
    >>> try:
    ...     Step("l1_unstructured", "fc.weight", amount="half")
    ... except ValueError as err:
    ...     print(err)
    Step: amount must be a float in [0, 1] or an int >= 0; got 'half'
    """

    __slots__ = ("_detail", "_importance", "_method", "_replay", "_seed", "_settings", "_target",
                 "_ties")

    def __init__(
        self, method: str, target: str | Sequence[str], *, seed: int | None = None,
        importance: str | None = None, **settings: Any
    ) -> None:
        self._init("Step", method, target, settings, seed, importance)

    def _init(
        self, where: str, method: Any, target: Any, settings: Mapping[str, Any], seed: Any,
        importance: Any = None,
    ) -> None:
        spec = check_method(method, where)
        importance = _check_importance(spec, settings, importance, where)
        target = _check_targets(spec, target, where)
        clean = check_settings(spec, settings, where)
        if is_random(spec, clean):
            if seed is None:
                raise InvalidStepError(
                    f"{where}: seed must be an int in [0, 2**63) for a random method "
                    f"({spec.name}), so that its mask can be reproduced; got None",
                    "seed",
                )
            seed = check_seed(seed, where)
        elif seed is not None:
            raise InvalidStepError(
                f"{where}: seed must be None for {spec.name}, which draws no random numbers; "
                f"got {show_value(seed)}",
                "seed",
            )
        self._method = spec.name
        self._target = target
        self._settings = MappingProxyType(clean)
        self._seed = seed
        self._importance: str | None = importance
        self._ties: str | None = None
        self._detail: str | None = None
        self._replay: Mapping[str, Any] | None = None

    @classmethod
    def _build(
        cls,
        where: str,
        method: Any,
        target: Any,
        settings: Mapping[str, Any],
        seed: Any = None,
        importance: Any = None,
    ) -> Step:
        """Like ``Step(...)``, but errors start with ``where`` (the call that got bad input)."""
        step = cls.__new__(cls)
        step._init(where, method, target, settings, seed, importance)
        return step

    # -- read-only views ------------------------------------------------------------------------
    @property
    def method(self) -> str:
        """Method name (a ``torch.nn.utils.prune`` function name)."""
        return self._method

    @property
    def target(self) -> str | tuple[str, ...]:
        """The address, or a tuple of addresses for a global step."""
        return self._target

    @property
    def targets(self) -> tuple[str, ...]:
        """Addresses this step acts on, always as a tuple."""
        return self._target if isinstance(self._target, tuple) else (self._target,)

    @property
    def settings(self) -> Mapping[str, Any]:
        """Read-only mapping of the method's settings."""
        return self._settings

    @property
    def seed(self) -> int | None:
        """Seed for ``torch.manual_seed`` right before the call (random methods), else None."""
        return self._seed

    @property
    def spec(self) -> MethodSpec:
        """The :class:`~prune_explorer.session.steps.methods.MethodSpec` of the method."""
        return METHODS[self._method]

    @property
    def importance(self) -> str:
        """The criterion whose scores the step prunes by (``importance_scores=``):
        ``"magnitude"`` (torch's default: the tensor itself) unless it names another of
        :data:`prune_explorer.importance.CRITERIA`."""
        return self._importance or "magnitude"

    @property
    def calibrated(self) -> bool:
        """Whether the step reads the session's calibration (a criterion other than magnitude,
        or a method computed from calibration such as ``wanda_rows`` or ``sparsegpt``)."""
        return self._importance is not None or self.spec.compute is not None

    @property
    def detail(self) -> str | None:
        """What the step chose when a session ran it (SparseGPT: the dampening used), or None;
        not part of the step's value or JSON."""
        return self._detail

    @property
    def is_global(self) -> bool:
        """True for ``global_unstructured``."""
        return self._method == "global_unstructured"

    @property
    def is_random(self) -> bool:
        """True when the step draws random numbers (and carries a seed)."""
        return self._seed is not None

    # -- the plan format ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``method``, ``target``/``targets``, the settings, ``seed`` if random.

        This is the step of a version-2 plan file, written by the plan format
        (:func:`prune_explorer.session.plans.format.step_to_dict`, the one writer and reader of
        step fields): masks become ``{"shape": [...], "bits": base64}`` (see
        :class:`PackedMask`); infinite ``n`` becomes the string ``"inf"`` or ``"-inf"``;
        ``amount`` becomes ``{"fraction": float}`` or ``{"count": int}``.
        """
        return FORMAT.write(self)

    @classmethod
    def from_dict(cls, data: Any, where: str = "Step.from_dict", version: int | None = None
                  ) -> Step:
        """Strictly rebuild a step from :meth:`to_dict` output
        (:func:`prune_explorer.session.plans.format.step_from_dict`).

        Every field must be present with the right type, and no other field may appear.
        ``version`` is that of the plan file the step comes from (None: the current one); in
        version 1, ``amount`` is a bare number.
        """
        return FORMAT.read(data, where, version)

    @property
    def ties(self) -> str | None:
        """How this step, as a session applied it, split entries tied at its cut.

        ``None`` (no straddling tie, or torch's own split, or not known: a step not applied by a
        session), ``"lowest"`` or ``"highest"`` (the tied entries -- slices for
        ``ln_structured``, which keeps the lowest-index ones: ``"highest"`` -- of lowest /
        highest flat index were pruned). Read by :meth:`Plan.to_snippet`; not part of the
        step's value or JSON.
        """
        return self._ties

    @property
    def replay(self) -> Mapping[str, Any] | None:
        """For a calibrated step a session ran: the tensors a stock-torch replay needs (scores,
        masks, SparseGPT's values; see ``execute.replay_tensors``), else None. Not part of the
        step's value or JSON: :meth:`Plan.save_snippet` writes them beside the snippet."""
        return self._replay

    def _noted(self, ties: str | None, detail: str | None = None,
               replay: Mapping[str, Any] | None = None) -> Step:
        """A copy of this step carrying ``ties``, ``detail`` and ``replay`` (see :attr:`ties`)."""
        step = Step.__new__(Step)
        step._method, step._target = self._method, self._target
        step._settings, step._seed = self._settings, self._seed
        step._importance = self._importance
        step._ties, step._detail = ties, detail
        step._replay = None if replay is None else MappingProxyType(dict(replay))
        return step

    # -- value semantics ------------------------------------------------------------------------
    def _key(self) -> tuple[Any, ...]:
        # The type is part of a setting's value: amount=1 (one entry) is not amount=1.0 (all).
        settings = tuple((k, type(v), v) for k, v in self._settings.items())
        return (self._method, self._target, settings, self._seed, self._importance)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Step):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        target = list(self._target) if self.is_global else self._target
        parts = [repr(self._method), repr(target)]
        parts += [f"{k}={v!r}" for k, v in self._settings.items()]
        if self._seed is not None:
            parts.append(f"seed={self._seed}")
        if self._importance is not None:
            parts.append(f"importance={self._importance!r}")
        return f"Step({', '.join(parts)})"


def _check_importance(spec: MethodSpec, settings: Mapping[str, Any], value: Any,
                      where: str) -> str | None:
    """The step's criterion: None for magnitude (today's steps, their JSON unchanged)."""
    if value is None or value == "magnitude":
        return None
    try:
        check_criterion(value, where)
    except CriterionError as err:
        raise InvalidStepError(str(err), "importance") from None
    takes = spec.scores and settings.get("pruning_method", "l1_unstructured") == "l1_unstructured"
    if not takes:
        with_scores = ", ".join(name for name, s in METHODS.items() if s.scores)
        raise InvalidStepError(
            f"{where}: importance={value!r} needs a method that takes importance_scores "
            f"({with_scores}; global with pruning_method='l1_unstructured'); got {spec.name}",
            "importance")
    return str(value)

