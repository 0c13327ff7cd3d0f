"""Mask pictures: one mask, a before/after diff, and the history strip of a tensor.

Every ``plot_*`` function draws into an ``Axes`` (or a ``Figure``) that you pass in and returns a
small record of the artists it created plus the data behind them; nothing here touches pyplot's
global state.

Examples
--------
>>> import torch
>>> from prune_explorer.viz import make_figure, plot_mask, render_png
>>> mask = (torch.rand(64, 32) > 0.3).float()
>>> fig, ax = make_figure(figsize=(4, 3))
>>> drawn = plot_mask(ax, mask, name="fc.weight", method="random_unstructured",
...                   settings={"amount": 0.3})
>>> drawn.image.get_array().shape
(64, 32)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colorbar import Colorbar
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.patches import Patch

from prune_explorer.viz import style
from prune_explorer.viz.figures import (
    auto_cells,
    check_choice,
    draw_cells,
    legend_below,
)
from prune_explorer.viz.pooling import (
    MaxCells,
    PooledView,
    block_sums,
    pool_magnitude,
    pool_view,
)
from prune_explorer.viz.views import (
    LAYOUTS,
    Layout,
    TensorView,
    as_array,
    slice_states,
    tensor_view,
)

Mode = Literal["mask", "magnitude"]
MODES: tuple[str, ...] = ("mask", "magnitude")


def _label_axes(ax: Axes, view: TensorView) -> None:
    ax.set_xlabel(view.col_label)
    ax.set_ylabel(view.row_label)


def _mask_key(
    ax: Axes, image: AxesImage, view: TensorView, pooled: PooledView
) -> tuple[Colorbar | None, Legend | None]:
    # Colour bar for fractions, a two-entry legend for a plain 0/1 mask.
    fig = ax.figure
    if view.kind == "channels":
        bar = fig.colorbar(image, ax=ax)
        bar.set_ticks([0.0, 0.5, 1.0], labels=["0 slice gone", "0.5", "1 intact"])
        per = "" if pooled.full_resolution else f" ({pooled.block_text()} slices per cell)"
        bar.set_label(f"kept fraction of each slice{per}")
        return bar, None
    if pooled.full_resolution:
        handles = [
            Patch(facecolor=style.KEPT_COLOR, edgecolor="0.3", label="kept"),
            Patch(facecolor=style.PRUNED_COLOR, edgecolor="0.3", label="pruned"),
        ]
        return None, legend_below(ax, handles, ncol=2)
    bar = fig.colorbar(image, ax=ax)
    bar.set_ticks([0.0, 0.5, 1.0], labels=["0 all pruned", "0.5", "1 all kept"])
    bar.set_label(f"kept fraction per {pooled.block_text()} block")
    return bar, None


def _channel_summary(view: TensorView) -> str:
    states = slice_states(view)
    n = states.size
    pruned = int(np.count_nonzero(states == 0))
    partial = int(np.count_nonzero(states == 1))
    return f"{view.col_label}: {pruned} of {n} fully pruned, {partial} partial"



# --------------------------------------------------------------------------------------------
# plot_mask


@dataclass(repr=False)
class MaskPlot:
    """What :func:`plot_mask` drew, and the data behind it.

    Attributes
    ----------
    image : AxesImage
        The cells; ``image.get_array()`` equals ``pooled.values``.
    colorbar : Colorbar or None
        For kept fractions (pooled or channel views) and magnitudes.
    legend : Legend or None
        "kept" / "pruned" for a mask at full resolution; "pruned" in magnitude mode.
    view : TensorView
        The 2-D view of the mask.
    pooled : PooledView
        Exact per-cell kept fraction (or mean magnitude) and counts.
    """

    image: AxesImage
    colorbar: Colorbar | None
    legend: Legend | None
    view: TensorView
    pooled: PooledView
    mode: str = "mask"

    @property
    def artists(self) -> list[Artist]:
        """All artists created, for removal or inspection."""
        extra = [self.colorbar.ax] if self.colorbar is not None else []
        return [self.image, *extra, *([self.legend] if self.legend is not None else [])]

    def __repr__(self) -> str:
        return f"MaskPlot(mode={self.mode!r}, {self.view!r}, {self.pooled!r})"


def plot_mask(
    ax: Axes,
    mask: Any,
    *,
    weight: Any = None,
    mode: Mode = "mask",
    layout: Layout = "auto",
    dim: int = 0,
    name: str | None = None,
    method: str | None = None,
    settings: Mapping[str, Any] | str | None = None,
    title: str | None = None,
    module_type: str | None = None,
    max_cells: MaxCells | None = None,
    key: bool = True,
) -> MaskPlot:
    """Draw a mask (kept / pruned) or a weight's magnitude with its pruned cells marked.

    Parameters
    ----------
    ax : Axes
        Where to draw.
    mask : torch.Tensor or array-like, any rank
        Nonzero = kept.
    weight : torch.Tensor or array-like, optional
        Same shape as ``mask``; needed for ``mode="magnitude"``.
    mode : {"mask", "magnitude"}
        ``"mask"``: kept fraction per cell, dark blue = kept, pale yellow = pruned.
        ``"magnitude"``: mean ``|w|`` of the kept weights per cell (light to dark blue); cells
        with nothing kept are orange.
    layout : {"auto", "kernels", "channels"}
        The 2-D view (see :func:`~prune_explorer.viz.views.tensor_view`); ``"channels"`` shows
        the kept fraction of each slice along ``dim`` (0 = the whole channel is pruned).
    dim : int
        Pruning dimension for ``layout="channels"``.
    name, method, settings, title : optional
        Stated in the title together with the sparsity.
    module_type : str, optional
        Owning module's class name, to name the axes (``"Linear"``, ``"Conv2d"``).
    max_cells : int or (int, int), optional
        Upper bound on cells per side; by default one cell per pixel of the axes (at most 512).
        Larger tensors are pooled, each cell showing the exact kept fraction of its block.
    key : bool
        Add the colour key: a colour bar for fractions and magnitudes, a kept / pruned legend
        for a mask shown at full resolution.

    Returns
    -------
    MaskPlot

    Examples
    --------
    >>> import torch
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure()
    >>> m = torch.ones(4, 3, 3, 3)
    >>> m[1] = 0
    >>> drawn = plot_mask(ax, m, layout="channels", dim=0, module_type="Conv2d")
    >>> drawn.image.get_array().tolist()
    [[1.0, 0.0, 1.0, 1.0]]
    >>> print(ax.get_title())
    sparsity 25.0%
    out ch (dim 0): 1 of 4 fully pruned, 0 partial
    """
    check_choice(mode, MODES, "plot_mask: mode")
    check_choice(layout, LAYOUTS, "plot_mask: layout")
    view = tensor_view(mask, layout=layout, dim=dim, module_type=module_type)
    cells = max_cells if max_cells is not None else auto_cells(ax)
    if mode == "mask":
        pooled = pool_view(view, cells)
        image = draw_cells(
            ax, pooled.values, pooled, view, cmap=style.mask_cmap(), vmin=0.0, vmax=1.0
        )
        bar, legend = _mask_key(ax, image, view, pooled) if key else (None, None)
    else:
        if weight is None:
            raise ValueError("plot_mask: mode='magnitude' needs weight=; got weight=None")
        if layout == "channels":
            raise ValueError(
                "plot_mask: mode='magnitude' needs layout 'auto' or 'kernels'; got 'channels'"
            )
        w = as_array(weight)
        if tuple(w.shape) != view.source_shape:
            raise ValueError(
                "plot_mask: weight must have the same shape as mask "
                f"{view.source_shape}; got {tuple(w.shape)}"
            )
        weight_view = tensor_view(w, layout=layout, module_type=module_type)
        pooled = pool_magnitude(weight_view.data, view.data, cells)
        finite = pooled.values[np.isfinite(pooled.values)]
        vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        image = draw_cells(
            ax, pooled.values, pooled, view, cmap=style.magnitude_cmap(), vmin=0.0, vmax=vmax
        )
        bar = legend = None
        if key:
            bar = ax.figure.colorbar(image, ax=ax)
            if pooled.full_resolution:
                bar.set_label("|w| of kept weights")
            else:
                bar.set_label(f"mean |w| of kept weights per {pooled.block_text()} block")
            what = "pruned" if pooled.full_resolution else "all pruned in cell"
            handle = Patch(facecolor=style.MAGNITUDE_PRUNED_COLOR, edgecolor="0.3", label=what)
            legend = legend_below(ax, [handle])
    _label_axes(ax, view)
    text = format_plot_title(name, method, settings, pooled.sparsity, title)
    if view.kind == "channels":
        text += "\n" + _channel_summary(view)
    ax.set_title(text, fontsize="medium")
    return MaskPlot(image, bar, legend, view, pooled, mode)


def format_plot_title(
    name: str | None,
    method: str | None,
    settings: Mapping[str, Any] | str | None,
    sparsity: float | None,
    title: str | None,
) -> str:
    """Title for a mask picture; see :func:`prune_explorer.viz.style.format_title`.

    Examples
    --------
    >>> format_plot_title("fc.weight", None, None, 0.25, None)
    'fc.weight\\nsparsity 25.0%'
    """
    return style.format_title(
        name=name, method=method, settings=settings, sparsity=sparsity, title=title
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


def diff_legend_handles(new: int | None = None, revived: int | None = None) -> list[Patch]:
    """Legend entries for diff pictures (counts are added to the labels when given).

    Examples
    --------
    >>> [h.get_label() for h in diff_legend_handles(new=3)]
    ['kept', 'pruned before', 'newly pruned (3)']
    """
    handles = [
        Patch(facecolor=style.KEPT_COLOR, edgecolor="0.3", label="kept"),
        Patch(facecolor=style.PRUNED_COLOR, edgecolor="0.3", label="pruned before"),
        Patch(
            facecolor=style.NEW_PRUNED_COLOR,
            edgecolor="0.3",
            label="newly pruned" + (f" ({new})" if new is not None else ""),
        ),
    ]
    if revived:
        handles.append(
            Patch(facecolor=style.REVIVED_COLOR, edgecolor="0.3", label=f"revived ({revived})")
        )
    return handles


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
) -> DiffPlot:
    """Overlay two masks so that the units a step newly pruned stand out.

    The base picture is the mask ``after`` (dark blue kept, pale yellow pruned); on top, every
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
    overlay_extent = base.get_extent()
    new_values = np.ma.masked_where(~(pooled_new.kept > 0), pooled_new.values)
    new_image = ax.imshow(
        new_values,
        extent=overlay_extent,
        interpolation="nearest",
        aspect=ax.get_aspect(),
        cmap=style.overlay_cmap(style.NEW_PRUNED_COLOR, "newly_pruned"),
        vmin=0.0,
        vmax=1.0,
    )
    back_image = None
    if pooled_back.kept_total:
        back_values = np.ma.masked_where(~(pooled_back.kept > 0), pooled_back.values)
        back_image = ax.imshow(
            back_values,
            extent=overlay_extent,
            interpolation="nearest",
            aspect=ax.get_aspect(),
            cmap=style.overlay_cmap(style.REVIVED_COLOR, "revived"),
            vmin=0.0,
            vmax=1.0,
        )
    _label_axes(ax, after_view)
    new_total = pooled_new.kept_total
    area_total = pooled_after.area_total
    share = 100.0 * new_total / area_total if area_total else 0.0
    text = format_plot_title(name, method, settings, pooled_after.sparsity, title)
    text += f"\nnewly pruned {new_total} ({share:.1f}%)"
    if pooled_back.kept_total:
        text += f", revived {pooled_back.kept_total}"
    ax.set_title(text, fontsize="medium")
    drawn_legend = None
    if legend:
        note = None if pooled_after.full_resolution else (
            f"cells pool {pooled_after.block_text()} units; tint strength = fraction"
        )
        drawn_legend = legend_below(
            ax,
            diff_legend_handles(new_total, pooled_back.kept_total),
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

