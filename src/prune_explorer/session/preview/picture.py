"""What one picture of a previewed step needs, read in one call under the session's lock.

A view that shows a step before it is applied (the Explore tab) asks one question per picture:
:meth:`Session.preview_picture <prune_explorer.session.Session.preview_picture>` with a
:class:`StepRequest`. The answer, a :class:`PreviewPicture`, holds everything the picture and its
numbers are drawn from, decided here and not in the view: the preview's masks (lazy where the
session can leave them unbuilt), the shown tensor's counts now (:class:`MaskSummary`), the kept
entries per picture cell when the session's cached order tells them (so no mask is pooled), a
reader of windows for a zoom, the other targets' kept counts and the layers' sizes. What can only
be known once the picture is pooled (the kept total of a mask with no cell counts) is finished
by :meth:`PreviewPicture.counts`, outside the lock: the step's :class:`StepCounts` and the layers
it would collapse.

The slider's cost is what is on screen: with cell counts, nothing of the size of the tensor is
read; masks, their slices and the alive mask are built only when something reads them
(:class:`Later`, :class:`MaskSummary`).

Examples
--------
>>> import numpy as np, torch
>>> from prune_explorer.session import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(600, 400)))
>>> request = StepRequest("0.weight", "l1_unstructured", {"amount": 0.25})
>>> edges = lambda shape: (np.array([0, 200, 400]), np.array([0, 600]))
>>> picture = s.preview_picture(request, cell_edges=edges)
>>> picture
PreviewPicture('0.weight', l1_unstructured, shape=(400, 600), 2x1 cell counts, mask not built)
>>> picture.cells.shape, int(picture.cells.sum()), picture.mask_kept
((2, 1), 180000, 180000)
>>> counts = picture.counts(shown_kept=int(picture.cells.sum()))
>>> counts.stats.units_pruned, counts.collapsed
(60000, ())
>>> torch.equal(picture.mask(), request.preview(s))  # built now, bit for bit the preview
True
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import numpy as np
import torch

from ..analysis.frames import collapsed_layers
from ..analysis.wording import count, describe_rounding, percent, plural, slice_unit
from ..steps.checks import kept_slices
from ..steps.methods import METHODS
from ..steps.step import Step
from .masks import kept_count, slices_pruned, window_reader

if TYPE_CHECKING:
    from ..model.targets import TensorInfo

__all__ = [
    "CellEdges",
    "CountingSession",
    "Later",
    "MaskSummaries",
    "MaskSummary",
    "PictureCounts",
    "PictureSession",
    "PreviewPicture",
    "StepCounts",
    "StepRequest",
    "preview_picture",
]

_Counts = TypeVar("_Counts", bound="StepCounts")

#: Row and column block edges of the picture's cells for a tensor of a shape (rank >= 2).
CellEdges = Callable[[tuple[int, ...]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class StepRequest:
    """A step to preview (and, unchanged, to apply) and the tensor a picture shows.

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

    Examples
    --------
    >>> import torch
    >>> from prune_explorer.session import Session
    >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
    >>> request = StepRequest("0.weight", "ln_structured", {"amount": 1, "n": 1, "dim": 0})
    >>> request.structured_dim, int(request.preview(s).sum())
    (0, 4)
    """

    target: str
    method: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    targets: tuple[str, ...] = ()

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

    def preview_all(self, session: PictureSession) -> Mapping[str, torch.Tensor]:
        """Masks the step would leave, by address (one entry unless global); for large
        tensors built only when read (``Session.preview_masks``, ``preview_global``)."""
        if self.is_global:
            return session.preview_global(
                list(self.targets), self.settings["pruning_method"], amount=self.settings["amount"],
                importance=self.settings.get("importance"))
        return session.preview_masks(self.target, self.method, **self.settings)

    def preview(self, session: PictureSession) -> torch.Tensor | None:
        """Mask the step would leave on :attr:`target` (None: not among global targets)."""
        return self.preview_all(session).get(self.target)

    def kept_cells(self, session: PictureSession, edges: tuple[Any, Any],
                   alive: bool = False) -> Any:
        """Kept (``alive``: kept and nonzero) entries per picture cell of :attr:`target` after
        the step, straight from the session's cached order (no mask pooled); None where only
        the mask can tell (``Session.preview_cells``)."""
        row_edges, col_edges = edges
        if self.is_global:
            return session.preview_cells(self.target, self.method, row_edges=row_edges,
                                         col_edges=col_edges, targets=list(self.targets),
                                         alive=alive, **self.settings)
        return session.preview_cells(self.target, self.method, row_edges=row_edges,
                                     col_edges=col_edges, alive=alive, **self.settings)

    def apply(self, session: PictureSession) -> Step:
        """Do it: ``Session.apply`` or ``Session.apply_global``; returns the Step."""
        if self.is_global:
            return session.apply_global(
                list(self.targets), self.settings["pruning_method"], amount=self.settings["amount"],
                importance=self.settings.get("importance"))
        return session.apply(self.target, self.method, **self.settings)


class Later:
    """A tensor computed on the first call, then kept: the mask of a preview, built only for
    whoever reads it (a zoom, a check, a heatmap), not on the slider path.

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

    @property
    def computed(self) -> bool:
        """Whether the tensor has been computed."""
        return self._compute is None

    def __repr__(self) -> str:
        return f"Later({'computed' if self.computed else 'not computed'})"


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


