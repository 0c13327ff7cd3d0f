"""Sharded global pruning (DTensor, gloo on the CPU) on 1, 2 and 4 processes, against torch.

Global L1 pruning (``amount=0.5``) of the linear weights of GPT-2 small (12 blocks of 768x2304,
768x768, 768x3072 and 3072x768: 85M parameters; ``--layers`` takes fewer blocks), sharded on dim
0 across ``world`` processes with ``prune_explorer.prune.global_unstructured``. For each world
size the script prints the time of the call, the bytes the call sent through collectives (per
rank) and each rank's peak extra resident memory (``/proc/self/clear_refs`` then ``VmHWM``, over
the memory held just before) of the whole call and of computing the masks alone
(``global_masks``). On sharded parameters the whole call keeps no pruned weight ``mask * orig``
(torch's layout keeps it as an attribute; here it is computed on demand), so per rank it adds
the mask (4 B/param for float32 weights) and chunk-sized temporaries. Resident memory is noisy on
a loaded machine (the allocator keeps freed temporaries): compare several ranks and runs.
In the same run one process prunes the same full weights with
``torch.nn.utils.prune.global_unstructured``: the gathered masks of every world size must be
identical to torch's (the weights have pairwise distinct magnitudes).

Processes share the machine's cores: with 4 processes on a 2-core machine the times include
contention. Usage::

    python benchmarks/bench_sharded.py                 # 12 blocks, worlds 1 2 4
    python benchmarks/bench_sharded.py --layers 4 --worlds 1 2
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


def torch_child(layers: int, out: str) -> None:
    """One process, torch.nn.utils.prune on the full weights."""
    import torch.nn.utils.prune as prune

    torch.set_num_threads(1)
    mods = _modules(make_weights(gpt2_linear_shapes(layers), "distinct"), lambda w: w)
    _release_freed_memory()
    _peak_rss_reset()
    before = _rss_kib("VmRSS")
    t0 = time.perf_counter()
    prune.global_unstructured([(m, "weight") for m in mods], prune.L1Unstructured, amount=0.5)
    seconds = time.perf_counter() - t0
    peak = _rss_kib("VmHWM") - before
    Path(out).write_text(json.dumps({"time": seconds, "peak_mib": peak / 1024,
                                     "digest": _digest([m.weight_mask for m in mods])}))


def rank_main(rank: int, world: int, port: int, layers: int, outdir: str) -> None:
    """One rank of a sharded run; writes its numbers to ``outdir/rank<r>.json``."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    from prune_explorer import prune
    from prune_explorer.prune import _radix

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

    def measured(call: Callable[[], object]) -> tuple[float, float]:
        dist.barrier()
        _release_freed_memory()
        _peak_rss_reset()
        before = _rss_kib("VmRSS")
        t0 = time.perf_counter()
        out = call()
        dist.barrier()
        seconds = time.perf_counter() - t0
        del out
        return seconds, (_rss_kib("VmHWM") - before) / 1024

    # the masks alone (global_masks), then the whole call (masks + torch's layout: the pruned
    # weight attribute ``mask * orig``)
    _, masks_mib = measured(lambda: prune.global_masks(pairs, prune.L1Unstructured, amount=0.5))
    _radix.STATS.reset()
    seconds, peak_mib = measured(
        lambda: prune.global_unstructured(pairs, prune.L1Unstructured, amount=0.5))
    sent, collectives = _radix.STATS.bytes, _radix.STATS.collectives
    masks = [m.weight_mask.full_tensor() for m in mods]
    result = {"time": seconds, "peak_mib": peak_mib, "masks_mib": masks_mib, "bytes": sent,
              "collectives": collectives, "shard": shard,
              "digest": _digest(masks) if rank == 0 else None}
    Path(outdir, f"rank{rank}.json").write_text(json.dumps(result))
    dist.barrier()  # tear gloo down together: a rank leaving early can abort its peers
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_world(world: int, layers: int) -> list[dict]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as outdir:
        mp.start_processes(rank_main, args=(world, _free_port(), layers, outdir), nprocs=world,
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12, help="GPT-2 blocks (12 = GPT-2 small)")
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    numel = sum(torch.Size(s).numel() for s in gpt2_linear_shapes(args.layers))
    print(f"torch {torch.__version__}, gloo on CPU, {os.cpu_count()} cores, 1 thread per "
          f"process; global L1 0.5 over {numel / 1e6:.1f}M GPT-2-small linear weights")
    theirs = run_torch(args.layers)
    print(f"\ntorch, 1 process (unsharded):  {theirs['time'] * 1e3:9.1f} ms   peak "
          f"+{theirs['peak_mib']:8.1f} MiB ({theirs['peak_mib'] * 2**20 / numel:5.1f} B/param)")
    ok = True
    for world in args.worlds:
        ranks = run_world(world, args.layers)
        same = ranks[0]["digest"] == theirs["digest"]
        ok &= same
        slowest = max(r["time"] for r in ranks)
        print(f"\nsharded, {world} process{'es' if world > 1 else ''}: {slowest * 1e3:9.1f} ms"
              f"   {'masks identical to torch' if same else 'MASKS DIFFER'}")
        for i, r in enumerate(ranks):
            per = 2**20 / max(r["shard"], 1)
            beyond = r["masks_mib"] - 4 * r["shard"] / 2**20
            print(f"  rank {i}: shard {r['shard'] / 1e6:5.1f}M  peak +{r['peak_mib']:6.1f} MiB "
                  f"({r['peak_mib'] * per:3.1f} B/param); masks alone +{r['masks_mib']:6.1f} MiB"
                  f" = the fp32 masks (4 B/param) {beyond:+5.1f} MiB;  sent "
                  f"{r['bytes'] / 1024:4.1f} KiB in {r['collectives']} collectives")
    if not ok:
        print("\nFAILED: masks differ")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
