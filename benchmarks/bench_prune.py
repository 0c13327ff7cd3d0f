"""Speed and peak memory of prune_explorer.prune against torch.nn.utils.prune, in the same run.

Each measurement runs in its own child process, so peak memory is not polluted by the other
implementation: the child builds the weights, resets the kernel's peak-RSS counter
(``/proc/self/clear_refs``), prunes, and reports the extra peak resident memory over the memory
held just before the call. Time is the median over ``--repeats`` calls on fresh copies (torch:
one call on the big cases unless ``--torch-repeats`` says otherwise).

Data (``--data``): ``tie-free`` (default) gives every |value| a distinct float32 bit pattern,
interleaved across tensors, random signs; ``normal`` draws N(0, 0.02); ``default-init`` draws what
``nn.Linear``/``nn.Conv2d`` initialise with (uniform in +-1/sqrt(fan_in)). ``--dtype`` casts the
weights (bfloat16/float16 hold only 65,536 values: ties at the cut are certain). Where the data
are tie-free float32/64 the masks must be *identical* (compared by a hash); otherwise ours must
prune the same count with the same cut value and be a valid choice (no kept |w| below a pruned
one) -- ours splits ties at the cut lowest flat index first, torch by its partial sort.

Usage::

    python benchmarks/bench_prune.py                  # every case
    python benchmarks/bench_prune.py --cases layerwise mid --repeats 21 --torch-repeats 21
    python benchmarks/bench_prune.py --cases l1 ln    # a subset
    python benchmarks/bench_prune.py --cases gpt2 --dtype bfloat16 --data normal
    python benchmarks/bench_prune.py --cases session-global --dtype bfloat16 --data normal

``session-global`` times ``Session.apply_global`` on a fresh ``Session`` (built before the clock
starts, no preview before: the session's own one-pass path) against torch's
``global_unstructured``; the peak memory is that of the call.

``--device cuda`` measures on the GPU instead, in this one process (see :func:`device_main`):
CUDA-synchronised wall time of each call, the median of ``--repeats`` after ``--warmup`` calls,
on fresh copies; torch and ours alternate on the same weights in the same run; masks compared bit
for bit; peak extra GPU memory (``torch.cuda.max_memory_allocated``) per parameter, and what the
call leaves (masks and pruned copies); every figure set against the physical floor (read the
weights once, write the mask and the pruned tensor, at the copy bandwidth measured first).
Cases: every torch method on one 4096x4096 and one 11008x4096 weight and on each of GPT-2-small's
50 tensors, ``global_unstructured`` and ``Session.apply_global`` over GPT-2-small, in
``--dtypes`` (default float32 and bfloat16). ``--device cpu --tiny`` runs the same code on CPU at
toy sizes (a smoke test of the script)::

    python benchmarks/bench_prune.py --device cuda                      # about a minute
    python benchmarks/bench_prune.py --device cuda --data normal --repeats 5

``--busy N`` starts N processes of its own that spin on a core each, beside both implementations
(killed when the script ends, whatever happens), and measures ``l1_unstructured`` on 4096x4096
and ``global_unstructured`` over ResNet-50 shapes (default data: N(0, 0.02)) quiet, then busy:
the slow-down of each, and whether issue 21's target is met (ours slows down at most 1.5x what
torch does and stays at least 10x faster than torch, busy). ``--rounds R`` alternates quiet and
busy R times and reports medians over the rounds::

    python benchmarks/bench_prune.py --busy 1
    python benchmarks/bench_prune.py --busy 1 --rounds 3 --cases l1

``--session`` times, interleaved in this one process over GPT-2-small shapes (N(0, 0.02) by
default), the core's ``global_unstructured``, ``Session.apply_global`` on a fresh session,
``preview_global`` then ``apply_global``, and the explorer's first Global move (the preview,
every target's kept count, the cells of the tensor shown: block 0's ``mlp.c_fc``), each on
fresh copies; the masks must be
the core's and each history entry's bits the installed mask. Issue 33's target: each at most
1.5x the core's call, quiet and with ``--busy N``::

    python benchmarks/bench_prune.py --session --busy 1 --dtype bfloat16

The children inherit the environment, so PyTorch's own allocator setting
``THP_MEM_ALLOC_ENABLE=1`` (Linux: allocations of 2 MiB and more faulted in as huge pages) applies
to both implementations alike; the header says which allocator ran. It matters where a call's
time is mostly first writes to fresh memory: ``l1`` writes two new 4096x4096 tensors (the mask
and ``orig * mask``), whose page faults take about half of our time with 4 KiB pages::

    THP_MEM_ALLOC_ENABLE=1 python benchmarks/bench_prune.py --cases l1 --data normal
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

CASES = {
    "resnet50": "global_unstructured L1 0.5 over ResNet-50 weight shapes",
    "gpt2": "global_unstructured L1 0.5 over GPT-2-small weight shapes",
    "session-global": "Session.apply_global L1 0.5 over GPT-2-small weight shapes "
                      "(torch: global_unstructured)",
    "l1": "l1_unstructured 0.5 on one 4096x4096 weight",
    "ln": "ln_structured n=2 dim=0 on one 4096x4096 weight",
    "layerwise": "l1_unstructured 0.5 on each ResNet-50 weight, one call per layer",
    "mid": "l1_unstructured 0.5 on 128x128, 64x576 and 256x512 weights, one call each",
}
#: Cases whose cut is per tensor: no one cut value over all of them to compare.
PER_TENSOR = ("ln", "layerwise", "mid")
#: Mid-size weights (16K to 128K entries): where a selection is one ``topk`` (or sort).
MID_SHAPES = [(128, 128), (64, 576), (256, 512)]


def resnet50_shapes() -> list[tuple[int, ...]]:
    shapes: list[tuple[int, ...]] = [(64, 3, 7, 7)]
    inplanes = 64
    for planes, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            shapes += [(planes, inplanes, 1, 1), (planes, planes, 3, 3),
                       (planes * 4, planes, 1, 1)]
            if b == 0:
                shapes.append((planes * 4, inplanes, 1, 1))
            inplanes = planes * 4
    shapes += [(1000, 2048), (1000,)]
    return shapes


def gpt2_shapes(d: int = 768, vocab: int = 50257, ctx: int = 1024) -> list[tuple[int, ...]]:
    shapes: list[tuple[int, ...]] = [(vocab, d), (ctx, d)]
    for _ in range(12):
        shapes += [(d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,), (d,),
                   (d, 4 * d), (4 * d,), (4 * d, d), (d,)]
    shapes += [(d,), (d,)]
    return shapes


def case_shapes(case: str) -> list[tuple[int, ...]]:
    if case in ("resnet50", "layerwise"):
        return resnet50_shapes()
    if case in ("gpt2", "session-global"):
        return gpt2_shapes()
    if case == "mid":
        return list(MID_SHAPES)
    return [(4096, 4096)]


DATA = {
    "tie-free": "tie-free (distinct |w|)",
    "normal": "N(0, 0.02)",
    "default-init": "default init, U(+-1/sqrt(fan_in))",
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def make_weights(shapes: list[tuple[int, ...]], data: str, dtype: str = "float32",
                 seed: int = 0) -> list[torch.Tensor]:
    """Weights of ``data`` kind (see the module docstring), cast to ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    out = []
    if data == "normal":
        out = [torch.randn(s, generator=g) * 0.02 for s in shapes]
    elif data == "default-init":
        for s in shapes:
            fan_in = int(torch.Size(s[1:]).numel()) if len(s) > 1 else s[0]
            bound = 1.0 / fan_in ** 0.5
            out.append(torch.empty(s).uniform_(-bound, bound, generator=g))
    else:
        count = len(shapes)
        base = 0x3A000000  # bit pattern of a small positive float; patterns above it increase
        for i, s in enumerate(shapes):
            n = int(torch.Size(s).numel())
            bits = base + i + count * torch.randperm(n, generator=g, dtype=torch.int64)
            w = bits.to(torch.int32).view(torch.float32)
            sign = torch.randint(0, 2, (n,), generator=g, dtype=torch.int8).to(torch.float32)
            out.append((w * (sign * 2 - 1)).view(s))
    return [w.to(DTYPES[dtype]) for w in out]


