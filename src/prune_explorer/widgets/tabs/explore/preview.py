"""What the controls ask for, and the live picture of it.

A :class:`PreviewRequest` is a snapshot of the controls: target tensor, method and settings in
the form :class:`~prune_explorer.session.Session` takes them. The same request drives the
preview (``Session.preview``/``preview_global``) and the Apply button (``Session.apply``/
``apply_global``), so what you see is what you get.

:class:`PreviewStats` counts, from the masks before and after, what the step would prune
(entries, and channels for structured methods) and how ``amount`` was rounded to a count.
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
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import ipywidgets as widgets
import torch

from prune_explorer.session import Session, Step
from prune_explorer.session.analysis.wording import (
    count,
    describe_rounding,
    noun,
    percent,
    plural,
    shape_text,
    slice_unit,
)
from prune_explorer.session.steps.checks import kept_slices
from prune_explorer.session.steps.methods import METHODS
from prune_explorer.viz import MaskPreview, PooledView

from ...parts.html import esc
from .sizeprobe import MIN_HEIGHT

__all__ = ["Later", "MaskSummary", "PreviewPane", "PreviewRequest", "PreviewStats", "kept_slices"]


@dataclass(frozen=True)
class PreviewRequest:
    """A snapshot of the controls: what to preview and, on Apply, to do.

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

    target: str
    method: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    targets: tuple[str, ...] = ()
    layout: str = "auto"
    view_dim: int = 0

    @property
    def is_global(self) -> bool:
        """True for ``global_unstructured``."""
        return self.method == "global_unstructured"

    @property
    def structured_dim(self) -> int | None:
        """The pruning ``dim`` of a structured method, else None."""
        if METHODS[self.method].structured and isinstance(self.settings.get("dim"), int):
            return int(self.settings["dim"])
        return None

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

    def preview_all(self, session: Session) -> Mapping[str, torch.Tensor]:
        """Masks the step would leave, by address (one entry unless global); for large
        tensors built only when read (``Session.preview_masks``, ``preview_global``)."""
        if self.is_global:
            return session.preview_global(
                list(self.targets), self.settings["pruning_method"], amount=self.settings["amount"]
            )
        return session.preview_masks(self.target, self.method, **self.settings)

    def preview(self, session: Session) -> torch.Tensor | None:
        """Mask the step would leave on :attr:`target` (None: not among global targets)."""
        return self.preview_all(session).get(self.target)

    def kept_cells(self, session: Session, edges: tuple[Any, Any], alive: bool = False) -> Any:
        """Kept (``alive``: kept and nonzero) entries per picture cell of :attr:`target` after
        the step, straight from the session's cached order (no mask pooled); None where only
        the mask can tell."""
        if self.layout != "auto":
            return None
        row_edges, col_edges = edges
        if self.is_global:
            return session.preview_cells(self.target, self.method, row_edges=row_edges,
                                         col_edges=col_edges, targets=list(self.targets),
                                         alive=alive, **self.settings)
        return session.preview_cells(self.target, self.method, row_edges=row_edges,
                                     col_edges=col_edges, alive=alive, **self.settings)

    def apply(self, session: Session) -> Step:
        """Do it: ``Session.apply`` or ``Session.apply_global``; returns the Step."""
        if self.is_global:
            return session.apply_global(
                list(self.targets), self.settings["pruning_method"], amount=self.settings["amount"]
            )
        return session.apply(self.target, self.method, **self.settings)

    def title_settings(self) -> dict[str, Any] | str:
        """Settings for the picture title (custom masks by their shape only)."""
        if "mask" in self.settings:
            return "custom mask"
        return dict(self.settings)


