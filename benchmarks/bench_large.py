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

``--device cuda`` runs the 7B case on one GPU (issue 21): 32 LLaMA-7B blocks (q, k, v, o
``4096x4096``, gate and up ``11008x4096``, down ``4096x11008``; 6.48B parameters, bfloat16, drawn
on the GPU), passed to ``prune.on_demand`` and opened in one ``Session``: open, the first and
later ``preview_global`` over every weight, ``apply_global``; memory is the GPU's
(``torch.cuda.max_memory_allocated`` over what was allocated before each call, per parameter).
torch's ``global_unstructured`` is then run on ``--torch-blocks`` (default 2) blocks on the GPU
and its peak per parameter scaled to the whole model: printed as an ESTIMATE, beside the card's
memory. No explorer on the GPU run. Needs about 40 GB; about a minute on an H100.

``--blocks N`` and ``--tiny`` (every size divided by 16) make smoke tests of either path:
``--device cpu --shapes 7b --blocks 1 --tiny`` runs the GPU script's code on a CPU.

Run: ``python benchmarks/bench_large.py [--blocks 16] [--torch-blocks 1] [--no-torch]
[--on-demand]`` or ``python benchmarks/bench_large.py --device cuda [--blocks 32]``
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

SHAPES = {"q": (2048, 2048), "k": (2048, 2048), "v": (2048, 2048), "o": (2048, 2048),
          "gate": (8192, 2048), "up": (8192, 2048), "down": (2048, 8192)}
#: LLaMA-7B's linear layers (one block; 202M parameters).
SHAPES_7B = {"q": (4096, 4096), "k": (4096, 4096), "v": (4096, 4096), "o": (4096, 4096),
             "gate": (11008, 4096), "up": (11008, 4096), "down": (4096, 11008)}
MODELS = {"1b": SHAPES, "7b": SHAPES_7B}
AMOUNTS = [0.3, 0.4, 0.5, 0.6, 0.7]


def build(blocks: int, dtype: torch.dtype = torch.bfloat16, shapes: str = "1b",
          device: str = "cpu", tiny: bool = False) -> nn.Module:
    """The stacked model, weights N(0, 0.02) (drawn in pieces: no float32 copy of the model)."""
    g = torch.Generator(device=device).manual_seed(0)
    model = nn.ModuleList()
    for _ in range(blocks):
        block = nn.Module()
        for name, (out, inp) in MODELS[shapes].items():
            if tiny:
                out, inp = out // 16, inp // 16
            lin = nn.Linear(inp, out, bias=False, device="meta")
            weight = torch.empty(out, inp, dtype=dtype, device=device)
            for rows in weight.split(512):
                rows.copy_(torch.randn(rows.shape, generator=g, device=device) * 0.02)
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


class GpuPeak:
    """Peak and retained GPU memory over a block (``torch.cuda.max_memory_allocated``)."""

    highest = 0  # the most ever allocated inside any block, in bytes

    def __enter__(self) -> GpuPeak:
        torch.cuda.synchronize()
        self.base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.start
        self.peak = torch.cuda.max_memory_allocated()
        self.after = torch.cuda.memory_allocated()
        GpuPeak.highest = max(GpuPeak.highest, self.peak)

    def per_param(self, params: int) -> tuple[float, float]:
        """(peak extra, retained extra) bytes per parameter."""
        return (self.peak - self.base) / params, (self.after - self.base) / params


def meter(device: str) -> type[GpuPeak] | type[Peak]:
    return GpuPeak if device == "cuda" else Peak


def torch_estimate_on(device: str, blocks: int, shapes: str, tiny: bool) -> dict:
    """torch's global_unstructured on a ``blocks``-block model in this process, on ``device``:
    time and peak extra bytes per parameter (GPU memory on CUDA, resident memory on CPU)."""
    import torch.nn.utils.prune as torch_prune

    model = build(blocks, shapes=shapes, device=device, tiny=tiny)
    pairs = [(m, "weight") for m in model.modules() if isinstance(m, nn.Linear)]
    params = sum(p.numel() for p in model.parameters())
    with meter(device)() as pruned:
        torch_prune.global_unstructured(pairs, torch_prune.L1Unstructured, amount=0.5)
    peak, _ = pruned.per_param(params)
    del model, pairs
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"params": params, "seconds": pruned.seconds, "B_per_param": peak}