def _peak_rss_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _modules(weights: list[torch.Tensor]) -> list[torch.nn.Module]:
    mods = []
    for w in weights:
        m = torch.nn.Module()
        m.weight = torch.nn.Parameter(w.clone())
        mods.append(m)
    return mods


def _prepare(impl: str, case: str, mods: list[torch.nn.Module]) -> object:
    """What a call needs that is not timed: the Session of the session case (ours)."""
    if impl == "torch" or case != "session-global":
        return None
    from prune_explorer import Session
    return Session(torch.nn.ModuleList(mods))


def _run(impl: str, case: str, mods: list[torch.nn.Module], session: object = None) -> None:
    if impl == "torch":
        import torch.nn.utils.prune as prune
    else:
        from prune_explorer import prune  # type: ignore[no-redef]
    if session is not None:
        session.apply_global([f"{i}.weight" for i in range(len(mods))], amount=0.5)
    elif case in ("resnet50", "gpt2", "session-global"):
        prune.global_unstructured([(m, "weight") for m in mods], prune.L1Unstructured, amount=0.5)
    elif case == "l1":
        prune.l1_unstructured(mods[0], "weight", amount=0.5)
    elif case in ("layerwise", "mid"):
        for m in mods:
            prune.l1_unstructured(m, "weight", amount=0.5)
    else:
        prune.ln_structured(mods[0], "weight", amount=0.5, n=2, dim=0)


