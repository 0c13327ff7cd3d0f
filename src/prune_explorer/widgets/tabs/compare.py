"""The Global vs local tab: one threshold for all tensors, or the same amount for each?

Choose tensors (default: ``Session.default_targets()``) and an amount; the tab
shows ``Session.compare_global_local`` as a table (``pe-compare-table``) beside its bar chart
(``pe-compare-chart``), warns about layers that would collapse (``pe-compare-warnings``), and
applies either choice: ``Apply global`` (``Session.apply_global``) or ``Apply local`` (one
``l1_unstructured`` step per tensor, in one session transaction: all or none).

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

from prune_explorer.viz import make_figure, plot_global_vs_local, render_png
from prune_explorer.viz.charts import GlobalLocalPlot

from ..errors import WidgetInputError
from ..parts.html import collapse_warning, esc, frame_table, message
from ..parts.scheduler import LatestOnly
from ..parts.status import Progress, human_error
from .titles import COMPARE_TAB

if TYPE_CHECKING:
    from ..context import TabContext

__all__ = ["ComparePane"]

class ComparePane:
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
        self.box = widgets.VBox([
            widgets.HBox([widgets.VBox([self.targets, self.amount]),
                          widgets.VBox([self.apply_global, self.apply_local])]),
            self.warnings,
            # Side by side when the notebook is wide enough, the chart below the table otherwise.
            widgets.HBox([self.table, self.chart],
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

    @property
    def visible(self) -> bool:
        """Whether the tab is on show (the comparison is computed only then)."""
        return self.ex.selected_tab == COMPARE_TAB

    def invalidate(self) -> None:
        """Settings or session changed: recompute if on show."""
        if self.visible:
            self.runner.request((tuple(self.targets.value), float(self.amount.value)))

    def _render(self, what: tuple[tuple[str, ...], float]) -> None:
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
        fig, ax = make_figure(figsize=(6.0, 4.0), dpi=80)
        # Once something is pruned the table previews the next step: show what was there.
        self.plot = plot_global_vs_local(ax, frame, amount=amount,
                                         before=now if any(now.values()) else None)
        self.chart.value = render_png(fig, compress_level=1)
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
        self.frame = frame
        self.ex.status.clear(source="compare")

    def _fail(self, err: BaseException) -> None:
        self.frame = None
        text = esc(human_error(err, "Global vs local"))
        self.table.value = f'<span style="color:#b2182b">{text}</span>'
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
