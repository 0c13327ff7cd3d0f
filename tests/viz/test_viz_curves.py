"""Accuracy-vs-sparsity curves of schedule runs, checked through the lines' data and labels."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import pytest
from matplotlib.ticker import PercentFormatter

from prune_explorer.viz import CurvePlot, make_figure, plot_accuracy_vs_sparsity
from prune_explorer.viz.curves import BASELINE_LABEL


@dataclass(frozen=True)
class Round:
    target: float
    realized: float
    accuracy_after: float | None


@dataclass
class Run:
    label: str
    rounds: list[Round] = field(default_factory=list)
    stopped: bool = False


def rounds(*points: tuple[float, float | None]) -> list[Round]:
    return [Round(target=x, realized=x, accuracy_after=y) for x, y in points]


def draw(runs, **kwargs) -> CurvePlot:
    _, ax = make_figure()
    return plot_accuracy_vs_sparsity(ax, runs, **kwargs)


def test_one_line_per_run_with_its_points_in_round_order_and_its_label():
    gradual = Run("gradual cubic, 4 epochs", rounds((0.52, 0.97), (0.79, 0.96), (0.9, 0.95)))
    lottery = Run("lottery ticket, 2 rounds, rewind to init, 30 epochs",
                  rounds((0.0, 0.98), (0.68, 0.97), (0.9, 0.96)))
    drawn = draw([gradual, lottery])
    assert list(drawn.lines) == [gradual.label, lottery.label]
    line = drawn.lines[gradual.label]
    assert line.get_xdata().tolist() == [0.52, 0.79, 0.9]
    assert line.get_ydata().tolist() == [0.97, 0.96, 0.95]
    assert drawn.lines[lottery.label].get_xdata().tolist() == [0.0, 0.68, 0.9]
    texts = [t.get_text() for t in drawn.legend.get_texts()]
    assert texts == [gradual.label, lottery.label]
    assert drawn.lines[gradual.label].get_color() != drawn.lines[lottery.label].get_color()
    assert drawn.baseline is None


def test_the_realized_sparsity_is_the_x_not_the_target():
    run = Run("one-shot, 2 epochs", [Round(target=0.9, realized=0.8984, accuracy_after=0.9)])
    assert draw([run]).lines[run.label].get_xdata().tolist() == [0.8984]


def test_one_shot_runs_sharing_a_label_join_one_line_sorted_by_sparsity():
    runs = [Run("one-shot, 10 epochs", rounds((0.9, 0.97))),
            Run("one-shot, 10 epochs", rounds((0.5, 0.99))),
            Run("one-shot, no fine-tune", rounds((0.9, 0.48))),
            Run("one-shot, 10 epochs", rounds((0.8, 0.98)))]
    drawn = draw(runs)
    assert list(drawn.lines) == ["one-shot, 10 epochs", "one-shot, no fine-tune"]
    line = drawn.lines["one-shot, 10 epochs"]
    assert line.get_xdata().tolist() == [0.5, 0.8, 0.9]
    assert line.get_ydata().tolist() == [0.99, 0.98, 0.97]


def test_multi_round_runs_sharing_a_label_stay_apart_and_name_their_target():
    a = Run("gradual cubic, 2 epochs", rounds((0.79, 0.97), (0.9, 0.95)))
    b = Run("gradual cubic, 2 epochs", rounds((0.83, 0.96), (0.95, 0.91)))
    drawn = draw([a, b])
    assert list(drawn.lines) == ["gradual cubic, 2 epochs → 90%", "gradual cubic, 2 epochs → 95%"]
    assert drawn.lines["gradual cubic, 2 epochs → 95%"].get_ydata().tolist() == [0.96, 0.91]


def test_a_stopped_run_says_so_and_shows_the_rounds_it_completed():
    run = Run("iterative, 3 rounds, 6 epochs", rounds((0.5, 0.98)), stopped=True)
    drawn = draw([run])
    assert list(drawn.lines) == ["iterative, 3 rounds, 6 epochs (stopped)"]
    assert drawn.lines["iterative, 3 rounds, 6 epochs (stopped)"].get_xdata().tolist() == [0.5]


def test_rounds_without_an_accuracy_and_runs_without_a_point_are_left_out():
    measured = Run("iterative, 2 rounds, 2 epochs", rounds((0.5, None), (0.75, 0.9)))
    empty = Run("one-shot, 1 epoch", [], stopped=True)
    drawn = draw([measured, empty])
    assert list(drawn.lines) == [measured.label]
    assert drawn.lines[measured.label].get_xdata().tolist() == [0.75]


def test_baseline_from_pairs_is_a_grey_dashed_line_sorted_by_sparsity():
    drawn = draw([Run("one-shot, 5 epochs", rounds((0.9, 0.96)))],
                 baseline=[(0.9, 0.47), (0.0, 0.98), (0.5, 0.95)])
    base = drawn.baseline
    assert base is not None
    assert list(base.get_xdata()) == [0.0, 0.5, 0.9]
    assert list(base.get_ydata()) == [0.98, 0.95, 0.47]
    assert base.get_linestyle() == "--"
    assert base.get_label() == BASELINE_LABEL
    assert [t.get_text() for t in drawn.legend.get_texts()][-1] == BASELINE_LABEL


def test_baseline_from_a_sensitivity_table():
    table = pd.DataFrame({"target": ["global"] * 3, "scope": ["global"] * 3,
                          "amount": [0.0, 0.5, 0.9], "sparsity": [0.0, 0.5, 0.9],
                          "score": [0.98, 0.95, 0.47]})
    drawn = draw([], baseline=table)
    assert list(drawn.baseline.get_ydata()) == [0.98, 0.95, 0.47]
    assert drawn.lines == {}
    assert drawn.legend is not None


@pytest.mark.parametrize(("baseline", "match"), [
    ([(0.5,)], r"baseline\[0\] must be a pair"),
    ([(0.1, 0.9), (0.5, "high")], r"baseline\[1\] must be a pair .* got \(0.5, 'high'\)"),
    ([(float("nan"), 0.9)], r"baseline\[0\] must be finite"),
    (pd.DataFrame({"sparsity": [0.5]}), r"columns 'sparsity' and 'score'; missing \['score'\]"),
])
def test_a_bad_baseline_is_refused_naming_the_point(baseline, match):
    with pytest.raises(ValueError, match=match):
        draw([], baseline=baseline)


def test_axes_are_labelled_and_accuracies_read_as_percentages():
    _, ax = make_figure()
    plot_accuracy_vs_sparsity(ax, [Run("one-shot, 1 epoch", rounds((0.5, 0.9)))],
                              metric_label="test accuracy")
    assert ax.get_ylabel() == "test accuracy"
    assert "sparsity" in ax.get_xlabel()
    assert ax.get_title() == "test accuracy vs sparsity"
    assert isinstance(ax.yaxis.get_major_formatter(), PercentFormatter)
    _, ax = make_figure()
    plot_accuracy_vs_sparsity(ax, [Run("one-shot, 1 epoch", rounds((0.5, 2.3)))],
                              metric_label="loss")
    assert not isinstance(ax.yaxis.get_major_formatter(), PercentFormatter)


def test_nothing_to_draw_draws_no_legend():
    drawn = draw([])
    assert drawn.legend is None
    assert repr(drawn) == "CurvePlot(0 lines: -; no baseline)"


def test_repr_names_the_lines_and_the_baseline():
    drawn = draw([Run("one-shot, 10 epochs", rounds((0.9, 0.97)))], baseline=[(0, 1), (1, 0)])
    assert repr(drawn) == "CurvePlot(1 line: 'one-shot, 10 epochs'; baseline: 2 points)"


def test_a_draw_does_not_search_above_the_axes_for_the_title(monkeypatch):
    from matplotlib.axis import Axis

    from prune_explorer.viz import render_png

    fig, ax = make_figure(figsize=(6.4, 4.2), dpi=80, layout=None)
    plot_accuracy_vs_sparsity(ax, [Run("gradual", rounds((0.5, 0.97), (0.9, 0.9)))],
                              baseline=[(0.5, 0.9), (0.9, 0.5)])
    boxes: list[object] = []
    measure = Axis.get_tightbbox

    def counted(self, *args, **kwargs):
        boxes.append(self)
        return measure(self, *args, **kwargs)

    monkeypatch.setattr(Axis, "get_tightbbox", counted)
    assert render_png(fig)[1:4] == b"PNG"
    assert boxes == []  # the title's place is fixed: no tight box of the ticks per redraw
    assert ax.title.get_text() == "accuracy vs sparsity"
