"""What a tab may reach of the explorer: small Protocols, not the whole :class:`Explorer`.

A pane is given the explorer it lives in, typed as one of these: the session it shows, the
widget registry, the status line, the tensor on show, a count of session changes (which keys
the panes' caches), and the few actions a pane starts (an action at the widget boundary,
quiet updates, one redraw for several changes). The :class:`Explorer` satisfies them
structurally; mypy checks every pane against the Protocol it names, and
``tests/widgets/test_widgets_context.py`` that no pane reaches further.

- :class:`PaneContext`: what every tab uses.
- :class:`ExploreContext`: the Explore tab and its panels (model view, magnitudes, zoom): also
  the session as far as they ask it (:class:`ExploreSession`, a part of ``Session``'s API),
  the metric readout, choosing a tensor, its zeros, and the Apply/Undo/Reset actions.
- :class:`TabContext`: the other tabs (History, Global vs local, Commit, Shrink, Export): also
  the whole session, which tab is on show and whether it holds a given pane, the zeros before
  an action and the sentence saying what it changed, the model and the example inputs for
  Shrink.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 2)), debounce=None)
>>> isinstance(ex, ExploreContext), isinstance(ex, TabContext), isinstance(ex.session,
...                                                                        ExploreSession)
(True, True, True)
>>> sorted(members(ExploreContext) - members(PaneContext))
['apply', 'metric', 'reset', 'select', 'session', 'undo', 'zeros']
>>> ex.close()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from prune_explorer.session.preview.picture import CountingSession

if TYPE_CHECKING:
    import torch
    from torch import nn

    from prune_explorer.session import Session, Step
    from prune_explorer.session.analysis.why import CriteriaComparison, WhyData
    from prune_explorer.session.preview.magnitudes import Magnitudes
    from prune_explorer.session.preview.picture import (
        CellEdges,
        MaskSummaries,
        PreviewPicture,
        StepRequest,
    )

    from .parts.status import Progress, StatusBar
    from .parts.ui import UI
    from .tabs.explore.metric import MetricReadout

__all__ = ["ExploreContext", "ExploreSession", "PaneContext", "TabContext", "members"]


@runtime_checkable
class ExploreSession(CountingSession, Protocol):
    """The questions the Explore tab asks the session (a part of ``Session``'s API): the
    tensors and their facts, the one call a picture is drawn from, what the buttons may do,
    and for the panels the zeros after a step, the sorted importances and the weights. The
    summaries of the current masks read :class:`~prune_explorer.session.preview.picture.
    CountingSession`'s ``mask``, ``alive``, ``kept_count`` and ``info``."""

    @property
    def names(self) -> tuple[str, ...]:
        """Addresses of the prunable tensors."""

    @property
    def steps(self) -> tuple[Step, ...]:
        """Steps applied so far."""

    def default_targets(self) -> list[str]:
        """The tensors people usually prune."""

    def preview(self, target: str, method: str, *, seed: int | None = None,
                **settings: Any) -> torch.Tensor:
        """The mask a step would leave (the custom-mask upload checks a file with it)."""

    def preview_picture(self, request: StepRequest, *, cell_edges: CellEdges | None = None,
                        summaries: MaskSummaries | None = None) -> PreviewPicture:
        """Everything one picture of a previewed step is drawn from."""

    def undo_blocker(self) -> str | None:
        """Why Undo would refuse now, or None."""

    def reset_blocker(self) -> str | None:
        """Why Reset would refuse now, or None."""

    def zeros_after(self, masks: Mapping[str, torch.Tensor]) -> dict[str, int]:
        """Zeros of each tensor once ``masks`` are installed."""

    def magnitudes(self, name: str, *, n: Any = None, dim: int | None = None) -> Magnitudes:
        """The sorted importances of ``name``."""

    def tensor(self, name: str) -> torch.Tensor:
        """The values of ``name`` as the forward pass sees them."""

    def why(self, name: str, importance: str = "wanda") -> WhyData:
        """``|W|``, the input norms and a criterion's score of ``name`` (the why view)."""

    def compare_criteria(self, target: str, method: str = "l1_unstructured", *, against: str,
                         importance: str = "magnitude", targets: Sequence[str] | None = None,
                         seed: int | None = None, **settings: Any) -> CriteriaComparison:
        """Two criteria's masks of one step on ``target`` (the why view's comparison)."""


@runtime_checkable
class PaneContext(Protocol):
    """What every tab reaches of the explorer."""

    @property
    def ui(self) -> UI:
        """Every widget by name."""

    @property
    def status(self) -> StatusBar:
        """The status line and progress bar."""

    @property
    def debounce(self) -> float | None:
        """Seconds a background picture waits for newer input (None: drawn synchronously)."""

    @property
    def tensor(self) -> str | None:
        """The tensor chosen in the picker."""

    @property
    def version(self) -> int:
        """Session changes seen so far (keys the panes' caches)."""

    @property
    def is_quiet(self) -> bool:
        """True while the explorer updates widgets to show the session (observers ignore)."""

    def quiet(self) -> AbstractContextManager[None]:
        """Widget changes inside the block do not trigger the control observers."""

    def batch(self) -> AbstractContextManager[None]:
        """One redraw at the end of several session changes."""

    def act(self, what: str, action: Callable[[Progress], Any], *,
            done: str | Callable[[Any], str] | None = None, source: str = "action",
            atomic: bool = True) -> Any:
        """Run a session action at the widget boundary (errors become a status message)."""

    def request_preview(self) -> None:
        """Ask for a new preview of the current controls."""

    def reserve(self, what: str | None) -> None:
        """While ``what`` is set, every other action is refused, naming it (None: release)."""


@runtime_checkable
class ExploreContext(PaneContext, Protocol):
    """What the Explore tab and its panels reach of the explorer."""

    @property
    def session(self) -> ExploreSession:
        """The session on show, as far as the Explore tab asks it."""

    @property
    def metric(self) -> MetricReadout | None:
        """The metric readout, when the explorer was given ``evaluate``."""

    def select(self, name: str) -> None:
        """Choose the tensor ``name`` in the picker."""

    def zeros(self, name: str) -> int:
        """Entries of ``name`` that are exactly 0 (from the last report)."""

    def apply(self) -> None:
        """Apply the previewed step."""

    def undo(self) -> None:
        """Undo the last step."""

    def reset(self) -> None:
        """Undo every step."""


@runtime_checkable
class TabContext(PaneContext, Protocol):
    """What the other tabs reach of the explorer."""

    @property
    def session(self) -> Session:
        """The session on show."""

    @property
    def selected_tab(self) -> int | None:
        """Index of the tab on show."""

    def shows(self, pane: Any) -> bool:
        """Whether the tab holding ``pane`` is on show."""

    @property
    def model(self) -> nn.Module:
        """The model explored."""

    @property
    def example_inputs(self) -> Any:
        """One input batch for Shrink (None: not given)."""

    def zeros_snapshot(self) -> dict[str, int]:
        """Exact zeros of every tensor now, to say later what an action changed."""

    def outcome(self, verb: str, steps: list[Step], before: Mapping[str, int]) -> str:
        """The status line for ``steps`` done, with what changed since ``before``."""


def members(protocol: type) -> frozenset[str]:
    """The public names a Protocol declares, its bases' included."""
    return frozenset(
        name for cls in protocol.__mro__ if cls.__module__ not in ("typing", "builtins")
        for name in vars(cls) if not name.startswith("_"))
