"""``Schedule``: how a model goes from dense to a target sparsity, in rounds of prune and train.

A schedule is a list of *rounds*. Each round prunes to an absolute sparsity (its entry in
:attr:`Schedule.targets`) and then trains for a number of epochs (:attr:`Schedule.epochs`). Four
kinds cover the usual recipes:

``one_shot(target, epochs)``
    One round: prune to ``target`` at once, then fine-tune ``epochs``.
``iterative(target, rounds, epochs_per_round)``
    ``rounds`` rounds, each pruning the same fraction ``p`` of what is left, so that
    ``(1 - p) ** rounds == 1 - target``; each round trains ``epochs_per_round``.
``gradual(target, epochs, rounds=None, initial=0.0)``
    The cubic schedule of Zhu & Gupta (2017, "To prune, or not to prune"), Distiller's
    *automated gradual pruner*: round ``t`` of ``n`` prunes to
    ``target + (initial - target) * (1 - t / n) ** 3``, fast at first and slowly at the end,
    and the ``epochs`` are spread over the rounds (by default one round per two epochs: each
    pruning gets two epochs to recover, which measures better on the demo models than one).
``lottery_ticket(target, rounds, epochs_per_round, rewind_to="init")``
    Frankle & Carbin (2019): round 0 trains the dense network (keeping the weights to rewind
    to: those at the start, or after epoch ``k`` with ``rewind_to=k``); each of the ``rounds``
    rounds then prunes by magnitude (the iterative targets), *rewinds* the surviving weights
    to the kept ones and trains again. Start it from an untrained model.

A target is absolute (the share of entries pruned after the round). The session turns the
step from ``s[t-1]`` to ``s[t]`` into torch's relative ``amount = (s[t] - s[t-1]) / (1 - s[t-1])``
of what is still unpruned, so the rounds compound exactly as repeated
``torch.nn.utils.prune`` calls do (see :meth:`Schedule.amounts`).

Examples
--------
>>> from prune_explorer.session import Schedule
>>> Schedule.iterative(0.875, rounds=3, epochs_per_round=2).targets
(0.5, 0.75, 0.875)
>>> s = Schedule.gradual(0.9, epochs=6)
>>> [round(t, 4) for t in s.targets], s.epochs
([0.6333, 0.8667, 0.9], (2, 2, 2))
>>> Schedule.lottery_ticket(0.75, rounds=2, epochs_per_round=3).targets
(0.0, 0.5, 0.75)
>>> Schedule.from_dict(s.to_dict()) == s
True
>>> s.label
'gradual cubic, 6 epochs'
"""

from __future__ import annotations

import math
from typing import Any, Literal

from prune_explorer.prune.validation import show_value

__all__ = ["SCHEDULE_KINDS", "Schedule"]

#: The kinds of schedule, as :attr:`Schedule.kind` and the plan JSON name them.
SCHEDULE_KINDS = ("one_shot", "iterative", "gradual", "lottery_ticket")

RewindTo = Literal["init"] | int


