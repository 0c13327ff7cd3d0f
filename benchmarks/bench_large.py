"""A 1B-parameter bfloat16 model in the session and the explorer.

The model: ``--blocks`` (default 16) LLaMA-1B-like blocks of bias-free linear layers, no
embeddings: q, k, v, o ``2048x2048``, gate and up ``8192x2048``, down ``2048x8192`` (67.1M
parameters a block; 1.07B for 16), weights N(0, 0.02) in bfloat16 (every cut is a tie).

Measured, in this order, in one process (peak resident memory sampled every millisecond from
``/proc/self/statm`` by a thread, as ``bench_session.py`` does; "extra" is over the resident
memory just before the call, per parameter of the model):

* open: ``Session(model)``, then ``explore(model)`` headless (its first picture included);
* global preview over every linear weight: the first ``preview_global`` (builds each target's
  key histogram), then slider moves at other amounts; and one target's mask;
* apply: ``apply_global`` right after the preview of the same amount (time, peak extra, and
  what stays: the masks and the ``orig * mask`` weights torch's layout keeps). With
  ``--on-demand`` the model is first passed to ``prune.on_demand``: no ``orig * mask`` copy is
  kept, pruning adds the bfloat16 masks (2 B/param) and the session's bit-packed history.

torch's ``global_unstructured`` concatenates the model and sorts it: it cannot run at this size
on a 24 GiB machine. ``--torch-blocks N`` (default 1) measures its peak extra memory per parameter
on an N-block model in a child process (the same ``VmHWM`` method as ``bench_prune.py``) and
scales it to the full model; the estimate is printed as such.

Run: ``python benchmarks/bench_large.py [--blocks 16] [--torch-blocks 1] [--no-torch]
[--on-demand]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
from torch import nn

SHAPES = {"q": (2048, 2048), "k": (2048, 2048), "v": (2048, 2048), "o": (2048, 2048),
          "gate": (8192, 2048), "up": (8192, 2048), "down": (2048, 8192)}
AMOUNTS = [0.3, 0.4, 0.5, 0.6, 0.7]


def build(blocks: int, dtype: torch.dtype = torch.bfloat16) -> nn.Module:
    """The stacked model, weights N(0, 0.02) (drawn in pieces: no float32 copy of the model)."""
    g = torch.Generator().manual_seed(0)
    model = nn.ModuleList()
    for _ in range(blocks):
        block = nn.Module()
        for name, (out, inp) in SHAPES.items():
            lin = nn.Linear(inp, out, bias=False, device="meta")
            weight = torch.empty(out, inp, dtype=dtype)
            for rows in weight.split(512):
                rows.copy_(torch.randn(rows.shape, generator=g) * 0.02)
            lin.weight = nn.Parameter(weight)
            setattr(block, name, lin)
        model.append(block)
    return model


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


class Peak:
    """Peak resident memory over a block, sampled every millisecond by a thread."""

    def __enter__(self) -> Peak:
        self.base = rss()
        self.peak = self.base
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        self.start = time.perf_counter()
        return self

    def _watch(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, rss())
            time.sleep(0.001)

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
        self._done.set()
        self._thread.join()
        self.after = rss()
        self.peak = max(self.peak, self.after)

    def per_param(self, params: int) -> tuple[float, float]:
        """(peak extra, retained extra) bytes per parameter."""
        return (self.peak - self.base) / params, (self.after - self.base) / params


TORCH_CHILD = """
import json, sys, torch
sys.path.insert(0, {here!r})
from pathlib import Path
from bench_large import build
import torch.nn.utils.prune as prune
model = build({blocks})
pairs = [(m, "weight") for m in model.modules() if isinstance(m, torch.nn.Linear)]
params = sum(p.numel() for p in model.parameters())
def kib(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
Path("/proc/self/clear_refs").write_text("5")
before = kib("VmRSS")
import time
t0 = time.perf_counter()
prune.global_unstructured(pairs, prune.L1Unstructured, amount=0.5)
seconds = time.perf_counter() - t0
print(json.dumps({{"params": params, "seconds": seconds,
                   "B_per_param": (kib("VmHWM") - before) * 1024 / params}}))
"""


def torch_estimate(blocks: int) -> dict:
    here = str(Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-c", TORCH_CHILD.format(here=here, blocks=blocks)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--torch-blocks", type=int, default=1)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--no-explorer", action="store_true")
    parser.add_argument("--on-demand", action="store_true",
                        help="prune.on_demand(model) first: no orig * mask copies are kept")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)

    from prune_explorer import Session, prune
    from prune_explorer.widgets import explore

    t0 = time.perf_counter()
    model = build(args.blocks)
    if args.on_demand:
        prune.on_demand(model)
    params = sum(p.numel() for p in model.parameters())
    targets = [f"{name}.weight" for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    print(f"model: {args.blocks} blocks, {len(targets)} linear weights, {params / 1e9:.3f}B "
          f"parameters, bfloat16 ({time.perf_counter() - t0:.1f} s to build)", flush=True)

    with Peak() as opened:
        s = Session(model)
    print(f"open Session: {opened.seconds:.2f} s", flush=True)
    if not args.no_explorer:
        with Peak() as shown:
            ex = explore(model, debounce=None)
        print(f"open explorer (headless, first picture of {ex.tensor}): {shown.seconds:.2f} s",
              flush=True)
        ex.close()
        del ex

    with Peak() as first:
        preview = s.preview_global(targets, amount=0.5)
    peak, kept = first.per_param(params)
    print(f"first global preview over {len(targets)} weights: {first.seconds:.2f} s, peak "
          f"+{peak:.3f} B/param, retained +{kept:.3f} B/param", flush=True)
    moves = []
    for amount in AMOUNTS:
        with Peak() as move:
            preview = s.preview_global(targets, amount=amount)
            counts = [preview.kept(t) for t in targets]  # type: ignore[attr-defined]
        moves.append(move.seconds)
    print(f"global slider move (cut + every target's kept count): median "
          f"{statistics.median(moves) * 1e3:.0f} ms, max {max(moves) * 1e3:.0f} ms over "
          f"{len(AMOUNTS)} amounts ({sum(counts):,} kept at the last)", flush=True)
    with Peak() as mask:
        preview[targets[-1]]
    print(f"one target's mask ({targets[-1]}): {mask.seconds * 1e3:.0f} ms", flush=True)
    del preview

    preview = s.preview_global(targets, amount=0.5)
    del preview
    with Peak() as applied:
        s.apply_global(targets, amount=0.5)
    peak, kept = applied.per_param(params)
    layout = ("on demand: the bfloat16 mask, 2 B/param" if args.on_demand else
              "torch's layout: a bfloat16 mask and the orig * mask weight, 4 B/param")
    print(f"apply_global after the preview: {applied.seconds:.2f} s, peak +{peak:.2f} B/param, "
          f"retained +{kept:.2f} B/param ({layout}), peak over what stays "
          f"+{peak - kept:.2f} B/param", flush=True)
    del s, model

    if not args.no_torch:
        t = torch_estimate(args.torch_blocks)
        print(f"torch global_unstructured on {args.torch_blocks} block(s) "
              f"({t['params'] / 1e6:.0f}M parameters): {t['seconds']:.1f} s, peak "
              f"+{t['B_per_param']:.1f} B/param -> ESTIMATED for {params / 1e9:.2f}B: "
              f"+{t['B_per_param'] * params / 2**30:.0f} GiB (not run)", flush=True)


if __name__ == "__main__":
    main()
