"""What the controls ask for, and the live picture of it.

A :class:`PreviewRequest` is a snapshot of the controls: target tensor, method and settings in
the form :class:`~prune_explorer.session.Session` takes them. The same request drives the
preview (``Session.preview``/``preview_global``) and the Apply button (``Session.apply``/
``apply_global``), so what you see is what you get.

:class:`PreviewStats` counts, from the masks before and after, what the step would prune
(entries, and channels for structured methods) and how ``amount`` was rounded to a count. The
counting itself, and what one picture is drawn from, are the session's
(:mod:`prune_explorer.session.preview.picture`; :class:`MaskSummary` and :class:`Later` come from
there).
:class:`PreviewPane` renders the mask into an ``ipywidgets.Image`` through
:class:`prune_explorer.viz.MaskPreview` and writes the counts next to it.

Examples
--------
>>> import torch
>>> from prune_explorer.session import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(10, 4)))
>>> request = PreviewRequest("0.weight", "l1_unstructured", {"amount": 0.25})
>>> mask = request.preview(s)
>>> stats = PreviewStats.measure(MaskSummary.of(s.mask("0.weight")), mask, request)
>>> stats.newly_pruned, stats.rounding
(10, '25% of 40 entries left = 10, rounded to 10')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import ipywidgets as widgets
import torch

from prune_explorer.session.analysis.wording import count, noun, percent, plural, shape_text
from prune_explorer.session.preview.picture import (
    Later,
    MaskSummary,
    PictureSession,
    StepCounts,
    StepRequest,
)
from prune_explorer.session.steps.checks import kept_slices
from prune_explorer.viz import MaskPreview, PooledView
from prune_explorer.viz.preview import COMPACT_BELOW

from ...parts.html import esc
from ...parts.sizeprobe import drawn_room, room_changed

__all__ = ["Later", "MaskSummary", "PreviewPane", "PreviewRequest", "PreviewStats", "kept_slices"]


@dataclass(frozen=True)
class PreviewRequest(StepRequest):
    """A snapshot of the controls: what to preview and, on Apply, to do
    (:class:`~prune_explorer.session.preview.picture.StepRequest`), and how to picture it.

    Parameters
    ----------
    target : str
        The tensor shown (address).
    method : str
        A session method name; ``"global_unstructured"`` acts on ``targets``.
    settings : mapping
        Keyword settings for ``Session.preview``/``apply`` (``amount``, ``n``, ``dim``,
        ``mask``); for a global step ``pruning_method`` and ``amount``.
    targets : tuple of str
        Global step only: every tensor it prunes.
    layout : str
        Picture layout, ``"auto"``, ``"kernels"`` or ``"channels"``.
    view_dim : int
        The dim of the channel layout.
    """

    layout: str = "auto"
    view_dim: int = 0

    @property
    def counted(self) -> bool:
        """Whether the picture may be drawn from the session's per-cell counts (the matrix
        layout, whose cells are blocks of rows and columns)."""
        return self.layout == "auto"

    def beside_amount(self) -> tuple[Any, ...]:
        """Everything but the amount, comparable with ``==``: requests with the same value are
        slider steps of one preview (the session's caches for one serve the next); a new value
        may have the session build them first (a first global preview, a new tensor).

        >>> from dataclasses import replace
        >>> a = PreviewRequest("0.weight", "l1_unstructured", {"amount": 0.5})
        >>> a.beside_amount() == replace(a, settings={"amount": 0.2}).beside_amount()
        True
        >>> a.beside_amount() == replace(a, method="random_unstructured").beside_amount()
        False
        """
        settings = tuple(sorted((key, id(value) if isinstance(value, torch.Tensor) else value)
                                for key, value in self.settings.items() if key != "amount"))
        return (self.target, self.method, self.targets, self.layout, self.view_dim, settings)

    def kept_cells(self, session: PictureSession, edges: tuple[Any, Any],
                   alive: bool = False) -> Any:
        """Kept (``alive``: kept and nonzero) entries per picture cell of :attr:`target` after
        the step, straight from the session's cached order (no mask pooled); None where only
        the mask can tell, or the layout is not the matrix."""
        if not self.counted:
            return None
        return super().kept_cells(session, edges, alive)

    def title_settings(self) -> dict[str, Any] | str:
        """Settings for the picture title (custom masks by their shape only)."""
        if "mask" in self.settings:
            return "custom mask"
        return dict(self.settings)


@dataclass(frozen=True)
class PreviewStats(StepCounts):
    """Counts behind the preview of one step
    (:class:`~prune_explorer.session.preview.picture.StepCounts`), with the lines of the info
    box.

    Examples
    --------
    >>> PreviewStats(100, 10, 40, "entry", 90, 30, 0.3).count_line("fc.weight")
    'prunes 30 of 90 entries left → 40.0% of fc.weight pruned'
    """

    @classmethod
    def of(cls, counts: StepCounts) -> PreviewStats:
        """The same counts, with the info box's lines."""
        return cls(*(getattr(counts, f.name) for f in fields(StepCounts)))

    def lines(self) -> list[tuple[str, str]]:
        """``(css class, text)`` lines for the info box."""
        share = self.newly_pruned / self.numel if self.numel else 0.0
        before = self.pruned_before / self.numel if self.numel else 0.0
        after = self.pruned_after / self.numel if self.numel else 0.0
        step = (f"this step prunes {count(self.newly_pruned)} more "
                f"{noun(self.newly_pruned, 'entry')} ({percent(share)} of it)")
        if self.unit != "entry" and not self.unit.startswith("entry "):
            step += f": {plural(self.units_pruned, self.unit)}"
        return [
            ("pe-info-already", f"already pruned: {self.pruned_before:,} ({percent(before)})"),
            ("pe-info-step", step),
            ("pe-info-rounding", f"rounding: {self.rounding}"),
            ("pe-info-after", f"after: {self.pruned_after:,} pruned ({percent(after)})"),
        ]


class PreviewPane:
    """The live heatmap (``Image``, class ``pe-preview``) and its counts (``pe-preview-info``).

    Attributes
    ----------
    image : ipywidgets.Image
    info : ipywidgets.HTML
    words : ipywidgets.HTML
        The picture in words (``MaskPreview.describe``), for screen readers (off screen).
    picture : MaskPreview
        The reusable figure; ``picture.pooled.values`` is the pooled array on screen.
    """

    def __init__(self, *, figsize: tuple[float, float] = (4.8, 4.0), dpi: float = 80,
                 pixel_ratio: float = 1.0) -> None:
        if not (isinstance(pixel_ratio, (int, float)) and 1.0 <= pixel_ratio <= 4.0):
            raise ValueError(f"pixel_ratio must be a number from 1 to 4; got {pixel_ratio!r}")
        self.picture = MaskPreview(figsize=figsize, dpi=dpi * pixel_ratio)
        self.image = widgets.Image(format="png", layout=widgets.Layout(flex="0 0 auto"))
        if pixel_ratio != 1.0:  # drawn larger, shown at the CSS size: sharp on HiDPI screens
            self.image.width = str(round(figsize[0] * dpi))
        self.image.add_class("pe-preview")
        self.info = widgets.HTML(value="")
        self.info.add_class("pe-preview-info")
        self.count_line = widgets.HTML(value="")  # the step in one line, over the picture
        self.words = widgets.HTML(value="")  # the picture in words, off screen
        self.words.add_class("pe-sr-only")
        self.pixel_ratio = float(pixel_ratio)
        self.room: tuple[int, int, float] | None = None  # as the browser measured it
        self.presentation = False
        self._sized: tuple[int, int, float, bool] | None = None  # what it is drawn for

    def set_room(self, room: tuple[int, int, float]) -> bool:
        """The room the browser gives the picture (``SizeProbe.room()``): ``(width, height,
        pixel ratio)`` in CSS pixels. Returns whether the picture must be redrawn (changes
        under 8 px are ignored, so a scroll bar coming and going cannot make it flicker).
        Applied by the next :meth:`fit` (on the drawing thread)."""
        width, height, ratio = room
        if not room_changed(self.room, room):
            return False
        self.room = (int(width), int(height), float(ratio))
        return True

    def set_presentation(self, on: bool) -> None:
        """Presentation: no title in the picture (the count line over it says, in larger text,
        what it shows; the pane hides the detail lines and the panels): the cells get the
        title's room; the picture's text a quarter larger where the place is wide enough (see
        :meth:`fit`). Applied by the next :meth:`fit`."""
        self.presentation = bool(on)

    def fit(self) -> None:
        """Size the picture for :attr:`room` (before its cells are computed): the column's
        width, at most the height that keeps slider, counts and picture on one screen;
        within the bounds of :func:`~prune_explorer.widgets.parts.sizeprobe.drawn_room`. Call
        on the drawing thread, before :meth:`draw`.

        Presentation draws the compact picture without a title; its text is a quarter larger
        only in a place at least :data:`~prune_explorer.viz.preview.COMPACT_BELOW` wide: in a
        narrower one (a projector at 150 % zoom beside the file browser) larger tick labels
        and legend would take the cells' room, and Presentation never makes the picture
        smaller."""
        if self.room is None:
            return
        width, height, ratio = drawn_room(self.room)
        target = (width, height, max(ratio, self.pixel_ratio), self.presentation)
        if target != self._sized:
            larger = self.presentation and width >= COMPACT_BELOW[0]
            self.picture.resize(width, height, pixel_ratio=min(target[2], 4.0),
                                text_scale=1.25 if larger else 1.0,
                                compact=True if self.presentation else None,
                                titled=not self.presentation)
            self._sized = target

    def draw(self, mask: Any, request: PreviewRequest, *, module_type: str,
             plain: bool = False, kept_cells: Any = None, before: Any = None,
             before_cells: Any = None) -> PooledView:
        """Put ``mask`` in the picture (not yet rendered); returns the pooled view.

        With ``kept_cells`` only the shape of ``mask`` is read (it may be
        :func:`~prune_explorer.viz.views.shape_only`).

        ``plain`` leaves method and settings out of the title (for a mask that is not a preview).
        ``kept_cells``: the mask's kept counts per cell of ``picture.cell_edges`` when the
        session knows them (:meth:`PreviewRequest.kept_cells`), so the mask is not pooled.
        ``before``: the state before the step, when ``mask`` is a preview (drawn as three
        classes: kept, pruned before, pruned by this step); ``before_cells`` in its place, its
        kept counts per cell (as ``kept_cells``).
        """
        layout = request.layout
        if layout == "kernels" and len(mask.shape) < 3:
            layout = "auto"
        return self.picture.update(
            mask,
            layout=layout,  # type: ignore[arg-type]
            dim=request.view_dim,
            name=request.target,
            method=None if plain else request.method,
            settings=None if plain else request.title_settings(),
            module_type=module_type,
            kept_cells=kept_cells,
            before=before,
            before_cells=before_cells,
        )

    def publish(
        self,
        request: PreviewRequest,
        shape: tuple[int, ...],
        *,
        note: str | None = None,
        stats: PreviewStats | None = None,
        unmasked_zeros: int = 0,
    ) -> None:
        """Render the picture into the Image and write the counts next to it.

        ``unmasked_zeros`` counts entries that are exactly 0 without being masked (committed
        pruning, or zero weights); they count as pruned, and magnitude methods take them first.
        """
        self.image.value = self.picture.png()
        if self._sized is not None:  # drawn at pixel_ratio x the CSS size: shown at that
            width = str(self.picture.css_size[0])
            if self.image.width != width:
                self.image.width = width
        self.mark_current()
        numel = math.prod(shape)
        head = (
            f'<div class="pe-info-tensor"><b>{esc(request.target)}</b> · '
            f"{esc(shape_text(shape))} · {esc(plural(numel, 'entry'))}</div>"
        )
        body = ""
        if note:
            body += f'<div class="pe-info-note">{esc(note)}</div>'
        if stats is not None:
            body += "".join(f'<div class="{c}">{esc(t)}</div>' for c, t in stats.lines())
        if unmasked_zeros > 0:
            body += (
                f'<div class="pe-info-zeros">{esc(plural(unmasked_zeros, "entry"))} '
                f"{'is' if unmasked_zeros == 1 else 'are'} exactly 0 without a mask (committed "
                "pruning or zero weights); they count as pruned</div>"
            )
        self.info.value = head + body
        self.count_line.value = "" if stats is None else (
            f'<span class="pe-count-text">{esc(stats.count_line(request.target))}</span>')
        self.tell()

    def tell(self) -> None:
        """Put the picture in words (title, axes, ticks) for screen readers, and for checks
        that cannot read pixels; kept off screen (an Image widget cannot carry a title in
        8.1)."""
        self.words.value = esc(self.picture.describe()).replace("\n", "<br>")


    @property
    def stale(self) -> bool:
        """True while the picture and counts are of older settings (see :meth:`mark_stale`)."""
        return "pe-stale" in self.image._dom_classes

    def mark_current(self) -> None:
        """Undo :meth:`mark_stale` without redrawing: what is on show is current after all
        (the step just applied, which was its preview)."""
        for widget in (self.image, self.info, self.count_line):
            widget.remove_class("pe-stale")

    def mark_stale(self) -> None:
        """Dim the last picture and strike its counts: they are not of the current controls
        (the status line says why). The next :meth:`publish` restores them."""
        for widget in (self.image, self.info, self.count_line):
            widget.add_class("pe-stale")
