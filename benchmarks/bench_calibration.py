"""What calibration costs, against the plain passes it adds to, in the same run.

Model: ``transformers`` GPT-2 built from a config with GPT-2-small's shapes (n_embd 768, 12
heads, vocab 50,257, 1,024 positions) and ``--layers`` blocks (12 is GPT-2-small; fewer keep
the run short on a CPU), random weights, random tokens. Targets: the session's default targets
(every block's ``c_attn``, ``c_proj``, ``c_fc``, ``mlp.c_proj``; the tied embedding is excluded).

Timed, each the median of ``--repeats`` rounds interleaved so they share the machine's load:

* ``forward``: the batches through the model without gradients;
* ``calibrate(inputs)``: ``Session.calibrate(batches)`` (running sums of ``x_j**2``), as a
  multiple of ``forward``;
* ``forward+backward``: the batches' loss and its gradient w.r.t. the targets;
* ``calibrate(gradients)``: with ``loss=``, ``per_sample=False`` (Taylor), as a multiple of
  ``forward+backward``;
* ``calibrate(fisher)``: with per-sample gradients (one backward per sample), likewise.

Memory: the bytes the statistics hold per target parameter (exact, from the tensors), and the
peak resident set size of the process after each kind (``ru_maxrss``, coarse: it only grows).

Usage::

    python benchmarks/bench_calibration.py
    python benchmarks/bench_calibration.py --layers 12 --batches 4 --batch-size 4 --seq 128
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Callable

import torch
import transformers as T

from prune_explorer import Session


def _stats_bytes(calibration) -> int:  # type: ignore[no-untyped-def]
    total = 0
    for stats in calibration.stats.values():
        for tensor in (stats.inputs, stats.gradients, stats.fisher):
            if tensor is not None:
                total += tensor.numel() * tensor.element_size()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = T.GPT2Config(n_layer=args.layers, n_embd=768, n_head=12, vocab_size=50257,
                          n_positions=1024)
    model = T.GPT2LMHeadModel(config).eval()
    batches = [{"input_ids": torch.randint(0, 50257, (args.batch_size, args.seq))}
               for _ in range(args.batches)]

    def loss(m: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return m(**batch, labels=batch["input_ids"]).loss

    s = Session(model)
    targets = s.default_targets()
    params = [s.tensor(name) for name in targets]
    numel = sum(p.numel() for p in params)
    locate = [s.model.get_submodule(n.rpartition(".")[0]) for n in targets]
    weights = [m._parameters["weight"] for m in locate]

    def forward() -> None:
        with torch.no_grad():
            for batch in batches:
                model(**batch)

    def forward_backward() -> None:
        for batch in batches:
            torch.autograd.grad(loss(model, batch), weights)

    runs: dict[str, Callable[[], object]] = {
        "forward": forward,
        "calibrate(inputs)": lambda: s.calibrate(batches),
        "forward+backward": forward_backward,
        "calibrate(gradients)": lambda: s.calibrate(batches, loss, per_sample=False),
        "calibrate(fisher)": lambda: s.calibrate(batches, loss),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    peaks: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for round_ in range(args.repeats + 1):
        for name, run in runs.items():
            start = time.perf_counter()
            out = run()
            elapsed = time.perf_counter() - start
            if round_:  # the first round warms up
                times[name].append(elapsed)
            peaks[name] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            if out is not None:
                sizes[name] = _stats_bytes(out)
    median = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"GPT-2-small shapes, {args.layers} blocks, {len(targets)} targets "
          f"({numel / 1e6:.1f} M parameters), {args.batches} batches of {args.batch_size} x "
          f"{args.seq} tokens, torch {torch.__version__}, {torch.get_num_threads()} threads")
    base = {"calibrate(inputs)": "forward", "calibrate(gradients)": "forward+backward",
            "calibrate(fisher)": "forward+backward"}
    for name, seconds in median.items():
        ratio = f"{seconds / median[base[name]]:5.2f}x {base[name]}" if name in base else ""
        memory = f"{sizes[name] / numel:6.3f} B/param of statistics" if name in sizes else ""
        print(f"{name:22s} {seconds * 1e3:9.1f} ms  {ratio:26s} {memory:30s} "
              f"peak RSS {peaks[name] / 1024:7.0f} MiB")


if __name__ == "__main__":
    main()
