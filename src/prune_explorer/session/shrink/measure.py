"""What a shrink saved, measured: parameters, FLOPs, state_dict bytes and CPU latency.

FLOPs are counted by torch's own :class:`torch.utils.flop_counter.FlopCounterMode` on the
example inputs; latency is the median of repeated forward passes on the CPU (``torch.no_grad``,
eval mode, one warm-up pass first) -- a wall-clock number, so it varies with the machine's load.

Examples
--------
>>> import torch
>>> from prune_explorer.session.shrink.measure import measure
>>> m = measure(torch.nn.Linear(4, 2), (torch.randn(3, 4),), repeats=3)
>>> m.parameters, m.flops, m.state_dict_bytes
(10, 48, 40)
"""

from __future__ import annotations

import copy
import html
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["Metrics", "ShrinkReport", "measure"]


@dataclass(frozen=True)
class Metrics:
    """One model's size and cost on the example inputs."""

    parameters: int
    flops: int
    state_dict_bytes: int
    latency_ms: float


def _on_cpu(value: Any) -> Any:
    return value.cpu() if isinstance(value, torch.Tensor) else value


def measure(model: nn.Module, inputs: tuple[Any, ...], repeats: int = 20,
            kwargs: dict[str, Any] | None = None) -> Metrics:
    """Parameters, FLOPs, state_dict bytes and median CPU latency of ``model`` on ``inputs``
    (positional) and ``kwargs`` (keyword inputs)."""
    params = sum(p.numel() for p in model.parameters())
    size = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    cpu_model = model if all(p.device.type == "cpu" for p in model.parameters()) else (
        copy.deepcopy(model).cpu())
    cpu_inputs = tuple(_on_cpu(x) for x in inputs)
    cpu_kwargs = {k: _on_cpu(v) for k, v in (kwargs or {}).items()}
    training = cpu_model.training
    cpu_model.eval()
    try:
        with torch.no_grad():
            with FlopCounterMode(display=False) as counter:
                cpu_model(*cpu_inputs, **cpu_kwargs)
            times = []
            for _ in range(max(1, repeats)):
                start = time.perf_counter()
                cpu_model(*cpu_inputs, **cpu_kwargs)
                times.append(time.perf_counter() - start)
    finally:
        cpu_model.train(training)
    return Metrics(params, int(counter.get_total_flops()), size,
                   statistics.median(times) * 1e3)


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


@dataclass
class ShrinkReport:
    """The smaller model and what it saves.

    ``model`` is a new object (the session's model is unchanged); ``before`` is the masked model
    with its pruning made permanent, ``after`` the shrunk one. ``removed`` maps a layer to the
    number of its output channels removed (their coupled inputs, norms and biases went too);
    ``kept`` lists ``(layer, channel, reason)`` for channels whose weights are all zero but that
    had to stay; ``partly_zero`` counts, per layer, channels only partly zero (kept).
    """

    model: nn.Module
    before: Metrics
    after: Metrics
    removed: dict[str, int] = field(default_factory=dict)
    kept: list[tuple[str, int, str]] = field(default_factory=list)
    partly_zero: dict[str, int] = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """Rows parameters / FLOPs / state_dict bytes / latency; columns before, after, ratio."""
        rows = {}
        for key, label in (("parameters", "parameters"), ("flops", "FLOPs"),
                           ("state_dict_bytes", "state_dict bytes"),
                           ("latency_ms", "CPU latency (ms, median)")):
            b, a = getattr(self.before, key), getattr(self.after, key)
            rows[label] = {"before": b, "after": a, "after / before": a / b if b else float("nan")}
        return pd.DataFrame.from_dict(rows, orient="index")

    def _notes(self) -> list[str]:
        notes = [f"removed {sum(self.removed.values())} channels: "
                 + (", ".join(f"{k} {v}" for k, v in self.removed.items()) or "none")]
        if self.kept:
            notes.append(f"kept {len(self.kept)} all-zero channels: "
                         + "; ".join(f"{n}[{i}] {r}" for n, i, r in self.kept[:5])
                         + (" ..." if len(self.kept) > 5 else ""))
        if self.partly_zero:
            notes.append("kept partly-zero channels: "
                         + ", ".join(f"{k} {v}" for k, v in self.partly_zero.items()))
        notes.append("the session's model is unchanged; shrink is not part of undo")
        return notes

    def __repr__(self) -> str:
        lines = ["ShrinkReport", self.table().to_string(float_format=_fmt)]
        return "\n".join(lines + self._notes())

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self._notes())
        table = self.table().to_html(float_format=_fmt)
        return f"<div><b>ShrinkReport</b>{table}<ul>{notes}</ul></div>"
