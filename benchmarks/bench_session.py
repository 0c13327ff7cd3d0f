"""Time what one amount-slider step costs in the session: the mask and the picture's cell counts.

For ``Linear(4096, 4096)`` and ``Linear(4096, 11008)`` weights, fp32 N(0, 0.02), fp32 default init
and bf16 default init (every cut a tie there), and each method:

* first open: the first ``Session.preview`` of the tensor (includes the one-time order of |w|
  for L1) plus ``Session.preview_cells``;
* slider step: ``preview`` + ``preview_cells`` at 20 amounts in [0.3, 0.7]: median and p95;
* core: the same step with the session's order cache switched off (the core's own selection);
* apply: ``Session.apply`` once, right after the preview of the same settings as in the
  explorer (includes noting how a tied cut was split), then undo.

Then ``preview_global`` over three such layers (first call, median/p95 over the 20 amounts) and,
in a fresh process, the peak extra resident memory of the first ``preview_global`` per parameter.

Run: ``python benchmarks/bench_session.py [--shapes 4096x4096 11008x4096] [--data normal ...]
[--methods l1_unstructured ...] [--device cpu] [--no-memory]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

from prune_explorer.session import Session
from prune_explorer.viz import MaskPreview

AMOUNTS = [0.3 + 0.4 * i / 19 for i in range(20)]
SETTINGS = {
    "l1_unstructured": {},
    "random_unstructured": {"seed": 1},
    "ln_structured": {"n": 2, "dim": 0},
    "random_structured": {"dim": 0, "seed": 1},
}


def layer(shape: tuple[int, int], data: str, device: str, seed: int = 0) -> nn.Linear:
    """An ``nn.Linear`` whose weight has ``shape`` (out, in), filled per ``data`` from ``seed``
    (give each layer of a model its own: equal layers would tie entry for entry)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lin = nn.Linear(shape[1], shape[0], bias=False, device=device)  # default init
        if data == "normal":
            with torch.no_grad():
                lin.weight.normal_(0.0, 0.02)
    return lin.to(torch.bfloat16) if data == "bf16" else lin


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return 1000.0 * (time.perf_counter() - start)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def bench_local(shape, data, method, device) -> dict[str, float]:
    model = nn.Sequential(layer(shape, data, device))
    s = Session(model)
    edges = MaskPreview().cell_edges(shape)
    settings = SETTINGS[method]

    def step(amount: float) -> None:
        s.preview("0.weight", method, amount=amount, **settings)
        s.preview_cells("0.weight", method, row_edges=edges[0], col_edges=edges[1],
                        amount=amount, **settings)

    out = {"first_ms": timed(lambda: step(0.5))}
    times = [timed(lambda a=a: step(a)) for a in AMOUNTS]
    out |= {"median_ms": statistics.median(times), "p95_ms": p95(times)}
    budget = s._orders.budget
    s._orders.budget = 0  # the core's own selection, for comparison
    s._orders.clear()
    core = [timed(lambda a=a: s.preview("0.weight", method, amount=a, **settings))
            for a in AMOUNTS[::4]]
    s._orders.budget = budget
    out["core_median_ms"] = statistics.median(core)
    step(0.5)  # Apply follows the preview of the same settings, as in the explorer
    out["apply_ms"] = timed(lambda: s.apply("0.weight", method, amount=0.5, **settings))
    s.undo()
    return out


def bench_global(shape, data, device) -> dict[str, float]:
    model = nn.Sequential(*(layer(shape, data, device, seed=i) for i in range(3)))
    s = Session(model)
    targets = ["0.weight", "1.weight", "2.weight"]
    edges = MaskPreview().cell_edges(shape)

    def step(amount: float) -> None:
        s.preview_global(targets, amount=amount)
        s.preview_cells("0.weight", "global_unstructured", row_edges=edges[0],
                        col_edges=edges[1], targets=targets, pruning_method="l1_unstructured",
                        amount=amount)

    out = {"first_ms": timed(lambda: step(0.5))}
    times = [timed(lambda a=a: step(a)) for a in AMOUNTS]
    out |= {"median_ms": statistics.median(times), "p95_ms": p95(times)}
    out["apply_ms"] = timed(lambda: s.apply_global(targets, amount=0.5))
    return out


MEMORY = """
import json, sys, threading, time, torch
sys.path.insert(0, {here!r})
from bench_session import layer
from torch import nn
from prune_explorer.session import Session

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

model = nn.Sequential(*(layer({shape!r}, {data!r}, "cpu", seed=i) for i in range(3)))
s = Session(model)
base = rss()
peak = [base]
done = threading.Event()

def sample():  # resident memory every millisecond while the preview runs
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.001)

watcher = threading.Thread(target=sample)
watcher.start()
s.preview_global(["0.weight", "1.weight", "2.weight"], amount=0.5)
done.set()
watcher.join()
params = sum(p.numel() for p in model.parameters())
print(json.dumps({{"extra_B_per_param": (max(peak[0], rss()) - base) / params,
                   "retained_B_per_param": (rss() - base) / params}}))
"""


def global_memory(shape, data) -> dict[str, float]:
    here = str(__import__("pathlib").Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-c", MEMORY.format(here=here, shape=shape, data=data)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["4096x4096", "11008x4096"])
    parser.add_argument("--data", nargs="+", default=["normal", "default-init", "bf16"])
    parser.add_argument("--methods", nargs="+", default=list(SETTINGS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-global", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}")
    for text in args.shapes:
        shape = tuple(int(x) for x in text.split("x"))
        for data in args.data:
            for method in args.methods:
                r = bench_local(shape, data, method, args.device)
                print(f"{text:>10} {data:>12} {method:>20}: first {r['first_ms']:8.1f} ms | "
                      f"step median {r['median_ms']:7.1f} p95 {r['p95_ms']:7.1f} ms | "
                      f"core {r['core_median_ms']:7.1f} ms | apply {r['apply_ms']:7.1f} ms",
                      flush=True)
            if not args.no_global:
                g = bench_global(shape, data, args.device)
                line = (f"{text:>10} {data:>12} {'global x3':>20}: first {g['first_ms']:8.1f} ms | "
                        f"step median {g['median_ms']:7.1f} p95 {g['p95_ms']:7.1f} ms | "
                        f"apply {g['apply_ms']:7.1f} ms")
                if not args.no_memory and args.device == "cpu":
                    m = global_memory(shape, data)
                    line += (f" | peak +{m['extra_B_per_param']:.1f} B/param, retained "
                             f"{m['retained_B_per_param']:.1f} B/param")
                print(line, flush=True)


if __name__ == "__main__":
    main()