def child(impl: str, case: str, data: str, dtype: str, repeats: int) -> dict:
    torch.manual_seed(0)
    weights = make_weights(case_shapes(case), data, dtype)
    times = []
    peak = 0
    mods: list[torch.nn.Module] = []
    for r in range(repeats):
        mods = _modules(weights)
        session = _prepare(impl, case, mods)
        if r == 0:
            _peak_rss_reset()
            before = _rss_kib("VmRSS")
        t0 = time.perf_counter()
        _run(impl, case, mods, session)
        times.append(time.perf_counter() - t0)
        if r == 0:
            peak = _rss_kib("VmHWM") - before
    digest = hashlib.sha256()
    pruned = 0
    cut, floor = -math.inf, math.inf  # largest pruned |w|, smallest kept |w| (unstructured)
    for m in mods:
        mask = m.weight_mask.to(torch.uint8).contiguous()
        digest.update(mask.numpy().tobytes())
        pruned += int((mask == 0).sum())
        mags = m.weight_orig.detach().abs().float()
        if bool((mask == 0).any()):
            cut = max(cut, float(mags[mask == 0].max()))
        if bool((mask == 1).any()):
            floor = min(floor, float(mags[mask == 1].min()))
    return {"time": statistics.median(times), "times": times, "peak_mib": peak / 1024,
            "digest": digest.hexdigest(), "pruned": pruned, "cut": cut, "floor": floor,
            "numel": sum(w.numel() for w in weights)}


def measure(impl: str, case: str, data: str, dtype: str, repeats: int) -> dict:
    cmd = [sys.executable, __file__, "--child", impl, case, "--data", data, "--dtype", dtype,
           "--repeats", str(repeats)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------- --device
# Every figure of the device run is measured in this one process: torch and ours alternate on
# the same weights, so the GPU's clocks and the allocator's state are the same for both.

#: Shapes of the device run (the full size, and ``--tiny`` stand-ins to smoke-test on a CPU).
DEVICE_SHAPES = {
    "4096x4096": ([(4096, 4096)], [(256, 256)]),
    "11008x4096": ([(11008, 4096)], [(688, 256)]),
    # GPT-2-small's 50 weight matrices (124.4M parameters; biases and norms left out)
    "gpt2": ([s for s in gpt2_shapes() if len(s) == 2],
             [s for s in gpt2_shapes(d=64, vocab=1000, ctx=128) if len(s) == 2]),
}
#: torch's methods, each run on one tensor (or on each tensor of a shape set, in turn).
DEVICE_METHODS: dict[str, dict[str, object]] = {
    "l1_unstructured": {"amount": 0.5},
    "random_unstructured": {"amount": 0.5},
    "ln_structured": {"amount": 0.5, "n": 2, "dim": 0},
    "random_structured": {"amount": 0.5, "dim": 0},
    "custom_from_mask": {},
}
#: Cases over a whole shape set at once (torch: global_unstructured for both).
DEVICE_GLOBAL = ("global_unstructured", "Session.apply_global")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 30) -> float:
    """Bytes per second a device-to-device copy moves, counting what it reads and writes."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    times = []
    for _ in range(8):
        sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        sync(device)
        times.append(time.perf_counter() - t0)
    del src, dst
    return 2 * nbytes / statistics.median(times[2:])


class DeviceMemory:
    """Peak and retained extra memory of a call on a CUDA device (None elsewhere), in bytes."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device

    @contextlib.contextmanager
    def measure(self) -> Iterator[dict[str, int | None]]:
        out: dict[str, int | None] = {"peak": None, "left": None}
        if not self.cuda:
            yield out
            return
        sync(self.device)
        base = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        yield out
        sync(self.device)
        out["peak"] = torch.cuda.max_memory_allocated(self.device) - base
        out["left"] = torch.cuda.memory_allocated(self.device) - base