def _target(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1 \
            or (isinstance(value, float) and math.isnan(value)):
        raise ValueError(f"{where}: target must be a number in [0, 1) (the share of entries "
                         f"pruned at the end); got {show_value(value)}")
    return float(value)


def _count(where: str, field: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}: {field} must be an int >= {minimum}; got {show_value(value)}")
    return value


def _iterative_targets(target: float, rounds: int) -> tuple[float, ...]:
    # (1 - p) ** rounds == 1 - target; the last round is the target itself (no float drift)
    kept = 1.0 - target
    return (*(1.0 - kept ** (t / rounds) for t in range(1, rounds)), target)


class Schedule:
    """Rounds of pruning and training: an absolute target sparsity and epochs per round.

    Build one with :meth:`one_shot`, :meth:`iterative`, :meth:`gradual` or
    :meth:`lottery_ticket`; run it with
    :meth:`Session.fine_tune_schedule <prune_explorer.session.Session.fine_tune_schedule>`.
    Schedules compare by value and round-trip through :meth:`to_dict`.

    Examples
    --------
    >>> Schedule.one_shot(0.9, epochs=10)
    Schedule.one_shot(target=0.9, epochs=10)
    >>> Schedule.one_shot(0.9, epochs=10).targets, Schedule.one_shot(0.9, epochs=10).epochs
    ((0.9,), (10,))
    """

    __slots__ = ("_kind", "_settings")

    def __init__(self, kind: str, **settings: Any) -> None:
        where = "Schedule"
        if kind not in SCHEDULE_KINDS:
            kinds = ", ".join(map(repr, SCHEDULE_KINDS))
            raise ValueError(f"{where}: kind must be one of {kinds}; got {show_value(kind)}")
        where = f"Schedule.{kind}"
        fields = _FIELDS[kind]
        missing = [f for f in fields if f not in settings and f not in _DEFAULTS]
        extra = [f for f in settings if f not in fields]
        if missing or extra:
            what = f"missing {missing}" if missing else f"unexpected {extra}"
            raise ValueError(f"{where}: settings must be exactly {', '.join(fields)}; {what}")
        clean: dict[str, Any] = {f: settings.get(f, _DEFAULTS.get(f)) for f in fields}
        clean["target"] = _target(where, clean["target"])
        for field in ("epochs", "epochs_per_round"):
            if field in clean:
                clean[field] = _count(where, field, clean[field], 0)
        if "rounds" in clean and not (kind == "gradual" and clean["rounds"] is None):
            clean["rounds"] = _count(where, "rounds", clean["rounds"], 1)
        if kind == "gradual":
            initial = clean["initial"]
            if isinstance(initial, bool) or not isinstance(initial, (int, float)) or \
                    not 0 <= initial <= clean["target"]:
                raise ValueError(f"{where}: initial must be a number in [0, target] "
                                 f"({clean['target']}); got {show_value(initial)}")
            clean["initial"] = float(initial)
            if clean["rounds"] is None and clean["epochs"] == 0:
                raise ValueError(f"{where}: rounds must be given when epochs is 0 (by default "
                                 "there is one round per two epochs); got None")
        if kind == "lottery_ticket":
            rewind = clean["rewind_to"]
            if rewind != "init":
                rewind = _count(where, "rewind_to", rewind, 0) if not isinstance(rewind, str) \
                    else rewind
                if not isinstance(rewind, int) or rewind > clean["epochs_per_round"]:
                    raise ValueError(
                        f"{where}: rewind_to must be 'init' or an epoch k in [0, "
                        f"epochs_per_round] ({clean['epochs_per_round']}); got "
                        f"{show_value(clean['rewind_to'])}")
            clean["rewind_to"] = rewind
        self._kind = kind
        self._settings = clean

    # -- the four kinds ---------------------------------------------------------------------------
    @classmethod
    def one_shot(cls, target: float, epochs: int) -> Schedule:
        """Prune to ``target`` in one step, then fine-tune for ``epochs``.

        ``epochs=0`` is pruning without fine-tuning (the "no fine-tune" baseline).

        Examples
        --------
        >>> Schedule.one_shot(0.9, epochs=0).label
        'one-shot, no fine-tune'
        """
        return cls("one_shot", target=target, epochs=epochs)

    @classmethod
    def iterative(cls, target: float, rounds: int, epochs_per_round: int) -> Schedule:
        """``rounds`` rounds, each pruning the same share ``p`` of what is left
        (``(1 - p) ** rounds == 1 - target``) and training ``epochs_per_round``.

        Examples
        --------
        >>> [round(t, 3) for t in Schedule.iterative(0.9, 2, 5).targets]
        [0.684, 0.9]
        """
        return cls("iterative", target=target, rounds=rounds, epochs_per_round=epochs_per_round)

    @classmethod
    def gradual(cls, target: float, epochs: int, rounds: int | None = None,
                initial: float = 0.0) -> Schedule:
        """Zhu & Gupta's cubic schedule: round ``t`` of ``n`` prunes to
        ``target + (initial - target) * (1 - t / n) ** 3``; the ``epochs`` are spread over the
        rounds as evenly as they go, any extra ones to the last rounds (``rounds`` defaults to
        ``max(1, epochs // 2)``: prune before every second epoch. On the demo MLP, 10 rounds
        of one epoch reach 86.9% at 95% sparsity where 5 rounds of two reach 91.1%:
        ``benchmarks/README.md``).

        Examples
        --------
        >>> Schedule.gradual(0.8, epochs=5, rounds=2).epochs
        (2, 3)
        """
        return cls("gradual", target=target, epochs=epochs, rounds=rounds, initial=initial)

    @classmethod
    def lottery_ticket(cls, target: float, rounds: int, epochs_per_round: int,
                       rewind_to: RewindTo = "init") -> Schedule:
        """Frankle & Carbin's lottery ticket with iterative magnitude pruning.

        Round 0 trains the dense network for ``epochs_per_round`` and keeps the weights to
        rewind to: those at its start (``rewind_to="init"``) or after its epoch ``k``
        (``rewind_to=k``, "late rewinding": round 0 then trains ``k`` epochs, keeps the
        weights and trains the rest). Rounds 1 to ``rounds`` each prune to the iterative
        targets, set every weight back to the kept ones (the masks stay) and train
        ``epochs_per_round - k`` epochs. It uses ``rounds + 1`` trainings: far more epochs
        than a one-shot fine-tune, which :attr:`label` says.

        Examples
        --------
        >>> Schedule.lottery_ticket(0.9, rounds=2, epochs_per_round=10, rewind_to=2).epochs
        (10, 8, 8)
        """
        return cls("lottery_ticket", target=target, rounds=rounds,
                   epochs_per_round=epochs_per_round, rewind_to=rewind_to)

    @classmethod
    def of_kind(cls, kind: str, target: float, epochs: int, rounds: int,
                rewind_to: RewindTo = "init") -> Schedule:
        """The schedule of ``kind`` from one set of controls (the Fine-tune tab's, a
        benchmark's): ``epochs`` in all for one-shot and gradual, per round for iterative and
        the lottery ticket; ``rounds`` for those two; ``rewind_to`` for the lottery ticket.

        Examples
        --------
        >>> Schedule.of_kind("iterative", 0.9, epochs=2, rounds=3).epochs
        (2, 2, 2)
        """
        if kind == "one_shot":
            return cls.one_shot(target, epochs)
        if kind == "iterative":
            return cls.iterative(target, rounds, epochs)
        if kind == "gradual":
            return cls.gradual(target, epochs)
        if kind == "lottery_ticket":
            return cls.lottery_ticket(target, rounds, epochs, rewind_to)
        return cls(kind)  # refused: names the kinds

    # -- what it does -----------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """``"one_shot"``, ``"iterative"``, ``"gradual"`` or ``"lottery_ticket"``."""
        return self._kind

    @property
    def settings(self) -> dict[str, Any]:
        """The arguments it was built with (a copy)."""
        return dict(self._settings)

    @property
    def target(self) -> float:
        """The sparsity at the end (share of the targets' entries pruned)."""
        return float(self._settings["target"])

    @property
    def rewind_to(self) -> RewindTo | None:
        """Where a lottery ticket rewinds to (``"init"`` or an epoch); None for other kinds."""
        value: RewindTo | None = self._settings.get("rewind_to")
        return value

    @property
    def targets(self) -> tuple[float, ...]:
        """The absolute sparsity after each round's pruning (a lottery ticket's round 0,
        which only trains, has 0.0)."""
        s = self._settings
        if self._kind == "one_shot":
            return (s["target"],)
        if self._kind == "iterative":
            return _iterative_targets(s["target"], s["rounds"])
        if self._kind == "lottery_ticket":
            return (0.0, *_iterative_targets(s["target"], s["rounds"]))
        n = self._gradual_rounds()
        final, initial = s["target"], s["initial"]
        return (*(final + (initial - final) * (1 - t / n) ** 3 for t in range(1, n)), final)

    @property
    def epochs(self) -> tuple[int, ...]:
        """The epochs each round trains after its pruning (and, for a lottery ticket, its
        rewind)."""
        s = self._settings
        if self._kind == "one_shot":
            return (s["epochs"],)
        if self._kind == "iterative":
            return (s["epochs_per_round"],) * s["rounds"]
        if self._kind == "lottery_ticket":
            later = s["epochs_per_round"] - (0 if s["rewind_to"] == "init" else s["rewind_to"])
            return (s["epochs_per_round"],) + (later,) * s["rounds"]
        n = self._gradual_rounds()
        base, extra = divmod(s["epochs"], n)
        return tuple(base + (t >= n - extra) for t in range(n))

    @property
    def rounds(self) -> int:
        """How many rounds prune (the number of the last round)."""
        return len(self.targets) + self.first_round - 1

    @property
    def first_round(self) -> int:
        """The number of the first round: 0 for a lottery ticket (round 0 trains the dense
        network), else 1 (rounds count the pruning steps)."""
        return 1 if self._kind != "lottery_ticket" else 0

    @property
    def round_numbers(self) -> tuple[int, ...]:
        """The number of each round (:attr:`RoundResult.index`), in order."""
        return tuple(range(self.first_round, self.first_round + len(self.targets)))

    @property
    def epochs_total(self) -> int:
        """Epochs trained over the whole schedule."""
        return sum(self.epochs)

    def amounts(self) -> tuple[float, ...]:
        """torch's relative amount of each round: ``(s[t] - s[t-1]) / (1 - s[t-1])`` of what
        is still unpruned (before rounding to a count, which the pruning method does).

        Examples
        --------
        >>> Schedule.iterative(0.75, 2, 1).amounts()
        (0.5, 0.5)
        """
        previous, out = 0.0, []
        for target in self.targets:
            out.append(relative_amount(previous, target))
            previous = target
        return tuple(out)

    def _gradual_rounds(self) -> int:
        rounds = self._settings["rounds"]
        return max(1, self._settings["epochs"] // 2) if rounds is None else int(rounds)

    @property
    def label(self) -> str:
        """Words for a legend, with the epoch budget: ``"gradual cubic, 10 epochs"``,
        ``"lottery ticket, 3 rounds, rewind to init, 120 epochs"``."""
        s, total = self._settings, self.epochs_total
        budget = f"{total} epoch{'s' * (total != 1)}"
        if self._kind == "one_shot":
            return "one-shot, no fine-tune" if total == 0 else f"one-shot, {budget}"
        if self._kind == "iterative":
            return f"iterative, {s['rounds']} rounds, {budget}"
        if self._kind == "gradual":
            return f"gradual cubic, {budget}"
        rewind = "init" if s["rewind_to"] == "init" else f"epoch {s['rewind_to']}"
        return f"lottery ticket, {s['rounds']} rounds, rewind to {rewind}, {budget}"

    # -- JSON -------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """``{"kind": ..., <settings>}``, JSON-ready (the plan records it)."""
        return {"kind": self._kind, **self._settings}

    @classmethod
    def from_dict(cls, data: Any, where: str = "Schedule.from_dict") -> Schedule:
        """Strictly rebuild a schedule from :meth:`to_dict` output."""
        if not isinstance(data, dict) or "kind" not in data:
            raise ValueError(f"{where}: a schedule must be an object with a 'kind'; got "
                             f"{show_value(data)}")
        settings = dict(data)
        kind = settings.pop("kind")
        if kind not in SCHEDULE_KINDS:
            raise ValueError(f"{where}: kind must be one of "
                             f"{', '.join(map(repr, SCHEDULE_KINDS))}; got {show_value(kind)}")
        try:
            return cls(kind, **settings)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None

    # -- value ------------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return (self._kind, self._settings) == (other._kind, other._settings)

    def __hash__(self) -> int:
        return hash((self._kind, tuple(self._settings.items())))

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self._settings.items()
                             if not (k in _DEFAULTS and v == _DEFAULTS[k]))
        return f"Schedule.{self._kind}({settings})"


_FIELDS = {
    "one_shot": ("target", "epochs"),
    "iterative": ("target", "rounds", "epochs_per_round"),
    "gradual": ("target", "epochs", "rounds", "initial"),
    "lottery_ticket": ("target", "rounds", "epochs_per_round", "rewind_to"),
}
_DEFAULTS: dict[str, Any] = {"initial": 0.0, "rewind_to": "init"}


def relative_amount(previous: float, target: float) -> float:
    """The share of what is still unpruned at sparsity ``previous`` that brings it to
    ``target``: ``(target - previous) / (1 - previous)``, clipped to [0, 1].

    Examples
    --------
    >>> relative_amount(0.5, 0.75)
    0.5
    """
    if previous >= 1.0:
        return 0.0
    return min(1.0, max(0.0, (target - previous) / (1.0 - previous)))
