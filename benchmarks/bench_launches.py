"""What a GPU would launch and wait for: ours against torch.nn.utils.prune, counted on any device.

On a GPU, a pruning call on a small or medium tensor is bound by launches, not by memory: each
aten op is (at least) one kernel launch of a few microseconds, and each read of a device value
(``.item()``, ``nonzero``, a host transfer) makes the host wait for every kernel queued before
it, so the Python of the next call cannot overlap the device's work. This script counts both,
for the cases of ``bench_prune.py --device cuda``, with a ``TorchDispatchMode``
(``tests/helpers/ops.py``): on a CPU the core's device path runs on CPU tensors
(``_select_device.forced()``), so the counts are the GPU's without a GPU; ``--device cuda`` counts
on the GPU itself.

Columns: kernel-launching aten ops (views left out), syncing aten ops, and our host reads (the
transfers our device path makes on purpose: ``_select_device.HOST_READS``; on CPU tensors a
``.cpu()``, ``.tolist()`` or ``.numpy()`` dispatches nothing, so reads made that way are not
seen here -- ours go through ``HOST_READS``) per case, ours and torch's, for one 4096x4096
weight, each of GPT-2-small's 50 weight matrices in turn, and all 50
at once (``global_unstructured``; ``Session.apply_global`` on a fresh session, whose history packs
the masks and notes how ties were split).

``--session`` adds a session's actions (previews, applies, undo, reset) on three linear layers
at two sizes, 5x apart, on the device path: an action whose launches or syncs differ between the
sizes (marked ``differs``) either works per piece or takes another route above a size threshold
(2**17 entries: cached orders; 2**20: the Global tab's window of keys; 2**23: the bracket).

``--host`` adds the host's own time per call on a tiny (16x16) weight, median of 21 rounds of
500 calls, ours and torch's taking turns (the garbage collector off while timed, as ``timeit``
does): where a GPU call is launch-bound, the host pays this on top of the launches. Timings
are this machine's; counts do not depend on it.

Usage::

    python benchmarks/bench_launches.py              # counts, GPT-2-small shapes (~1 min on a CPU)
    python benchmarks/bench_launches.py --host       # and the host time per tiny call
    python benchmarks/bench_launches.py --session    # session actions at two sizes
    python benchmarks/bench_launches.py --tiny       # toy shapes (a smoke test)
    python benchmarks/bench_launches.py --device cuda
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from bench_prune import (  # noqa: E402 -- the GPU benchmark's cases, one copy
    DEVICE_GLOBAL,
    DEVICE_METHODS,
    DEVICE_SHAPES,
    _device_call,
    _modules,
    make_weights,
)

from helpers.ops import OpCounter, kernels, syncs  # noqa: E402 -- the tests' counter
from prune_explorer.prune import _select_device  # noqa: E402

#: The shape sets counted (one 4096x4096 weight; GPT-2-small's 50 weight matrices).
SHAPES = ("4096x4096", "gpt2")


def count(impl: str, case: str, weights: list[torch.Tensor], device: torch.device,
          ) -> tuple[int, int, int]:
    """(kernel ops, syncing ops, our host reads) of one call of ``case`` on fresh modules,
    after one uncounted call on small tensors of the same dtype (what a process makes once,
    e.g. our all-ones base per dtype and device, is not a call's own)."""
    small = [torch.ones(4, 4, dtype=w.dtype) for w in weights[:2]]
    _call(impl, case, small, device)
    return _call(impl, case, weights, device)


def _call(impl: str, case: str, weights: list[torch.Tensor], device: torch.device,
          ) -> tuple[int, int, int]:
    mods = _modules([w.to(device) for w in weights])
    session = None
    if impl == "ours" and case == "Session.apply_global":
        from prune_explorer import Session
        with _select_device.forced(device.type == "cpu"):
            session = Session(torch.nn.ModuleList(mods))
    masks = [(m.weight.detach() > 0).to(m.weight.dtype) for m in mods] \
        if case == "custom_from_mask" else None
    call = _device_call(impl, case, DEVICE_METHODS.get(case, {}), mods, masks, session)
    torch.manual_seed(0)
    _select_device.HOST_READS.reset()
    with _select_device.forced(device.type == "cpu"), OpCounter() as counter:
        call()
    reads = _select_device.HOST_READS.count if impl == "ours" else 0
    return kernels(counter.ops), syncs(counter.ops), reads


def host_times(case: str, rounds: int = 21, calls: int = 500) -> tuple[float, float]:
    """(torch's, ours) host time in microseconds per call on a fresh 16x16 weight (CPU, the
    default path): each the median over ``rounds`` of the mean over ``calls`` calls. The two
    sides take turns round by round (who goes first alternates), so a change in the machine's
    speed during the run reaches both alike; as ``timeit`` does, the cyclic garbage collector
    is off while the calls are timed (collected before each round)."""
    kw = DEVICE_METHODS[case]
    per_call: dict[str, list[float]] = {"torch": [], "ours": []}
    for r in range(rounds):
        for impl in ("torch", "ours") if r % 2 == 0 else ("ours", "torch"):
            mods = _modules([torch.randn(16, 16) * 0.02 for _ in range(calls)])
            masks = [(m.weight.detach() > 0).float() for m in mods] \
                if case == "custom_from_mask" else None
            call = _device_call(impl, case, kw, mods, masks, None)
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                call()
                per_call[impl].append((time.perf_counter() - t0) / calls * 1e6)
            finally:
                gc.enable()
    return statistics.median(per_call["torch"]), statistics.median(per_call["ours"])


def _session_actions(session: object, targets: list[str]) -> list[tuple[str, Callable[[], object]]]:
    s: Any = session
    return [
        ("preview l1 (first)", lambda: s.preview(targets[0], "l1_unstructured", amount=0.3)),
        ("preview l1 (slider step)", lambda: s.preview(targets[0], "l1_unstructured",
                                                       amount=0.5)),
        ("apply l1", lambda: s.apply(targets[0], "l1_unstructured", amount=0.3)),
        ("apply random", lambda: s.apply(targets[1], "random_unstructured", amount=0.3,
                                         seed=1)),
        ("apply ln", lambda: s.apply(targets[2], "ln_structured", amount=0.3, n=2, dim=0)),
        ("preview_global (first)", lambda: s.preview_global(targets, amount=0.5)),
        ("preview_global (slider step)", lambda: s.preview_global(targets, amount=0.6)),
        ("apply_global (after its preview)", lambda: s.apply_global(targets, amount=0.6)),
        ("apply_global (no preview)", lambda: s.apply_global(targets, amount=0.3)),
        ("undo", lambda: s.undo()),
        ("reset", lambda: s.reset()),
    ]


def session_counts(scale: int, device: torch.device) -> list[tuple[str, int, int]]:
    """(action, kernels, syncs and host reads) of a scripted session on three linear layers of
    ``60 * scale`` x 300 entries each (N(0, 0.02)), on the device path."""
    from prune_explorer import Session

    g = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(60 * scale, 300),
                                torch.nn.Linear(300, 60 * scale),
                                torch.nn.Linear(60 * scale, 300))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    out = []
    with _select_device.forced(device.type == "cpu"):
        session = Session(model.to(device))
        for name, action in _session_actions(session, ["0.weight", "1.weight", "2.weight"]):
            _select_device.HOST_READS.reset()
            with OpCounter() as counter:
                action()
            out.append((name, kernels(counter.ops),
                        syncs(counter.ops) + _select_device.HOST_READS.count))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--tiny", action="store_true", help="toy shapes (a smoke test)")
    parser.add_argument("--host", action="store_true",
                        help="also the host time per call on a tiny weight")
    parser.add_argument("--session", action="store_true",
                        help="also a session's actions at two sizes")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, device {device}, {args.dtype}, weights N(0, 0.02); "
          "counted with a TorchDispatchMode" +
          (" on CPU tensors through the device path" if device.type == "cpu" else ""))
    print()
    print("| case | shapes | torch kernels / syncs | ours kernels / syncs / host reads | "
          "ours / torch kernels |")
    print("|---|---|---|---|---|")
    for shapes_name in SHAPES:
        shapes = DEVICE_SHAPES[shapes_name][1 if args.tiny else 0]
        weights = make_weights(shapes, "normal", args.dtype)
        label = "one 4096x4096" if shapes_name == "4096x4096" else "GPT-2-small, each of 50"
        if args.tiny:
            label += " (tiny)"
        cases = [*DEVICE_METHODS] + (list(DEVICE_GLOBAL) if shapes_name == "gpt2" else [])
        for case in cases:
            where = label if case not in DEVICE_GLOBAL else label.replace("each of", "all")
            theirs = count("torch", case, weights, device)
            ours = count("ours", case, weights, device)
            print(f"| `{case}` | {where} | {theirs[0]} / {theirs[1]} | "
                  f"{ours[0]} / {ours[1]} / {ours[2]} | {ours[0] / max(theirs[0], 1):.2f} |",
                  flush=True)
    if args.session:
        small, large = (2, 10) if args.tiny else (50, 250)
        print()
        print(f"Session actions on three linear layers of {60 * small}x300 and then "
              f"{60 * large}x300 entries each (kernels / syncs and host reads):")
        print()
        print("| action | smaller | 5x larger | |")
        print("|---|---|---|---|")
        for (name, k1, s1), (_, k2, s2) in zip(session_counts(small, device),
                                               session_counts(large, device), strict=True):
            grows = "differs" if (k1, s1) != (k2, s2) else "same"
            print(f"| {name} | {k1} / {s1} | {k2} / {s2} | {grows} |", flush=True)
    if args.host:
        print()
        print("Host time per call, 16x16 weight, CPU (median of 21 rounds of 500 calls, the"
              " two sides taking turns, garbage collector off while timed):")
        print()
        print("| method | torch us | ours us | ours / torch |")
        print("|---|---|---|---|")
        for case in DEVICE_METHODS:
            theirs_us, ours_us = host_times(case)
            print(f"| `{case}` | {theirs_us:.1f} | {ours_us:.1f} | {ours_us / theirs_us:.2f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
