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

    python benchmarks/bench_prune.py                  # all four cases
    python benchmarks/bench_prune.py --cases l1 ln    # a subset
    python benchmarks/bench_prune.py --cases gpt2 --dtype bfloat16 --data normal
    python benchmarks/bench_prune.py --cases session-global --dtype bfloat16 --data normal

``session-global`` times ``Session.apply_global`` on a fresh ``Session`` (built before the clock
starts, no preview before: the session's own one-pass path) against torch's
``global_unstructured``; the peak memory is that of the call.

The children inherit the environment, so PyTorch's own allocator setting
``THP_MEM_ALLOC_ENABLE=1`` (Linux: allocations of 2 MiB and more faulted in as huge pages) applies
to both implementations alike; the header says which allocator ran. It matters where a call's
time is mostly first writes to fresh memory: ``l1`` writes two new 4096x4096 tensors (the mask
and ``orig * mask``), whose page faults take about half of our time with 4 KiB pages::

    THP_MEM_ALLOC_ENABLE=1 python benchmarks/bench_prune.py --cases l1 --data normal
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

CASES = {
    "resnet50": "global_unstructured L1 0.5 over ResNet-50 weight shapes",
    "gpt2": "global_unstructured L1 0.5 over GPT-2-small weight shapes",
    "session-global": "Session.apply_global L1 0.5 over GPT-2-small weight shapes "
                      "(torch: global_unstructured)",
    "l1": "l1_unstructured 0.5 on one 4096x4096 weight",
    "ln": "ln_structured n=2 dim=0 on one 4096x4096 weight",
}


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


def gpt2_shapes() -> list[tuple[int, ...]]:
    d, vocab, ctx = 768, 50257, 1024
    shapes: list[tuple[int, ...]] = [(vocab, d), (ctx, d)]
    for _ in range(12):
        shapes += [(d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,), (d,),
                   (d, 4 * d), (4 * d,), (4 * d, d), (d,)]
    shapes += [(d,), (d,)]
    return shapes


def case_shapes(case: str) -> list[tuple[int, ...]]:
    if case == "resnet50":
        return resnet50_shapes()
    if case in ("gpt2", "session-global"):
        return gpt2_shapes()
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--data", choices=list(DATA), default="tie-free")
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32")
    parser.add_argument("--repeats", type=int, default=5, help="calls timed for ours")
    parser.add_argument("--torch-repeats", type=int, default=1, help="calls timed for torch")
    parser.add_argument("--child", nargs=2, metavar=("IMPL", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.data, args.dtype,
                               args.repeats)))
        return 0

    thp = os.environ.get("THP_MEM_ALLOC_ENABLE", "0") == "1"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, allocator: "
          + ("THP_MEM_ALLOC_ENABLE=1 (huge pages for allocations of 2 MiB and more)" if thp
             else "default"))
    exact = args.data == "tie-free" and args.dtype == "float32"
    ok = True
    for case in args.cases:
        theirs = measure("torch", case, args.data, args.dtype, args.torch_repeats)
        ours = measure("ours", case, args.data, args.dtype, args.repeats)
        same = theirs["digest"] == ours["digest"]
        alike = (theirs["pruned"] == ours["pruned"]
                 and (case == "ln" or (theirs["cut"] == ours["cut"]
                                       and ours["cut"] <= ours["floor"])))
        verdict = "identical masks" if same else (
            "same count and cut, ties split lowest index first" if alike else "MASKS DIFFER")
        if (exact and not same) or not alike:
            ok = False
        print(f"\n{CASES[case]}  ({ours['numel'] / 1e6:.1f}M parameters, {args.dtype}, "
              f"data: {DATA[args.data]})")
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
