"""``Explorer``: the whole tool in one notebook widget, bound to a :class:`Session`.

The explorer holds no pruning logic. Controls become a
:class:`~prune_explorer.widgets.preview.PreviewRequest`; the session computes the preview and
performs Apply/Undo/Reset/Commit/Import; the explorer redraws whenever the session reports a
change (:meth:`Session.on_change`), also when you drive the session from code.

Layout: a tensor picker, device and summary on top; tabs *Explore* (controls, live preview,
Apply/Undo/Reset), *History*, *Global vs local*, *Commit* and *Export*; a status line and a
progress bar at the bottom. Every widget that matters has a stable CSS class ``pe-<name>`` and
is reachable as ``explorer.ui.<name>`` (see :attr:`Explorer.ui`).

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
>>> ex = Explorer(model, debounce=None)  # synchronous previews (scripts and tests)
>>> ex.ui.amount.value = 0.5
>>> int((ex.preview_mask == 0).sum())  # half of the 32 weights of layer 0
16
>>> ex.ui.apply.click()
>>> ex.session.steps
(Step('l1_unstructured', '0.weight', amount=0.5),)
>>> ex.ui.undo.click()
>>> ex.status.text
"Undid Step('l1_unstructured', '0.weight', amount=0.5)"
>>> ex.close()
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import ipywidgets as widgets
import numpy as np
import torch
from torch import nn

from prune_explorer.session import Session, SessionEvent

from .commit import CommitPane
from .compare import ComparePane
from .controls import PruningControls
from .errors import WidgetInputError
from .export import ExportPane
from .history import HistoryPane
from .html import esc, percent
from .preview import MaskSummary, PreviewPane, PreviewRequest, PreviewStats
from .scheduler import LatestOnly
from .shrink import ShrinkPane
from .status import Progress, StatusBar, describe_error
from .tabs import COMMIT_TAB, COMPARE_TAB, HISTORY_TAB, TAB_TITLES

__all__ = ["UI", "Explorer", "explore"]



class UI(dict):
    """The explorer's widgets by name; ``ui.amount`` is ``ui["amount"]`` (CSS ``pe-amount``)."""

    def __getattr__(self, name: str) -> widgets.Widget:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"Explorer.ui has no widget {name!r}; it has {sorted(self)}"
                                 ) from None

    def add(self, name: str, widget: widgets.Widget) -> widgets.Widget:
        """Register ``widget`` as ``name`` and give it the CSS class ``pe-<name>``."""
        widget.add_class("pe-" + name.replace("_", "-"))
        self[name] = widget
        return widget


def _devices() -> list[str]:
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return out


def _model_device(model: nn.Module) -> str:
    for tensor in (*model.parameters(), *model.buffers()):
        device = tensor.device
        if device.type == "cuda":
            return f"cuda:{device.index or 0}"
        return str(device)
    return "cpu"


def _shape_text(shape: tuple[int, ...]) -> str:
    return "×".join(str(s) for s in shape) or "scalar"


