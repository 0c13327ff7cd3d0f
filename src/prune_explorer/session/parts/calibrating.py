"""``Session.calibrate``: record what the data-aware criteria need.

A part of :class:`~prune_explorer.session.Session`, working on its
:class:`~..state.SessionState`: the statistics (:mod:`prune_explorer.importance.calibration`)
and the batches go to ``state._calibrated``, which calibrated steps read
(:mod:`..steps.calibrated`).

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> _ = torch.manual_seed(0)
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> s = Session(model)
>>> s.calibrate([torch.randn(16, 4) for _ in range(2)])
Calibration(2 tensors, 2 batches: inputs)
>>> mask = s.preview("0.weight", "l1_unstructured", amount=0.5, importance="wanda")
>>> step = s.apply("0.weight", "l1_unstructured", amount=0.5, importance="wanda")
>>> step, torch.equal(mask, model[0].weight_mask)
(Step('l1_unstructured', '0.weight', amount=0.5, importance='wanda'), True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from prune_explorer.importance.calibration import Calibration, Loss, collect

from ..events import SessionEvent
from ..state import SessionState
from ..steps.calibrated import Calibrated
from ..tensors.sharded import refuse_sharded
from ..transaction.journal import locked
from .arguments import Arguments, as_list
from .stepping import Stepping

__all__ = ["Calibrating"]


class Calibrating:
    """Calibration statistics for the session's steps (a part of ``Session``)."""

    def __init__(self, state: SessionState, arguments: Arguments, stepping: Stepping) -> None:
        self._state = state
        self._lock = state._lock  # what @locked holds
        self._arguments = arguments
        self._stepping = stepping

    @locked
    def calibrate(self, batches: Iterable[Any], loss: Loss | None = None, *,
                  targets: Sequence[str] | None = None,
                  per_sample: bool = True) -> Calibration:
        """Run ``batches`` through the model and record what the criteria need.

        Parameters
        ----------
        batches : iterable
            A few batches the caller already has: a tensor (``model(x)``), a tuple or list
            (``model(*batch)``) or a mapping (``model(**batch)``). They are kept by reference
            (SparseGPT runs them again, one layer at a time).
        loss : callable, optional
            ``loss(model, batch) -> scalar`` (the batch's mean loss; it runs the model): needed
            for ``importance="taylor"`` (summed batch gradients) and ``"fisher"`` (summed squared
            per-sample gradients, one backward per sample when ``per_sample``).
        targets : sequence of str, optional
            Tensors to keep statistics for; by default :meth:`default_targets`.
        per_sample : bool, default True
            With a ``loss``, also collect Fisher's per-sample squared gradients.

        Returns
        -------
        Calibration
            The statistics (also kept by the session, replacing any earlier calibration).

        Notes
        -----
        Memory: O(C_in) per layer for the input sums, two tensor-sized sums per target for
        gradients; nothing per token or per sample outlives its batch. The model runs in eval
        mode; its modes, the parameters' ``requires_grad`` and ``.grad`` and the thread's grad
        mode are as before on any exit. The statistics describe the model when it was
        calibrated: calibrate again after changes that matter to them.
        """
        where = "Session.calibrate"
        state = self._state
        refuse_sharded(state._model, where)
        names = state.default_targets() if targets is None else as_list(targets)
        if isinstance(names, str) or not isinstance(names, list):
            raise TypeError(f"{where}: targets must be a list of tensor addresses; got "
                            f"{names!r}")
        names = list(dict.fromkeys(self._arguments.check_name(name, where) for name in names))
        if loss is not None and not callable(loss):
            raise TypeError(f"{where}: loss must be a callable loss(model, batch) -> scalar "
                            f"tensor; got {type(loss).__name__}")
        held = tuple(batches)
        if not held:
            raise ValueError(f"{where}: batches must hold at least one batch; got none")
        with self._stepping.transaction():  # the lock; the grad mode restored on any exit
            statistics = collect(state._model, held, names, loss=loss, per_sample=per_sample)
            before = state._calibrated
            state._journal.on_rollback((), lambda: setattr(state, "_calibrated", before))
            state._calibrated = Calibrated(statistics, held, loss)
            state._journal.emit(SessionEvent("calibrate", tuple(names), ()))  # views redraw
        return statistics
