"""Charts of the session's report tables: global-vs-local bars and sensitivity curves.

Both take a pandas DataFrame with the columns agreed with the session layer and draw into an
``Axes`` you pass in.

Examples
--------
>>> import pandas as pd
>>> from prune_explorer.viz import make_figure
>>> df = pd.DataFrame({"target": ["fc.weight"] * 2, "scope": ["local"] * 2,
...                    "amount": [0.0, 0.5], "sparsity": [0.0, 0.5], "score": [0.9, 0.8]})
>>> fig, ax = make_figure()
>>> plot_sensitivity(ax, df)
SensitivityPlot(1 curves: fc.weight/local)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.ticker import PercentFormatter

from prune_explorer.viz import style
from prune_explorer.viz.figures import check_choice

if TYPE_CHECKING:
    import pandas as pd

GLOBAL_LOCAL_COLUMNS = (
    "name",
    "numel",
    "sparsity_global",
    "sparsity_local",
    "pruned_global",
    "pruned_local",
    "collapsed_global",
    "collapsed_local",
)
SENSITIVITY_COLUMNS = ("target", "scope", "amount", "sparsity", "score")


def _require_columns(df: pd.DataFrame, columns: Sequence[str], where: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"{where}: df must have columns {list(columns)}; missing {missing}, "
            f"got {list(df.columns)}"
        )


@dataclass(repr=False)
class GlobalLocalPlot:
    """What :func:`plot_global_vs_local` drew.

    Attributes
    ----------
    global_bars, local_bars : BarContainer
        One bar per tensor; heights are the sparsities.
    totals : dict
        ``{"global": Line2D, "local": Line2D}`` for the TOTAL row (empty without one).
    collapsed : list of Line2D
        Markers over bars of layers that collapsed (everything pruned).
    legend : Legend
    names : list of str
    before_bars : list of BarContainer
        The part of each bar pruned before the step (global, local), when ``before`` was given.
    """

    global_bars: BarContainer
    local_bars: BarContainer
    totals: dict[str, Line2D]
    collapsed: list[Line2D]
    legend: Legend
    names: list[str]
    before_bars: list[BarContainer] = field(default_factory=list)

    def __repr__(self) -> str:
        return (
            f"GlobalLocalPlot({len(self.names)} tensors, totals {sorted(self.totals)}, "
            f"{len(self.collapsed)} collapsed markers)"
        )


def plot_global_vs_local(
    ax: Axes, df: pd.DataFrame, *, amount: float | None = None, title: str | None = None,
    before: Mapping[str, float] | None = None,
) -> GlobalLocalPlot:
    """Grouped bars: per-tensor sparsity under global vs local pruning at the same amount.

    Parameters
    ----------
    ax : Axes
    df : pandas.DataFrame
        ``Session.compare_global_local`` table: columns ``name, numel, sparsity_global,
        sparsity_local, pruned_global, pruned_local, collapsed_global, collapsed_local``,
        optionally a final row named ``"TOTAL"``, drawn as two horizontal lines instead of bars.
    amount : float, optional
        Stated in the title.
    title : str, optional
        Replaces the default title.
    before : mapping of str to float, optional
        Sparsity of each tensor now. The table is then a preview of the next step: the part of
        each bar pruned before is drawn pale and hatched, and the title says so. Both scopes
        take ``amount`` of what is still unpruned, so a tensor pruned before ends higher.

    Returns
    -------
    GlobalLocalPlot

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({
    ...     "name": ["a.weight", "b.weight", "TOTAL"], "numel": [100, 300, 400],
    ...     "sparsity_global": [0.9, 0.367, 0.5], "sparsity_local": [0.5, 0.5, 0.5],
    ...     "pruned_global": [90, 110, 200], "pruned_local": [50, 150, 200],
    ...     "collapsed_global": [False, False, False], "collapsed_local": [False] * 3})
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure()
    >>> bars = plot_global_vs_local(ax, df, amount=0.5)
    >>> [round(float(p.get_height()), 3) for p in bars.global_bars]
    [0.9, 0.367]
    """
    _require_columns(df, GLOBAL_LOCAL_COLUMNS, "plot_global_vs_local")
    is_total = df["name"].astype(str) == "TOTAL"
    layers = df[~is_total]
    names = [str(n) for n in layers["name"]]
    x = np.arange(len(names), dtype=float)
    width = 0.4
    global_bars = ax.bar(
        x - width / 2,
        layers["sparsity_global"].to_numpy(dtype=float),
        width,
        color=style.GLOBAL_COLOR,
        edgecolor="black",
        linewidth=0.5,
        label="global (one threshold for all)",
    )
    local_bars = ax.bar(
        x + width / 2,
        layers["sparsity_local"].to_numpy(dtype=float),
        width,
        color=style.LOCAL_COLOR,
        edgecolor="black",
        linewidth=0.5,
        hatch="//",
        label="local (same amount of what is left, per tensor)",
    )
    before_bars: list[Any] = []
    if before is not None:
        heights = np.array([float(before.get(n, 0.0)) for n in names])
        for offset in (-width / 2, width / 2):
            before_bars.append(ax.bar(
                x + offset, heights, width, color=style.PRUNED_COLOR, edgecolor="black",
                linewidth=0.5, hatch="..",
                label="pruned before" if not before_bars else "_nolegend_",
            ))
    collapsed: list[Line2D] = []
    for scope, bars in (("global", global_bars), ("local", local_bars)):
        flags = layers[f"collapsed_{scope}"].to_numpy(dtype=bool)
        if flags.any():
            hit = [bar for bar, flag in zip(bars, flags, strict=True) if flag]
            xs = [bar.get_x() + bar.get_width() / 2 for bar in hit]
            ys = [bar.get_height() + 0.03 for bar in hit]
            (marker,) = ax.plot(
                xs, ys, linestyle="none", marker="X", markersize=9, color="black",
                label="collapsed layer (all pruned)" if not collapsed else "_nolegend_",
            )
            collapsed.append(marker)
    totals: dict[str, Line2D] = {}
    if is_total.any():
        total = df[is_total].iloc[-1]
        totals["global"] = ax.axhline(
            float(total["sparsity_global"]), color=style.GLOBAL_COLOR, linestyle="--",
            linewidth=1.2,
            label=f"total global {100 * float(total['sparsity_global']):.1f}%",
        )
        totals["local"] = ax.axhline(
            float(total["sparsity_local"]), color=style.LOCAL_COLOR, linestyle=":",
            linewidth=1.6,
            label=f"total local {100 * float(total['sparsity_local']):.1f}%",
        )
    ax.set_xticks(x, names, rotation=40, ha="right", fontsize="small")
    ax.set_ylim(0.0, 1.12)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_ylabel("sparsity (share of weights pruned)")
    if title is None:
        title = "Global vs local pruning: sparsity per tensor"
        if amount is not None:
            title += f"\namount={amount:g}"
        if before is not None:
            title += (" · " if amount is not None else "\n") + "preview of the next step"
    ax.set_title(title, fontsize="medium")
    # Outside the axes, on the right: bars reach 100% and must not hide under the legend.
    handles = [global_bars, local_bars, *before_bars[:1], *totals.values(), *collapsed[:1]]
    legend = ax.legend(
        handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
        frameon=False,
    )
    return GlobalLocalPlot(global_bars, local_bars, totals, collapsed, legend, names,
                           before_bars)


@dataclass(repr=False)
class SensitivityPlot:
    """What :func:`plot_sensitivity` drew.

    Attributes
    ----------
    lines : dict
        ``{(target, scope): Line2D}``; ``get_xdata()`` / ``get_ydata()`` are sorted by x.
    baseline : Line2D or None
    legend : Legend
    """

    lines: dict[tuple[str, str], Line2D]
    baseline: Line2D | None
    legend: Legend

    def __repr__(self) -> str:
        keys = ", ".join(f"{t}/{s}" for t, s in self.lines)
        return f"SensitivityPlot({len(self.lines)} curves: {keys})"


def plot_sensitivity(
    ax: Axes,
    df: pd.DataFrame,
    *,
    x: Literal["sparsity", "amount"] = "sparsity",
    score_label: str = "score",
    baseline: float | None = None,
    title: str | None = None,
) -> SensitivityPlot:
    """Score-vs-sparsity curves, one per (target, scope), from a sensitivity table.

    Parameters
    ----------
    ax : Axes
    df : pandas.DataFrame
        Long table with columns ``target, scope, amount, sparsity, score``; ``scope`` is
        ``"local"`` (solid line) or ``"global"`` (dashed line).
    x : {"sparsity", "amount"}
        Column on the horizontal axis.
    score_label : str
        What the score is (``"accuracy"``, ``"loss"``).
    baseline : float, optional
        Score of the unpruned model, drawn as a grey horizontal line.
    title : str, optional

    Returns
    -------
    SensitivityPlot

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"target": ["fc1.weight"] * 3, "scope": ["local"] * 3,
    ...                    "amount": [0.5, 0.0, 0.9], "sparsity": [0.5, 0.0, 0.9],
    ...                    "score": [0.95, 0.97, 0.4]})
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure()
    >>> s = plot_sensitivity(ax, df, score_label="accuracy")
    >>> s.lines["fc1.weight", "local"].get_ydata().tolist()
    [0.97, 0.95, 0.4]
    """
    _require_columns(df, SENSITIVITY_COLUMNS, "plot_sensitivity")
    check_choice(x, ("sparsity", "amount"), "plot_sensitivity: x")
    bad_scopes = sorted(set(map(str, df["scope"])) - {"local", "global"})
    if bad_scopes:
        raise ValueError(
            f"plot_sensitivity: scope values must be 'local' or 'global'; got {bad_scopes}"
        )
    targets = list(dict.fromkeys(str(t) for t in df["target"]))
    lines: dict[tuple[str, str], Line2D] = {}
    for k, target in enumerate(targets):
        marker = style.MARKERS[k % len(style.MARKERS)]
        for scope, linestyle in (("local", "-"), ("global", "--")):
            # the scope's colour (as in the global vs local bars); the tensor: its marker
            colour = style.GLOBAL_COLOR if scope == "global" or target == "global" \
                else style.LOCAL_COLOR
            rows = df[(df["target"].astype(str) == target) & (df["scope"] == scope)]
            if rows.empty:
                continue
            rows = rows.sort_values(x, kind="stable")
            label = target if target == "global" else f"{target} ({scope})"
            (line,) = ax.plot(
                rows[x].to_numpy(dtype=float),
                rows["score"].to_numpy(dtype=float),
                color=colour,
                linestyle=linestyle,
                marker=marker,
                markersize=5,
                label=label,
            )
            lines[target, scope] = line
    # Scores that are shares (all within 0..1, as an accuracy) read in %, as everywhere else
    scores = [float(v) for v in df["score"]] + ([] if baseline is None else [float(baseline)])
    shares = bool(scores) and all(0.0 <= v <= 1.0 for v in scores)
    if shares:
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    baseline_line = None
    if baseline is not None:
        said = f"{100 * baseline:.1f}%" if shares else f"{baseline:g}"
        baseline_line = ax.axhline(
            baseline, color="0.45", linewidth=1.0, linestyle="-.", label=f"unpruned {said}"
        )
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_xlabel("sparsity (share of weights pruned)" if x == "sparsity" else "amount")
    ax.set_ylabel(score_label)
    ax.grid(True, alpha=0.3)
    ax.set_title(
        title if title is not None else f"Sensitivity: {score_label} vs {x}", fontsize="medium"
    )
    legend = ax.legend(fontsize="small", title="target (scope)", title_fontsize="small")
    return SensitivityPlot(lines, baseline_line, legend)
