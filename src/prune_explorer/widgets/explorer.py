"""``Explorer``: the whole tool in one notebook widget, bound to a :class:`Session`.

The explorer holds no pruning logic. Controls become a
:class:`~prune_explorer.widgets.tabs.explore.preview.PreviewRequest`; the session computes the
preview and performs Apply/Undo/Reset/Commit/Import; the explorer redraws whenever the session
reports a change (:meth:`Session.on_change`), also when you drive the session from code.

Layout: a tensor picker, device and summary on top; tabs *Explore* (controls, live preview,
Apply/Undo/Reset), *History*, *Global vs local*, *Commit*, *Export* and *Fine-tune* (listed in
:mod:`.tabs.registry`); a status line and a progress bar at the bottom. Every widget that
matters has a stable CSS class ``pe-<name>`` and is reachable as ``explorer.ui.<name>`` (see
:attr:`Explorer.ui`).

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
>>> ex.status.text
'Applied L1 magnitude, 50% of 0.weight: 16 entries pruned (now 50.0% of 0.weight pruned).'
>>> ex.ui.undo.click()
>>> ex.status.text
'Undid L1 magnitude, 50% of 0.weight: 16 entries restored (now 0.0% of 0.weight pruned).'
>>> ex.close()
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import torch
from torch import nn

from prune_explorer.session import (
    InvalidStepError,
    Session,
    SessionEvent,
    Step,
)
from prune_explorer.session.analysis.wording import describe_change, percent, plural, shape_text

from .errors import WidgetInputError
from .parts.html import esc
from .parts.pane import Pane
from .parts.status import Progress, StatusBar
from .parts.stylesheet import stylesheet
from .parts.ui import UI, add_header, model_device
from .tabs.explore.maskfile import check_custom
from .tabs.explore.metric import Evaluate, MetricReadout
from .tabs.explore.preview import MaskSummary, PreviewRequest
from .tabs.registry import TAB_TITLES, TABS

if TYPE_CHECKING:
    from .tabs.commit import CommitPane
    from .tabs.compare import ComparePane
    from .tabs.explore.pane import ExplorePane
    from .tabs.export import ExportPane
    from .tabs.fine_tune import FineTunePane
    from .tabs.history import HistoryPane
    from .tabs.shrink import ShrinkPane

__all__ = ["UI", "Explorer", "explore"]



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
        Size of the preview picture; a larger ``dpi`` (say 120) enlarges picture and fonts
        alike, for a projector.
    pixel_ratio : float, default 1.0
        Pixels rendered per CSS pixel: 2 draws the picture at twice the resolution and shows
        it at the same size, sharp on a HiDPI screen or a zoomed browser (4x the pixels to
        draw per slider step).
    evaluate : callable, optional
        ``fn(model) -> float`` or a dict of named floats (test accuracy, say). Shown for the
        current state and for the previewed step (``pe-metric``), computed in the background
        on a trial copy of the model; the model is never touched (see :mod:`.tabs.explore.metric`).
    metric_label : str, optional
        What ``evaluate`` measures, for its readout ("test accuracy"); default: the
        function's ``metric_label`` attribute, else "score".
    train : callable, optional
        ``train(model, epochs)``, training the model in place (its optimizer built inside), for
        the *Fine-tune* tab's schedules (see :mod:`.tabs.fine_tune`); the demo's is
        :func:`prune_explorer.demo.train`. Without it that tab says how to give one.

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

    # The panes of the tabs (built from TABS; typed here for the explorer's own use and tests).
    explore_pane: ExplorePane
    history_pane: HistoryPane
    compare_pane: ComparePane
    commit_pane: CommitPane
    shrink_pane: ShrinkPane
    export_pane: ExportPane
    fine_tune_pane: FineTunePane

    def __init__(
        self,
        model: nn.Module | None = None,
        *,
        session: Session | None = None,
        custom_masks: Mapping[str, torch.Tensor] | None = None,
        debounce: float | None = 0.0,
        figsize: tuple[float, float] = (4.8, 4.0),
        dpi: float = 80,
        pixel_ratio: float = 1.0,
        evaluate: Evaluate | None = None,
        metric_label: str | None = None,
        train: Callable[[nn.Module, int], object] | None = None,
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
            masks[name] = check_custom(session, name, mask, "Explorer")
        self.session = session
        self.debounce = debounce
        self._quiet_depth = 0
        self._batch_depth = 0
        self._batch_dirty = False
        self._reserved: str | None = None  # see reserve()
        self._zeros: dict[str, int] = {}  # exact zeros per tensor, from the last report

        self.ui = UI()
        self.status = StatusBar()
        self.ui.add("status", self.status.html)
        self.ui.add("progress", self.status.progress)
        self._build_header()
        self.metric = None if evaluate is None else MetricReadout(
            session, evaluate, debounce=debounce, label=metric_label)
        if self.metric is not None:
            self.ui.add("metric", self.metric.html)
        self.example_inputs: Any = None  # one input batch, for Shrink (demo models: own)
        options = {"custom_masks": masks, "figsize": figsize, "dpi": dpi,
                   "pixel_ratio": pixel_ratio, "evaluate": evaluate,
                   "metric_label": metric_label, "train": train}
        self.panes: dict[str, Pane] = {}  #: every pane by name, in the order of the tabs
        self._tab_panes: list[tuple[Pane, ...]] = []  # the panes of each tab, by index
        children = []
        for tab in TABS:  # the one list of the tabs (see tabs/registry.py)
            built = []
            for part in tab.parts:
                pane = self.panes[part.name] = part.build(self, options)
                setattr(self, f"{part.name}_pane", pane)
                built.append(pane)
            self._tab_panes.append(tuple(built))
            children.append(built[0].widget if len(built) == 1 else
                            widgets.VBox([pane.widget for pane in built]))
        tabs = widgets.Tab(children=children, titles=TAB_TITLES)
        self.ui.add("tabs", tabs)
        for tab, child in zip(TABS, tabs.children, strict=True):
            self.ui.add(f"{tab.name}_tab", child)
        tabs.observe(self._on_tab, names="selected_index")
        header = widgets.HBox([self.ui.tensor, self.ui.device, self.ui.summary])
        header.add_class("pe-header")  # wraps: the summary takes its own line when narrow
        self.ui.add("busy", self.status.busy)
        self.ui.add("stylesheet", stylesheet())
        self.widget = widgets.VBox([self.ui.stylesheet, header, tabs, self.status.widget])
        self.ui.add("explorer", self.widget)

        self._unsubscribe = session.on_change(self._on_session_change)
        self.refresh()
        if not session.names:
            self.status.show("warning", "This model has no parameters to prune.")

    # -- building ---------------------------------------------------------------------------------
    def _build_header(self) -> None:
        add_header(self.ui, self.session.model)
        self.ui.tensor.observe(self._on_tensor, names="value")
        self.ui.device.observe(self._on_device, names="value")

    # -- public -----------------------------------------------------------------------------------
    @property
    def model(self) -> nn.Module:
        """The model being explored."""
        return self.session.model

    @property
    def version(self) -> int:
        """The session's :attr:`~Session.revision`: it moves with every change, so it keys the
        panes' caches (also when a change's event was cut short by Ctrl-C)."""
        return self.session.revision

    @property
    def tensor(self) -> str | None:
        """Address of the tensor chosen in the picker."""
        return self.ui.tensor.value

    def select(self, name: str) -> None:
        """Choose the tensor ``name`` in the picker; an alias of a tied tensor
        (``"lm_head.weight"``) chooses the tensor it names, as everywhere in the session."""
        try:
            listed = self.session.info(name).name  # the session's one alias rule
        except InvalidStepError:
            raise WidgetInputError(
                f"Explorer.select: name {name!r} is not a prunable tensor of this model; "
                f"choose one of {list(self.session.names)}"
            ) from None
        self.ui.tensor.value = listed

    def set_custom_mask(self, name: str, mask: torch.Tensor) -> None:
        """Provide the mask the method "custom mask" applies to tensor ``name`` (1 = keep).

        The session checks shape and values when you preview or apply it.
        """
        self.explore_pane.set_custom_mask(name, mask)

    @property
    def custom_masks(self) -> dict[str, torch.Tensor]:
        """The custom masks given so far, by address (a copy)."""
        return self.explore_pane.custom_masks

    def current_request(self) -> PreviewRequest:
        """The step the controls describe now.

        Raises
        ------
        WidgetInputError
            No tensor chosen, or "custom mask" without a mask for the chosen tensor.
        """
        return self.explore_pane.current_request()

    def request_preview(self) -> None:
        """Ask for a new preview of the current controls (coalesced; see ``debounce``)."""
        self.explore_pane.request_preview()

    # The Explore tab's state, as the explorer has always exposed it.
    controls = property(lambda self: self.explore_pane.controls)
    preview_pane = property(lambda self: self.explore_pane.preview_pane)
    preview_mask = property(lambda self: self.explore_pane.preview_mask)
    preview_array = property(lambda self: self.explore_pane.preview_array)
    preview_stats = property(lambda self: self.explore_pane.preview_stats)
    preview_request = property(lambda self: self.explore_pane.preview_request)
    preview_error = property(lambda self: self.explore_pane.preview_error)
    render_count = property(lambda self: self.explore_pane.render_count)
    _runner = property(lambda self: self.explore_pane.runner)

    def zeros(self, name: str) -> int:
        """Entries of ``name`` that are exactly 0 (from the last report)."""
        return self._zeros.get(name, 0)

    def zeros_snapshot(self) -> dict[str, int]:
        """Exact zeros of every tensor now (a copy), to say later what an action changed
        (:meth:`outcome`)."""
        return dict(self._zeros)

    def flush(self) -> None:
        """Render every pending picture now (preview, history, comparison) and return."""
        for pane in self.panes.values():
            pane.flush()
        if self.metric is not None:
            self.metric.runner.flush()

    def refresh(self) -> None:
        """Redraw everything from the session (the session's change events call this)."""
        with self.quiet():
            self._refresh_picker()
            device = model_device(self.session.model)
            if device in self.ui.device.options:
                self.ui.device.value = device
        self.explore_pane.refresh()
        self._refresh_summary()
        for pane in self.panes.values():
            pane.invalidate()
        self.request_preview()

    # -- actions (buttons call these) -------------------------------------------------------------
    def act(self, what: str, action: Callable[[Progress], Any], *,
            done: str | Callable[[Any], str] | None = None, source: str = "action",
            atomic: bool = True) -> Any:
        """Run a session action at the widget boundary: errors become a status message. One
        transaction (``atomic``), one redraw. Ctrl-C (any number of them) is let through while
        the action runs, never while the explorer redraws after it; the status line then says
        what the session holds: as before ("<what> failed: interrupted") or as after (the done
        message), however the interrupts fell."""
        if self._reserved is not None:  # a background run changes the session meanwhile
            self.status.error(WidgetInputError(
                f"{self._reserved} is in progress; press Stop on its tab and try again"),
                what, source=source)
            return None
        with self.session.lock:  # partials, not lambdas: no frame of ours between the
            # action's return and the status bar's, where an interrupt would cut in
            return self.status.run(what, functools.partial(self._atomically, action,
                                                           atomic=atomic),
                                   done=done, source=source,
                                   settle=functools.partial(self._settle,
                                                            self.session.revision))

    def reserve(self, what: str | None) -> None:
        """While ``what`` (say "a fine-tune run") is set, :meth:`act` refuses every other
        action with a line naming it: a run on a background thread owns the session between
        its rounds too. ``None`` ends the reservation."""
        self._reserved = what

    def _atomically(self, action: Callable[[Progress], Any], progress: Progress,
                    atomic: bool) -> Any:
        # The redraw waits for _settle (Ctrl-C held there): here only the action runs.
        result = []
        try:
            with self.batch(redraw=False), (self.session.transaction() if atomic
                                            else contextlib.nullcontext()):
                result.append(action(progress))
        except KeyboardInterrupt as err:
            if result:  # it returned: the interrupt came as its transaction closed
                err.result = result[0]  # type: ignore[attr-defined]
            raise
        return result[0]

    def _settle(self, revision: int) -> bool:
        # After an action, however it ended (called by StatusBar.run with Ctrl-C held): redraw
        # what it changed; whether it took effect (the session's revision moved since).
        if self._batch_dirty and not self._batch_depth:
            self._batch_dirty = False
            self.refresh()
        return self.session.revision != revision

    def apply(self) -> None:
        """Apply the previewed step (the Apply button). Its error is about these controls: the
        next valid preview clears it."""
        before = self.zeros_snapshot()
        self.act("Apply", lambda _: self.current_request().apply(self.session),
                 done=lambda step: self.outcome("Applied", [step], before), source="apply")

    def undo(self) -> None:
        """Undo the last step (the Undo button)."""
        before = self.zeros_snapshot()
        steps = self.session.steps  # the last is the one undone (a Ctrl-C may cut the return)
        self.act("Undo", lambda _: self.session.undo(),  # not atomic: it reaches earlier steps
                 done=lambda _: self.outcome("Undid", list(steps[-1:]), before), atomic=False)

    def outcome(self, verb: str, steps: list[Step], before: Mapping[str, int]) -> str:
        """The status line for ``steps`` done (or undone), with what changed since ``before``
        (:meth:`zeros_snapshot`; see
        :func:`~prune_explorer.session.analysis.wording.describe_change`)."""
        numel = {n: self.session.info(n).numel for n in self.session.names}
        return describe_change(verb, steps, before, self._zeros, numel)

    def reset(self) -> None:
        """Undo every step, at once (the Reset button asks first, then calls this)."""
        self.act("Reset", lambda _: self.session.reset(),
                 done="Reset: the model is back to how the session found it.", atomic=False)

    @contextlib.contextmanager
    def batch(self, *, redraw: bool = True) -> Iterator[None]:
        """Refresh once at the end of several session changes instead of after each
        (``redraw=False``: not even then; the caller redraws)."""
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if redraw and self._batch_depth == 0 and self._batch_dirty:
                self._batch_dirty = False
                self.refresh()

    def kept(self, name: str) -> MaskSummary:
        """Current kept-mask of ``name`` with its counts, cached until the session changes."""
        return self.explore_pane.kept(name)

    def close(self) -> None:
        """Stop background rendering, unsubscribe from the session, close the widgets."""
        for pane in self.panes.values():
            pane.close()
        if self.metric is not None:
            self.metric.close()
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
        if self._batch_depth:
            self._batch_dirty = True
            return
        self.refresh()

    # -- control events ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Widget changes made inside this block (by the explorer and its panes, to show the
        session's state) do not trigger the control observers."""
        self._quiet_depth += 1
        try:
            yield
        finally:
            self._quiet_depth -= 1

    @property
    def is_quiet(self) -> bool:
        """True inside :meth:`quiet`: observers ignore the change."""
        return self._quiet_depth > 0

    def _on_tensor(self, change: dict[str, Any]) -> None:
        if self.is_quiet:
            return
        # The picture and readout on show are of the other tensor until the new preview
        self.preview_pane.mark_stale()
        if self.metric is not None:
            self.metric.mark_stale("computing…")
        with self.quiet(), self.status.working(f"reading {change['new']}"):
            self.explore_pane.refresh_tensor_controls()  # the first visit counts its mask
            self.explore_pane.update_custom_note()
        self.history_pane.invalidate(reset_step=True)
        self.request_preview()

    def _on_device(self, change: dict[str, Any]) -> None:
        if self.is_quiet:
            return
        device = change["new"]
        moved = self.act(f"Move to {device}", lambda _: self.session.to(device),
                         done=f"Model, masks and history moved to {device}", atomic=False)
        if moved is None:
            with self.quiet():
                self.ui.device.value = change["old"]

    def _on_tab(self, change: dict[str, Any]) -> None:
        index = change["new"]
        if index is not None:
            for pane in self._tab_panes[index]:
                pane.invalidate()

    @property
    def selected_tab(self) -> int | None:
        """Index of the tab on show (see :data:`TAB_TITLES`)."""
        return self.ui.tabs.selected_index

    def shows(self, pane: Pane) -> bool:
        """Whether the tab holding ``pane`` is on show (a pane draws only then)."""
        index = self.selected_tab
        return index is not None and pane in self._tab_panes[index]

    # -- refreshing -------------------------------------------------------------------------------
    def _refresh_picker(self) -> None:
        # Zeros only (Session.zeros): the per-channel counts of a full report are not shown.
        session = self.session
        self._zeros = session.zeros()
        options = []
        for name in session.names:
            info = session.info(name)
            sparsity = self._zeros[name] / info.numel if info.numel else 0.0
            also = f" (tied: also {', '.join(info.aliases)})" if info.aliases else ""
            options.append((f"{name}{also} · {shape_text(info.shape)} · {percent(sparsity)} "
                            "pruned", name))
        picker = self.ui.tensor
        old = picker.value
        picker.options = options
        names = [value for _, value in options]
        if old in names:
            picker.value = old
        elif names:
            picker.value = self._default_tensor(names)

    def _default_tensor(self, names: list[str]) -> str:
        return (self.session.default_targets() or names)[0]

    def _refresh_summary(self) -> None:
        session = self.session
        zeros = sum(self._zeros.values())  # read by _refresh_picker just before
        numel = sum(session.info(n).numel for n in session.names)
        steps = len(session.steps)
        pruned = sum(1 for n in session.names if session.methods(n))
        text = (f"{type(self.model).__name__}: {plural(len(session.names), 'tensor')}, "
                f"{pruned:,} pruned, {plural(steps, 'step')}, whole model: {zeros:,} of "
                f"{plural(numel, 'entry')} zero ({percent(zeros / numel if numel else 0.0)})")
        self.ui.summary.value = f'<span class="pe-summary-text">{esc(text)}</span>'

def _close_tree(widget: widgets.Widget) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()


def explore(model: nn.Module, *, tensor: str | None = None, view: str | None = None,
            **kwargs: Any) -> Explorer:
    """Open the explorer on ``model``, showing ``tensor`` (an address) as ``view`` (``"matrix"``,
    ``"kernels"`` or ``"channels"``) when given; other keywords as for :class:`Explorer`.

    Examples
    --------
    >>> from prune_explorer.demo import load_cnn
    >>> ex = explore(load_cnn(), tensor="features.3.weight", view="kernels", debounce=None)
    >>> ex.tensor, ex.ui.layout.value
    ('features.3.weight', 'kernels')
    >>> ex.close()
    """
    ex = Explorer(model, **kwargs)
    try:
        if tensor is not None:
            ex.select(tensor)
        if view is not None:
            ex.explore_pane.controls.set_view(view)
    except BaseException:
        ex.close()
        raise
    return ex