def _device_call(impl: str, case: str, kw: dict[str, object], mods: list[torch.nn.Module],
                 masks: list[torch.Tensor] | None, session: object) -> Callable[[], None]:
    """The call to time: ``case`` on every module of ``mods`` (or over all of them at once)."""
    if impl == "torch":
        import torch.nn.utils.prune as prune
    else:
        from prune_explorer import prune  # type: ignore[no-redef]
    if case == "Session.apply_global" and impl == "ours":
        names = [f"{i}.weight" for i in range(len(mods))]
        return lambda: session.apply_global(names, amount=0.5)  # type: ignore[attr-defined]
    if case in DEVICE_GLOBAL:  # torch's counterpart of Session.apply_global too
        pairs = [(m, "weight") for m in mods]
        return lambda: prune.global_unstructured(pairs, prune.L1Unstructured, amount=0.5)
    function = getattr(prune, case)
    if case == "custom_from_mask":
        assert masks is not None
        return lambda: [function(m, "weight", mask=k) for m, k in zip(mods, masks, strict=True)]
    return lambda: [function(m, "weight", **kw) for m in mods]


def device_measure(impl: str, case: str, weights: list[torch.Tensor], device: torch.device,
                   repeats: int, warmup: int, budget_s: float,
                   given: list[torch.Tensor] | None) -> dict[str, object]:
    """Median time (after ``warmup`` untimed calls), peak/retained extra bytes, the masks."""
    memory = DeviceMemory(device)
    kw = DEVICE_METHODS.get(case, {})
    times: list[float] = []
    peaks: list[int] = []
    lefts: list[int] = []
    mods: list[torch.nn.Module] = []
    started = time.perf_counter()
    for r in range(warmup + repeats):
        mods = _modules(weights)
        session = None
        if impl == "ours" and case == "Session.apply_global":
            from prune_explorer import Session
            session = Session(torch.nn.ModuleList(mods))
        call = _device_call(impl, case, kw, mods, given, session)
        torch.manual_seed(0)  # random methods: the same draws for both implementations
        with memory.measure() as used:
            sync(device)
            t0 = time.perf_counter()
            call()
            sync(device)
            seconds = time.perf_counter() - t0
        if r >= warmup:
            times.append(seconds)
            if used["peak"] is not None:
                peaks.append(used["peak"])
                lefts.append(used["left"] or 0)
        del session
        if r >= warmup and len(times) >= 3 and time.perf_counter() - started > budget_s:
            break  # a slow case: fewer repeats, said in the table
    return {"time": statistics.median(times), "repeats": len(times),
            "peak": max(peaks) if peaks else None, "left": max(lefts) if lefts else None,
            "masks": [m.weight_mask.detach() for m in mods],
            "origs": [m.weight_orig.detach() for m in mods]}


def compare_masks(theirs: dict[str, object], ours: dict[str, object], by_magnitude: bool,
                  whole: bool) -> str:
    """``identical`` (bit for bit); else, where the pruned counts agree, ``same count+cut`` (L1:
    the same largest pruned |w|, no kept |w| below it: ties at the cut split another way) or
    ``same count`` (other methods: ties among norms or draws); else ``DIFFER``."""
    a, b = theirs["masks"], ours["masks"]
    if all(torch.equal(x, y) for x, y in zip(a, b, strict=True)):  # type: ignore[call-overload]
        return "identical"
    pruned = [int((x == 0).sum()) for x in a]  # type: ignore[attr-defined]
    ours_pruned = [int((y == 0).sum()) for y in b]  # type: ignore[attr-defined]
    if (sum(pruned) != sum(ours_pruned)) if whole else (pruned != ours_pruned):
        return "DIFFER"
    if not by_magnitude:
        return "same count"
    def cut_and_floor(masks: list[torch.Tensor], origs: list[torch.Tensor]) -> tuple[float, float]:
        cut, floor = -math.inf, math.inf  # largest pruned |w|, smallest kept |w|
        for m, w in zip(masks, origs, strict=True):
            mags = w.abs().float()
            if bool((m == 0).any()):
                cut = max(cut, float(mags[m == 0].max()))
            if bool((m != 0).any()):
                floor = min(floor, float(mags[m != 0].min()))
        return cut, floor

    # one cut over every tensor (global), or one per tensor
    groups = [list(range(len(a)))] if whole else [[i] for i in range(len(a))]  # type: ignore
    same_cut = True
    for group in groups:
        origs = [ours["origs"][i] for i in group]  # type: ignore[index]
        theirs_cut, _ = cut_and_floor([a[i] for i in group], origs)  # type: ignore[index]
        ours_cut, ours_floor = cut_and_floor([b[i] for i in group], origs)  # type: ignore[index]
        same_cut = same_cut and theirs_cut == ours_cut and ours_cut <= ours_floor
    return "same count+cut" if same_cut else "DIFFER"