def device_main(args: argparse.Namespace) -> int:
    """The 7B case in one Session with ``prune.on_demand``, on ``args.device`` (see above)."""
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print(f"bench_large: --device cuda needs a CUDA device; torch {torch.__version__} sees "
              "none", file=sys.stderr)
        return 2
    card = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    total = torch.cuda.get_device_properties(0).total_memory if device == "cuda" else 0
    unit = "GPU memory" if device == "cuda" else "resident memory"
    print(f"# bench_large --device {device}: {card}, torch {torch.__version__}; peak {unit} "
          "over what was allocated before each call, per parameter", flush=True)
    print(f"| bench_large --device {device}: {card}, torch {torch.__version__} | |")
    print("|---|---|", flush=True)  # rows as they are measured

    def report(what: str, value: str) -> None:
        print(f"| {what} | {value} |", flush=True)

    failed = False
    try:
        session_part(args, device, report)
    except Exception as exc:  # the torch estimate still runs
        failed = True
        report("ERROR", " ".join(f"{type(exc).__name__}: {exc}".split())[:300])
    gc.collect()  # the session and model may hold reference cycles
    if device == "cuda":
        torch.cuda.empty_cache()
        report("GPU memory allocated at most during the Session part",
               f"{GpuPeak.highest / 1e9:.1f} GB of the card's {total / 1e9:.1f} GB")
    if not args.no_torch:
        div = 16 if args.tiny else 1
        params = args.blocks * sum((o // div) * (i // div) for o, i in MODELS[args.shapes].values())
        t = torch_estimate_on(device, args.torch_blocks, args.shapes, args.tiny)
        need = t["B_per_param"] * params
        fits = "" if device != "cuda" else (
            f"; the card has {total / 1e9:.0f} GB: " + ("fits" if need < total else "DOES NOT FIT"))
        report(f"torch global_unstructured, measured on {args.torch_blocks} block(s) "
               f"({t['params'] / 1e6:.0f}M parameters)",
               f"{t['seconds']:.2f} s, peak +{t['B_per_param']:.1f} B/param")
        report(f"torch global_unstructured for all {params / 1e6:,.0f}M parameters (ESTIMATE, "
               "not run)",
               f"+{need / 1e9:.2f} GB{fits}")
    return 1 if failed else 0


def session_part(args: argparse.Namespace, device: str, report: Callable[[str, str], None]
                 ) -> None:
    """Open the on-demand model in a Session, preview and apply global pruning; report each."""
    from prune_explorer import Session, prune

    t0 = time.perf_counter()
    model = build(args.blocks, shapes=args.shapes, device=device, tiny=args.tiny)
    prune.on_demand(model)
    params = sum(p.numel() for p in model.parameters())
    targets = [f"{name}.weight" for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    shape_name = {"7b": "LLaMA-7B", "1b": "LLaMA-1B"}[args.shapes] + (" /16 (tiny)" * args.tiny)
    report("model", f"{args.blocks} blocks of {shape_name} linear layers, {len(targets)} weights, "
           f"{params / 1e6:,.1f}M parameters, bfloat16, prune.on_demand "
           f"({time.perf_counter() - t0:.1f} s to build)")
    Meter = meter(device)

    with Meter() as opened:
        s = Session(model)
    report("Session(model)", f"{opened.seconds:.2f} s")
    with Meter() as first:
        preview = s.preview_global(targets, amount=0.5)
        kept = sum(preview.kept(t) for t in targets)  # type: ignore[attr-defined]
    peak, retained = first.per_param(params)
    report("first preview_global (amount 0.5, every weight)",
           f"{first.seconds:.2f} s, peak +{peak:.2f} B/param, retained +{retained:.2f} B/param")
    moves = []
    for amount in AMOUNTS:
        with Meter() as move:
            preview = s.preview_global(targets, amount=amount)
            kept = sum(preview.kept(t) for t in targets)  # type: ignore[attr-defined]
        moves.append(move.seconds)
    report(f"later preview_global ({len(AMOUNTS)} amounts, cut + every target's kept count)",
           f"median {statistics.median(moves) * 1e3:.1f} ms, max {max(moves) * 1e3:.1f} ms "
           f"({kept:,} kept at {AMOUNTS[-1]})")
    del preview
    preview = s.preview_global(targets, amount=0.5)
    del preview
    with Meter() as applied:
        s.apply_global(targets, amount=0.5)
    peak, retained = applied.per_param(params)
    report("apply_global (amount 0.5, after its preview)",
           f"{applied.seconds:.2f} s, peak +{peak:.2f} B/param, retained +{retained:.2f} "
           f"B/param (on demand: the bfloat16 masks, 2 B/param), peak over what stays "
           f"+{peak - retained:.2f} B/param")
    pruned = sum(int((s.mask(t) == 0).sum()) for t in targets[:7])
    report("check", f"first block: {pruned:,} pruned of "
           f"{sum(s.mask(t).numel() for t in targets[:7]):,}")
    del s, model


def torch_estimate(blocks: int) -> dict:
    here = str(Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-c", TORCH_CHILD.format(here=here, blocks=blocks)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=None,
                        help="blocks of the model (default 16; --device: 32)")
    parser.add_argument("--torch-blocks", type=int, default=None,
                        help="blocks torch's estimate is measured on (default 1; --device: 2)")
    parser.add_argument("--device", default=None,
                        help="cuda: the 7B case on the GPU, in one process (cpu: its code on a "
                             "CPU, for a smoke test with --blocks 1 --tiny)")
    parser.add_argument("--shapes", choices=list(MODELS), default=None,
                        help="block shapes (default 1b; --device: 7b)")
    parser.add_argument("--tiny", action="store_true", help="every size divided by 16")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--no-explorer", action="store_true")
    parser.add_argument("--on-demand", action="store_true",
                        help="prune.on_demand(model) first: no orig * mask copies are kept")
    args = parser.parse_args()
    if args.device is not None:
        args.blocks = 32 if args.blocks is None else args.blocks
        args.torch_blocks = 2 if args.torch_blocks is None else args.torch_blocks
        args.shapes = args.shapes or "7b"
        return device_main(args)
    args.blocks = 16 if args.blocks is None else args.blocks
    args.torch_blocks = 1 if args.torch_blocks is None else args.torch_blocks
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
