"""Time the Global tab's first slider move on GPT-2-small (fp32, 124M parameters, 49 targets).

The model is ``transformers.GPT2LMHeadModel(GPT2Config())`` (random init from the config, no
download); the targets are the 48 weights of the 12 blocks' ``c_attn``, ``attn.c_proj``,
``c_fc`` and ``mlp.c_proj`` plus ``lm_head.weight`` (123.5M entries): what the issue measured.

A move of the Global tab is what the explorer does per slider step: ``Session.preview_global``
over the targets, the kept count of every target (the model view) and the shown tensor's cells
(the picture). Timed: the core's ``global_unstructured`` over the same targets of a copy (same
process: each row's ratio to it is printed), the first move (one pass per target: the key
histogram and the window of keys around the cut), the next moves at nearby amounts (the
slider's steps), one far move, and the apply that follows a preview. Wall and CPU seconds
(``time.process_time``: all threads of this process) are printed with the machine's load
average: on a shared machine the wall figure is not a benchmark figure; CPU seconds vary less.

Run: ``python benchmarks/bench_global_first_move.py [--amount 0.3] [--json]``
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from typing import Any

import numpy as np
import torch


def gpt2_small() -> tuple[Any, list[str]]:
    """GPT-2-small from its config (fp32, seeded) and the 49 targets."""
    import transformers as T

    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(T.GPT2Config()).eval()
    targets = [f"transformer.h.{i}.{layer}.weight" for i in range(12)
               for layer in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")]
    return model, [*targets, "lm_head.weight"]


def move(session: Any, targets: list[str], shown: str, amount: float) -> None:
    """One Global-tab step: the preview, every target's kept count, the shown picture's cells."""
    masks = session.preview_global(targets, "l1_unstructured", amount=amount)
    for name in targets:
        masks.kept(name)
    shape = session.info(shown).shape
    rows = np.linspace(0, shape[0], 129).astype(np.int64)
    cols = np.linspace(0, int(np.prod(shape[1:])), 129).astype(np.int64)
    session.preview_cells(shown, "global_unstructured", row_edges=rows, col_edges=cols,
                          targets=targets, pruning_method="l1_unstructured", amount=amount)


def core_call(model: Any, targets: list[str], amount: float) -> tuple[float, float]:
    """The core's ``global_unstructured`` over ``targets`` of a copy of ``model``, timed."""
    from prune_explorer import prune

    copied = copy.deepcopy(model)
    pairs = [(copied.get_submodule(t.rsplit(".", 1)[0]), "weight") for t in targets]
    return timed(lambda: prune.global_unstructured(pairs, prune.L1Unstructured, amount=amount))


def timed(fn: Any) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--amount", type=float, default=0.3)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    from prune_explorer import Session

    model, targets = gpt2_small()
    session = Session(model)
    shown = targets[2]
    entries = sum(session.info(t).numel for t in targets)
    load = os.getloadavg()[0]
    results: dict[str, Any] = {"targets": len(targets), "entries": entries,
                               "torch": torch.__version__, "threads": torch.get_num_threads(),
                               "cores": os.cpu_count(), "load_before": round(load, 2)}
    results["core_global_unstructured"] = core_call(model, targets, args.amount)
    results["first_move"] = timed(lambda: move(session, targets, shown, args.amount))
    steps = [timed(lambda a=a: move(session, targets, shown, a))
             for a in (args.amount + 0.02 * i for i in range(1, 6))]
    results["next_moves_median"] = tuple(float(np.median([s[i] for s in steps]))
                                         for i in (0, 1))
    results["far_move"] = timed(lambda: move(session, targets, shown, 0.8))
    results["apply_after_preview"] = timed(
        lambda: session.apply_global(targets, "l1_unstructured", amount=0.8))
    results["load_after"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(results))
        return
    print(f"GPT-2-small fp32: {len(targets)} targets, {entries:,} entries; torch "
          f"{results['torch']}, {results['threads']} threads, {results['cores']} cores; load "
          f"average {results['load_before']} -> {results['load_after']}")
    core = results["core_global_unstructured"][0]
    for key in ("core_global_unstructured", "first_move", "next_moves_median", "far_move",
                "apply_after_preview"):
        wall, cpu = results[key]
        print(f"{key:>24}: wall {wall:6.2f} s   cpu {cpu:6.2f} s   wall / core {wall / core:5.2f}x")


if __name__ == "__main__":
    main()
