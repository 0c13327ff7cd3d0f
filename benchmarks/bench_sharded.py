"""Sharded global pruning (DTensor, gloo on the CPU) on 1, 2 and 4 processes, against torch.

Global L1 pruning (``amount=0.5``) of the linear weights of GPT-2 small (12 blocks of 768x2304,
768x768, 768x3072 and 3072x768: 85M parameters; ``--layers`` takes fewer blocks), sharded on dim
0 across ``world`` processes with ``prune_explorer.prune.global_unstructured``. For each world
size the script prints the time of the call, the bytes the call sent through collectives (per
rank) and, per rank, the memory of the call in bytes per parameter of the rank's shard:

* ``mask``: the bytes of the masks the call installs (the layout needs them: the weight's dtype,
  4 B/param for float32, as torch);
* ``extra``: the peak, during the call, of the tensor memory allocated and not yet freed, minus
  ``mask`` -- the transient the call needs beyond its result. Target: at most 2 B/param.

Both are measured with ``torch.profiler`` (``profile_memory=True``): the CPU allocator reports
every tensor allocation and free with its size, and the live bytes are summed in time order
(:func:`allocated_peak`). That counts tensor storages exactly -- no allocator slack, no
resident-memory noise -- and nothing else (gloo's own buffers and Python objects are outside it,
a few KiB here). The call is measured twice: on fresh weights, and again on the pruned weights
(``extra`` then includes the 1-byte "still alive" flag per entry). Times come from a separate,
unprofiled call. The whole process's peak resident memory (``VmHWM``) over the call is printed
too, for comparison only: it counts allocator slack and is noisy on a loaded machine.

In the same run one process prunes the same full weights with
``torch.nn.utils.prune.global_unstructured`` (measured the same way): the gathered masks of every
world size must be identical to torch's (the weights have pairwise distinct magnitudes).

With ``--session`` each rank then measures a ``Session`` on the same sharded weights, the same
way (:func:`session_case`): ``apply_global`` (L1, 0.5) on fresh weights, again on the pruned
ones, and ``undo`` of that second step. Per call it prints, in B/param of the shard: ``mask``
(the masks installed, or put back by ``undo``), ``history`` (the bits added to the session's
history: 1/8 per entry of each tensor pruned), ``kept bits`` (everything the call keeps beyond
the masks: the history bits, plus, on pruned weights, the undo snapshot's bits of the masks
replaced -- 1/8 more) and ``extra`` (the peak beyond what the call keeps; target <= 2). Mask
bits are packed with numpy a chunk at a time, outside the profiler's view: chunk-sized.

Processes share the machine's cores: with 4 processes on a 2-core machine the times include
contention. Usage::

    python benchmarks/bench_sharded.py                 # 12 blocks, worlds 1 2 4
    python benchmarks/bench_sharded.py --layers 4 --worlds 1 2
    python benchmarks/bench_sharded.py --session       # and a Session's apply_global / undo
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_prune import _peak_rss_reset, _rss_kib, make_weights


def gpt2_linear_shapes(layers: int) -> list[tuple[int, ...]]:
    d = 768
    return [s for _ in range(layers) for s in ((d, 3 * d), (d, d), (d, 4 * d), (4 * d, d))]


def _release_freed_memory() -> None:
    """Return freed heap memory to the OS, so that the peak-RSS counter sees new allocations."""
    import ctypes

    with contextlib.suppress(OSError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def allocated_peak(call: Callable[[], object]) -> tuple[int, int]:
    """(peak, net) bytes of CPU tensor memory allocated by ``call()`` and not yet freed.

    ``torch.profiler`` with ``profile_memory=True`` records every allocation and free of the CPU
    allocator with its size; summed in time order they give the live bytes at each moment (an
    allocation and a free at the same nanosecond count the allocation first: an upper bound).
    ``net``: what is still allocated at the end (what the call kept).
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    events = sorted((e.start_ns(), -e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == DeviceType.CPU)
    live = peak = 0
    for _, minus in events:
        live -= minus
        peak = max(peak, live)
    return peak, live


def _digest(masks: list[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for m in masks:
        h.update(m.to(torch.uint8).contiguous().numpy().tobytes())
    return h.hexdigest()


def _modules(weights: list[torch.Tensor], wrap: Callable[[torch.Tensor], torch.Tensor]
             ) -> list[torch.nn.Module]:
    mods = []
    for w in weights:
        m = torch.nn.Module()
        m.weight = torch.nn.Parameter(wrap(w))
        mods.append(m)
    return mods


def _local_bytes(t: torch.Tensor) -> int:
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def torch_child(layers: int, out: str) -> None:
    """One process, torch.nn.utils.prune on the full weights."""
    import torch.nn.utils.prune as prune

    torch.set_num_threads(1)
    mods = _modules(make_weights(gpt2_linear_shapes(layers), "distinct"), lambda w: w)
    pairs = [(m, "weight") for m in mods]
    _release_freed_memory()
    _peak_rss_reset()
    before = _rss_kib("VmRSS")
    t0 = time.perf_counter()
    prune.global_unstructured(pairs, prune.L1Unstructured, amount=0.5)
    seconds = time.perf_counter() - t0
    rss = (_rss_kib("VmHWM") - before) / 1024
    digest = _digest([m.weight_mask for m in mods])
    for m in mods:
        prune.remove(m, "weight")  # plain parameters again (pruned values, unchanged order)
    peak, net = allocated_peak(
        lambda: prune.global_unstructured(pairs, prune.L1Unstructured, amount=0.5))
    Path(out).write_text(json.dumps({"time": seconds, "rss_mib": rss, "peak": peak, "net": net,
                                     "masks": sum(_local_bytes(m.weight_mask) for m in mods),
                                     "digest": digest}))


def rank_main(rank: int, world: int, port: int, layers: int, outdir: str,
              session: bool = False) -> None:
    """One rank of a sharded run; writes its numbers to ``outdir/rank<r>.json``."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    from prune_explorer import prune
    from prune_explorer.prune import _radix
    from prune_explorer.prune._module import snapshot

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    weights = make_weights(gpt2_linear_shapes(layers), "distinct")
    mods = _modules(weights, lambda w: distribute_tensor(w, mesh, [Shard(0)],
                                                         src_data_rank=None).clone())
    del weights  # each rank keeps its shards only
    shard = sum(m.weight.to_local().numel() for m in mods)
    pairs = [(m, "weight") for m in mods]

    def prune_all() -> None:
        prune.global_unstructured(pairs, prune.L1Unstructured, amount=0.5)

    def masks_bytes() -> int:
        return sum(_local_bytes(m.weight_mask) for m in mods)

    # 1. time, bytes sent and resident memory of the call on fresh weights (unprofiled)
    fresh = snapshot(pairs)
    dist.barrier()
    _release_freed_memory()
    _peak_rss_reset()
    before = _rss_kib("VmRSS")
    _radix.STATS.reset()
    t0 = time.perf_counter()
    prune_all()
    dist.barrier()
    seconds = time.perf_counter() - t0
    rss = (_rss_kib("VmHWM") - before) / 1024
    sent, collectives = _radix.STATS.bytes, _radix.STATS.collectives
    digest = _digest([m.weight_mask.full_tensor() for m in mods])
    for snap in reversed(fresh):  # back to the fresh weights (what an undo does)
        snap.restore()
    # 2. allocated memory: on fresh weights, then again on the pruned ones
    result: dict[str, object] = {"time": seconds, "rss_mib": rss, "bytes": sent,
                                 "collectives": collectives, "shard": shard,
                                 "digest": digest if rank == 0 else None}
    for key in ("fresh", "again"):
        dist.barrier()
        peak, net = allocated_peak(prune_all)
        result[key] = {"peak": peak, "net": net, "masks": masks_bytes()}
    if session:
        for snap in reversed(fresh):
            snap.restore()
        result["session"] = session_case(mods)
    Path(outdir, f"rank{rank}.json").write_text(json.dumps(result))
    dist.barrier()  # tear gloo down together: a rank leaving early can abort its peers
    dist.destroy_process_group()


def session_case(mods: list[torch.nn.Module]) -> dict[str, dict[str, int]]:
    """Allocated memory of ``Session.apply_global`` (L1, 0.5) on the sharded weights, fresh and
    again on the pruned ones, and of ``undo`` of the second step.

    Per call: ``peak`` and ``net`` (:func:`allocated_peak`; the masks the call replaces are held
    meanwhile, so their release cannot hide a peak), ``masks`` (bytes of the masks installed --
    for ``undo``, the masks it puts back) and ``history`` (bytes of the bits the call adds to the
    session's history: 1/8 B per entry of each tensor it prunes). ``net - masks`` is what the
    session keeps beyond the masks: the history bits plus the undo snapshot's bits of the masks
    replaced (1/8 B per entry again, on pruned weights)."""
    import torch.distributed as dist

    from prune_explorer import Session

    s = Session(torch.nn.ModuleList(mods))
    names = [f"{i}.weight" for i in range(len(mods))]

    def history_bytes() -> int:
        return sum(e.mask.nbytes for n in names for e in s.history(n))

    def masks_bytes() -> int:
        return sum(_local_bytes(m.weight_mask) for m in mods if hasattr(m, "weight_mask"))

    def apply() -> None:
        s.apply_global(names, "l1_unstructured", amount=0.5)

    out: dict[str, dict[str, int]] = {}
    for key in ("fresh", "again", "undo"):
        held = [m._buffers.get("weight_mask") for m in mods]  # not freed inside the call
        had = history_bytes()
        dist.barrier()
        peak, net = allocated_peak(s.undo if key == "undo" else apply)
        out[key] = {"peak": peak, "net": net, "masks": masks_bytes(),
                    "history": max(history_bytes() - had, 0)}
        del held
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_world(world: int, layers: int, session: bool = False) -> list[dict]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as outdir:
        mp.start_processes(rank_main, args=(world, _free_port(), layers, outdir, session),
                           nprocs=world,
                           start_method="spawn")
        return [json.loads(Path(outdir, f"rank{r}.json").read_text()) for r in range(world)]


def run_torch(layers: int) -> dict:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as outdir:
        out = str(Path(outdir, "torch.json"))
        ctx = mp.get_context("spawn")
        p = ctx.Process(target=torch_child, args=(layers, out))
        p.start()
        p.join()
        return json.loads(Path(out).read_text())


def _per_param(memory: dict, params: int) -> str:
    """``mask`` and ``extra`` (peak beyond the masks) in B/param."""
    return (f"mask {memory['masks'] / params:4.2f}  extra "
            f"{(memory['peak'] - memory['masks']) / params:4.2f} B/param")


def _session_per_param(memory: dict, params: int) -> str:
    """``mask``, ``history`` (bits added to it), ``kept`` (all the session keeps beyond the
    masks: history and undo bits) and ``extra`` (peak beyond what the call keeps) in B/param."""
    kept = max(memory["net"] - memory["masks"], 0)
    extra = memory["peak"] - max(memory["net"], memory["masks"])
    return (f"mask {memory['masks'] / params:4.2f}  history {memory['history'] / params:5.3f}  "
            f"kept bits {kept / params:5.3f}  extra {extra / params:4.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12, help="GPT-2 blocks (12 = GPT-2 small)")
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--session", action="store_true",
                        help="also measure Session.apply_global and undo on the sharded weights")
    args = parser.parse_args()
    numel = sum(torch.Size(s).numel() for s in gpt2_linear_shapes(args.layers))
    print(f"torch {torch.__version__}, gloo on CPU, {os.cpu_count()} cores, 1 thread per "
          f"process, load average {os.getloadavg()[0]:.2f}; global L1 0.5 over "
          f"{numel / 1e6:.1f}M GPT-2-small linear weights")
    print("memory: tensor bytes allocated during the call (torch.profiler, profile_memory=True),"
          " per parameter of the rank's shard:\n  mask = the masks installed; extra = peak "
          "allocated beyond them (target <= 2); resident = peak RSS growth (noisy, for "
          "comparison)")
    theirs = run_torch(args.layers)
    print(f"\ntorch, 1 process (unsharded):  {theirs['time'] * 1e3:9.1f} ms   "
          f"{_per_param(theirs, numel)} (kept after the call: {theirs['net'] / numel:4.1f});"
          f"  resident {theirs['rss_mib'] * 2**20 / numel:4.1f}")
    ok = True
    for world in args.worlds:
        ranks = run_world(world, args.layers, args.session)
        same = ranks[0]["digest"] == theirs["digest"]
        ok &= same
        slowest = max(r["time"] for r in ranks)
        print(f"\nsharded, {world} process{'es' if world > 1 else ''}: {slowest * 1e3:9.1f} ms"
              f"   {'masks identical to torch' if same else 'MASKS DIFFER'}")
        for i, r in enumerate(ranks):
            shard = max(r["shard"], 1)
            print(f"  rank {i}: shard {r['shard'] / 1e6:5.2f}M  fresh: "
                  f"{_per_param(r['fresh'], shard)}; again: {_per_param(r['again'], shard)};"
                  f"  resident {r['rss_mib'] * 2**20 / shard:3.1f};  sent "
                  f"{r['bytes'] / 1024:4.1f} KiB in {r['collectives']} collectives")
        for i, r in enumerate(ranks):
            if "session" in r:
                print(f"  rank {i}: Session " + ";  ".join(
                    f"{key}: {_session_per_param(r['session'][key], max(r['shard'], 1))}"
                    for key in ("fresh", "again", "undo")))
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if not ok:
        print("\nFAILED: masks differ")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