class CountingSession(Protocol):
    """What :class:`MaskSummaries` asks of a session (a part of ``Session``'s API)."""

    def mask(self, name: str) -> torch.Tensor:
        """The current bool mask of ``name``."""

    def alive(self, name: str, mask: torch.Tensor | None = None) -> torch.Tensor:
        """What the forward pass keeps of ``name``."""

    def kept_count(self, name: str, *, alive: bool = False) -> int:
        """Entries of ``name`` its mask keeps (``alive``: and not exactly 0)."""

    def info(self, name: str) -> TensorInfo:
        """Address, module type, shape and numel of ``name``."""



class PictureSession(CountingSession, Protocol):
    """What a picture of a previewed step asks of a session (a part of ``Session``'s API):
    its lock, its previews and, to do the step, its apply methods."""

    @property
    def lock(self) -> threading.RLock:
        """The session's re-entrant lock."""

    def preview_masks(self, target: str, method: str, *, seed: int | None = None,
                      **settings: Any) -> Mapping[str, torch.Tensor]:
        """The masks a step on ``target`` would leave, by tensor."""

    def preview_global(self, targets: Sequence[str], method: str = "l1_unstructured", *,
                       amount: float | int, seed: int | None = None,
                       importance: str | None = None) -> Mapping[str, torch.Tensor]:
        """The masks a global step would leave, by tensor."""

    def preview_cells(self, target: str, method: str, *, row_edges: np.ndarray,
                      col_edges: np.ndarray, targets: Sequence[str] | None = None,
                      seed: int | None = None, alive: bool = False, **settings: Any
                      ) -> np.ndarray | None:
        """Kept entries per picture cell, where the session's order tells them."""

    def apply(self, target: str, method: str, *, seed: int | None = None,
              with_bias: bool = False, **settings: Any) -> Step:
        """Do a step on one tensor."""

    def apply_global(self, targets: Sequence[str], method: str = "l1_unstructured", *,
                     amount: float | int, seed: int | None = None,
                     importance: str | None = None) -> Step:
        """Do a global step."""

