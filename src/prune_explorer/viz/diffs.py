"""What pruning changed: a before/after diff of two masks and the history strip of a tensor.

Units pruned by the step (and any revived) are highlighted over the mask after it, on the same
display cells as :func:`.masks.plot_mask` would use.

Examples
--------
>>> import torch
>>> from prune_explorer.viz import make_figure, plot_diff
>>> before = torch.ones(8, 8)
>>> after = before.clone()
>>> after[:2] = 0
>>> fig, ax = make_figure(figsize=(4, 3))
>>> plot_diff(ax, before, after, name="fc.weight").newly_pruned_total
16
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.patches import Patch

from prune_explorer.viz import style
from prune_explorer.viz.figures import (
    auto_cells,
    check_choice,
    draw_cells,
    label_axes,
    legend_below,
)
from prune_explorer.viz.pooling import (
    MaxCells,
    PooledView,
    block_sums,
    pool_view,
)
from prune_explorer.viz.views import (
    LAYOUTS,
    Layout,
    TensorView,
    as_array,
    tensor_view,
)

# --------------------------------------------------------------------------------------------
# plot_diff


@dataclass(repr=False)
class DiffPlot:
    """What :func:`plot_diff` drew.

    Attributes
    ----------
    base : AxesImage
        Kept fraction after the step (same colours as :func:`plot_mask`).
    newly_pruned : AxesImage
        Overlay; ``get_array()`` is the fraction of each cell newly pruned, masked where 0.
    revived : AxesImage or None
        Overlay of units pruned before and kept after (only when there are any).
    legend : Legend or None
    after : PooledView
        Pooled kept fraction after the step.
    new : PooledView
        ``kept`` counts newly pruned units per cell; ``values`` is their fraction.
    back : PooledView
        Same for revived units.
    """

    base: AxesImage
    newly_pruned: AxesImage
    revived: AxesImage | None
    legend: Legend | None
    after: PooledView
    new: PooledView
    back: PooledView
    view: TensorView = field(repr=False)

    @property
    def newly_pruned_total(self) -> int:
        """Units kept before and pruned after."""
        return self.new.kept_total

    @property
    def revived_total(self) -> int:
        """Units pruned before and kept after."""
        return self.back.kept_total

    @property
    def artists(self) -> list[Artist]:
        """All artists created."""
        found: list[Artist | None] = [self.base, self.newly_pruned, self.revived, self.legend]
        return [a for a in found if a is not None]

    def __repr__(self) -> str:
        return (
            f"DiffPlot({self.view.kind} view {self.view.shape}, cells {self.after.shape}, "
            f"newly pruned {self.newly_pruned_total}, revived {self.revived_total}, "
            f"sparsity after {100.0 * self.after.sparsity:.1f}%)"
        )


def _fraction_like(counts: np.ndarray, like: PooledView, statistic: str) -> PooledView:
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(like.area > 0, counts / np.maximum(like.area, 1), np.nan)
    return PooledView(values, counts, like.area, like.row_edges, like.col_edges, statistic)


def _pool_counts(view: TensorView, like: PooledView) -> PooledView:
    # Pool an indicator view (newly pruned / revived) on the same blocks as ``like``.
    if view.kind == "channels":
        return pool_view(view, (1, like.shape[1]))
    data = view.data
    indicator = (data != 0) & ~np.isnan(data) if data.dtype.kind == "f" else data
    counts = block_sums(indicator, like.row_edges, like.col_edges)
    return _fraction_like(counts, like, "")


#: What the classes of a diff picture are called: pruned in both, pruned only after, kept only
#: after (``plot_diff(labels=...)`` names them otherwise, e.g. for two criteria's masks).
DIFF_LABELS = ("pruned before", "newly pruned", "revived")


def diff_legend_handles(new: int | None = None, revived: int | None = None,
                        labels: tuple[str, str, str] = DIFF_LABELS) -> list[Patch]:
    """Legend entries for diff pictures (counts are added to the labels when given).

    Examples
    --------
    >>> [h.get_label() for h in diff_legend_handles(new=3)]
    ['kept', 'pruned before', 'newly pruned (3)']
    """
    pruned, newly, back = labels
    handles = [
        Patch(facecolor=style.KEPT_COLOR, edgecolor="0.3", label="kept"),
        Patch(facecolor=style.PRUNED_COLOR, edgecolor="0.3", label=pruned),
        Patch(
            facecolor=style.NEW_PRUNED_COLOR,
            edgecolor="0.3",
            label=newly + (f" ({new})" if new is not None else ""),
        ),
    ]
    if revived:
        handles.append(
            Patch(facecolor=style.REVIVED_COLOR, edgecolor="0.3", label=f"{back} ({revived})")
        )
    return handles



def _tint(ax: Axes, pooled: PooledView, extent: Any, colour: str, name: str) -> AxesImage:
    """Tint the cells holding any of ``pooled``'s units over the picture (opacity = fraction)."""
    values = np.ma.masked_where(~(pooled.kept > 0), pooled.values)
    return ax.imshow(values, extent=extent, interpolation="nearest", aspect=ax.get_aspect(),
                     cmap=style.overlay_cmap(colour, name), vmin=0.0, vmax=1.0)


