"""SparseGPT (Frantar & Alistarh, 2023): prune a layer and update its surviving weights.

For a layer ``y = W x`` with ``W`` of shape (rows, C_in), the calibration inputs give the
Hessian of the layer's squared reconstruction error, ``H = (2 / n) sum x x^T`` (float32,
C_in x C_in, one layer at a time: :func:`layer_hessian`). :func:`sparsegpt` then walks the
columns in blocks of 128: in each block it picks what to prune by the saliency
``w_ij**2 / [H^-1]_jj**2`` (unstructured: the lowest fraction of the block; ``"N:M"``: each row
keeps the N highest of every M consecutive columns), and column by column sets the
pruned weights to zero and spreads their error over the columns not yet visited through the
upper Cholesky factor of ``H^-1``.

Stated choices (a step records them):

* dampening: ``damping * mean(diag H)`` is added to the diagonal (``damping = 0.01`` by
  default). If the Cholesky factorisation still fails (an ill-conditioned or singular ``H``:
  tiny data, collinear inputs), the damping is multiplied by 10 and tried again, up to
  ``damping = 1e4``, and the damping used is returned: never a silent fallback to another
  criterion; beyond that it raises.
* dead inputs (``H_jj == 0``: a feature that is 0 on every calibration row) get ``H_jj = 1``
  and their weights are pruned (they never contributed to the calibration outputs).

This module imports only torch. The algorithm follows the paper and the formulas of
IST-DASLab/sparsegpt; the code is our own.

Examples
--------
>>> import torch
>>> from prune_explorer.importance.sparsegpt import sparsegpt
>>> _ = torch.manual_seed(0)
>>> x = torch.randn(256, 8)
>>> w = torch.randn(4, 8)
>>> result = sparsegpt(w, 2 / 256 * x.T @ x, 0.5)
>>> int(result.kept.sum()), result.damping
(16, 0.01)
>>> zeroed = w * result.kept  # the same mask without the update of the survivors
>>> def error(v):
...     return float(((x @ v.T - x @ w.T) ** 2).sum())
>>> error(result.weight) < error(zeroed)
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from prune_explorer.prune.validation import pattern_counts

from .calibration import run_model

__all__ = ["BLOCK", "MAX_DAMPING", "SparseGPTResult", "layer_hessian", "sparsegpt"]

#: Columns per block (the paper's 128).
BLOCK = 128
#: Beyond this dampening (a multiple of mean(diag H)) SparseGPT refuses instead of raising it.
MAX_DAMPING = 1e4


@dataclass(frozen=True)
class SparseGPTResult:
    """The updated weight (same shape and dtype as given), the kept entries (bool), the
    dampening actually used, the dead inputs found and whether the dampening was raised."""

    weight: torch.Tensor
    kept: torch.Tensor
    damping: float
    dead_inputs: int
    raised: bool

    def __repr__(self) -> str:
        return (f"SparseGPTResult({tuple(self.weight.shape)}, {int(self.kept.sum())} kept, "
                f"damping={self.damping}{' (raised)' if self.raised else ''}, "
                f"dead_inputs={self.dead_inputs})")


class _Reached(Exception):
    """Stops the forward pass once the layer has seen its input."""


def layer_hessian(model: nn.Module, layer: nn.Module, batches: Iterable[Any],
                  run: Callable[[nn.Module, Any], Any] = run_model) -> torch.Tensor:
    """``H = (2 / n) sum x x^T`` (float32, C_in x C_in) of ``layer``'s inputs over ``batches``.

    Each batch runs until the layer has seen it (the rest of the model is skipped); the model
    runs without gradients, in the mode it is in.
    """
    total: list[torch.Tensor | None] = [None]
    rows = [0]

    def hook(module: nn.Module, args: tuple[Any, ...]) -> None:
        x = args[0].detach()
        flat = x.reshape(-1, x.shape[-1]).to(torch.float32)
        part = flat.T @ flat
        total[0] = part if total[0] is None else total[0] + part
        rows[0] += flat.shape[0]
        raise _Reached

    handle = layer.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            for batch in batches:
                with contextlib.suppress(_Reached):
                    run(model, batch)
    finally:
        handle.remove()
    if total[0] is None or rows[0] == 0:
        raise ValueError("sparsegpt: the calibration batches never reached the layer; got "
                         f"{rows[0]} input rows")
    return total[0] * (2.0 / rows[0])


def _inverse_factor(h: torch.Tensor, damping: float) -> tuple[torch.Tensor, float, bool]:
    """The upper Cholesky factor of ``(H + d I)^-1``, raising ``d`` by 10x until it works."""
    mean_diag = float(torch.diagonal(h).mean())
    scale = mean_diag if mean_diag > 0 else 1.0
    used, raised = damping, False
    eye = torch.eye(h.shape[0], dtype=h.dtype, device=h.device)
    while True:
        lower, info = torch.linalg.cholesky_ex(h + used * scale * eye)
        if int(info) == 0:
            inverse = torch.cholesky_inverse(lower)
            upper, info = torch.linalg.cholesky_ex(inverse, upper=True)
            if int(info) == 0 and bool(torch.isfinite(upper).all()):
                return upper, used, raised
        if used * 10 > MAX_DAMPING:
            raise ValueError(
                f"sparsegpt: damping must make the Hessian positive definite; still singular "
                f"at damping={used} (x mean diag {scale:.3g}), the most it is raised to")
        used, raised = used * 10, True


def sparsegpt(weight: torch.Tensor, hessian: torch.Tensor, sparsity: float | str,
              damping: float = 0.01, block: int = BLOCK) -> SparseGPTResult:
    """Prune ``weight`` (rows, C_in) with SparseGPT given its layer's ``hessian``.

    Parameters
    ----------
    weight : torch.Tensor
        2-D, output rows by input columns.
    hessian : torch.Tensor
        ``(C_in, C_in)``, from :func:`layer_hessian`.
    sparsity : float or str
        A fraction in [0, 1) of each 128-column block (the lowest saliencies of the block), or
        ``"N:M"`` (keep N of every M consecutive columns of each row).
    damping : float, default 0.01
        Fraction of ``mean(diag H)`` added to the diagonal (raised if need be, see the module).
    block : int, default 128
        Columns per block.
    """
    w = weight.detach().to(torch.float32).clone(memory_format=torch.contiguous_format)
    h = hessian.detach().to(torch.float32).clone()
    columns = w.shape[1]
    dead = torch.diagonal(h) == 0
    h[dead, dead] = 1.0
    w[:, dead] = 0.0
    upper, used, raised = _inverse_factor(h, damping)
    pattern = pattern_counts(sparsity) if isinstance(sparsity, str) else None
    pruned = torch.zeros_like(w, dtype=torch.bool)
    for start in range(0, columns, block):
        stop = min(start + block, columns)
        width = stop - start
        w1 = w[:, start:stop].clone()
        errors = torch.zeros_like(w1)
        inv1 = upper[start:stop, start:stop]
        diag = torch.diagonal(inv1)
        cut = torch.zeros(w1.shape, dtype=torch.bool, device=w1.device)
        if pattern is None:
            saliency = w1.square() / diag.square().unsqueeze(0)
            count = int(saliency.numel() * float(sparsity))
            order = torch.sort(saliency.flatten(), stable=True).indices
            cut.view(-1)[order[:count]] = True
        for i in range(width):
            if pattern is not None and i % pattern[1] == 0:
                keep_n, m = pattern
                span = w1[:, i:i + m].square() / diag[i:i + m].square().unsqueeze(0)
                order = torch.sort(span, dim=1, stable=True).indices
                cut[:, i:i + m].scatter_(1, order[:, : span.shape[1] - keep_n], True)
            column = w1[:, i]
            quantized = torch.where(cut[:, i], torch.zeros_like(column), column)
            error = (column - quantized) / inv1[i, i]
            w1[:, i] = quantized
            w1[:, i + 1:] -= error.unsqueeze(1) * inv1[i, i + 1:].unsqueeze(0)
            errors[:, i] = error
        w[:, start:stop] = w1
        pruned[:, start:stop] = cut
        w[:, stop:] -= errors @ upper[start:stop, stop:]
    pruned |= dead.unsqueeze(0).expand_as(pruned)
    w[pruned] = 0.0
    return SparseGPTResult(w.to(weight.dtype), ~pruned, used, int(dead.sum()), raised)