class MaskSummaries:
    """The :class:`MaskSummary` of each tensor's current mask (``kept``) and of what the
    forward pass keeps (``alive``: committed zeros count as pruned), for the current state of
    a session: counts from the session (cheap once its caches hold the tensor), masks and
    slices read only when asked, then kept until the state changes.

    Parameters
    ----------
    session : Session or CountingSession
    stamp : callable, optional
        Returns a value that changes whenever the session's state does (a view's count of
        change events, say); read at each lookup, and the summaries start again when it
        differs. Without it, call :meth:`clear` on every change.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer.session import Session
    >>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
    >>> changes = [0]
    >>> summaries = MaskSummaries(s, stamp=lambda: changes[0])
    >>> first = summaries.kept("0.weight")
    >>> first is summaries.kept("0.weight"), summaries
    (True, MaskSummaries(1 kept, 0 alive))
    >>> changes[0] += 1
    >>> first is summaries.kept("0.weight")
    False
    """

    #: Summaries held before the cache starts again (a model's worth of targets, at most).
    LIMIT = 64

    def __init__(self, session: CountingSession, *,
                 stamp: Callable[[], object] | None = None) -> None:
        self._session = session
        self._stamp = stamp
        self._seen: object = None if stamp is None else stamp()
        self._held: dict[tuple[bool, str], MaskSummary] = {}

    def kept(self, name: str) -> MaskSummary:
        """``Session.mask(name)`` with its counts."""
        return self._summary(name, alive=False)

    def alive(self, name: str) -> MaskSummary:
        """``Session.alive(name)`` with its counts."""
        return self._summary(name, alive=True)

    def clear(self) -> None:
        """Forget every summary (the session changed)."""
        self._held = {}

    def _summary(self, name: str, *, alive: bool) -> MaskSummary:
        held = self._held
        if self._stamp is not None:
            seen = self._stamp()
            if seen != self._seen:
                self._seen, held = seen, {}
                self._held = held
        key = (alive, name)
        if key not in held:
            if len(held) > self.LIMIT:
                held.clear()
            session = self._session
            read = session.alive if alive else session.mask
            held[key] = MaskSummary(
                lambda: read(name), session.kept_count(name, alive=alive),
                shape=session.info(name).shape)
        return held[key]

    def __repr__(self) -> str:
        alive = sum(1 for is_alive, _ in self._held if is_alive)
        return f"MaskSummaries({len(self._held) - alive} kept, {alive} alive)"


@dataclass(frozen=True)
class StepCounts:
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

    Examples
    --------
    >>> StepCounts(100, 10, 40, "entry", 90, 30, 0.3).count_line("fc.weight")
    'prunes 30 of 90 entries left → 40.0% of fc.weight pruned'
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
        cls: type[_Counts],
        before: MaskSummary,
        after: torch.Tensor | None,
        request: StepRequest,
        *,
        others: Mapping[str, tuple[MaskSummary, int]] | None = None,
        kept_after: int | None = None,
        slices_pruned: int | None = None,
        module_type: str | None = None,
    ) -> _Counts:
        """Count from the shown tensor's current mask and the previewed ``after`` (1 = kept).

        ``others`` holds ``(before, kept count after)`` of the other targets of a global step;
        ``kept_after`` is the kept count of ``after`` when already known (the pooled picture
        counts it exactly), ``slices_pruned`` the slices a structured step prunes
        (``previews.slices_pruned``). With both known where needed, ``after`` may be None: the
        mask is not read. ``module_type`` (the owning layer's class name) names the slices by
        that layer's axes (``Conv1D`` stores (in, out)).
        """
        where = f"{cls.__name__}.measure"
        numel = before.numel
        kept_before = before.kept_count
        if kept_after is None:
            kept_after = int(_read(after, where).count_nonzero())
        amount = request.settings.get("amount")
        dim = request.structured_dim
        if dim is not None:
            left = before.kept_slices[dim]
            units_pruned = (slices_pruned if slices_pruned is not None
                            else left - kept_slices(_read(after, where), dim))
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
        """The step in one line: what it prunes and what is pruned of ``target`` after it
        (each share says what it is of)."""
        after = self.pruned_after / self.numel if self.numel else 0.0
        return (f"prunes {count(self.units_pruned)} of {plural(self.left, self.unit)} left → "
                f"{percent(after)} of {target} pruned")


def _read(after: torch.Tensor | None, where: str) -> torch.Tensor:
    if after is None:
        raise ValueError(f"{where}: after is None, so kept_after (and for a structured step "
                         "slices_pruned) must be given")
    return after