def plot_diff(
    ax: Axes,
    before: Any,
    after: Any,
    *,
    layout: Layout = "auto",
    dim: int = 0,
    name: str | None = None,
    method: str | None = None,
    settings: Mapping[str, Any] | str | None = None,
    title: str | None = None,
    module_type: str | None = None,
    max_cells: MaxCells | None = None,
    legend: bool = True,
    labels: tuple[str, str, str] = DIFF_LABELS,
) -> DiffPlot:
    """Overlay two masks so that the units a step newly pruned stand out.

    The base picture is the mask ``after`` (dark blue kept, lemon yellow pruned); on top, every
    cell that holds a newly pruned unit (kept in ``before``, pruned in ``after``) is tinted
    vermillion, more opaque the larger the newly pruned fraction. Units revived by the step
    (only possible after an undo or a custom mask) get a sky-blue tint.

    Parameters
    ----------
    ax : Axes
    before, after : torch.Tensor or array-like
        Masks of the same shape; nonzero = kept.
    layout, dim, name, method, settings, title, module_type, max_cells
        As in :func:`plot_mask`.
    legend : bool
        Add a legend under the axes.
    labels : (str, str, str)
        Names of the pale yellow, vermillion and sky-blue classes in the legend and title
        (default :data:`DIFF_LABELS`); two criteria's masks ``before=A``, ``after=B`` read
        ``("pruned by B", "only A keeps", "only B keeps")``.

    Returns
    -------
    DiffPlot

    Examples
    --------
    >>> import torch
    >>> before = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    >>> after = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure()
    >>> d = plot_diff(ax, before, after)
    >>> d.newly_pruned_total, d.newly_pruned.get_array().filled(0).tolist()
    (2, [[0.0, 1.0, 0.0, 1.0]])
    """
    check_choice(layout, LAYOUTS, "plot_diff: layout")
    b = as_array(before)
    a = as_array(after)
    if b.shape != a.shape:
        raise ValueError(
            f"plot_diff: before and after must have the same shape; got {b.shape} and {a.shape}"
        )
    kept_before = b != 0
    kept_after = a != 0
    newly = kept_before & ~kept_after
    back = ~kept_before & kept_after
    after_view = tensor_view(a, layout=layout, dim=dim, module_type=module_type)
    cells = max_cells if max_cells is not None else auto_cells(ax)
    pooled_after = pool_view(after_view, cells)
    pooled_new = _pool_counts(tensor_view(newly, layout=layout, dim=dim), pooled_after)
    pooled_back = _pool_counts(tensor_view(back, layout=layout, dim=dim), pooled_after)

    base = draw_cells(
        ax, pooled_after.values, pooled_after, after_view, cmap=style.mask_cmap(), vmin=0.0,
        vmax=1.0,
    )
    extent = base.get_extent()
    new_image = _tint(ax, pooled_new, extent, style.NEW_PRUNED_COLOR, "newly_pruned")
    back_image = None
    if pooled_back.kept_total:
        back_image = _tint(ax, pooled_back, extent, style.REVIVED_COLOR, "revived")
    label_axes(ax, after_view)
    new_total = pooled_new.kept_total
    area_total = pooled_after.area_total
    share = 100.0 * new_total / area_total if area_total else 0.0
    text = style.format_title(
        name=name, method=method, settings=settings, sparsity=pooled_after.sparsity,
        title=title,
    )
    text += f"\n{labels[1]} {new_total} ({share:.1f}%)"
    if pooled_back.kept_total:
        text += f", {labels[2]} {pooled_back.kept_total}"
    ax.set_title(text, fontsize="medium")
    drawn_legend = None
    if legend:
        note = None if pooled_after.full_resolution else (
            f"cells pool {pooled_after.block_text()} units; tint strength = fraction"
        )
        drawn_legend = legend_below(
            ax,
            diff_legend_handles(new_total, pooled_back.kept_total, labels),
            ncol=2,
            title=note,
            title_fontsize="small",
        )
    return DiffPlot(
        base, new_image, back_image, drawn_legend, pooled_after, pooled_new, pooled_back,
        after_view,
    )


