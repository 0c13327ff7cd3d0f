"""The Explore tab: pruning controls, the live preview and the Apply/Undo/Reset buttons.

Reset asks first: the button shows *Confirm reset* and *Cancel* (``Session.reset`` drops the
history, so it cannot be undone); any change to the session cancels the question. A preview that
would leave a layer (almost) empty says so (``pe-collapse-warning``) before you apply it, by the
rule of the Global vs local tab.

Controls become a :class:`~prune_explorer.widgets.tabs.explore.preview.PreviewRequest`; one
session call, :meth:`Session.preview_picture <prune_explorer.session.Session.preview_picture>`
(on a background thread unless ``debounce`` is None), returns what the picture is drawn from, and
the pane draws it; on Apply the session performs the same request. The pane keeps the custom
masks given for "custom mask" and, until the session changes, the counts of the current masks
that the controls need (entries and channels still unpruned). It reaches the explorer through
:class:`~prune_explorer.widgets.context.ExploreContext` only.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(8, 4)), debounce=None)
>>> ex.ui.amount.value = 0.25
>>> ex.explore_pane.preview_stats.newly_pruned
8
>>> ex.close()
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import numpy as np
import torch

from prune_explorer.session.preview.picture import MaskSummaries
from prune_explorer.viz import shape_only
from prune_explorer.viz.zoom import WindowReader, matrix_reader

from ...errors import WidgetInputError
from ...parts.html import collapse_warning, custom_note, esc, message
from ...parts.pane import Pane
from ...parts.scheduler import LatestOnly
from ...parts.sizeprobe import SizeProbe, drawn_room
from ...parts.status import describe_error
from .controls import PruningControls, parse_count
from .feedback import refresh_buttons, show_input_error
from .maskfile import check_custom, read_mask_file, uploaded_file
from .panels import ExplorePanels
from .preview import Later, MaskSummary, PreviewPane, PreviewRequest, PreviewStats
from .zoom import ZoomPane

if TYPE_CHECKING:
    from ...context import ExploreContext

__all__ = ["ExplorePane"]


#: While the slider is dragged every finished preview is already stale (a newer request waits).
#: Skipping all of them would show nothing until the drag ends; a stale picture is drawn anyway
#: once the last one is this old, so a drag animates at a few frames per second at least.
FRAME_INTERVAL_S = 0.25


def _same(a: PreviewRequest, b: PreviewRequest) -> bool:
    # The same step: everything but the amount alike (tensors by identity), and the amount
    return a.beside_amount() == b.beside_amount() and \
        a.settings.get("amount") == b.settings.get("amount")


class ExplorePane(Pane):
    """Controls, preview picture and counts, and the Apply/Undo/Reset buttons.

    Attributes
    ----------
    controls : PruningControls
    preview_pane : PreviewPane
    preview_mask, preview_array, preview_stats, preview_request, preview_error, render_count
        What the last preview showed (see :class:`~prune_explorer.widgets.Explorer`).
    runner : LatestOnly
        Runs previews (coalesced, on a worker thread unless ``debounce`` is None).
    """

    def __init__(self, explorer: ExploreContext, custom_masks: Mapping[str, torch.Tensor], *,
                 figsize: tuple[float, float], dpi: float, pixel_ratio: float = 1.0) -> None:
        self.ex = explorer
        ui = explorer.ui
        self._mask: Later | None = None  # preview_mask, built on first read
        self.preview_array: np.ndarray | None = None
        self.preview_stats: PreviewStats | None = None
        self.preview_request: PreviewRequest | None = None
        self.preview_error: str | None = None
        # What the picture shows, for the zoom: kept after the step (or now), kept now.
        self._shown: Later | None = None  # preview_shown, built on first read
        self._reader: WindowReader | None = None  # windows of it, read without building it
        self._now: MaskSummary | None = None  # what is alive now, when the picture is a step
        self.render_count = 0
        self.collapsed: list[str] = []  # layers the previewed step would collapse
        self._drawn_at = 0.0  # time.monotonic() of the last picture drawn
        self._asked: tuple[Any, ...] | None = None  # what the last request was, amount aside
        self._custom = {name: mask.detach() for name, mask in custom_masks.items()}
        # counts (and, when read, masks) of the session's state, until the next change
        self.summaries = MaskSummaries(explorer.session, stamp=lambda: explorer.version)
        # After Apply the picture shows the step applied (it was its preview) until the user
        # asks for the next: the request applied, and the session's steps after it (not the
        # version: a readout's evaluation changes that without a step)
        self._holding: PreviewRequest | None = None
        self._hold_version: tuple[int, int] | None = None

        self.controls = c = PruningControls()
        for name in ("method", "amount_mode", "amount", "count", "left", "n", "dim",
                     "global_method", "global_targets", "custom", "custom_upload", "layout",
                     "pattern", "block", "importance"):
            ui.add(name, getattr(c, name))
        self.preview_pane = PreviewPane(figsize=figsize, dpi=dpi, pixel_ratio=pixel_ratio)
        ui.add("preview", self.preview_pane.image)
        ui.add("preview_info", self.preview_pane.info)
        ui.add("picture_text", self.preview_pane.words)
        ui.add("collapse_warning", widgets.HTML(value=""))
        ui.add("apply", widgets.Button(description="Apply", button_style="primary",
                                       tooltip="prune the tensor as previewed"))
        ui.add("next_preview", widgets.Button(
            description="Preview next step", button_style="info", disabled=True,
            tooltip="preview the next step of these settings on the pruned tensor",
            layout=widgets.Layout(display="none")))
        ui.add("undo", widgets.Button(description="Undo", tooltip="undo the last step"))
        ui.add("reset", widgets.Button(description="Reset", button_style="warning",
                                       tooltip="undo every step of this session"))
        ui.add("button_note", widgets.HTML(value=""))  # why a button is off, where it is
        ui.add("reset_question", widgets.HTML(value=""))
        ui.add("reset_confirm", widgets.Button(description="Confirm reset", button_style="danger",
                                               tooltip="undo every step; this cannot be undone"))
        ui.add("reset_cancel", widgets.Button(description="Cancel", tooltip="keep every step"))
        self.reset_row = widgets.HBox([ui.reset_question, ui.reset_confirm, ui.reset_cancel],
                                      layout=widgets.Layout(flex_flow="row wrap"))
        self.reset_row.add_class("pe-reset-row")
        self._drop_reset()
        buttons = widgets.HBox([ui.apply, ui.next_preview, ui.undo, ui.reset])
        buttons.add_class("pe-buttons")  # over the picture, by the slider (see below)
        # The input errors: by the control they are about (CSS order in the controls), and
        # over the picture with the slider and the count line, so they share one screen.
        ui.add("control_error", widgets.HTML(value="", layout=widgets.Layout(display="none")))
        ui.add("input_error", widgets.HTML(value="", layout=widgets.Layout(display="none")))
        ui.add("count_line", self.preview_pane.count_line)
        ui.add("presentation", widgets.ToggleButton(
            value=False, description="Presentation",
            tooltip="bigger picture and text, fewer lines: for a projector"))
        c.box.children = [w for w in c.box.children if w not in (c.amount, c.count)] + [
            ui.control_error]
        left = widgets.VBox([c.box, ui.button_note, ui.preview_info, ui.collapse_warning,
                             ui.presentation])
        left.add_class("pe-explore-controls")
        self.zoom = ZoomPane(explorer, self, dpi=dpi)  # closed: costs nothing
        self.probe = SizeProbe()
        ui.add("size_probe", self.probe)
        # Over the picture, on its screen: the slider with Apply beside it (the row wraps
        # when narrow), Reset's question, the counts, the accuracy (why a button is off is
        # said under the controls; an input error, over the picture).
        slider_row = widgets.HBox([c.amount, c.count, buttons])
        slider_row.add_class("pe-slider-row")
        head = widgets.VBox([slider_row, self.reset_row, ui.input_error,
                             ui.count_line] + ([ui.metric] if "metric" in ui else []))
        head.add_class("pe-picture-head")
        picture = widgets.VBox([head, ui.preview, ui.picture_text, self.probe, self.zoom.box])
        picture.add_class("pe-explore-picture")
        self.box = widgets.HBox([left, picture])  # wraps when narrow (see stylesheet.py)
        self.box.add_class("pe-explore-row")
        self.panels = ExplorePanels(explorer)  # model view, magnitudes (collapsed)
        self.tab = widgets.VBox([self.box, self.panels.box])  # the Explore tab
        c.observe_all(self._on_control)
        ui.apply.on_click(lambda _: self.apply())
        ui.next_preview.on_click(lambda _: self.next_preview())
        ui.undo.on_click(lambda _: explorer.undo())
        ui.reset.on_click(lambda _: self.ask_reset())
        ui.reset_confirm.on_click(lambda _: self._confirm_reset())
        ui.reset_cancel.on_click(lambda _: self._drop_reset())
        c.custom_upload.observe(self._on_upload, names="value")
        self.probe.observe(self._on_room, names=["width", "height", "pixel_ratio"])
        ui.presentation.observe(self._on_presentation, names="value")
        self.runner = LatestOnly(self._render, debounce=explorer.debounce,
                                 on_error=self._failed)

    @property
    def widget(self) -> widgets.VBox:
        """The Explore tab: the controls and picture, then the panels."""
        return self.tab

    def flush(self) -> None:
        """Render the pending preview now."""
        self.runner.flush()

    def close(self) -> None:
        """Stop the preview renderer and the panels' background work."""
        self.runner.close()
        self.panels.close()

    @property
    def preview_before(self) -> torch.Tensor | None:
        """What is alive now when the picture shows a step (None otherwise): the zoom's
        "before", read when first asked (the picture itself needs only its cell counts)."""
        return None if self._now is None else self._now.kept

    # -- custom masks -----------------------------------------------------------------------------
    def set_custom_mask(self, name: str, mask: torch.Tensor) -> None:
        """Keep ``mask`` for the method "custom mask" on ``name``; re-preview if on show."""
        self._custom[name] = check_custom(self.ex.session, name, mask, "Explorer.set_custom_mask")
        self.update_custom_note()
        if name == self.ex.tensor and self.controls.method.value == "custom_from_mask":
            self.request_preview()

    def load_custom_mask(self, filename: str, data: bytes) -> torch.Tensor:
        """Read a ``.pt``/``.npy`` mask file as data only (see :mod:`.maskfile`) for the tensor
        on show, check it as the session will (0/1 values, shape), then keep it.

        Raises
        ------
        WidgetInputError or InvalidStepError
            The file is refused; the masks kept so far are unchanged.
        """
        name = self.ex.tensor
        where = "custom mask upload"
        if name is None:
            raise WidgetInputError(f"{where}: no tensor is chosen (the model has none)")
        mask = read_mask_file(filename, data, where)
        check_custom(self.ex.session, name, mask, where)
        self.ex.session.preview(name, "custom_from_mask", mask=mask)  # the session's checks
        previous = self._custom.get(name)
        try:
            self.set_custom_mask(name, mask)
        except BaseException:  # a refused upload is not kept
            if previous is None:
                self._custom.pop(name, None)
            else:
                self._custom[name] = previous
            self.update_custom_note()
            raise
        return mask

    def _on_upload(self, change: dict[str, Any]) -> None:
        found = uploaded_file(change["new"])
        if found is None:
            return
        filename, data = found
        with self.ex.quiet():
            self.controls.custom_upload.value = ()  # the same file can be chosen again
        self.ex.act("Upload custom mask", lambda _: self.load_custom_mask(filename, data),
                    done=lambda mask: f"Loaded the custom mask for {self.ex.tensor!r} from "
                                      f"{filename} ({int(mask.count_nonzero()):,} of "
                                      f"{mask.numel():,} kept)")

    @property
    def custom_masks(self) -> dict[str, torch.Tensor]:
        """The custom masks given so far, by address (a copy)."""
        return dict(self._custom)

    def update_custom_note(self) -> None:
        """Say whether the chosen tensor has a custom mask."""
        name = self.ex.tensor
        self.controls.custom.value = custom_note(
            name, self._custom.get(name) if name is not None else None)

    # -- reset, after a question ------------------------------------------------------------------
    @property
    def asking_reset(self) -> bool:
        """True while *Confirm reset* / *Cancel* are on show."""
        return self.reset_row.layout.display != "none"

    def ask_reset(self) -> None:
        """The Reset button: ask before undoing every step (``Session.reset`` is not undoable)."""
        steps = len(self.ex.session.steps)
        ui = self.ex.ui
        ui.reset_question.value = message(
            "warning", f"Undo all {steps:,} step{'s' * (steps != 1)}? Reset cannot be undone.")
        for widget in (ui.reset_confirm, ui.reset_cancel):
            widget.disabled = False
            widget.layout.display = ""
        self.reset_row.layout.display = ""

    def _confirm_reset(self) -> None:
        if not self.asking_reset:
            return
        self._drop_reset()
        self.ex.reset()

    def _drop_reset(self) -> None:
        ui = self.ex.ui
        ui.reset_question.value = ""
        for widget in (ui.reset_confirm, ui.reset_cancel):
            widget.disabled = True
            widget.layout.display = "none"
        self.reset_row.layout.display = "none"

    # -- requests ---------------------------------------------------------------------------------
    def current_request(self) -> PreviewRequest:
        """The step the controls describe now (see :meth:`Explorer.current_request`)."""
        name = self.ex.tensor
        if name is None:
            raise WidgetInputError("Explorer: no tensor is chosen (the model has none)")
        c = self.controls
        method = c.method.value
        custom = None
        if method == "custom_from_mask":
            custom = self._custom.get(name)
            if custom is None:
                raise WidgetInputError(
                    f"custom mask: no mask was given for {name!r}; upload a .pt or .npy file, "
                    f"pass Explorer(model, custom_masks={{{name!r}: mask}}) or call "
                    f"explorer.set_custom_mask({name!r}, mask)"
                )
        targets: tuple[str, ...] = ()
        if method == "global_unstructured":
            targets = tuple(c.global_targets.value)
        return PreviewRequest(
            target=name, method=method, settings=c.settings(custom), targets=targets,
            layout=c.layout.value, view_dim=int(c.dim.value),
        )

    # -- Apply, and the picture of what it applied -------------------------------------------------
    @property
    def showing_applied(self) -> bool:
        """True while the picture shows the step just applied (not a preview of the next)."""
        return self._holding is not None and self._hold_version == self._steps_key()

    def _steps_key(self) -> tuple[int, int]:
        steps = self.ex.session.steps
        return len(steps), id(steps[-1]) if steps else 0

    def apply(self) -> None:
        """The Apply button: apply the step the controls describe. When the picture on show is
        its preview, it then stays, labelled as the step applied, until the user asks for the
        next preview (*Preview next step*, or any control)."""
        shown = self.preview_request
        try:
            current: PreviewRequest | None = self.current_request()
        except WidgetInputError:
            current = None
        fresh = (shown is not None and current is not None and _same(shown, current)
                 and not self.preview_pane.stale
                 and not self.showing_applied)  # else it shows the step before
        steps = len(self.ex.session.steps)
        self._holding, self._hold_version = (current if fresh else None), None
        try:
            self.ex.apply()
        finally:
            if self._holding is not None and len(self.ex.session.steps) > steps:
                self._hold_version = self._steps_key()
                self._show_applied(len(self.ex.session.steps))
            elif self._holding is not None:  # nothing applied: the preview is still current
                self._release()

    def next_preview(self) -> None:
        """The *Preview next step* button: preview the controls' step on the pruned tensor."""
        self._release()
        self.request_preview()

    def _release(self) -> None:
        self._holding = self._hold_version = None
        ui = self.ex.ui
        ui.next_preview.disabled = True
        ui.next_preview.layout.display = "none"

    def _show_applied(self, number: int) -> None:
        ui, pane = self.ex.ui, self.preview_pane
        pane.picture.relabel(f"step {number}, applied")
        pane.image.value = pane.picture.png()
        pane.tell()
        pane.mark_current()
        stats = self.preview_stats
        if stats is not None and self.preview_request is not None:
            done = stats.count_line(self.preview_request.target).replace("prunes", "pruned", 1)
            ui.count_line.value = (f'<span class="pe-count-text">Step {number} applied: '
                                   f"{esc(done)}</span>")
        ui.apply.disabled = True
        ui.next_preview.disabled = False
        ui.next_preview.layout.display = ""
        self.refresh_buttons()

    def request_preview(self) -> None:
        """Ask for a new preview of the current controls (coalesced). A preview of something
        new (not a slider step of the last one, or a changed session) may wait for the session
        to build its caches (a first global preview): the picture and the readout are marked
        stale at once, before it starts, until it is drawn. While the picture shows the step
        just applied, a request for that same step again (the session's refresh after Apply,
        a resize) keeps it; anything else (a control, another tensor, Undo) ends it."""
        try:
            request = self.current_request()
        except WidgetInputError as err:
            self._release()
            self._failed(err)
            return
        if self._holding is not None:
            if _same(request, self._holding) and self._hold_version in (None,
                                                                        self._steps_key()):
                if self._hold_version is not None:  # what it shows is current: not dimmed
                    self.preview_pane.mark_current()
                return  # the step just applied stays on show until the user asks
            self._release()
        asked = (self.ex.version, request.beside_amount())
        if asked != self._asked:
            self._asked = asked
            self.preview_pane.mark_stale()
            if self.ex.metric is not None:
                self.ex.metric.mark_stale("computing…")
        self.runner.request(request)

    def kept(self, name: str) -> MaskSummary:
        """Current kept-mask of ``name`` with its counts, cached until the session changes."""
        return self.summaries.kept(name)

    def alive(self, name: str) -> MaskSummary:
        """What the forward pass keeps of ``name`` now (``Session.alive``: committed zeros count
        as pruned), cached until the session changes."""
        return self.summaries.alive(name)

    # -- refreshing -------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Show the session's state: targets, the chosen tensor's counts, buttons, note."""
        self.summaries.clear()
        with self.ex.quiet():
            self.refresh_targets()
            self.refresh_tensor_controls()
        ui = self.ex.ui
        self._drop_reset()  # the question was about the state before this change
        ui.apply.disabled = self.ex.tensor is None
        self.refresh_buttons()
        self.update_custom_note()

    def refresh_buttons(self) -> None:
        """Undo and Reset on exactly when the session would do them, each reason by the
        buttons (:func:`.feedback.refresh_buttons`)."""
        if self.showing_applied:
            self.ex.ui.apply.disabled = True
        refresh_buttons(self.ex, "the picture shows the step just applied; press Preview next "
                        "step (or change a control) to see the next" if self.showing_applied
                        else None)

    def refresh_targets(self) -> None:
        """Offer every tensor as a global target (default: ``Session.default_targets()``)."""
        c = self.controls
        names = list(self.ex.session.names)
        if list(c.global_targets.options) != names:
            old = [n for n in c.global_targets.value if n in names]
            c.global_targets.options = names
            c.global_targets.value = tuple(old or self.ex.session.default_targets())

    def refresh_tensor_controls(self) -> None:
        """Bounds of the controls for the chosen tensor (what is still unpruned)."""
        name = self.ex.tensor
        if name is None:
            return
        c = self.controls
        info = self.ex.session.info(name)
        c.set_tensor(len(info.shape), self._left(name), info.module_type)
        if c.amount_mode.value == "count":
            count, _ = c.units_left
            try:
                typed = parse_count(c.count.value)
            except WidgetInputError:
                typed = None  # the preview names the problem
            if typed is not None and typed > count:
                c.count.value = str(count)

    def _refresh_left(self) -> None:
        name = self.ex.tensor
        if name is not None:
            info = self.ex.session.info(name)
            self.controls.set_tensor(len(info.shape), self._left(name), info.module_type)

    def _left(self, name: str) -> dict[str, Any]:
        summary = self.kept(name)
        if self.controls.method.value == "global_unstructured":
            entries = sum(self.kept(n).kept_count for n in self.controls.global_targets.value)
        else:
            entries = summary.kept_count
        return {"entries": entries, "dim": summary.slices}

    def _on_control(self, change: dict[str, Any]) -> None:
        if self.ex.is_quiet:
            return
        c = self.controls
        with self.ex.quiet():
            if change["owner"] is c.amount_mode and change["new"] == "count":
                self._refresh_left()
                c.sync_count()
            elif change["owner"] in (c.method, c.dim, c.global_targets):
                self._refresh_left()
            c.update_visibility()
            self.update_custom_note()
        self.request_preview()

    # -- rendering (on the worker thread unless debounce is None) ---------------------------------
    def _render(self, request: PreviewRequest) -> None:
        with self.ex.status.working("preview"):
            self._draw(request)

    def _draw(self, request: PreviewRequest) -> None:
        holding = self._holding
        if holding is not None and _same(request, holding):
            return  # queued before Apply (a resize): the step applied stays on show
        self.preview_pane.fit()  # the room the browser reported, before the cells are cut
        try:  # one session call, under its lock: what to draw (see Session.preview_picture)
            seen = self.ex.session.preview_picture(
                request, summaries=self.summaries,
                cell_edges=self.preview_pane.picture.cell_edges if request.counted else None)
        except Exception as err:
            self._failed(err)
            return
        if self.runner.pending and time.monotonic() - self._drawn_at < FRAME_INTERVAL_S:
            return  # a newer request is waiting and a picture is recent: skip this stale one
        note = None
        if not seen.previewed:
            note = f"{request.target} is not among the global targets; showing its current mask"
        counted = seen.cells is not None
        pooled = self.preview_pane.draw(
            shape_only(seen.shape) if counted else seen.shown(), request,
            module_type=seen.module_type, plain=note is not None, kept_cells=seen.cells,
            before=None if note is not None or seen.now_cells is not None
            else seen.alive_now.kept, before_cells=seen.now_cells)
        counts = seen.counts(pooled.kept_total)
        stats = None if counts.stats is None else PreviewStats.of(counts.stats)
        self.preview_array = pooled.values
        before = seen.before  # the current mask, read if asked (held without the picture)
        self._mask = Later(lambda: before.kept) if seen.mask is None else seen.mask
        self.preview_stats = stats
        self.preview_request = request
        self.preview_error = None
        self._shown, self._reader = seen.shown, seen.reader
        self._now = seen.alive_now if seen.previewed else None
        self.render_count += 1
        self._drawn_at = time.monotonic()
        self.preview_pane.publish(request, seen.shape, note=note, stats=stats,
                                  unmasked_zeros=seen.unmasked_zeros)
        self._warn_collapse(request, list(counts.collapsed))
        self.ex.ui.apply.disabled = False
        self._show_input_error(None)
        self.refresh_buttons()
        self.ex.status.clear(source=("preview", "apply"))  # errors about older settings
        self.panels.show(request, seen.masks, stats)  # nothing while collapsed
        if self.ex.metric is not None:  # off the slider path (background, superseded)
            self.ex.metric.request(self.ex.version, seen.masks if seen.previewed else None)
        self.zoom.preview_changed()  # closed: marks it out of date only

    @property
    def preview_mask(self) -> torch.Tensor | None:
        """The mask the last preview showed (the current mask where the tensor is not among
        the step's targets); built on first read where the session left it unbuilt."""
        return None if self._mask is None else self._mask()

    @property
    def preview_shown(self) -> torch.Tensor | None:
        """What the last picture shows kept after the step (or now): the preview's mask less
        the unmasked exact zeros; built on first read, like :attr:`preview_mask`."""
        return None if self._shown is None else self._shown()

    @property
    def preview_window(self) -> WindowReader | None:
        """Reads windows of :attr:`preview_shown` (the zoom's source), without building it
        where the session's preview reads a window from its order alone."""
        return None if self._shown is None else self._reader or matrix_reader(self._shown)

    def _warn_collapse(self, request: PreviewRequest, names: list[str]) -> None:
        self.collapsed = names
        what = "global pruning" if request.is_global else "this step"
        self.ex.ui.collapse_warning.value = collapse_warning(what, names) if names else ""

    def _failed(self, err: BaseException) -> None:
        self.collapsed = []
        self.ex.ui.collapse_warning.value = ""
        self._mask = self._shown = self._reader = None
        self.preview_stats = None
        self.preview_error = describe_error(err)
        self._now = None
        self.preview_pane.mark_stale()
        self.panels.mark_stale()
        if self.ex.metric is not None:
            self.ex.metric.mark_stale()
        self.ex.ui.apply.disabled = True
        self._show_input_error(err)
        self.refresh_buttons()
        self.ex.status.error(err, "Preview", source="preview",
                             shown="by the controls and over the picture")
        self.zoom.preview_changed()

    def _show_input_error(self, err: BaseException | None) -> None:
        show_input_error(self.ex, self.controls, err)  # by the control and over the picture

    # -- the picture's room, from the browser -----------------------------------------------------
    def _on_room(self, _change: dict[str, Any]) -> None:
        room = self.probe.room()
        if room is not None and self.preview_pane.set_room(room):
            self.zoom.set_room(drawn_room(room))  # the zoom sits in the same column
            self.request_preview()

    def _on_presentation(self, change: dict[str, Any]) -> None:
        self.preview_pane.set_presentation(bool(change["new"]))
        for widget in (self.ex.ui.preview_info, self.panels.box):
            widget.layout.display = "none" if change["new"] else ""
        if "explorer" in self.ex.ui:  # the explorer's text larger (stylesheet.py)
            root = self.ex.ui.explorer
            (root.add_class if change["new"] else root.remove_class)("pe-presenting")
        self.request_preview()