@dataclass(frozen=True)
class PictureCounts:
    """What a previewed step does, once its picture is pooled (:meth:`PreviewPicture.counts`).

    Attributes
    ----------
    stats : StepCounts or None
        The shown tensor's counts (None: it is not among the step's targets).
    kept_after : mapping of str to int
        Entries each target would keep (the shown tensor's only when the picture counts it).
    collapsed : tuple of str
        Targets the step would leave (almost) empty
        (:func:`~prune_explorer.session.analysis.frames.collapsed_layers`).
    """

    stats: StepCounts | None
    kept_after: Mapping[str, int]
    collapsed: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class PreviewPicture:
    """What one picture of a previewed step is drawn from (:func:`preview_picture`).

    Attributes
    ----------
    request : StepRequest
    shape : tuple of int
        Shape of the shown tensor.
    module_type : str
        Class name of the layer that owns it (names its axes).
    masks : mapping of str to torch.Tensor
        The step's masks by address (lazy where the session can leave them unbuilt).
    before, now : MaskSummary
        The shown tensor now: its mask (``before``) and what is alive (``now``).
    mask : Later or None
        The shown tensor's preview mask, built on first call (None: not a target).
    shown : Later
        What the picture shows kept: after the step less the unmasked zeros (or now, when the
        tensor is not a target); already built when :attr:`cells` is None.
    reader : callable or None
        Windows of :attr:`shown` read without building it, where the session can.
    cells : numpy.ndarray or None
        Kept entries of :attr:`shown` per picture cell, when the session's order tells them
        (then pool nothing: draw these counts).
    now_cells : numpy.ndarray or None
        The same for the state now, when known from the order (the same step pruning nothing).
    mask_kept : int or None
        Entries the preview mask keeps, when :attr:`cells` tell it.
    others : mapping of str to (MaskSummary, int)
        The other targets of a global step: their summary now and the entries they keep after.
    sizes : mapping of str to int
        Entries of each target.
    """

    request: StepRequest
    shape: tuple[int, ...]
    module_type: str
    masks: Mapping[str, torch.Tensor]
    before: MaskSummary
    now: MaskSummary
    mask: Later | None
    shown: Later
    reader: Callable[[slice, slice], torch.Tensor | None] | None
    cells: np.ndarray | None
    now_cells: np.ndarray | None
    mask_kept: int | None
    others: Mapping[str, tuple[MaskSummary, int]]
    sizes: Mapping[str, int]

    @property
    def previewed(self) -> bool:
        """Whether the shown tensor is among the step's targets."""
        return self.mask is not None

    @property
    def zeros_free(self) -> bool:
        """No entry the mask keeps is exactly 0: what the mask keeps is what is alive."""
        return self.now.kept_count == self.before.kept_count

    @property
    def alive_now(self) -> MaskSummary:
        """What the picture's "now" of a step is: the mask (no unmasked zeros) or alive."""
        return self.before if self.zeros_free else self.now

    @property
    def unmasked_zeros(self) -> int:
        """Entries kept by the mask but exactly 0 (committed pruning, zero weights)."""
        return self.before.kept_count - self.now.kept_count

    def counts(self, shown_kept: int) -> PictureCounts:
        """The step's counts, given ``shown_kept``: the kept total of the picture drawn
        (what stays alive after the step; the sum of :attr:`cells` when drawn from them).
        Builds the preview mask only for a structured step whose slices the session's order
        does not tell; otherwise counts only."""
        request, masks, target = self.request, self.masks, self.request.target
        stats = None
        mask_kept = self.mask_kept
        if self.mask is not None:
            if mask_kept is None:  # no unmasked zeros: alive is what the mask keeps
                mask_kept = shown_kept if self.zeros_free else kept_count(masks, target)
            slices = slices_pruned(masks, target)
            needs_mask = request.structured_dim is not None and slices is None
            stats = StepCounts.measure(self.before, self.mask() if needs_mask else None,
                                       request, others=self.others, kept_after=mask_kept,
                                       slices_pruned=slices, module_type=self.module_type)
            numel = stats.numel  # pruned = masked or exactly 0, as the picture and the picker
            stats = replace(stats, pruned_before=numel - self.now.kept_count,
                            pruned_after=numel - shown_kept)
        # Counts only (a global preview's other masks stay unbuilt); also when the tensor on
        # show is not a global target, since the step may still empty the others.
        kept_after = {n: kept for n, (_, kept) in self.others.items()}
        if mask_kept is not None:
            kept_after[target] = mask_kept
        collapsed = collapsed_layers({n: kept_after[n] for n in masks}, self.sizes)
        return PictureCounts(stats, kept_after, tuple(collapsed))

    def __repr__(self) -> str:
        if self.cells is not None:
            source = "{}x{} cell counts".format(*self.cells.shape)
        else:
            source = "pooled mask"
        if self.mask is None:
            state = "not a target"
        else:
            state = "mask built" if self.mask.computed else "mask not built"
        return (f"PreviewPicture({self.request.target!r}, {self.request.method}, "
                f"shape={self.shape}, {source}, {state})")