class MaskSummary:
    """A tensor's current kept-mask with the counts the preview needs, each worked out on
    first use and then kept: what a step's redraw does not look at costs nothing.

    Parameters
    ----------
    kept : torch.Tensor or callable
        The bool kept-mask, or a function that reads it (called at most once).
    kept_count : int, optional
        Its kept entries, when already known (else counted from the mask).
    shape : tuple of int, optional
        Its shape, when ``kept`` is a function (else read from the mask).

    Examples
    --------
    >>> import torch
    >>> MaskSummary.of(torch.tensor([[True, False], [False, False]]))
    MaskSummary(shape=(2, 2), kept_count=1, kept_slices=(1, 1))
    >>> lazy = MaskSummary(lambda: torch.ones(3, 4, dtype=torch.bool), 12, shape=(3, 4))
    >>> lazy.kept_count, len(lazy.slices), lazy.built  # the mask itself is not read yet
    (12, 2, False)
    >>> lazy.slices[1], lazy.built
    (4, True)
    """

    def __init__(self, kept: torch.Tensor | Callable[[], torch.Tensor],
                 kept_count: int | None = None, *, shape: tuple[int, ...] | None = None) -> None:
        if isinstance(kept, torch.Tensor):
            self._kept: torch.Tensor | None = kept
            self._read: Callable[[], torch.Tensor] | None = None
            shape = tuple(kept.shape)
        elif shape is None:
            raise TypeError("MaskSummary: give shape with a function that reads the mask")
        else:
            self._kept, self._read = None, kept
        self._shape = tuple(shape)
        self._count = kept_count
        self._slices: tuple[int, ...] | None = None

    @classmethod
    def of(cls, kept: torch.Tensor) -> MaskSummary:
        """Summarise a bool kept-mask."""
        return cls(kept)

    @property
    def built(self) -> bool:
        """Whether the mask has been read (:attr:`kept`)."""
        return self._kept is not None

    @property
    def kept(self) -> torch.Tensor:
        """The bool kept-mask (read on first use)."""
        kept = self._kept
        if kept is None:
            assert self._read is not None  # set whenever the mask was not given
            kept = self._kept = self._read()
        return kept

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the tensor."""
        return self._shape

    @property
    def numel(self) -> int:
        """Entries of the tensor."""
        return math.prod(self._shape)

    @property
    def kept_count(self) -> int:
        """Kept entries."""
        if self._count is None:
            self._count = int(self.kept.count_nonzero())
        return self._count

    @property
    def kept_slices(self) -> tuple[int, ...]:
        """Per dim, the slices with at least one kept entry (structured methods only need it)."""
        if self._slices is None:
            kept = self.kept
            self._slices = tuple(kept_slices(kept, d) for d in range(kept.dim()))
        return self._slices

    @property
    def slices(self) -> Sequence[int]:
        """:attr:`kept_slices` as a sequence counted when first indexed (for controls that
        may never ask)."""
        return _Slices(self)

    def __repr__(self) -> str:
        return (f"MaskSummary(shape={self.shape}, kept_count={self.kept_count}, "
                f"kept_slices={self.kept_slices})")


class _Slices(Sequence[int]):
    # MaskSummary.slices: the length is the rank; the counts are read on first indexing.
    def __init__(self, summary: MaskSummary) -> None:
        self._summary = summary

    def __len__(self) -> int:
        return len(self._summary.shape)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        return self._summary.kept_slices[index]


@dataclass(frozen=True)
class PreviewStats:
    """Counts behind the preview of one step.

    Attributes
    ----------
    numel : int
        Entries of the shown tensor.
    pruned_before, pruned_after : int
        Pruned entries of the shown tensor now and after the step.
    unit : str
        What ``amount`` counts, singular: ``"entry"``, a slice (``"kernel row (dim 2)"``,
        :func:`~prune_explorer.session.analysis.wording.slice_unit`) or ``"entry
        over k tensors"`` (global); :func:`~prune_explorer.session.analysis.wording.plural` counts
        it.
    left : int
        Units still unpruned now (what ``amount`` is a fraction of, and the bound of a count).
    units_pruned : int
        Units the step would prune.
    amount : float, int or None
        The amount asked for (None for identity and custom masks).
    """

    numel: int
    pruned_before: int
    pruned_after: int
    unit: str
    left: int
    units_pruned: int
    amount: float | int | None

    @property
    def newly_pruned(self) -> int:
        """Entries of the shown tensor that the step would prune."""
        return self.pruned_after - self.pruned_before

    @property
    def rounding(self) -> str:
        """How ``amount`` became a count, e.g. ``"30% of 1,000 entries left = 300, rounded to
        300"`` (:func:`~prune_explorer.session.analysis.wording.describe_rounding`)."""
        return describe_rounding(self.amount, self.left, self.unit, self.units_pruned)

    @classmethod
    def measure(
        cls,
        before: MaskSummary,
        after: torch.Tensor | None,
        request: PreviewRequest,
        *,
        others: Mapping[str, tuple[MaskSummary, int]] | None = None,
        kept_after: int | None = None,
        slices_pruned: int | None = None,
        module_type: str | None = None,
    ) -> PreviewStats:
        """Count from the shown tensor's current mask and the previewed ``after`` (1 = kept).

        ``others`` holds ``(before, kept count after)`` of the other targets of a global step;
        ``kept_after`` is the kept count of ``after`` when already known (the pooled picture
        counts it exactly), ``slices_pruned`` the slices a structured step prunes
        (``compute.slices_pruned``). With both known where needed, ``after`` may be None: the
        mask is not read. ``module_type`` (the owning layer's class name) names the slices by
        that layer's axes (``Conv1D`` stores (in, out)).
        """
        numel = before.numel
        kept_before = before.kept_count
        if kept_after is None:
            kept_after = int(_read(after).count_nonzero())
        amount = request.settings.get("amount")
        dim = request.structured_dim
        if dim is not None:
            left = before.kept_slices[dim]
            units_pruned = (slices_pruned if slices_pruned is not None
                            else left - kept_slices(_read(after), dim))
            unit = slice_unit(len(before.shape), dim, module_type)
        else:
            left = kept_before
            units_pruned = kept_before - kept_after
            unit = "entry"
            if request.is_global and others:
                for other_before, other_kept in others.values():
                    left += other_before.kept_count
                    units_pruned += other_before.kept_count - other_kept
                unit = f"entry over {len(others) + 1} tensors"
        return cls(numel, numel - kept_before, numel - kept_after, unit, left, units_pruned,
                   amount)

    def count_line(self, target: str) -> str:
        """The step in one line, for over the picture: what it prunes and what is pruned of
        ``target`` after it (each share says what it is of).

        Examples
        --------
        >>> PreviewStats(100, 10, 40, "entry", 90, 30, 0.3).count_line("fc.weight")
        'prunes 30 of 90 entries left → 40.0% of fc.weight pruned'
        """
        after = self.pruned_after / self.numel if self.numel else 0.0
        return (f"prunes {count(self.units_pruned)} of {plural(self.left, self.unit)} left → "
                f"{percent(after)} of {target} pruned")

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