class Explorer:
    """Interactive pruning explorer for ``model`` (a view over a :class:`Session`).

    Parameters
    ----------
    model : torch.nn.Module, optional
        The model to explore (pruned in place). Give ``model`` or ``session``.
    session : Session, optional
        An existing session to show; its model is the one explored.
    custom_masks : mapping of str to torch.Tensor, optional
        Masks for the method "custom mask", by tensor address (see :meth:`set_custom_mask`).
    debounce : float or None, default 0.0
        ``None`` renders previews synchronously inside the control callback (deterministic, for
        tests and scripts). A number runs them on a background thread after that many seconds
        without a newer change; requests superseded meanwhile are dropped, so dragging a slider
        never queues stale pictures. :meth:`flush` waits for the newest one.
    figsize, dpi : optional
        Size of the preview picture.

    Attributes
    ----------
    session : Session
    ui : UI
        Every widget by name (``ui.tensor``, ``ui.method``, ``ui.amount``, ``ui.apply``...).
    widget : ipywidgets.VBox
        The root widget (CSS class ``pe-explorer``); the explorer displays as it.
    status : StatusBar
        Status line (``pe-status``): ``status.kind``, ``status.text``.
    preview_mask : torch.Tensor or None
        The mask of the last rendered preview (as ``Session.preview`` returned it); None when
        the controls hold invalid input.
    preview_array : numpy.ndarray or None
        The pooled kept-fraction array drawn in the preview image.
    preview_stats : PreviewStats or None
        Counts shown next to the preview.
    preview_error : str or None
        Why there is no preview for the current controls.
    render_count : int
        Previews rendered so far.
    """

    def __init__(
        self,
        model: nn.Module | None = None,
        *,
        session: Session | None = None,
        custom_masks: Mapping[str, torch.Tensor] | None = None,
        debounce: float | None = 0.0,
        figsize: tuple[float, float] = (4.8, 4.0),
        dpi: float = 80,
    ) -> None:
        if session is None:
            if model is None:
                raise TypeError("Explorer: give a model or a session; got neither")
            session = Session(model)
        elif not isinstance(session, Session):
            raise TypeError(f"Explorer: session must be a Session; got {type(session).__name__}")
        elif model is not None and model is not session.model:
            raise ValueError("Explorer: model must be session.model when both are given; got "
                             "a different model")
        masks = dict(custom_masks or {})
        for name, mask in masks.items():
            _check_custom(session, name, mask, "Explorer")
        self.session = session
        self.debounce = debounce
        self.preview_mask: torch.Tensor | None = None
        self.preview_array: np.ndarray | None = None
        self.preview_stats: PreviewStats | None = None
        self.preview_request: PreviewRequest | None = None
        self.preview_error: str | None = None
        self.render_count = 0
        self._lock = threading.RLock()  # session access: actions vs background previews
        self._quiet_depth = 0
        self._batch_depth = 0
        self._batch_dirty = False
        self._version = 0
        self._kept_cache: dict[tuple[str, int], MaskSummary] = {}
        self._custom: dict[str, torch.Tensor] = {}
        self._zeros: dict[str, int] = {}  # exact zeros per tensor, from the last report

        self.ui = UI()
        self.status = StatusBar()
        self.ui.add("status", self.status.html)
        self.ui.add("progress", self.status.progress)
        self._build_explore_tab(figsize, dpi)
        self.history_pane = HistoryPane(self)
        self.compare_pane = ComparePane(self)
        self.commit_pane = CommitPane(self)
        self.example_inputs: Any = None  # one input batch, for Shrink (demo models: own)
        self.shrink_pane = ShrinkPane(self)
        self.export_pane = ExportPane(self)
        commit_tab = widgets.VBox([self.commit_pane.box, self.shrink_pane.box])
        tabs = widgets.Tab(
            children=[self._explore_box, self.history_pane.box, self.compare_pane.box,
                      commit_tab, self.export_pane.box],
            titles=TAB_TITLES,
        )
        self.ui.add("tabs", tabs)
        for name, child in zip(("explore_tab", "history_tab", "compare_tab", "commit_tab",
                                "export_tab"), tabs.children, strict=True):
            self.ui.add(name, child)
        tabs.observe(self._on_tab, names="selected_index")
        header = widgets.HBox([self.ui.tensor, self.ui.device, self.ui.summary])
        self.widget = widgets.VBox([header, tabs, self.status.widget])
        self.ui.add("explorer", self.widget)

        self._runner = LatestOnly(
            self._render_preview, debounce=debounce, on_error=self._runner_error
        )
        self._unsubscribe = session.on_change(self._on_session_change)
        self._custom = {name: mask.detach() for name, mask in masks.items()}
        self.refresh()
        if not session.names:
            self.status.show("warning", "This model has no parameters to prune.")

    # -- building ---------------------------------------------------------------------------------
    def _build_explore_tab(self, figsize: tuple[float, float], dpi: float) -> None:
        ui = self.ui
        ui.add("tensor", widgets.Dropdown(options=[], description="tensor",
                                          layout=widgets.Layout(width="460px"),
                                          style={"description_width": "60px"}))
        device = _model_device(self.session.model)
        devices = _devices()
        ui.add("device", widgets.Dropdown(options=devices + [device] * (device not in devices),
                                          value=device,
                                          description="device",
                                          layout=widgets.Layout(width="180px"),
                                          style={"description_width": "50px"}))
        ui.add("summary", widgets.HTML(value=""))
        self.controls = c = PruningControls()
        for name in ("method", "amount_mode", "amount", "count", "left", "n", "dim",
                     "global_method", "global_targets", "custom", "layout", "pattern", "block"):
            ui.add(name, getattr(c, name))
        self.preview_pane = PreviewPane(figsize=figsize, dpi=dpi)
        ui.add("preview", self.preview_pane.image)
        ui.add("preview_info", self.preview_pane.info)
        ui.add("apply", widgets.Button(description="Apply", button_style="primary",
                                       tooltip="prune the tensor as previewed"))
        ui.add("undo", widgets.Button(description="Undo", tooltip="undo the last step"))
        ui.add("reset", widgets.Button(description="Reset", button_style="warning",
                                       tooltip="undo every step of this session"))
        buttons = widgets.HBox([ui.apply, ui.undo, ui.reset])
        left = widgets.VBox([c.box, buttons, ui.preview_info],
                            layout=widgets.Layout(width="420px"))
        self._explore_box = widgets.HBox([left, ui.preview])

        ui.tensor.observe(self._on_tensor, names="value")
        ui.device.observe(self._on_device, names="value")
        c.observe_all(self._on_control)
        ui.apply.on_click(lambda _: self.apply())
        ui.undo.on_click(lambda _: self.undo())
        ui.reset.on_click(lambda _: self.reset())

    # -- public -----------------------------------------------------------------------------------
    @property
    def model(self) -> nn.Module:
        """The model being explored."""
        return self.session.model

    @property
    def tensor(self) -> str | None:
        """Address of the tensor chosen in the picker."""
        return self.ui.tensor.value

    def select(self, name: str) -> None:
        """Choose the tensor ``name`` in the picker."""
        if name not in self.session.names:
            raise WidgetInputError(
                f"Explorer.select: name {name!r} is not a prunable tensor of this model; "
                f"choose one of {list(self.session.names)}"
            )
        self.ui.tensor.value = name

    def set_custom_mask(self, name: str, mask: torch.Tensor) -> None:
        """Provide the mask the method "custom mask" applies to tensor ``name`` (1 = keep).

        The session checks shape and values when you preview or apply it.
        """
        _check_custom(self.session, name, mask, "Explorer.set_custom_mask")
        self._custom[name] = mask.detach()
        self._update_custom_note()
        if name == self.tensor and self.controls.method.value == "custom_from_mask":
            self.request_preview()

    @property
    def custom_masks(self) -> dict[str, torch.Tensor]:
        """The custom masks given so far, by address (a copy)."""
        return dict(self._custom)

    def current_request(self) -> PreviewRequest:
        """The step the controls describe now.

        Raises
        ------
        WidgetInputError
            No tensor chosen, or "custom mask" without a mask for the chosen tensor.
        """
        name = self.tensor
        if name is None:
            raise WidgetInputError("Explorer: no tensor is chosen (the model has none)")
        c = self.controls
        method = c.method.value
        custom = None
        if method == "custom_from_mask":
            custom = self._custom.get(name)
            if custom is None:
                raise WidgetInputError(
                    f"custom mask: no mask was given for {name!r}; pass "
                    f"Explorer(model, custom_masks={{{name!r}: mask}}) or call "
                    f"explorer.set_custom_mask({name!r}, mask)"
                )
        targets: tuple[str, ...] = ()
        if method == "global_unstructured":
            targets = tuple(c.global_targets.value)
        return PreviewRequest(
            target=name, method=method, settings=c.settings(custom), targets=targets,
            layout=c.layout.value, view_dim=int(c.dim.value),
        )

    def request_preview(self) -> None:
        """Ask for a new preview of the current controls (coalesced; see ``debounce``)."""
        try:
            request = self.current_request()
        except WidgetInputError as err:
            self._preview_failed(err)
            return
        self._runner.request(request)

    def flush(self) -> None:
        """Render every pending picture now (preview, history, comparison) and return."""
        self._runner.flush()
        self.history_pane.runner.flush()
        self.compare_pane.runner.flush()

    def refresh(self) -> None:
        """Redraw everything from the session (the session's change events call this)."""
        with self._quiet():
            self._refresh_picker()
            self._refresh_targets()
            self._refresh_tensor_controls()
        self._refresh_summary()
        self._refresh_buttons()
        self._update_custom_note()
        self.history_pane.invalidate()
        self.compare_pane.invalidate()
        self.commit_pane.invalidate()
        self.export_pane.refresh()
        self.request_preview()

    # -- actions (buttons call these) -------------------------------------------------------------
    def act(self, what: str, action: Callable[[Progress], Any], *,
            done: str | Callable[[Any], str] | None = None) -> Any:
        """Run a session action at the widget boundary: errors become a status message."""
        with self._lock:
            return self.status.run(what, action, done=done)

    def apply(self) -> None:
        """Apply the previewed step (the Apply button)."""
        self.act("Apply", lambda _: self.current_request().apply(self.session),
                 done=lambda step: f"Applied {step!r}")

    def undo(self) -> None:
        """Undo the last step (the Undo button)."""
        self.act("Undo", lambda _: self.session.undo(), done=lambda step: f"Undid {step!r}")

    def reset(self) -> None:
        """Undo every step (the Reset button)."""
        self.act("Reset", lambda _: self.session.reset(),
                 done="Reset: the model is back to how the session found it")

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Refresh once at the end of several session changes instead of after each."""
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if self._batch_depth == 0 and self._batch_dirty:
                self._batch_dirty = False
                self.refresh()

    def kept(self, name: str) -> MaskSummary:
        """Current kept-mask of ``name`` with its counts, cached until the session changes."""
        key = (name, self._version)
        if key not in self._kept_cache:
            self._kept_cache[key] = MaskSummary.of(self.session.mask(name))
        return self._kept_cache[key]

    def close(self) -> None:
        """Stop background rendering, unsubscribe from the session, close the widgets."""
        self._runner.close()
        self.history_pane.runner.close()
        self.compare_pane.runner.close()
        self._unsubscribe()
        _close_tree(self.widget)
        for widget in self.ui.values():  # also those not on show (none today, but cheap)
            widget.close()

    # -- display ----------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/plain"] = repr(self)
        return bundle

    def __repr__(self) -> str:
        return (
            f"Explorer({self.session!r}, tensor={self.tensor!r}, "
            f"method={self.controls.method.value!r}, status={self.status.text!r})"
        )

    # -- session events ---------------------------------------------------------------------------
    def _on_session_change(self, event: SessionEvent) -> None:
        self._version += 1
        self._kept_cache.clear()
        if event.kind == "to":
            with self._quiet():
                self.ui.device.value = _model_device(self.session.model)
        if self._batch_depth:
            self._batch_dirty = True
            return
        self.refresh()

    # -- control events ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        # Programmatic widget changes inside this block do not trigger the observers.
        self._quiet_depth += 1
        try:
            yield
        finally:
            self._quiet_depth -= 1

    def _on_control(self, change: dict[str, Any]) -> None:
        if self._quiet_depth:
            return
        c = self.controls
        with self._quiet():
            if change["owner"] is c.amount_mode and change["new"] == "count":
                self._refresh_left()
                c.sync_count()
            elif change["owner"] in (c.method, c.dim, c.global_targets):
                self._refresh_left()
            c.update_visibility()
            self._update_custom_note()
        self.request_preview()

    def _on_tensor(self, change: dict[str, Any]) -> None:
        if self._quiet_depth:
            return
        with self._quiet():
            self._refresh_tensor_controls()
            self._update_custom_note()
        self.history_pane.invalidate(reset_step=True)
        self.request_preview()

    def _on_device(self, change: dict[str, Any]) -> None:
        if self._quiet_depth:
            return
        device = change["new"]
        moved = self.act(f"Move to {device}", lambda _: self.session.to(device),
                         done=f"Model, masks and history moved to {device}")
        if moved is None:
            with self._quiet():
                self.ui.device.value = change["old"]

    def _on_tab(self, change: dict[str, Any]) -> None:
        index = change["new"]
        if index == HISTORY_TAB:
            self.history_pane.invalidate()
        elif index == COMPARE_TAB:
            self.compare_pane.invalidate()
        elif index == COMMIT_TAB:
            self.commit_pane.invalidate()

    @property
    def selected_tab(self) -> int | None:
        """Index of the tab on show (see :data:`TAB_TITLES`)."""
        return self.ui.tabs.selected_index

    # -- refreshing -------------------------------------------------------------------------------
    def _refresh_picker(self) -> None:
        report = self.session.report()
        self._zeros = {str(n): int(z) for n, z in zip(report["name"], report["zeros"],
                                                      strict=True)}
        options = [
            (f"{row.name} · {_shape_text(row.shape)} · {percent(row.sparsity)} pruned", row.name)
            for row in report.itertuples()
        ]
        picker = self.ui.tensor
        old = picker.value
        picker.options = options
        names = [value for _, value in options]
        if old in names:
            picker.value = old
        elif names:
            picker.value = self._default_tensor(names)

    def _default_tensor(self, names: list[str]) -> str:
        for name in names:
            if len(self.session.info(name).shape) >= 2:
                return name
        return names[0]

    def _refresh_targets(self) -> None:
        c = self.controls
        names = list(self.session.names)
        if list(c.global_targets.options) != names:
            old = [n for n in c.global_targets.value if n in names]
            c.global_targets.options = names
            c.global_targets.value = tuple(old or self.compare_pane.default_targets())

    def _refresh_tensor_controls(self) -> None:
        name = self.tensor
        if name is None:
            return
        c = self.controls
        c.set_tensor(len(self.session.info(name).shape), self._left(name))
        if c.amount_mode.value == "count":
            count, _ = c.units_left
            if c.count.value > count:
                c.count.value = count

    def _refresh_left(self) -> None:
        name = self.tensor
        if name is not None:
            self.controls.set_tensor(len(self.session.info(name).shape), self._left(name))

    def _left(self, name: str) -> dict[str, Any]:
        summary = self.kept(name)
        if self.controls.method.value == "global_unstructured":
            entries = sum(self.kept(n).kept_count for n in self.controls.global_targets.value)
        else:
            entries = summary.kept_count
        return {"entries": entries, "dim": list(summary.kept_slices)}

    def _refresh_summary(self) -> None:
        report = self.session.report(totals=True)
        total = report.iloc[-1]
        steps = len(self.session.steps)
        pruned = int(sum(1 for methods in report["methods"].iloc[:-1] if methods))
        self.ui.summary.value = (
            f'<span class="pe-summary-text">{esc(type(self.model).__name__)}: '
            f"{len(self.session.names)} tensors, {pruned} pruned, {steps} "
            f"step{'s' * (steps != 1)}, {int(total['zeros']):,} of {int(total['numel']):,} "
            f"zero ({percent(total['sparsity'])})</span>"
        )

    def _refresh_buttons(self) -> None:
        has_steps = bool(self.session.steps)
        self.ui.undo.disabled = not has_steps or self.session.steps[-1].method == "remove"
        self.ui.reset.disabled = not has_steps
        self.ui.apply.disabled = self.tensor is None

    def _update_custom_note(self) -> None:
        name = self.tensor
        mask = self._custom.get(name) if name is not None else None
        if mask is None:
            text = (f"No custom mask for {name!r}: call explorer.set_custom_mask({name!r}, "
                    "mask) (1 = keep, 0 = prune).")
        else:
            kept = int(mask.count_nonzero())
            text = (f"Custom mask for {name!r}: shape {tuple(mask.shape)}, keeps {kept:,} of "
                    f"{mask.numel():,}.")
        self.controls.custom.value = f'<span class="pe-custom-text">{esc(text)}</span>'

    # -- preview rendering (runs on the worker thread unless debounce is None) --------------------
    def _render_preview(self, request: PreviewRequest) -> None:
        with self._lock:
            try:
                masks = request.preview_all(self.session)
                before = self.kept(request.target)
                others = {n: (self.kept(n), m) for n, m in masks.items() if n != request.target}
                module_type = self.session.info(request.target).module_type
            except Exception as err:
                self._preview_failed(err)
                return
        if self._runner.pending:
            return  # a newer request is waiting: do not draw this stale one
        mask = masks.get(request.target)
        stats = note = None
        if mask is None:
            mask = before.kept
            note = f"{request.target} is not among the global targets; showing its current mask"
        pooled = self.preview_pane.draw(mask, request, module_type=module_type,
                                        plain=note is not None)
        if note is None:
            stats = PreviewStats.measure(before, mask, request, others=others,
                                         kept_after=pooled.kept_total)
        unmasked_zeros = self._zeros.get(request.target, 0) - (
            before.kept.numel() - before.kept_count
        )
        self.preview_array = pooled.values
        self.preview_mask = mask
        self.preview_stats = stats
        self.preview_request = request
        self.preview_error = None
        self.render_count += 1
        self.preview_pane.publish(request, tuple(mask.shape), note=note, stats=stats,
                                  unmasked_zeros=unmasked_zeros)
        self.status.clear(source="preview")

    def _preview_failed(self, err: BaseException) -> None:
        self.preview_mask = None
        self.preview_stats = None
        self.preview_error = describe_error(err)
        self.preview_pane.show_error(f"No preview: {self.preview_error}")
        self.status.error(err, "Preview", source="preview")

    def _runner_error(self, err: BaseException) -> None:
        # Drawing failed (the session part reports through _preview_failed directly).
        self._preview_failed(err)


def _check_custom(session: Session, name: Any, mask: Any, where: str) -> None:
    if name not in session.names:
        raise WidgetInputError(
            f"{where}: name {name!r} is not a prunable tensor of this model; choose one of "
            f"{list(session.names)}"
        )
    if not isinstance(mask, torch.Tensor):
        raise WidgetInputError(
            f"{where}: mask must be a torch.Tensor of 0/1 values; got {type(mask).__name__}"
        )


def _close_tree(widget: widgets.Widget) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()


def explore(model: nn.Module, **kwargs: Any) -> Explorer:
    """Open the explorer on ``model`` (see :class:`Explorer` for the keyword arguments).

    Examples
    --------
    >>> from prune_explorer.demo import load_mlp
    >>> ex = explore(load_mlp(), debounce=None)
    >>> ex.tensor
    'fc1.weight'
    >>> ex.close()
    """
    return Explorer(model, **kwargs)
