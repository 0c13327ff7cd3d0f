"""The Global vs local tab: one threshold for all tensors, or the same amount for each?

Choose tensors (default: ``Session.default_targets()``) and an amount; the tab
shows ``Session.compare_global_local`` as a table (``pe-compare-table``) beside its bar chart
(``pe-compare-chart``), warns about layers that would collapse (``pe-compare-warnings``), and
applies either choice: ``Apply global`` (``Session.apply_global``) or ``Apply local`` (one
``l1_unstructured`` step per tensor, in one session transaction: all or none). Each button is on
exactly when the session would do it (``Session.global_blocker``, ``Session.plan_blocker``); when
it is off, the note under the buttons (``pe-compare-note``) says why.

Examples
--------
>>> from prune_explorer.demo import load_cnn
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(load_cnn(), debounce=None)
>>> ex.ui.tabs.selected_index = 2  # Global vs local
>>> list(ex.compare_pane.frame["name"])
['features.0.weight', 'features.3.weight', 'classifier.weight', 'TOTAL']
>>> ex.ui.apply_local.click()
>>> len(ex.session.steps)
3
>>> ex.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import pandas as pd

from prune_explorer.session import Step
from prune_explorer.viz import make_figure, plot_global_vs_local, render_png
from prune_explorer.viz.charts import GlobalLocalPlot
from prune_explorer.viz.figures import room_figure

from ..errors import WidgetInputError
from ..parts.html import collapse_warning, esc, frame_table, message, why_off
from ..parts.pane import Pane
from ..parts.scheduler import LatestOnly
from ..parts.sizeprobe import MIN_HEIGHT, SizeProbe
from ..parts.status import Progress, human_error

if TYPE_CHECKING:
    from ..context import TabContext

__all__ = ["ComparePane"]

class ComparePane(Pane):
    """Targets, amount, table, chart, collapse warnings and the two apply buttons.

    Attributes
    ----------
    frame : pandas.DataFrame or None
        The last comparison shown.
    plot : GlobalLocalPlot or None
        The last chart drawn.
    """

    def __init__(self, explorer: TabContext) -> None:
        self.ex = explorer
        ui = explorer.ui
        names = list(explorer.session.names)
        self.targets = ui.add("compare_targets", widgets.SelectMultiple(
            options=names, value=tuple(explorer.session.default_targets()), rows=6,
            description="tensors",
            layout=widgets.Layout(width="420px"),
        ))
        self.amount = ui.add("compare_amount", widgets.FloatSlider(
            value=0.5, min=0.0, max=1.0, step=0.01, readout_format=".2f",
            continuous_update=False, description="amount", layout=widgets.Layout(width="420px"),
        ))
        self.table = ui.add("compare_table", widgets.HTML(value=""))
        self.chart = ui.add("compare_chart", widgets.Image(
            format="png", layout=widgets.Layout(flex="0 0 auto")))
        self.warnings = ui.add("compare_warnings", widgets.HTML(value=""))
        self.apply_global = ui.add("apply_global", widgets.Button(
            description="Apply global", button_style="primary",
            tooltip="one L1-magnitude threshold over all the chosen tensors (global_unstructured)",
        ))
        self.apply_local = ui.add("apply_local", widgets.Button(
            description="Apply local",
            tooltip="L1 magnitude, this amount of each chosen tensor (l1_unstructured)",
        ))
        self.note = ui.add("compare_note", widgets.HTML(value=""))  # why a button is off
        self.note.add_class("pe-button-note")
        # the chart is drawn for its column, as the browser measures it (the Explore
        # picture's rule)
        self.probe = ui.add("compare_probe", SizeProbe(column="pe-compare-picture",
                                                       picture="pe-compare-chart"))
        self.room: tuple[int, int, float] | None = None  # drawn_room() of the last report
        chart = widgets.VBox([self.chart, self.probe])
        chart.add_class("pe-compare-picture")
        self.box = widgets.VBox([
            widgets.HBox([widgets.VBox([self.targets, self.amount]),
                          widgets.VBox([self.apply_global, self.apply_local, self.note])]),
            self.warnings,
            # Side by side when the notebook is wide enough, the chart below the table otherwise.
            widgets.HBox([self.table, chart],
                         layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start")),
        ])
        self.frame: pd.DataFrame | None = None
        self.plot: GlobalLocalPlot | None = None
        self.runner = LatestOnly(self._render, debounce=explorer.debounce,
                                 on_error=lambda err: explorer.status.error(err, "Compare"))
        self.targets.observe(lambda _: self.invalidate(), names="value")
        self.amount.observe(lambda _: self.invalidate(), names="value")
        self.apply_global.on_click(lambda _: self.do_apply_global())
        self.apply_local.on_click(lambda _: self.do_apply_local())
        self.probe.follow(self._on_room)

    def _on_room(self, room: tuple[int, int, float]) -> None:
        self.room = room
        if self.visible:
            self.invalidate()

    @property
    def visible(self) -> bool:
        """Whether the tab is on show (the comparison is computed only then)."""
        return self.ex.shows(self)

    def flush(self) -> None:
        """Render the pending picture now."""
        self.runner.flush()

    def close(self) -> None:
        """Stop the background renderer."""
        self.runner.close()

    def invalidate(self) -> None:
        """Settings or session changed: the buttons follow the session's answers; recompute
        the comparison if on show."""
        self.refresh_buttons()
        if self.visible:  # a first comparison may take a while: say so before it starts
            for widget in (self.table, self.chart):
                widget.add_class("pe-stale")
            self.warnings.value = message("working", "computing the comparison…")
            self.runner.request((tuple(self.targets.value), float(self.amount.value)))

    @property
    def stale(self) -> bool:
        """True while the table and chart on show are not of the current settings."""
        return "pe-stale" in self.chart._dom_classes

    def refresh_buttons(self) -> None:
        """Apply global and Apply local on exactly when the session would do them; the reason
        for each one that is off, under them."""
        names, amount = list(self.targets.value), float(self.amount.value)
        session = self.ex.session
        global_why = session.global_blocker(names, "l1_unstructured", amount=amount)
        local_why = "no tensor is chosen" if not names else session.plan_blocker(
            [Step("l1_unstructured", name, amount=amount) for name in names])
        if not names and global_why is not None:  # the session's words are about the call
            global_why = local_why
        self.apply_global.disabled = global_why is not None
        self.apply_local.disabled = local_why is not None
        lines = []
        if global_why is not None and global_why == local_why:
            lines.append(f"Apply global and Apply local are off: {global_why}.")
        else:
            lines += [f"Apply {scope} is off: {why}." for scope, why in
                      (("global", global_why), ("local", local_why)) if why is not None]
        self.note.value = why_off(lines)

    def _render(self, what: tuple[tuple[str, ...], float]) -> None:
        with self.ex.status.working("comparing global and local"):
            self._compare(what)

    def _compare(self, what: tuple[tuple[str, ...], float]) -> None:
        names, amount = what
        if not names:
            self._fail(WidgetInputError("Global vs local: choose at least one tensor"))
            return
        try:
            with self.ex.session.lock:
                frame = self.ex.session.compare_global_local(list(names), amount)
                report = self.ex.session.report()
        except Exception as err:
            self._fail(err)
            return
        now = {str(n): float(v) for n, v in zip(report["name"], report["sparsity"],
                                                strict=True) if n in names}
        if self.runner.pending:
            return
        room = self.room
        if room is None:
            fig, ax = make_figure(figsize=(6.0, 4.0), dpi=80)
        else:  # the column's width, 5:6 as tall where the room allows (the text then as
            width, height, ratio = room  # large as the Explore picture's in such a column)
            fig, ax = room_figure(width, max(MIN_HEIGHT, min(height, round(5 * width / 6))),
                                  pixel_ratio=ratio)
        # Once something is pruned the table previews the next step: show what was there.
        self.plot = plot_global_vs_local(ax, frame, amount=amount,
                                         before=now if any(now.values()) else None)
        self.chart.value = render_png(fig, compress_level=1)
        if room is not None:  # drawn at the pixel ratio: shown at its CSS size
            self.chart.width = str(round(fig.get_size_inches()[0] * fig.dpi / room[2]))
        self.table.value = frame_table(
            frame, css_class="pe-compare-frame",
            columns=["name", "numel", "sparsity_global", "sparsity_local", "pruned_global",
                     "pruned_local", "collapsed_global", "collapsed_local"],
            percent_columns=("sparsity_global", "sparsity_local"),
        )
        layers = frame[frame["name"] != "TOTAL"]
        lines = []
        for scope in ("global", "local"):
            hit = [str(n) for n in layers.loc[layers[f"collapsed_{scope}"].astype(bool), "name"]]
            if hit:
                lines.append(collapse_warning(f"{scope} pruning", hit))
        self.warnings.value = "<br>".join(lines) or message("ok", "No layer collapses.")
        for widget in (self.table, self.chart):
            widget.remove_class("pe-stale")
        self.frame = frame
        self.ex.status.clear(source="compare")

    def _fail(self, err: BaseException) -> None:
        self.frame = None
        text = esc(human_error(err, "Global vs local"))
        self.table.value = f'<span style="color:#b2182b">{text}</span>'
        self.table.remove_class("pe-stale")  # the message is current; the chart is not
        self.warnings.value = ""
        self.ex.status.error(err, "Global vs local", source="compare")

    # -- actions ----------------------------------------------------------------------------------
    def do_apply_global(self) -> None:
        """Apply ``global_unstructured`` (l1) over the chosen tensors."""
        names, amount = list(self.targets.value), float(self.amount.value)
        before = self.ex.zeros_snapshot()
        self.ex.act(
            "Apply global",
            lambda _: self.ex.session.apply_global(names, "l1_unstructured", amount=amount),
            done=lambda step: self.ex.outcome("Applied", [step], before),
        )

    def do_apply_local(self) -> None:
        """Apply ``l1_unstructured`` with the same amount to each chosen tensor, all or none."""
        names, amount = list(self.targets.value), float(self.amount.value)
        before = self.ex.zeros_snapshot()

        def run(progress: Progress) -> Any:
            if not names:
                raise WidgetInputError("Apply local: choose at least one tensor")
            session = self.ex.session
            steps = []
            with self.ex.batch(), session.transaction():  # all or nothing
                for index, name in enumerate(names):
                    steps.append(session.apply(name, "l1_unstructured", amount=amount))
                    progress(index + 1, len(names))
            return steps

        self.ex.act("Apply local", run,
                    done=lambda steps: self.ex.outcome("Applied", steps, before))
