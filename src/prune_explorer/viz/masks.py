"""Mask pictures: one mask (or the weights under it) as a heatmap of the exact kept fraction.

Every ``plot_*`` function of viz draws into an ``Axes`` (or a ``Figure``) that you pass in and
returns a small record of the artists it created plus the data behind them; nothing here touches
pyplot's global state. What changed between two masks is drawn by :mod:`.diffs`.

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colorbar import Colorbar
from matplotlib.colors import LogNorm
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
from prune_explorer.viz.patterns import draw_pattern_lines
from prune_explorer.viz.pooling import (
    MaxCells,
    PooledView,
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



#: A log colour scale spans at most this ratio below its largest value.
LOG_RANGE = 1e-6


def _magnitude_cells(ax: Axes, pooled: PooledView, view: TensorView,
                     log: bool) -> tuple[AxesImage, int]:
    # Mean values of the kept entries per cell, light to dark blue; all-pruned cells lemon
    # yellow. On a log scale, cells of exact zeros are light grey; returns how many there are.
    values = pooled.values
    finite = values[np.isfinite(values)]
    if not log:
        vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        image = draw_cells(ax, values, pooled, view, cmap=style.magnitude_cmap(), vmin=0.0,
                           vmax=vmax)
        return image, 0
    positive = finite[finite > 0]
    vmax = float(positive.max()) if positive.size else 1.0
    vmin = max(float(positive.min()), vmax * LOG_RANGE) if positive.size else vmax * 0.1
    if vmin >= vmax:
        vmin = vmax * 0.1
    zeros = int(np.count_nonzero(values == 0))
    with np.errstate(invalid="ignore"):
        shown = np.where((values > 0) & (values < vmin), vmin, values)
        shown = np.where(values == 0, vmin * 0.5, shown)  # under the scale: the grey
    cmap = style.magnitude_cmap().with_extremes(under=style.ZERO_COLOR)
    image = draw_cells(ax, shown, pooled, view, cmap=cmap,
                       norm=LogNorm(vmin=vmin, vmax=vmax, clip=False))
    return image, zeros


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
    value_label: str = "|w|",
    log: bool = False,
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
        ``"mask"``: kept fraction per cell, dark blue = kept, lemon yellow = pruned.
        ``"magnitude"``: mean ``|w|`` of the kept weights per cell (light to dark blue); cells
        with nothing kept are lemon yellow (pruned, as in the mask pictures).
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
    value_label : str
        ``mode="magnitude"``: what ``weight`` holds, for the colour bar (``"|w|"``; a score,
        an input norm: any non-negative array of the mask's shape).
    log : bool
        ``mode="magnitude"``: a log colour scale (values spanning orders of magnitude); cells
        whose kept values are all exactly 0 are light grey (:data:`~.style.ZERO_COLOR`),
        values below a millionth of the largest are drawn at that floor.

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
        image, zeros = _magnitude_cells(ax, pooled, view, log)
        bar = legend = None
        if key:
            bar = ax.figure.colorbar(image, ax=ax)
            kept = "kept weights" if value_label == "|w|" else "kept entries"
            if pooled.full_resolution:
                bar.set_label(f"{value_label} of {kept}{' (log)' if log else ''}")
            else:
                bar.set_label(f"mean {value_label} of {kept} per {pooled.block_text()} block"
                              f"{' (log)' if log else ''}")
            what = "pruned" if pooled.full_resolution else "all pruned in cell"
            handles = [Patch(facecolor=style.MAGNITUDE_PRUNED_COLOR, edgecolor="0.3",
                             label=what)]
            if zeros:
                handles.append(Patch(facecolor=style.ZERO_COLOR, edgecolor="0.3",
                                     label="exactly 0"))
            legend = legend_below(ax, handles, ncol=len(handles))
    label_axes(ax, view)
    text = style.format_title(
        name=name, method=method, settings=settings, sparsity=pooled.sparsity, title=title
    )
    if view.kind == "channels":
        text += "\n" + _channel_summary(view)
    elif view.kind in ("matrix", "flat") and isinstance(settings, Mapping):
        draw_pattern_lines(ax, view.source_shape, method, settings,
                           full_resolution=pooled.full_resolution)
    ax.set_title(text, fontsize="medium")
    return MaskPlot(image, bar, legend, view, pooled, mode)