class Later:
    """A tensor computed on the first call, then kept: the mask of a preview, built only for
    whoever reads it (the zoom, a check, the Magnitudes heatmap), not on the slider path.

    Examples
    --------
    >>> import torch
    >>> later = Later(lambda: torch.ones(2))
    >>> later
    Later(not computed)
    >>> later() is later(), later
    (True, Later(computed))
    """

    def __init__(self, compute: Callable[[], torch.Tensor]) -> None:
        self._compute: Callable[[], torch.Tensor] | None = compute
        self._value = torch.empty(0)
        self._lock = threading.Lock()

    def __call__(self) -> torch.Tensor:
        with self._lock:
            if self._compute is not None:
                self._value = self._compute()
                self._compute = None  # and what it held on to
            return self._value

    def __repr__(self) -> str:
        return f"Later({'not computed' if self._compute is not None else 'computed'})"


def _read(after: torch.Tensor | None) -> torch.Tensor:
    if after is None:
        raise ValueError("PreviewStats.measure: after is None, so kept_after (and for a "
                         "structured step slices_pruned) must be given")
    return after


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
        old = self.room
        if old is not None and abs(old[0] - width) < 8 and abs(old[1] - height) < 8 \
                and old[2] == ratio:
            return False
        self.room = (int(width), int(height), float(ratio))
        return True

    def set_presentation(self, on: bool) -> None:
        """Presentation: the picture's text a quarter larger (the pane hides the detail lines
        and the panels); applied by the next :meth:`fit`."""
        self.presentation = bool(on)

    def fit(self) -> None:
        """Size the picture for :attr:`room` (before its cells are computed): the column's
        width, at most the height that keeps slider, counts and picture on one screen;
        never smaller than 240 x :data:`~.sizeprobe.MIN_HEIGHT`. Call on the drawing thread,
        before :meth:`draw`."""
        if self.room is None:
            return
        width, height, ratio = self.room
        width = max(240, min(width, 1400))
        height = max(MIN_HEIGHT, min(height, 1400))
        target = (width, height, max(ratio, self.pixel_ratio), self.presentation)
        if target != self._sized:
            self.picture.resize(width, height, pixel_ratio=min(target[2], 4.0),
                                text_scale=1.25 if self.presentation else 1.0)
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
        for widget in (self.image, self.info, self.count_line):
            widget.remove_class("pe-stale")
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
        # The picture in words (title, axes, ticks) for screen readers, and for checks that
        # cannot read pixels; kept off screen (an Image widget cannot carry a title in 8.1).
        self.words.value = esc(self.picture.describe()).replace("\n", "<br>")


    @property
    def stale(self) -> bool:
        """True while the picture and counts are of older settings (see :meth:`mark_stale`)."""
        return "pe-stale" in self.image._dom_classes

    def mark_stale(self) -> None:
        """Dim the last picture and strike its counts: they are not of the current controls
        (the status line says why). The next :meth:`publish` restores them."""
        for widget in (self.image, self.info, self.count_line):
            widget.add_class("pe-stale")