# --------------------------------------------------------------------------------------------
# plot_history


@dataclass(repr=False)
class HistoryPlot:
    """What :func:`plot_history` drew: one :class:`DiffPlot` per step and a shared legend."""

    panels: list[DiffPlot]
    legend: Legend | None
    labels: list[str]

    @property
    def artists(self) -> list[Artist]:
        """All artists created."""
        out = [a for panel in self.panels for a in panel.artists]
        return out + ([self.legend] if self.legend is not None else [])

    def __repr__(self) -> str:
        steps = ", ".join(
            f"{label}: -{p.newly_pruned_total}"
            for label, p in zip(self.labels, self.panels, strict=True)
        )
        return f"HistoryPlot({len(self.panels)} steps; newly pruned per step {steps})"


def plot_history(
    target: Figure | Sequence[Axes],
    masks: Sequence[Any],
    labels: Sequence[str] | None = None,
    *,
    initial: Any = None,
    name: str | None = None,
    layout: Layout = "auto",
    dim: int = 0,
    module_type: str | None = None,
    max_cells: MaxCells | None = None,
) -> HistoryPlot:
    """A strip of the mask after each pruning step, units pruned by that step highlighted.

    Panel ``k`` is :func:`plot_diff` of ``masks[k-1]`` -> ``masks[k]`` (panel 0 compares with
    ``initial``, all kept by default), so the strip reads as "what each step of a
    ``PruningContainer`` removed".

    Parameters
    ----------
    target : Figure or sequence of Axes
        A figure (one row of axes is added to it) or exactly ``len(masks)`` axes.
    masks : sequence of tensors
        The mask after each step, all of one shape.
    labels : sequence of str, optional
        Panel titles (default ``"step 1"``, ``"step 2"``, ...), e.g. method names.
    initial : tensor, optional
        Mask before the first step; all ones by default.
    name : str, optional
        Tensor name, put in the figure title.
    layout, dim, module_type, max_cells
        As in :func:`plot_mask`.

    Returns
    -------
    HistoryPlot

    Examples
    --------
    >>> import torch
    >>> m1 = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    >>> m2 = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    >>> from prune_explorer.viz import make_figure
    >>> fig, _ = make_figure(figsize=(6, 2))
    >>> fig.clear()
    >>> h = plot_history(fig, [m1, m2], ["l1_unstructured", "random_unstructured"])
    >>> [p.newly_pruned_total for p in h.panels]
    [1, 1]
    """
    if len(masks) == 0:
        raise ValueError("plot_history: masks must hold at least one mask; got 0")
    if labels is None:
        labels = [f"step {k + 1}" for k in range(len(masks))]
    if len(labels) != len(masks):
        raise ValueError(
            f"plot_history: labels must give one label per mask ({len(masks)}); "
            f"got {len(labels)}"
        )
    if isinstance(target, Figure):
        fig = target
        axes = list(fig.subplots(1, len(masks), squeeze=False)[0])
    else:
        axes = list(target)
        if len(axes) != len(masks) or not all(isinstance(a, Axes) for a in axes):
            raise ValueError(
                f"plot_history: target must be a Figure or {len(masks)} Axes (one per mask); "
                f"got {len(axes)} items"
            )
        fig = axes[0].figure
    previous = initial if initial is not None else np.ones(as_array(masks[0]).shape, dtype=bool)
    panels = []
    for ax, mask, label in zip(axes, masks, labels, strict=True):
        panels.append(
            plot_diff(
                ax,
                previous,
                mask,
                layout=layout,
                dim=dim,
                title=label,
                module_type=module_type,
                max_cells=max_cells,
                legend=False,
            )
        )
        previous = mask
    for ax in axes[1:]:
        ax.set_ylabel("")
    engine = fig.get_layout_engine()
    constrained = engine is not None and type(engine).__name__ == "ConstrainedLayoutEngine"
    legend = fig.legend(
        handles=diff_legend_handles(revived=sum(p.revived_total for p in panels)),
        loc="outside lower center" if constrained else "lower center",
        ncol=4,
        fontsize="small",
        frameon=False,
    )
    if name:
        fig.suptitle(f"{name}: mask after each step")
    return HistoryPlot(panels, legend, list(labels))

