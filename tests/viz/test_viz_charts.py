"""Global-vs-local bars and sensitivity curves, checked through bar heights and line data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from prune_explorer.viz import make_figure, plot_global_vs_local, plot_sensitivity, style

COMPARE_COLUMNS = [
    "name", "numel", "sparsity_global", "sparsity_local", "pruned_global", "pruned_local",
    "collapsed_global", "collapsed_local",
]


def compare_table(with_total: bool = True) -> pd.DataFrame:
    numel = np.array([216, 4608, 32768, 640])
    pruned_global = np.array([22, 1613, 20316, 640])
    pruned_local = np.round(0.6 * numel).astype(int)
    rows = {
        "name": ["conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight"],
        "numel": numel,
        "sparsity_global": pruned_global / numel,
        "sparsity_local": pruned_local / numel,
        "pruned_global": pruned_global,
        "pruned_local": pruned_local,
        "collapsed_global": [False, False, False, True],
        "collapsed_local": [False, False, False, False],
    }
    df = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    if with_total:
        total = {
            "name": "TOTAL", "numel": numel.sum(),
            "sparsity_global": pruned_global.sum() / numel.sum(),
            "sparsity_local": pruned_local.sum() / numel.sum(),
            "pruned_global": pruned_global.sum(), "pruned_local": pruned_local.sum(),
            "collapsed_global": False, "collapsed_local": False,
        }
        df = pd.concat([df, pd.DataFrame([total])], ignore_index=True)
    return df


def test_global_vs_local_bars_have_the_table_sparsities():
    df = compare_table()
    _fig, ax = make_figure()
    drawn = plot_global_vs_local(ax, df, amount=0.6)
    layers = df[df["name"] != "TOTAL"]
    heights_g = [bar.get_height() for bar in drawn.global_bars]
    heights_l = [bar.get_height() for bar in drawn.local_bars]
    np.testing.assert_allclose(heights_g, layers["sparsity_global"])
    np.testing.assert_allclose(heights_l, layers["sparsity_local"])
    assert [t.get_text() for t in ax.get_xticklabels()] == list(layers["name"])
    assert drawn.names == list(layers["name"])
    # the TOTAL row is not a bar but two reference lines
    assert len(drawn.global_bars) == 4
    total = df[df["name"] == "TOTAL"].iloc[0]
    assert drawn.totals["global"].get_ydata()[0] == pytest.approx(total["sparsity_global"])
    assert drawn.totals["local"].get_ydata()[0] == pytest.approx(total["sparsity_local"])
    assert ax.get_title() == "Global vs local pruning: sparsity per tensor\namount=0.6"


def test_collapsed_layers_are_marked_over_their_bar():
    _fig, ax = make_figure()
    drawn = plot_global_vs_local(ax, compare_table())
    assert len(drawn.collapsed) == 1
    bar = drawn.global_bars[3]
    marker = drawn.collapsed[0]
    assert marker.get_xdata()[0] == pytest.approx(bar.get_x() + bar.get_width() / 2)
    assert marker.get_ydata()[0] > bar.get_height()
    labels = [t.get_text() for t in drawn.legend.get_texts()]
    assert labels[0].startswith("global")
    assert labels[1].startswith("local")
    assert "collapsed layer (all pruned)" in labels
    assert f"total global {100 * 22591 / 38232:.1f}%" in labels


def test_global_and_local_bars_are_told_apart_by_colour_and_hatch():
    _fig, ax = make_figure()
    drawn = plot_global_vs_local(ax, compare_table())
    g, loc = drawn.global_bars[0], drawn.local_bars[0]
    assert to_hex(g.get_facecolor()) != to_hex(loc.get_facecolor())
    assert g.get_hatch() != loc.get_hatch()


def test_global_vs_local_without_total_row():
    _fig, ax = make_figure()
    drawn = plot_global_vs_local(ax, compare_table(with_total=False))
    assert drawn.totals == {}
    assert len(drawn.local_bars) == 4


def test_global_vs_local_names_missing_columns():
    _fig, ax = make_figure()
    df = compare_table().drop(columns=["sparsity_local"])
    with pytest.raises(ValueError, match=r"plot_global_vs_local: df must have columns .* "
                                         r"missing \['sparsity_local'\]"):
        plot_global_vs_local(ax, df)


def sensitivity_table() -> pd.DataFrame:
    rows = []
    amounts = [0.5, 0.0, 0.9, 0.2]  # deliberately unsorted
    for target, k in [("conv1.weight", 3), ("fc1.weight", 8)]:
        for a in amounts:
            rows.append((target, "local", a, a + 0.001, 0.97 - 0.9 * a**k))
    for a in amounts:
        rows.append(("global", "global", a, a, 0.97 - 0.9 * a**5))
    for a in amounts:
        rows.append(("fc1.weight", "global", a, 0.8 * a, 0.97 - 0.5 * a**5))
    return pd.DataFrame(rows, columns=["target", "scope", "amount", "sparsity", "score"])


def test_sensitivity_draws_one_sorted_line_per_target_and_scope():
    df = sensitivity_table()
    _fig, ax = make_figure()
    drawn = plot_sensitivity(ax, df, score_label="accuracy", baseline=0.97)
    assert set(drawn.lines) == {
        ("conv1.weight", "local"), ("fc1.weight", "local"), ("global", "global"),
        ("fc1.weight", "global"),
    }
    for (target, scope), line in drawn.lines.items():
        rows = df[(df["target"] == target) & (df["scope"] == scope)].sort_values("sparsity")
        np.testing.assert_allclose(line.get_xdata(), rows["sparsity"])
        np.testing.assert_allclose(line.get_ydata(), rows["score"])
        assert line.get_linestyle() == ("-" if scope == "local" else "--")
    # the scope has its colour (the global vs local bars'), a target keeps its marker
    local_fc1, global_fc1 = drawn.lines["fc1.weight", "local"], drawn.lines["fc1.weight", "global"]
    assert local_fc1.get_color() == style.LOCAL_COLOR
    assert global_fc1.get_color() == style.GLOBAL_COLOR
    assert local_fc1.get_marker() == global_fc1.get_marker()
    conv = drawn.lines["conv1.weight", "local"]
    assert conv.get_marker() != local_fc1.get_marker()
    assert drawn.baseline.get_ydata()[0] == 0.97
    assert ax.get_ylabel() == "accuracy"
    assert ax.get_title() == "Sensitivity: accuracy vs sparsity"
    labels = [t.get_text() for t in drawn.legend.get_texts()]
    assert "fc1.weight (global)" in labels
    assert "unpruned 97.0%" in labels  # a share reads in %, as everywhere else


def test_sensitivity_can_use_amount_on_the_x_axis():
    df = sensitivity_table()
    _fig, ax = make_figure()
    drawn = plot_sensitivity(ax, df, x="amount")
    line = drawn.lines["conv1.weight", "local"]
    assert line.get_xdata().tolist() == [0.0, 0.2, 0.5, 0.9]
    assert ax.get_xlabel() == "amount"


def test_sensitivity_validates_table_and_arguments():
    _fig, ax = make_figure()
    df = sensitivity_table()
    expected = r"plot_sensitivity: df must have columns .* missing \['score'\]"
    with pytest.raises(ValueError, match=expected):
        plot_sensitivity(ax, df.drop(columns=["score"]))
    bad = df.assign(scope="layerwise")
    expected = r"plot_sensitivity: scope values must be 'local' or 'global'; got \['layerwise'\]"
    with pytest.raises(ValueError, match=expected):
        plot_sensitivity(ax, bad)
    expected = r"plot_sensitivity: x must be one of \('sparsity', 'amount'\); got 'score'"
    with pytest.raises(ValueError, match=expected):
        plot_sensitivity(ax, df, x="score")


def test_reprs_summarise_the_plots():
    _fig, ax = make_figure()
    assert repr(plot_global_vs_local(ax, compare_table())) == (
        "GlobalLocalPlot(4 tensors, totals ['global', 'local'], 1 collapsed markers)"
    )
    _fig, ax = make_figure()
    text = repr(plot_sensitivity(ax, sensitivity_table()))
    assert text.startswith("SensitivityPlot(4 curves: conv1.weight/local")


def test_global_and_local_never_wear_a_mask_colour():
    # One meaning per colour: the chart's global/local are not the masks' kept (dark blue),
    # pruned (lemon yellow), pruned-by-this-step (vermillion) or revived (sky blue).
    mask_colours = {to_hex(c) for c in (style.KEPT_COLOR, style.PRUNED_COLOR,
                                        style.NEW_PRUNED_COLOR, style.REVIVED_COLOR,
                                        style.BLUE, style.ORANGE)}
    _fig, ax = make_figure()
    drawn = plot_global_vs_local(ax, compare_table())
    bars = {to_hex(drawn.global_bars[0].get_facecolor()),
            to_hex(drawn.local_bars[0].get_facecolor())}
    lines = {to_hex(line.get_color()) for line in drawn.totals.values()}
    assert len(bars) == 2
    assert lines == bars
    assert not bars & mask_colours
