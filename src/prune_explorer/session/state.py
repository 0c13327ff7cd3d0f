"""What the parts of a :class:`~prune_explorer.session.Session` share: :class:`SessionState`.

The session's public methods live in ``session.py`` or in one of its parts (``parts/``: the
reports, the previews, the commits, a call's arguments, the transaction and the step runner).
Each part is built with the session itself, seen only through this small protocol: the model,
what the session knows of its tensors, its history and journal, its lock, and its caches. No
part inherits from another or imports ``Session``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from torch import nn

if TYPE_CHECKING:
    from .history.tensor_history import HistoryEntry
    from .model.targets import TensorInfo
    from .model.watch import Seen
    from .preview.magnitudes import MagnitudeCache
    from .preview.order_cache import OrderCache
    from .steps.calibrated import Calibrated
    from .tensors.packed import MaskBits
    from .transaction.journal import Journal

__all__ = ["SessionState"]


class SessionState(Protocol):
    """The state a session's parts read and change (the :class:`Session` holds it).

    ``_known``: the prunable tensors by address (a tied tensor once); ``_aliases``: alias
    address of a tied tensor -> the address it is listed under; ``_histories``: each tensor's
    masks, one entry per step; ``_found_methods``: the pruning the model had when the session
    began; ``_journal``: actions, commits, seeds and events (:mod:`.transaction.journal`);
    ``_seen``: what the session last saw of each tensor (:mod:`.model.watch`); ``_orders`` and
    ``_magnitudes``: the previews' caches; ``_bits``: the history's packed masks by buffer;
    ``_calibrated``: the last :meth:`Session.calibrate`'s statistics and batches, or None.
    """

    _model: nn.Module
    _known: dict[str, TensorInfo]
    _aliases: dict[str, str]
    _histories: dict[str, list[HistoryEntry]]
    _found_methods: dict[str, tuple[str, ...]]
    _journal: Journal
    _lock: threading.RLock
    _seen: dict[str, Seen]
    _orders: OrderCache
    _magnitudes: MagnitudeCache
    _bits: MaskBits
    _calibrated: Calibrated | None  # what Session.calibrate recorded (calibrated steps read it)

    def _locate(self, name: str) -> tuple[nn.Module, str]:
        """The module holding tensor ``name`` and the tensor's name on it."""

    def default_targets(self) -> list[str]:
        """The tensors a report or sweep covers when given none."""
