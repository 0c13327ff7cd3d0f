"""Pictures of pruning: masks, weights, histories and session tables.

matplotlib's object-oriented API only -- every function draws into an ``Axes`` or ``Figure``
you pass in and returns what it drew; nothing here calls pyplot or ``plt.show()``.

Views and pooling
    :func:`tensor_view` (any rank -> labelled 2-D :class:`TensorView`), :func:`kernel_grid_view`,
    :func:`channel_view`, :func:`pool_fraction` (exact kept fraction per display cell).
Masks (``masks``), changes (``diffs``) and charts of session reports (``charts``)
    :func:`plot_mask`; :func:`plot_diff`, :func:`plot_history`; :func:`plot_global_vs_local`,
    :func:`plot_sensitivity`. Schedule runs (``curves``): :func:`plot_accuracy_vs_sparsity`.
    Figures (``figures``): :func:`make_figure` and :func:`render_png`. Notebook figures
    (``notebook``): :func:`notebook_figsize` fits a notebook's output area at 1024x768,
    :func:`check_readable` measures a figure's text as shown there (>= 10 px).
Live preview
    :class:`MaskPreview`: update with a new mask, get PNG bytes, in tens of milliseconds.

Examples
--------
>>> import torch
>>> from prune_explorer import viz
>>> fig, ax = viz.make_figure(figsize=(4, 3))
>>> mask = torch.zeros(8192, 1024, dtype=torch.bool)
>>> mask[:, :768] = True
>>> drawn = viz.plot_mask(ax, mask, name="emb.weight", max_cells=256)
>>> drawn.pooled
PooledView(kept fraction, source (8192, 1024) -> cells (256, 256), blocks 32 x 4, sparsity 25.0%)
"""

from prune_explorer.viz.charts import (
    GlobalLocalPlot,
    SensitivityPlot,
    plot_global_vs_local,
    plot_sensitivity,
)
from prune_explorer.viz.curves import CurvePlot, plot_accuracy_vs_sparsity
from prune_explorer.viz.diffs import DiffPlot, HistoryPlot, plot_diff, plot_history
from prune_explorer.viz.figures import auto_cells, make_figure, render_png
from prune_explorer.viz.masks import MaskPlot, plot_mask
from prune_explorer.viz.notebook import check_readable, notebook_figsize
from prune_explorer.viz.png import encode_png
from prune_explorer.viz.pooling import (
    PooledView,
    block_edges,
    block_sums,
    pool_counts,
    pool_fraction,
    pool_magnitude,
    pool_view,
)
from prune_explorer.viz.preview import MaskPreview
from prune_explorer.viz.views import (
    TensorView,
    channel_view,
    kernel_grid_view,
    matrix_view,
    shape_only,
    slice_states,
    tensor_view,
)

__all__ = [
    "CurvePlot",
    "DiffPlot",
    "GlobalLocalPlot",
    "HistoryPlot",
    "MaskPlot",
    "MaskPreview",
    "PooledView",
    "SensitivityPlot",
    "TensorView",
    "auto_cells",
    "block_edges",
    "block_sums",
    "channel_view",
    "check_readable",
    "encode_png",
    "kernel_grid_view",
    "make_figure",
    "matrix_view",
    "notebook_figsize",
    "plot_accuracy_vs_sparsity",
    "plot_diff",
    "plot_global_vs_local",
    "plot_history",
    "plot_mask",
    "plot_sensitivity",
    "pool_counts",
    "pool_fraction",
    "pool_magnitude",
    "pool_view",
    "render_png",
    "shape_only",
    "slice_states",
    "tensor_view",
]
