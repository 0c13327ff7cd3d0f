"""Accuracy against sparsity: one line per schedule run, beside the "no fine-tune" line.

:func:`plot_accuracy_vs_sparsity` draws what :meth:`Session.fine_tune_schedule
<prune_explorer.session.Session.fine_tune_schedule>` measured: each round's realized sparsity and
the accuracy after its training, one line per run, labelled with the schedule and its epoch
budget (the run's ``label``, e.g. ``"gradual cubic, 10 epochs"``). One-shot runs that share a
label (the same epochs, different targets) join into one line through their points, which makes
the classic curve. The baseline -- the same pruning with no training at all -- is a grey dashed
line: the gap between it and a run is what the epochs bought.

Runs are read by their attributes only (``label``, ``rounds``, ``stopped``; each round's
``target``, ``realized``, ``accuracy_after``), so a :class:`~prune_explorer.session.ScheduleRun`
works, and so does any object with those attributes (:class:`CurveRun`).

Examples
--------
>>> from types import SimpleNamespace as Run, SimpleNamespace as Round
>>> from prune_explorer.viz import make_figure
>>> fig, ax = make_figure()
>>> run = Run(label="iterative, 2 rounds, 4 epochs", stopped=False, rounds=[
...     Round(target=0.5, realized=0.5, accuracy_after=0.97),
...     Round(target=0.75, realized=0.75, accuracy_after=0.96)])
>>> drawn = plot_accuracy_vs_sparsity(ax, [run], baseline=[(0.0, 0.97), (0.5, 0.9), (0.75, 0.6)])
>>> drawn
CurvePlot(1 line: 'iterative, 2 rounds, 4 epochs'; baseline: 3 points)
>>> drawn.lines["iterative, 2 rounds, 4 epochs"].get_ydata().tolist()
[0.97, 0.96]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from matplotlib.axes import Axes
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.ticker import PercentFormatter

from prune_explorer.viz import style

__all__ = ["BASELINE_LABEL", "CurvePlot", "CurveRound", "CurveRun", "plot_accuracy_vs_sparsity"]

#: Legend entry of the baseline line.
BASELINE_LABEL = "no fine-tune (one-shot)"


class CurveRound(Protocol):
    """What the chart reads of one round (a :class:`~prune_explorer.session.RoundResult`)."""

    @property
    def target(self) -> float:
        """The absolute sparsity the round pruned to."""

    @property
    def realized(self) -> float:
        """The sparsity the masks have after the round (the x of its point)."""

    @property
    def accuracy_after(self) -> float | None:
        """The accuracy after the round's training (the y of its point; None: not measured)."""


class CurveRun(Protocol):
    """What the chart reads of one run (a :class:`~prune_explorer.session.ScheduleRun`)."""

    @property
    def label(self) -> str:
        """The schedule in words with its epoch budget."""

    @property
    def rounds(self) -> Sequence[Any]:
        """The completed rounds (:class:`CurveRound`), in order."""

    @property
    def stopped(self) -> bool:
        """True when the run ended before its last round."""


@dataclass(repr=False)
class CurvePlot:
    """What :func:`plot_accuracy_vs_sparsity` drew.

    Attributes
    ----------
    lines : dict of str to Line2D
        One line per legend entry, by its text, in the order of the runs.
    baseline : Line2D or None
        The "no fine-tune" line.
    legend : Legend or None
        None when nothing was drawn.
    """

    lines: dict[str, Line2D]
    baseline: Line2D | None
    legend: Legend | None

    def __repr__(self) -> str:
        names = ", ".join(map(repr, self.lines))
        count = len(self.lines)
        base = ("no baseline" if self.baseline is None else
                f"baseline: {np.size(self.baseline.get_xdata())} points")
        return f"CurvePlot({count} line{'s' * (count != 1)}: {names or '-'}; {base})"


def _points(rounds: Iterable[Any]) -> list[tuple[float, float]]:
    return [(float(r.realized), float(r.accuracy_after)) for r in rounds
            if r.accuracy_after is not None]


def _baseline_points(baseline: Any) -> list[tuple[float, float]]:
    columns = getattr(baseline, "columns", None)
    if columns is not None:  # a table: a sensitivity sweep, say
        missing = [c for c in ("sparsity", "score") if c not in columns]
        if missing:
            raise ValueError("plot_accuracy_vs_sparsity: a baseline table must have columns "
                             f"'sparsity' and 'score'; missing {missing}, got {list(columns)}")
        pairs = list(zip(baseline["sparsity"], baseline["score"], strict=True))
    else:
        pairs = list(baseline)
    points = []
    for index, pair in enumerate(pairs):
        try:
            x, y = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise ValueError(f"plot_accuracy_vs_sparsity: baseline[{index}] must be a pair "
                             f"(sparsity, accuracy) of numbers; got {pair!r}") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError(f"plot_accuracy_vs_sparsity: baseline[{index}] must be finite; "
                             f"got {pair!r}")
        points.append((x, y))
    return sorted(points)