def _bpp(value: int | None, params: int) -> str:
    return "-" if value is None else f"{value / params:.1f}"


def device_main(args: argparse.Namespace) -> int:
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_prune: --device cuda needs a CUDA device; torch.cuda.is_available() is "
              f"False (torch {torch.__version__})", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    bandwidth = copy_bandwidth(device, (1 << 30) if not args.tiny else (1 << 24))
    print(f"# bench_prune --device {device.type}: {name}, torch {torch.__version__}, copy "
          f"bandwidth {bandwidth / 1e9:.0f} GB/s (read + write); median of up to "
          f"{args.repeats} after {args.warmup} warm-up, at most ~{args.budget_s:g} s a case; "
          f"{'TINY shapes (smoke test)' if args.tiny else 'full shapes'}", flush=True)
    header = ["case", "shape", "dtype", "data", "torch ms", "ours ms", "ours/torch speed",
              "floor ms", "torch/floor", "ours/floor", "torch peak B/param",
              "ours peak B/param", "torch peak over kept B/param", "ours peak over kept B/param",
              "repeats ours/torch", "masks"]
    print(f"{name}, torch {torch.__version__}; 'peak' = max_memory_allocated over what was "
          "allocated before the call; 'over kept' = peak minus what the call leaves (masks and "
          "pruned copies); floor = (read w + write mask + write pruned) / copy bandwidth")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header), flush=True)  # rows as they are measured
    ok = True
    plan = [(case, shape) for shape in args.shapes for case in args.methods
            if case in DEVICE_METHODS]
    plan += [(case, "gpt2") for case in args.methods if case in DEVICE_GLOBAL
             and "gpt2" in args.shapes]
    drawn: dict[tuple[str, str], list[torch.Tensor]] = {}  # float32, on the host: cast per dtype
    for data in args.data:
        for dtype in args.dtypes:
            cache: dict[str, list[torch.Tensor]] = {}
            for case, shape in plan:
                if shape not in cache:
                    if (data, shape) not in drawn:
                        shapes = DEVICE_SHAPES[shape][1 if args.tiny else 0]
                        drawn[data, shape] = make_weights(shapes, data, "float32")
                    cache = {shape: [w.to(device=device, dtype=DTYPES[dtype])
                                     for w in drawn[data, shape]]}
                weights = cache[shape]
                if case.endswith("_structured"):  # torch refuses 1-D tensors there
                    weights = [w for w in weights if w.dim() > 1]
                params = sum(w.numel() for w in weights)
                given = None
                if case == "custom_from_mask":
                    g = torch.Generator().manual_seed(1)
                    given = [(torch.rand(w.shape, generator=g) > 0.5).to(device)
                             for w in weights]
                result = {}
                try:
                    for impl in ("torch", "ours"):
                        result[impl] = device_measure(impl, case, weights, device, args.repeats,
                                                      args.warmup, args.budget_s, given)
                except Exception as exc:  # one broken case must not end the run
                    ok = False
                    message = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
                    print(f"| {case} | {shape} | {dtype} | {data} | ERROR in {impl}: {message} |",
                          flush=True)
                    del result
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                    continue
                l1 = case in ("l1_unstructured", *DEVICE_GLOBAL)
                verdict = compare_masks(result["torch"], result["ours"], by_magnitude=l1,
                                        whole=case in DEVICE_GLOBAL)
                # tie-free float32: L1 and custom masks must be identical (no tie at any cut)
                exact = data == "tie-free" and dtype == "float32" and (
                    l1 or case == "custom_from_mask")
                if verdict == "DIFFER" or (exact and verdict != "identical"):
                    ok = False
                # floor: read every weight once, write the mask and the pruned tensor
                nbytes = 3 * sum(w.numel() * w.element_size() for w in weights)
                floor = nbytes / bandwidth
                t, o = result["torch"], result["ours"]
                shown = f"GPT-2-small (each of {len(weights)})" if shape == "gpt2" else shape
                shown = shown if case not in DEVICE_GLOBAL else "GPT-2-small (50 weights)"
                if args.tiny:
                    shown += " (tiny)"
                row = [
                    case, shown, dtype, data, f"{t['time'] * 1e3:.3f}", f"{o['time'] * 1e3:.3f}",
                    f"{t['time'] / o['time']:.2f}x", f"{floor * 1e3:.3f}",
                    f"{t['time'] / floor:.1f}x", f"{o['time'] / floor:.1f}x",
                    _bpp(t["peak"], params), _bpp(o["peak"], params),
                    _bpp(None if t["peak"] is None else t["peak"] - t["left"], params),
                    _bpp(None if o["peak"] is None else o["peak"] - o["left"], params),
                    f"{o['repeats']}/{t['repeats']}", verdict,
                ]
                print("| " + " | ".join(row) + " |", flush=True)
                del result, t, o
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    if not ok:
        print("\nFAILED: masks differ where they must be identical, or a case raised")
        return 1
    return 0


