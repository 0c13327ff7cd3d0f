"""Sensitivity analysis: how a score (accuracy, loss...) changes as each tensor is pruned more.

Every point is a real step through the session -- the same masks ``apply`` would give -- that is
undone right after the score is read, without change events, so the model, the history and the
plan are exactly as before when the sweep ends (also when ``evaluate`` raises).

Examples
--------
>>> import torch
>>> from prune_explorer.session import Session
>>> net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1))
>>> x = torch.randn(8, 4)
>>> s = Session(net)
>>> df = s.sensitivity(lambda m: float(m(x).abs().mean()), amounts=[0.5], progress=False)
>>> list(df.columns), sorted(set(df["scope"]))
(['target', 'scope', 'amount', 'sparsity', 'score'], ['global', 'local'])
>>> len(s.steps)
0
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import pandas as pd
import torch
from torch import nn

from ..errors import InvalidStepError

__all__ = ["COLUMNS", "SweptSession", "sensitivity"]


class SweptSession(Protocol):
    """What a sweep asks of a session (a part of ``Session``'s API): its targets, previews to
    check the settings, dry-run transactions to prune in, and the model to score."""

    @property
    def model(self) -> nn.Module:
        """The model pruned in place."""

    def default_targets(self) -> list[str]:
        """The tensors swept when given none."""

    def _canonical(self, target: Any) -> Any:
        """``target`` with each alias of a tied tensor replaced by its listed address."""

    def preview(self, target: str, method: str, *, seed: int | None = None,
                **settings: Any) -> torch.Tensor:
        """The mask a step would leave."""

    def mask(self, name: str) -> torch.Tensor:
        """The current bool mask of ``name``."""

    def transaction(self, *, dry_run: bool = False) -> contextlib.AbstractContextManager[Any]:
        """All or nothing; ``dry_run`` always rolls back."""

    def apply(self, target: str, method: str, *, seed: int | None = None,
              with_bias: bool = False, **settings: Any) -> Any:
        """Do a step on one tensor."""

    def apply_global(self, targets: Sequence[str], method: str = "l1_unstructured", *,
                     amount: float | int, seed: int | None = None) -> Any:
        """Do a global step."""

#: Columns of the table :func:`sensitivity` returns (long format, one row per evaluation).
COLUMNS = ["target", "scope", "amount", "sparsity", "score"]
_SCOPES = ("local", "global")
_METHODS = ("l1_unstructured", "random_unstructured")


def _check_amounts(amounts: Any, where: str) -> list[float]:
    rule = "amounts must be a non-empty list of fractions in [0, 1]"
    if isinstance(amounts, (str, bytes)) or not isinstance(amounts, Iterable):
        raise InvalidStepError(f"{where}: {rule}; got {amounts!r}", "amounts")
    out = []
    for a in amounts:
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 <= a <= 1.0:
            raise InvalidStepError(f"{where}: amounts must be fractions in [0, 1]; got {a!r}",
                                   "amounts")
        out.append(float(a))
    if not out:
        raise InvalidStepError(f"{where}: {rule}; got an empty list", "amounts")
    return out


def _progress(total: int, enabled: bool | None) -> Any:
    if enabled is False:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="sensitivity", leave=False, disable=enabled is None and total < 8)


def sensitivity(
    session: SweptSession,
    evaluate: Callable[[nn.Module], float],
    *,
    targets: Sequence[str] | None = None,
    amounts: Iterable[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    method: str = "l1_unstructured",
    scopes: Sequence[str] = _SCOPES,
    seed: int = 0,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Sweep ``amounts`` per tensor (``"local"``) and over all targets at once (``"global"``).

    Parameters
    ----------
    session
        The session whose model is scored; it is left exactly as it was.
    evaluate
        ``evaluate(model) -> float``, e.g. accuracy on a held-out split; called under
        ``torch.no_grad()``.
    targets
        Tensor addresses; default: ``session.default_targets()``. An alias of a tied tensor
        means that tensor (its rows name the address it is listed under).
    amounts
        Fractions in [0, 1] of what is still unpruned in each target (or across targets).
    method
        ``"l1_unstructured"`` or ``"random_unstructured"`` (random steps use ``seed``).
    scopes
        ``"local"`` (each target alone) and/or ``"global"`` (one threshold across targets).
    progress
        Show a tqdm bar: True, False, or None for "only if the sweep is long".

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`. ``target`` is the tensor address, or ``"global"``; ``sparsity``
        is the pruned fraction of that tensor (of all targets for ``"global"``) at that point.
        One extra row per target and scope at amount 0.0 holds the unpruned score.
    """
    where = "Session.sensitivity"
    if not callable(evaluate):
        raise TypeError(f"{where}: evaluate must be a callable model -> float; "
                        f"got {type(evaluate).__name__}")
    if method not in _METHODS:
        raise InvalidStepError(f"{where}: method must be one of {_METHODS}; got {method!r}",
                               "method")
    bad = [s for s in scopes if s not in _SCOPES]
    if bad or not scopes:
        raise InvalidStepError(f"{where}: scopes must be a non-empty subset of {_SCOPES}; "
                               f"got {tuple(scopes)!r}", "scopes")
    # an alias of a tied tensor means that tensor, listed (and swept) once
    names = session._canonical(list(session.default_targets() if targets is None else targets))
    if not names:
        raise InvalidStepError(f"{where}: targets must name at least one tensor; got {names!r}",
                               "targets")
    amounts = _check_amounts(amounts, where)
    settings: dict[str, Any] = {"seed": seed} if method == "random_unstructured" else {}
    # Validate every target (and the method) once, up front, without changing anything.
    for name in names:
        session.preview(name, method, amount=0.0, **settings)

    def score() -> float:
        with torch.no_grad():
            value = evaluate(session.model)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise TypeError(f"{where}: evaluate must return a number; got {value!r}") from None

    def sparsity(addresses: Sequence[str]) -> float:
        masks = [session.mask(a) for a in addresses]
        total = sum(m.numel() for m in masks)
        return sum(int((~m).sum()) for m in masks) / total if total else 0.0

    rows: list[tuple[str, str, float, float, float]] = []
    base = score()
    local = "local" in scopes
    total = len(amounts) * (len(names) * local + ("global" in scopes))
    bar = _progress(total, progress)
    # The whole sweep is one dry-run transaction (and each point another): whatever happens,
    # even an interrupt inside evaluate, the session is left exactly as it was, with no events.
    with session.transaction(dry_run=True):
        try:
            if local:
                for name in names:
                    rows.append((name, "local", 0.0, sparsity([name]), base))
                    for a in amounts:
                        with session.transaction(dry_run=True):
                            session.apply(name, method, amount=a, **settings)
                            rows.append((name, "local", a, sparsity([name]), score()))
                        if bar is not None:
                            bar.update()
            if "global" in scopes:
                rows.append(("global", "global", 0.0, sparsity(names), base))
                for a in amounts:
                    with session.transaction(dry_run=True):
                        session.apply_global(names, method, amount=a, **settings)
                        rows.append(("global", "global", a, sparsity(names), score()))
                    if bar is not None:
                        bar.update()
        finally:
            if bar is not None:
                bar.close()
    return pd.DataFrame(rows, columns=COLUMNS)