def preview_picture(session: PictureSession, request: StepRequest, *,
                    cell_edges: CellEdges | None = None,
                    summaries: MaskSummaries | None = None) -> PreviewPicture:
    """Everything one picture of ``request`` is drawn from, read under ``session.lock``
    (see :meth:`Session.preview_picture <prune_explorer.session.Session.preview_picture>`)."""
    summaries = MaskSummaries(session) if summaries is None else summaries
    target = request.target
    with session.lock:  # one consistent reading of the session
        # Large tensors: masks built only when read. The slider path reads none: the
        # picture's counts come from the session's cache and the numbers from the
        # counts, so a step costs what is on screen.
        masks = request.preview_all(session)
        before = summaries.kept(target)
        now = summaries.alive(target)  # committed zeros count as pruned
        previewed = target in masks
        shape = tuple(session.info(target).shape)
        # No unmasked zeros (the usual case): what the mask keeps is what is alive; with
        # a few, the session counts what stays alive per cell (O(zeros) per step).
        zeros_free = now.kept_count == before.kept_count
        cells = edges = None
        mask_kept = None  # entries the mask keeps, when the cell counts tell
        if previewed and len(shape) >= 2 and cell_edges is not None:
            edges = cell_edges(shape)
            cells = request.kept_cells(session, edges)
            if cells is not None:
                mask_kept = int(np.asarray(cells).sum())
                if not zeros_free:  # the picture counts what stays alive
                    cells = request.kept_cells(session, edges, alive=True)
        mask = Later(lambda: masks[target]) if previewed else None
        if mask is None:
            shown = Later(lambda: now.kept)
        elif zeros_free:
            shown = mask
        else:
            shown = Later(lambda: session.alive(target, masks[target]))
        # the zoom's windows, read from the order alone where the session can
        reader = window_reader(masks, target) if previewed and zeros_free else None
        if cells is None:
            shown()  # the picture pools it, under the lock
        # The picture's "now" (of a step): with no unmasked zeros, what the mask keeps,
        # as cell counts where the session has them (the same step pruning nothing);
        # else the alive mask, read under the lock (the summaries read lazily).
        alive_now = before if zeros_free else now
        now_cells = None
        if cells is not None and edges is not None and zeros_free and "amount" in request.settings:
            # a fraction, 0.0: an int count would be checked against what is left
            nothing = replace(request, settings={**request.settings, "amount": 0.0})
            now_cells = nothing.kept_cells(session, edges)
        if mask is not None and now_cells is None:
            alive_now.kept  # noqa: B018 -- read under the lock
        if request.structured_dim is not None:
            before.kept_slices  # noqa: B018 -- counted under the lock (the stats)
        others = {n: (summaries.kept(n), kept_count(masks, n)) for n in masks
                  if n != target}  # counts only: no mask of theirs is built
        sizes = {n: session.info(n).numel for n in masks}
        module_type = session.info(target).module_type
    return PreviewPicture(request, shape, module_type, masks, before, now, mask, shown, reader,
                          None if cells is None else np.asarray(cells),
                          None if now_cells is None else np.asarray(now_cells),
                          mask_kept, others, sizes)