# ---------------------------------------------------------------------------------- --busy
@contextlib.contextmanager
def spinners(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes of our own spinning on a core each; killed on the way out."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(count)]
    try:
        time.sleep(0.5)  # let them get scheduled
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


#: Issue 21's busy-CPU target: ours slows down by at most this times torch's slow-down ...
BUSY_SLOWDOWN_RATIO = 1.5
#: ... and stays at least this many times faster than torch, busy.
BUSY_SPEEDUP = 10.0


def busy_main(args: argparse.Namespace) -> int:
    # a SIGTERM (timeout, CI) still ends the spinners: it unwinds through spinners()' finally
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cases = [c for c in args.cases if c in ("l1", "resnet50")] or ["l1", "resnet50"]
    data = args.data[0]
    print(f"# bench_prune --busy {args.busy}: torch {torch.__version__}, {os.cpu_count()} cpus, "
          f"{torch.get_num_threads()} threads, data {DATA[data]}, {args.dtype}, "
          f"{args.rounds} round(s) of quiet then busy; load average "
          f"{os.getloadavg()[0]:.2f} at start", flush=True)
    runs: dict[tuple[str, str, str], list[dict]] = {}

    def run_all(state: str) -> None:
        for c in cases:
            for impl in ("torch", "ours"):
                runs.setdefault((state, impl, c), []).append(measure(
                    impl, c, data, args.dtype,
                    args.repeats if impl == "ours" else args.torch_repeats))

    for _ in range(args.rounds):  # quiet and busy alternate: drifts in the load hit both
        run_all("quiet")
        with spinners(args.busy):
            run_all("busy")

    def ms(state: str, impl: str, c: str) -> float:  # median over the rounds
        return statistics.median(r["time"] for r in runs[state, impl, c])

    header = ["case", "torch quiet ms", f"torch busy({args.busy}) ms", "torch slow-down",
              "ours quiet ms", f"ours busy({args.busy}) ms", "ours slow-down",
              "ours slow-down / torch's", "ours vs torch quiet", "ours vs torch busy",
              "masks", "target met?"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    met_all = True
    for c in cases:
        tq, tb = ms("quiet", "torch", c), ms("busy", "torch", c)
        oq, ob = ms("quiet", "ours", c), ms("busy", "ours", c)
        ratio = (ob / oq) / (tb / tq)
        met = ratio <= BUSY_SLOWDOWN_RATIO and tb / ob >= BUSY_SPEEDUP
        met_all = met_all and met
        digests = {r["digest"] for impl in ("torch", "ours") for state in ("quiet", "busy")
                   for r in runs[state, impl, c]}
        masks = "identical" if len(digests) == 1 else "differ (ties at the cut?)"
        print(f"| {CASES[c]} | {tq * 1e3:.1f} | {tb * 1e3:.1f} | {tb / tq:.2f}x | "
              f"{oq * 1e3:.1f} | {ob * 1e3:.1f} | {ob / oq:.2f}x | {ratio:.2f} | "
              f"{tq / oq:.1f}x | {tb / ob:.1f}x | {masks} | {'yes' if met else 'NO'} |")
    print(f"target (issue 21, {args.busy} busy): ours slows down at most "
          f"{BUSY_SLOWDOWN_RATIO}x what torch does and stays at least {BUSY_SPEEDUP:.0f}x "
          f"faster than torch busy: {'met' if met_all else 'NOT met'}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end (timings on a shared machine are "
          "noisy)")
    return 0


# ------------------------------------------------------------------------------- --session
#: Issue 33's target: each session path takes at most this times the core's call, same process.
SESSION_RATIO = 1.5


def session_calls(weights: list[torch.Tensor]) -> dict[str, Callable[[], tuple[float, list]]]:
    """The calls ``--session`` times, each on fresh copies of ``weights`` (the Session, where
    there is one, built before the clock starts): (seconds, the masks it leaves)."""
    from prune_explorer import Session, prune
    names = [f"{i}.weight" for i in range(len(weights))]
    # the tensor the Global tab shows: block 0's mlp.c_fc (as bench_global_first_move.py)
    shown = names[next(i for i, w in enumerate(weights) if w.dim() == 2 and w.shape[0] * 4
                       == w.shape[1])]

    def core() -> tuple[float, list]:
        mods = _modules(weights)
        t0 = time.perf_counter()
        prune.global_unstructured([(m, "weight") for m in mods], prune.L1Unstructured,
                                  amount=0.5)
        return time.perf_counter() - t0, [m.weight_mask for m in mods]

    def session(preview: bool, explorer: bool = False) -> tuple[float, list]:
        mods = _modules(weights)
        s = Session(torch.nn.ModuleList(mods))
        t0 = time.perf_counter()
        if explorer:  # the Global tab's first move: preview, kept counts, the shown cells
            masks = s.preview_global(names, "l1_unstructured", amount=0.5)
            for name in names:
                masks.kept(name)
            shape = s.info(shown).shape
            rows = torch.linspace(0, shape[0], 129).long().numpy()
            cols = torch.linspace(0, math.prod(shape[1:]), 129).long().numpy()
            s.preview_cells(shown, "global_unstructured", row_edges=rows, col_edges=cols,
                            targets=names, pruning_method="l1_unstructured", amount=0.5)
            return time.perf_counter() - t0, []
        if preview:
            s.preview_global(names, "l1_unstructured", amount=0.5)
        s.apply_global(names, amount=0.5)
        took = time.perf_counter() - t0
        for name, m in zip(names, mods, strict=True):  # the history: exact, bit-packed
            entry = s._histories[name][-1].mask
            if entry != type(entry).from_tensor(m.weight_mask):
                raise AssertionError(f"{name}: the history's bits are not the installed mask")
        return took, [m.weight_mask for m in mods]

    return {
        "core global_unstructured": core,
        "Session.apply_global (fresh)": lambda: session(False),
        "preview_global then apply_global": lambda: session(True),
        "explorer's first Global move": lambda: session(False, explorer=True),
    }


def session_main(args: argparse.Namespace) -> int:
    """``--session``: the session's global paths against the core's ``global_unstructured``,
    interleaved in this one process, over GPT-2-small shapes; quiet, and with ``--busy N``
    beside N spinning processes too."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    weights = make_weights(gpt2_shapes(), args.data[0], args.dtype)
    calls = session_calls(weights)
    print(f"# bench_prune --session: torch {torch.__version__}, {os.cpu_count()} cpus, "
          f"{torch.get_num_threads()} threads, GPT-2-small shapes ({len(weights)} tensors, "
          f"{sum(w.numel() for w in weights) / 1e6:.1f}M), {DATA[args.data[0]]}, {args.dtype}, "
          f"{args.rounds} round(s); load average {os.getloadavg()[0]:.2f} at start", flush=True)
    states = ["quiet"] + ([f"busy({args.busy})"] if args.busy else [])
    times: dict[tuple[str, str], list[float]] = {}
    ok = True
    for _ in range(args.rounds):
        for state in states:
            with spinners(args.busy if state != "quiet" else 0):
                reference: list = []
                for name, call in calls.items():
                    # the garbage of the path before (a Session lives in reference cycles:
                    # its model goes when the collector runs) is freed before the clock
                    # starts, not inside whichever call the collector happens to interrupt
                    gc.collect()
                    took, masks = call()
                    times.setdefault((state, name), []).append(took)
                    if not reference:
                        reference = masks
                    elif masks and not all(torch.equal(a, b)
                                           for a, b in zip(reference, masks, strict=True)):
                        ok = False
                        print(f"MASKS DIFFER: {name} ({state})")
                    del masks
    print("| path | " + " | ".join(f"{st} ms | / core" for st in states) + " |")
    print("|---|" + "---|---|" * len(states))
    met = True
    for name in calls:
        cells = []
        for st in states:
            ms = statistics.median(times[st, name]) * 1e3
            core = statistics.median(times[st, "core global_unstructured"]) * 1e3
            met = met and ms <= SESSION_RATIO * core
            cells.append(f"{ms:.0f} | {ms / core:.2f}x")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print(f"target (issue 33): every path at most {SESSION_RATIO}x the core's call: "
          f"{'met' if met else 'NOT met'}; masks {'identical' if ok else 'DIFFER'}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end (timings on a shared machine are "
          "noisy)")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--data", nargs="+", choices=list(DATA), default=None,
                        help="weights (several allowed): default tie-free; --busy: normal")
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32")
    parser.add_argument("--repeats", type=int, default=None,
                        help="calls timed for ours (default 5; --device: 20, for both)")
    parser.add_argument("--torch-repeats", type=int, default=1, help="calls timed for torch")
    parser.add_argument("--device", default=None,
                        help="cuda (or cpu with --tiny): measure in one process on the device")
    parser.add_argument("--dtypes", nargs="+", choices=list(DTYPES),
                        default=["float32", "bfloat16"], help="--device: dtypes to run")
    parser.add_argument("--shapes", nargs="+", choices=list(DEVICE_SHAPES),
                        default=list(DEVICE_SHAPES), help="--device: shape sets to run")
    parser.add_argument("--methods", nargs="+", choices=[*DEVICE_METHODS, *DEVICE_GLOBAL],
                        default=[*DEVICE_METHODS, *DEVICE_GLOBAL], help="--device: cases to run")
    parser.add_argument("--warmup", type=int, default=2, help="--device: untimed calls first")
    parser.add_argument("--budget-s", type=float, default=5.0,
                        help="--device: stop repeating a case after this long (3 calls at least)")
    parser.add_argument("--tiny", action="store_true", help="--device: toy shapes (smoke test)")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="quiet, then beside N spinning processes: l1 and resnet50")
    parser.add_argument("--rounds", type=int, default=1,
                        help="--busy: quiet/busy rounds, alternating (medians over them)")
    parser.add_argument("--session", action="store_true",
                        help="the session's global paths against the core's call, in one "
                        "process, GPT-2-small shapes (with --busy N: quiet, then busy)")
    parser.add_argument("--child", nargs=2, metavar=("IMPL", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.data = args.data or (["normal"] if args.busy or args.session else ["tie-free"])
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.data[0], args.dtype,
                               args.repeats)))
        return 0
    if args.device is not None and args.busy:
        parser.error("--busy measures on the CPU; leave out --device")
    if args.device is not None:
        args.repeats = 20 if args.repeats is None else args.repeats
        return device_main(args)
    args.repeats = 5 if args.repeats is None else args.repeats
    if args.session:
        return session_main(args)
    if args.busy:
        return busy_main(args)

    thp = os.environ.get("THP_MEM_ALLOC_ENABLE", "0") == "1"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, allocator: "
          + ("THP_MEM_ALLOC_ENABLE=1 (huge pages for allocations of 2 MiB and more)" if thp
             else "default"))
    ok = True
    for data, case in [(d, c) for d in args.data for c in args.cases]:
        exact = data == "tie-free" and args.dtype == "float32"
        theirs = measure("torch", case, data, args.dtype, args.torch_repeats)
        ours = measure("ours", case, data, args.dtype, args.repeats)
        same = theirs["digest"] == ours["digest"]
        alike = (theirs["pruned"] == ours["pruned"]
                 and (case in PER_TENSOR or (theirs["cut"] == ours["cut"]
                                       and ours["cut"] <= ours["floor"])))
        verdict = "identical masks" if same else (
            "same count and cut, ties split lowest index first" if alike else "MASKS DIFFER")
        if (exact and not same) or not alike:
            ok = False
        print(f"\n{CASES[case]}  ({ours['numel'] / 1e6:.1f}M parameters, {args.dtype}, "
              f"data: {DATA[data]})")
        print(f"  torch : {theirs['time'] * 1e3:9.1f} ms   peak +{theirs['peak_mib']:8.1f} MiB")
        print(f"  ours  : {ours['time'] * 1e3:9.1f} ms   peak +{ours['peak_mib']:8.1f} MiB"
              f"   (median of {len(ours['times'])})")
        print(f"  speed-up {theirs['time'] / ours['time']:6.1f}x   "
              f"memory ratio ours/torch {ours['peak_mib'] / max(theirs['peak_mib'], 1e-9):.2f}"
              f"   {verdict}")
    if not ok:
        print("\nFAILED: the masks do not agree")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