def _entries(runs: Sequence[Any]) -> list[tuple[str, list[tuple[float, float]]]]:
    """(legend text, points) per line: one-shot runs of one label share a line, sorted by
    sparsity; every other run is its own line, its target named when another run shares its
    label."""
    labels = [str(run.label) for run in runs]
    single = [len(run.rounds) == 1 and not run.stopped for run in runs]
    entries: dict[str, list[tuple[float, float]]] = {}
    joined: set[str] = set()
    for run, label, one in zip(runs, labels, single, strict=True):
        if one and all(s for s, other in zip(single, labels, strict=True) if other == label):
            entries.setdefault(label, []).extend(_points(run.rounds))
            joined.add(label)
            continue
        text = label
        if labels.count(label) > 1 and run.rounds:
            text += f" → {100 * float(run.rounds[-1].target):.3g}%"
        if run.stopped:
            text += " (stopped)"
        while text in entries:  # the same run twice: keep both lines
            text += "'"
        entries[text] = _points(run.rounds)
    return [(text, sorted(points) if text in joined else points)
            for text, points in entries.items()]


def plot_accuracy_vs_sparsity(
    ax: Axes,
    runs: Sequence[CurveRun],
    *,
    baseline: Any = None,
    metric_label: str = "accuracy",
    title: str | None = None,
) -> CurvePlot:
    """Accuracy after each round against its realized sparsity, one line per run.

    Parameters
    ----------
    ax : Axes
    runs : sequence of ScheduleRun (or :class:`CurveRun`)
        In the order to draw them (``Session.runs``). A run's points are its rounds with an
        accuracy, in order; a run that stopped early says so in its legend entry. One-shot
        runs that finished and share a label are one line through their points, by sparsity.
    baseline : sequence of (sparsity, accuracy) pairs, or a table, optional
        The "no fine-tune" line (grey, dashed), e.g. one-shot pruning evaluated without
        training at a few sparsities; a table needs columns ``sparsity`` and ``score`` (the
        rows of a ``Session.sensitivity`` sweep of one target or scope).
    metric_label : str, default "accuracy"
        What the y axis measures; values in [0, 1] are shown as percentages.
    title : str, optional
        Default: "<metric> vs sparsity".

    Returns
    -------
    CurvePlot

    Raises
    ------
    ValueError
        A baseline point that is not a pair of finite numbers.

    Examples
    --------
    >>> from types import SimpleNamespace as Run, SimpleNamespace as Round
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure()
    >>> one_shots = [Run(label="one-shot, 10 epochs", stopped=False, rounds=[
    ...     Round(target=t, realized=t, accuracy_after=a)]) for t, a in ((0.9, 0.97), (0.8, 0.98))]
    >>> drawn = plot_accuracy_vs_sparsity(ax, one_shots)
    >>> drawn.lines["one-shot, 10 epochs"].get_xdata().tolist()  # one line, by sparsity
    [0.8, 0.9]
    """
    base_points = None if baseline is None else _baseline_points(baseline)
    entries = _entries(list(runs))
    lines: dict[str, Line2D] = {}
    values: list[float] = []
    for k, (text, points) in enumerate(e for e in entries if e[1]):  # skip runs with no point
        colour = style.OKABE_ITO[k % len(style.OKABE_ITO)]
        marker = style.MARKERS[k % len(style.MARKERS)]
        xs = np.array([p[0] for p in points], dtype=float)
        ys = np.array([p[1] for p in points], dtype=float)
        (line,) = ax.plot(xs, ys, color=colour, marker=marker, markersize=5, linewidth=1.5,
                          label=text)
        lines[text] = line
        values += ys.tolist()
    baseline_line = None
    if base_points:
        baseline_line, = ax.plot([p[0] for p in base_points], [p[1] for p in base_points],
                                 color="0.45", linestyle="--", marker=".", linewidth=1.2,
                                 label=BASELINE_LABEL)
        values += [p[1] for p in base_points]
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    if values and all(0.0 <= v <= 1.0 for v in values):
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_xlabel("sparsity (share of the targets' weights pruned)")
    ax.set_ylabel(metric_label)
    ax.grid(True, alpha=0.3)
    # y given: the title sits at the top edge (nothing is drawn above the axes), so each
    # draw skips matplotlib's search for artists above them (a tight box of every tick)
    ax.set_title(title if title is not None else f"{metric_label} vs sparsity",
                 fontsize="medium", y=1.0)
    # accuracy falls as sparsity grows: the lower left corner is where the lines are not
    legend = (ax.legend(loc="lower left", fontsize="small", title="schedule, epoch budget",
                        title_fontsize="small") if lines or baseline_line is not None else None)
    return CurvePlot(lines, baseline_line, legend)
