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
from .arguments import CHECKPOINT_HELP, EXIT_STATUSES, FORCE_HELP, MODEL_HELP
from .checkpoints import checkpoint_bytes, output_format
from .model import load_checkpoint
from .plans import apply_plan, read_plan

__all__ = ["add_command", "cmd_apply"]


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


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare ``apply`` and its arguments on the parser's ``commands``."""
    apply = commands.add_parser(
        "apply",
        epilog=f"Exit status: {EXIT_STATUSES}.",
        help="apply a JSON plan to a saved state_dict and save the result",
        description="Apply a JSON plan to the model in CHECKPOINT and save its state_dict to "
        "OUTPUT. Without --commit pruned tensors are saved as <name>_orig + <name>_mask (as "
        "torch.nn.utils.prune leaves them); with --commit pruning is made permanent "
        "(prune.remove) and the keys are those of the unpruned model.",
    )
    apply.add_argument("checkpoint", metavar="CHECKPOINT", help=CHECKPOINT_HELP)
    apply.add_argument("plan", metavar="PLAN", help="JSON plan (exported by the explorer)")
    apply.add_argument("-o", "--output", required=True,
                       help="where to save the state_dict: .safetensors or .pt by its suffix, "
                       "else in the format of CHECKPOINT; '-' for standard output")
    apply.add_argument("--commit", action="store_true",
                       help="make pruning permanent (prune.remove) before saving")
    apply.add_argument("--model", help=MODEL_HELP)
    apply.add_argument("--shrink", action="store_true",
                       help="remove the channels pruning made dead (Torch-Pruning) and save the "
                       "smaller state_dict plus OUTPUT.shrunk.json, the JSON description of the "
                       "layers to resize before loading it")
    apply.add_argument("--force", action="store_true", help=FORCE_HELP)
    apply.add_argument("--input-shape",
                       help="with --shrink: shape of an input batch to trace, e.g. 1,3,32,32 "
                       "(the demo models know theirs; token ids: 1,8 by default)")
    apply.add_argument("--input-kind", choices=("float", "tokens"),
                       help="with --shrink: what the traced batch holds: float zeros, or "
                       "integer token ids for a language model (given as input_ids where "
                       "forward takes them). Default: tokens when the model's input is an "
                       "embedding table, else float")
