"""Calibration: running a few batches through a model and keeping per-tensor statistics.

What a data-aware criterion needs is summed as the batches go by, never stored per token or
per sample beyond the batch at hand:

* ``inputs``: for each weight of a layer with input features (``Linear``, ``transformers``'
  ``Conv1D``, ``Conv1d/2d/3d``), the running sum of ``x_j**2`` over every row (token, pixel) of
  the layer's input, one number per input feature ``j``: O(C_in) per layer, and the row count;
* ``gradients``: the sum over batches of ``d loss / d w`` (one backward per batch), tensor-shaped;
* ``fisher``: the sum over samples of the squared per-sample gradient ``(d loss_s / d w)**2``
  (one backward per sample of a batch), tensor-shaped.

Gradients are taken with :func:`torch.autograd.grad`, so the parameters' ``.grad`` are never
touched; the model runs in eval mode, and its modes, the thread's grad mode and its hooks are put
back on any exit. This module imports only torch.

Batches are whatever the model takes: a tensor (``model(x)``), a tuple or list
(``model(*batch)``) or a mapping (``model(**batch)``); with a ``loss``, ``loss(model, batch)``
runs the model itself and returns a scalar (the batch's mean loss), so a batch may also carry
labels. Per-sample gradients split a batch along dim 0 of every tensor in it.

Examples
--------
>>> import torch
>>> from prune_explorer.importance.calibration import collect
>>> model = torch.nn.Sequential(torch.nn.Linear(3, 2))
>>> stats = collect(model, [torch.ones(4, 3), 2 * torch.ones(4, 3)], ["0.weight"])
>>> stats["0.weight"].inputs.tolist(), stats["0.weight"].rows  # 4 * 1 + 4 * 4 per feature
([20.0, 20.0, 20.0], 8)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

__all__ = [
    "Calibration",
    "Loss",
    "TensorStats",
    "batch_size",
    "batch_to",
    "collect",
    "feature_layer",
    "run_model",
    "sample_of",
]

#: ``loss(model, batch) -> scalar tensor``: the user's loss on one batch (mean over its samples).
Loss = Callable[[nn.Module, Any], torch.Tensor]

#: Layers whose weight has input features, and where those features sit in the layer's input.
_FEATURES_LAST = ("Linear", "Conv1D")
_CHANNELS = ("Conv1d", "Conv2d", "Conv3d")


def feature_layer(module: nn.Module) -> str | None:
    """``"last"`` (features on the input's last dim), ``"channels"`` (dim 1 of a batched
    convolution input) or None: layers whose input statistics calibration can keep.

    Examples
    --------
    >>> feature_layer(torch.nn.Linear(2, 2)), feature_layer(torch.nn.Conv2d(1, 1, 3))
    ('last', 'channels')
    >>> feature_layer(torch.nn.Embedding(4, 2)) is None
    True
    """
    for base in type(module).__mro__:
        if base.__name__ in _FEATURES_LAST:
            return "last"
        if base.__name__ in _CHANNELS:
            return "channels"
    return None


@dataclass
class TensorStats:
    """What calibration kept for one tensor (a tied tensor once, whichever name used it).

    Attributes
    ----------
    inputs : torch.Tensor or None
        Float64 ``(C_in,)``: the sum of ``x_j**2`` over all input rows, for a weight whose layer
        has input features; None otherwise.
    rows : int
        Input rows summed in ``inputs`` (tokens, or positions for a convolution).
    gradients : torch.Tensor or None
        Sum over batches of the batch-loss gradient (float32 or the tensor's dtype if wider).
    batches : int
        Batches summed in ``gradients``.
    fisher : torch.Tensor or None
        Sum over samples of the squared per-sample gradient.
    samples : int
        Samples summed in ``fisher``.
    """

    inputs: torch.Tensor | None = None
    rows: int = 0
    gradients: torch.Tensor | None = None
    batches: int = 0
    fisher: torch.Tensor | None = None
    samples: int = 0

    def input_norms(self) -> torch.Tensor | None:
        """``||X_j||_2`` per input feature (the root of the summed squares), or None."""
        return None if self.inputs is None else self.inputs.sqrt()

    def mean_gradient(self) -> torch.Tensor | None:
        """The gradient averaged over batches, or None."""
        return None if self.gradients is None else self.gradients / max(self.batches, 1)

    def mean_square_gradient(self) -> torch.Tensor | None:
        """``E[g**2]`` over samples (the empirical Fisher's diagonal), or None."""
        return None if self.fisher is None else self.fisher / max(self.samples, 1)

    def to(self, device: torch.device | str) -> TensorStats:
        """The same statistics on ``device`` (a new record; tensors already there are shared).

        Examples
        --------
        >>> TensorStats(inputs=torch.ones(3), rows=4).to("meta").inputs.device.type
        'meta'
        """
        def moved(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return TensorStats(moved(self.inputs), self.rows, moved(self.gradients), self.batches,
                           moved(self.fisher), self.samples)

    def __repr__(self) -> str:
        held = [f"inputs ({self.inputs.numel()} features, {self.rows} rows)"
                if self.inputs is not None else None,
                f"gradients ({self.batches} batches)" if self.gradients is not None else None,
                f"fisher ({self.samples} samples)" if self.fisher is not None else None]
        return f"TensorStats({', '.join(h for h in held if h) or 'nothing'})"


@dataclass
class Calibration:
    """Statistics of every calibrated tensor, by address, and what was collected.

    ``kinds`` is the set of statistics collected (``"inputs"``, ``"gradients"``, ``"fisher"``);
    ``batches`` the number of batches seen.
    """

    stats: dict[str, TensorStats] = field(default_factory=dict)
    kinds: frozenset[str] = frozenset()
    batches: int = 0

    def __getitem__(self, name: str) -> TensorStats:
        return self.stats[name]

    def to(self, device: torch.device | str) -> Calibration:
        """The same statistics with every tensor on ``device`` (a new record; this one is
        left as it is, so a failed move can put it back)."""
        return Calibration({name: stats.to(device) for name, stats in self.stats.items()},
                           self.kinds, self.batches)

    def __contains__(self, name: object) -> bool:
        return name in self.stats

    def __repr__(self) -> str:
        kinds = ", ".join(sorted(self.kinds)) or "nothing"
        return f"Calibration({len(self.stats)} tensors, {self.batches} batches: {kinds})"


def run_model(model: nn.Module, batch: Any) -> Any:
    """Call ``model`` on ``batch``: a mapping as keywords, a tuple or list as positional
    arguments, anything else as the one argument."""
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def _tensors(batch: Any) -> Iterator[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        yield batch
    elif isinstance(batch, Mapping):
        for value in batch.values():
            yield from _tensors(value)
    elif isinstance(batch, (tuple, list)):
        for value in batch:
            yield from _tensors(value)


def batch_size(batch: Any) -> int:
    """The length of dim 0 of the first tensor in ``batch`` (its samples)."""
    for tensor in _tensors(batch):
        if tensor.dim() > 0:
            return int(tensor.shape[0])
    raise ValueError("calibrate: batches must hold a tensor with a batch dim (dim 0) to split "
                     "into samples for per-sample gradients; got a batch without one")


def sample_of(batch: Any, index: int) -> Any:
    """Sample ``index`` of ``batch`` as a batch of one (dim 0 of every tensor sliced)."""
    if isinstance(batch, torch.Tensor):
        return batch[index:index + 1] if batch.dim() > 0 else batch
    if isinstance(batch, Mapping):
        return {key: sample_of(value, index) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(sample_of(value, index) for value in batch)
    return batch


def batch_to(batch: Any, device: torch.device) -> Any:
    """``batch`` with every tensor in it on ``device`` (the same objects where they are there
    already): a batch recorded before the model moved, run on the model where it is now.

    Examples
    --------
    >>> moved = batch_to({"x": torch.ones(2), "n": 3}, torch.device("meta"))
    >>> moved["x"].device.type, moved["n"]
    ('meta', 3)
    """
    if isinstance(batch, torch.Tensor):
        return batch if batch.device == device else batch.to(device)
    if isinstance(batch, Mapping):
        return {key: batch_to(value, device) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(batch_to(value, device) for value in batch)
    return batch


def _locate(model: nn.Module, address: str) -> tuple[nn.Module, str]:
    module_name, _, tensor_name = address.rpartition(".")
    return model.get_submodule(module_name), tensor_name


def _parameter(module: nn.Module, tensor_name: str) -> nn.Parameter:
    """The trainable tensor behind ``module.<tensor_name>`` (its ``_orig`` when pruned)."""
    param = module._parameters.get(tensor_name + "_orig", module._parameters.get(tensor_name))
    if not isinstance(param, nn.Parameter):
        raise ValueError(f"calibrate: targets must name parameters; {tensor_name!r} of "
                         f"{type(module).__name__} is not one")
    return param


def _input_hook(stats: TensorStats, kind: str, live: list[bool]
                ) -> Callable[[nn.Module, tuple[Any, ...], Any], None]:
    def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if not live[0] or not args or not isinstance(args[0], torch.Tensor):
            return
        x = args[0].detach()
        if kind == "last":
            rows = x.reshape(-1, x.shape[-1])
        else:  # a convolution: channels on dim 1 (dim 0 when unbatched)
            weight = _parameter(module, "weight")
            channel = 1 if x.dim() == weight.dim() else 0
            rows = x.movedim(channel, -1).reshape(-1, x.shape[channel])
        squares = rows.to(torch.float64).square().sum(dim=0)
        stats.inputs = squares if stats.inputs is None else stats.inputs + squares.to(
            stats.inputs.device)
        stats.rows += rows.shape[0]

    return hook


def _accumulator_dtype(param: torch.Tensor) -> torch.dtype:
    return torch.promote_types(param.dtype, torch.float32)


def _add(total: torch.Tensor | None, value: torch.Tensor) -> torch.Tensor:
    value = value.detach().to(_accumulator_dtype(value))
    return value.clone() if total is None else total.add_(value)


@contextlib.contextmanager
def _calibrating(model: nn.Module, params: Sequence[nn.Parameter]) -> Iterator[None]:
    """Eval mode and ``requires_grad`` on the targets for the block; both put back after."""
    modes = [(module, module.training) for module in model.modules()]
    needs = [(param, param.requires_grad) for param in params]
    try:
        model.eval()
        for param, _ in needs:
            param.requires_grad_(True)
        yield
    finally:
        for param, flag in needs:
            param.requires_grad_(flag)
        for module, training in modes:
            module.training = training


def collect(
    model: nn.Module,
    batches: Iterable[Any],
    targets: Sequence[str],
    *,
    loss: Loss | None = None,
    per_sample: bool = True,
) -> Calibration:
    """Run ``batches`` through ``model`` and sum the statistics of ``targets``.

    Parameters
    ----------
    model : torch.nn.Module
    batches : iterable
        Calibration batches (see the module's docstring for what a batch may be).
    targets : sequence of str
        Tensor addresses (``"fc1.weight"``); a tied tensor under one of its names: its
        statistics come from every module that holds it.
    loss : callable, optional
        ``loss(model, batch) -> scalar``: with it, gradients are summed too (``"gradients"``,
        and ``"fisher"`` if ``per_sample``).
    per_sample : bool, default True
        With a ``loss``, also sum squared per-sample gradients (one backward per sample).

    Returns
    -------
    Calibration

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 1))
    >>> batch = (torch.ones(3, 2), torch.zeros(3, 1))
    >>> mse = lambda m, b: ((m(b[0]) - b[1]) ** 2).mean()
    >>> calib = collect(model, [batch], ["0.weight"], loss=mse)
    >>> sorted(calib.kinds), calib["0.weight"].samples
    (['fisher', 'gradients', 'inputs'], 3)
    """
    calibration = Calibration(kinds=frozenset(
        {"inputs"} | ({"gradients", "fisher"} if loss is not None and per_sample
                      else {"gradients"} if loss is not None else set())))
    by_param: dict[int, str] = {}
    params: list[nn.Parameter] = []
    for address in targets:
        param = _parameter(*_locate(model, address))
        by_param[id(param)] = address
        params.append(param)
        calibration.stats[address] = TensorStats()
    live = [True]
    handles = []
    try:
        for module in model.modules():
            kind = feature_layer(module)
            if kind is None:
                continue
            held = module._parameters.get("weight_orig", module._parameters.get("weight"))
            found = by_param.get(id(held)) if held is not None else None
            if found is not None:
                handles.append(module.register_forward_hook(
                    _input_hook(calibration.stats[found], kind, live)))
        with _calibrating(model, params):
            for batch in batches:
                _one_batch(model, batch, targets, params, calibration, loss, per_sample, live)
                calibration.batches += 1
    finally:
        for handle in handles:
            handle.remove()
    return calibration


def _one_batch(model: nn.Module, batch: Any, targets: Sequence[str],
               params: list[nn.Parameter], calibration: Calibration, loss: Loss | None,
               per_sample: bool, live: list[bool]) -> None:
    live[0] = True
    if loss is None:
        with torch.no_grad():
            run_model(model, batch)
        return
    with torch.enable_grad():
        value = loss(model, batch)
        grads = torch.autograd.grad(value, params, allow_unused=True)
    live[0] = False  # per-sample passes add no input statistics
    for address, grad in zip(targets, grads, strict=True):
        stats = calibration.stats[address]
        if grad is not None:
            stats.gradients = _add(stats.gradients, grad)
        stats.batches += 1
    if not per_sample:
        return
    for index in range(batch_size(batch)):
        with torch.enable_grad():
            value = loss(model, sample_of(batch, index))
            grads = torch.autograd.grad(value, params, allow_unused=True)
        for address, grad in zip(targets, grads, strict=True):
            stats = calibration.stats[address]
            if grad is not None:
                stats.fisher = _add(stats.fisher, grad.square())
            stats.samples += 1
