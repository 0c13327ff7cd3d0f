"""Speed of the pattern methods against l1_unstructured on the same weight, in the same run.

The target: ``semi_structured`` 2:4 on a 4096 x 4096 weight within 2x of
``l1_unstructured(amount=0.5)`` on that weight. Each method is timed as the session previews it
(``compute_mask`` on the weight and the all-ones default mask of a fresh tensor); the time is
the median over ``--repeats`` rounds after one warm-up call, the methods interleaved within
each round so that they share the machine's load. ``--threads`` sets torch's thread count.
``block_structured`` (4 x 4 blocks, 50 %) is shown for reference.

Usage::

    python benchmarks/bench_patterns.py
    python benchmarks/bench_patterns.py --size 2048 --repeats 9
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from prune_explorer import prune
from prune_explorer.prune._base import all_ones_like


def interleaved_medians_ms(fns: dict, repeats: int) -> dict:
    for fn in fns.values():
        fn()
    times: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) * 1e3 for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    t = torch.randn(args.size, args.size)
    ones = all_ones_like(t)
    methods = {
        "l1_unstructured 0.5": prune.L1Unstructured(0.5),
        "semi_structured 2:4": prune.SemiStructured("2:4"),
        "block_structured 4x4 0.5": prune.BlockStructured(0.5, block=(4, 4)),
    }
    times = interleaved_medians_ms(
        {name: (lambda m=m: m.compute_mask(t, ones)) for name, m in methods.items()},
        args.repeats)
    base = times["l1_unstructured 0.5"]
    print(f"{args.size}x{args.size}, median of {args.repeats} (torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads)")
    for name, ms in times.items():
        print(f"  {name:26s} {ms:9.1f} ms   {ms / base:5.2f}x l1_unstructured")
    ratio = times["semi_structured 2:4"] / base
    print(f"2:4 / l1_unstructured = {ratio:.2f} (target: <= 2)")


if __name__ == "__main__":
    main()
