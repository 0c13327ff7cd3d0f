"""The readability rule for notebook figures (prune_explorer.viz.notebook): text >= 10 CSS px as
shown in the 592 px output area of JupyterLab at 1024x768 with the file browser open."""

from __future__ import annotations

import pytest

from prune_explorer import viz
from prune_explorer.viz.notebook import (
    MIN_TEXT_PX,
    NOTEBOOK_WIDTH_PX,
    check_readable,
    notebook_figsize,
    shown_text_px,
    shown_width_px,
)


def _panel(figsize: tuple[float, float]):
    """A panel as the notebooks draw them: a title, axis labels, tick labels, a small legend."""
    fig, ax = viz.make_figure(figsize=figsize)
    ax.plot([0, 1], [1, 0], label="kept")
    ax.set(title="l1_unstructured\naccuracy 97.6%", xlabel="in features", ylabel="out")
    ax.legend(fontsize="small")
    return fig


def test_a_figure_13_inches_wide_is_shown_too_small():
    fig = _panel((13, 3.6))  # three panels side by side, as the notebooks had them
    width = shown_width_px(fig)
    assert width > NOTEBOOK_WIDTH_PX
    # the legend's "small" text: 8.33 pt = 11.6 px at 100 dpi, scaled from the PNG to 592 px
    legend = 10 * 0.8333 / 72 * 100 * NOTEBOOK_WIDTH_PX / width
    assert legend < MIN_TEXT_PX
    with pytest.raises(ValueError, match=r"text must be >= 10 px as shown in a 592 px output "
                                         rf"area \(the figure's PNG is {width} px wide\); got "
                                         rf"{legend:.1f} px 'kept'; "):
        check_readable(fig)


def test_the_same_figure_at_the_notebook_width_is_readable():
    fig = _panel(notebook_figsize(3.6))
    assert shown_width_px(fig) <= NOTEBOOK_WIDTH_PX
    assert min(shown_text_px(fig)) == (11.57, "kept")  # not scaled: 8.33 pt at 100 dpi


def test_only_texts_the_png_shows_count():
    fig, ax = viz.make_figure(figsize=(4, 3))
    ax.set_xticks([0.0, 0.5, 5.0], ["a", "b", "out of view"])
    ax.set_xlim(0, 1)  # after the ticks (which widen the view to show themselves)
    hidden = ax.text(0.5, 0.5, "hidden", fontsize=2)
    hidden.set_visible(False)
    ax.get_xticklabels()[2].set_fontsize(2)
    texts = [text for _, text in shown_text_px(fig)]
    assert "a" in texts
    assert "b" in texts
    assert "hidden" not in texts
    assert "out of view" not in texts
    check_readable(fig)
    ax.get_xticklabels()[1].set_fontsize(2)  # the same size on a tick in view: too small
    with pytest.raises(ValueError, match=r"got 2\.8 px 'b'"):
        check_readable(fig)


def test_the_threshold_and_the_width_are_arguments():
    fig, ax = viz.make_figure(figsize=(4, 3))
    ax.set_title("title")  # 12 pt: 16.7 px
    ax.set_axis_off()  # no tick labels: the title is the only text
    check_readable(fig, min_px=16.6)
    with pytest.raises(ValueError, match=r">= 17 px as shown in a 592 px"):
        check_readable(fig, min_px=17)
    with pytest.raises(ValueError, match=r"as shown in a 100 px output area"):
        check_readable(fig, width_px=100)


def test_notebook_figsize_refuses_sizes_that_cannot_fit():
    assert notebook_figsize(2) == (5.72, 2.0)
    assert notebook_figsize(2, width_px=800, dpi=200) == (3.8, 2.0)
    with pytest.raises(ValueError, match=r"height must be > 0 inches; got 0"):
        notebook_figsize(0)
    with pytest.raises(ValueError, match=r"width_px must leave room for the padding \(20 px\); "
                                         r"got 10"):
        notebook_figsize(3, width_px=10)
