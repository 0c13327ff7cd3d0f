"""Group boundaries of N:M and block patterns over a full-resolution mask."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import torch

from prune_explorer import prune
from prune_explorer.viz import make_figure, plot_mask
from prune_explorer.viz.patterns import pattern_bounds


def test_bounds_follow_the_matrix_view():
    assert pattern_bounds((4, 8), "semi_structured", {"pattern": "2:4", "dim": 1}) == ([], [4])
    assert pattern_bounds((8, 3), "semi_structured", {"pattern": "1:2", "dim": 0}) == (
        [2, 4, 6], [])
    assert pattern_bounds((4, 6, 3, 3), "block_structured", {"block": (2, 3)}) == ([2], [27])
    # a block that cuts the kernel: no column lines (the bands would not be blocks)
    assert pattern_bounds((4, 6, 3, 3), "block_structured", {"block": (2, 3, 1)}) == ([2], [])
    assert pattern_bounds((4, 8), "l1_unstructured", {"amount": 0.5}) == ([], [])


def test_plot_mask_draws_the_group_lines_only_at_full_resolution():
    t = torch.randn(8, 16)
    mask = prune.SemiStructured("2:4").compute_mask(t, torch.ones_like(t))
    settings = {"pattern": "2:4", "dim": -1}
    _, ax = make_figure()
    plot_mask(ax, mask, method="semi_structured", settings=settings, max_cells=64)
    xs = sorted(line.get_xdata()[0] for line in ax.lines)
    assert xs == [3.5, 7.5, 11.5]
    _, ax = make_figure()
    plot_mask(ax, mask, method="semi_structured", settings=settings, max_cells=4)  # pooled
    assert len(ax.lines) == 0
