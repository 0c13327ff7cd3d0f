"""``prune-explorer apply``: apply a JSON plan to a checkpoint and save the resulting state_dict.

The output is written through the one safe writer, in the format its suffix names
(``.safetensors``, ``.pt``...) or else the checkpoint's own; the summary goes to standard output
(to standard error when ``-o -`` sends the checkpoint there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO

from . import files
from .checkpoints import checkpoint_bytes, output_format
from .model import load_checkpoint
from .plans import apply_plan, read_plan

__all__ = ["cmd_apply"]


def cmd_apply(args: argparse.Namespace, out: IO[str]) -> int:
    """Run ``prune-explorer apply``."""
    checkpoint, plan_path, output = Path(args.checkpoint), Path(args.plan), Path(args.output)
    inputs = [("CHECKPOINT", checkpoint), ("PLAN", plan_path)]
    force = getattr(args, "force", False)
    files.check(output, "-o/--output", inputs, force=force)
    if files.is_stdout(output):
        out = sys.stderr  # standard output carries the checkpoint alone
    loaded = load_checkpoint(checkpoint, args.model)
    plan = read_plan(plan_path, "PLAN")
    session = apply_plan(plan, loaded.model, plan_path, checkpoint)
    committed: tuple[str, ...] = ()
    if args.commit:
        committed = session.commit().names
    totals = session.report(totals=True).iloc[-1]
    fmt = output_format(args.output, loaded.format)
    if getattr(args, "shrink", False):
        from .shrink import write_shrunk

        write_shrunk(args, session.model, output, fmt, inputs, out)
        return 0
    files.write(output, checkpoint_bytes(loaded.model.state_dict(), fmt), "-o/--output", inputs,
                force=force)
    steps = len(plan)
    print(f"Applied {steps} step{'s' * (steps != 1)} of {plan_path} to {checkpoint}; "
          f"model: {loaded.described}.", file=out)
    print(f"Sparsity over all tensors: {totals['sparsity']:.1%} "
          f"({int(totals['zeros']):,} of {int(totals['numel']):,} entries are 0).", file=out)
    pruned = [n for n in session.names if session.methods(n)]
    if args.commit:
        print(f"Wrote {output} ({fmt}): pruning made permanent for {len(committed)} tensors "
              "(plain state_dict, loads into the unpruned model).", file=out)
    else:
        print(f"Wrote {output} ({fmt}): {len(pruned)} pruned tensors kept as <name>_orig + "
              "<name>_mask pairs (undoable; `prune-explorer report` reads them; --commit makes "
              "pruning permanent).", file=out)
    return 0
