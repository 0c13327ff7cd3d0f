"""``prune-explorer demo-checkpoint``: save a trained demo model's ``state_dict``.

A newcomer has no checkpoint of their own: this writes the one the notebooks use, through the
one safe writer, so ``report`` and ``apply`` can be tried at once::

    prune-explorer demo-checkpoint model.pt
    prune-explorer apply model.pt plan.json -o pruned.pt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO

from . import files
from .arguments import EXIT_STATUSES, FORCE_HELP
from .checkpoints import checkpoint_bytes, output_format

__all__ = ["add_command", "cmd_demo_checkpoint"]


def cmd_demo_checkpoint(args: argparse.Namespace, out: IO[str]) -> int:
    """Run ``prune-explorer demo-checkpoint``."""
    output = Path(args.output)
    files.check(output, "OUTPUT", [], force=getattr(args, "force", False))
    if files.is_stdout(output):
        out = sys.stderr  # standard output carries the checkpoint alone
    from prune_explorer.demo import load_model

    model = load_model(args.model)
    state = model.state_dict()
    fmt = output_format(args.output, "torch")
    files.write(output, checkpoint_bytes(state, fmt), "OUTPUT", [],
                force=getattr(args, "force", False))
    numel = sum(t.numel() for t in state.values())
    print(f"Wrote {output} ({fmt}): the trained demo model {args.model!r} "
          f"({type(model).__name__}, {len(state)} tensors, {numel:,} values). Try "
          f"`prune-explorer report {output}` or `prune-explorer apply {output} plan.json "
          "-o pruned.pt`.", file=out)
    return 0


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare ``demo-checkpoint`` and its arguments on the parser's ``commands``."""
    demo = commands.add_parser(
        "demo-checkpoint",
        epilog=f"Exit status: {EXIT_STATUSES}.",
        help="save the trained demo model's state_dict, to try report and apply on",
        description="Write the state_dict of a trained demo model (the one the notebooks use) "
        "to OUTPUT: .safetensors or .pt by its suffix, else torch.save format; '-' for "
        "standard output.",
    )
    demo.add_argument("output", metavar="OUTPUT", help="file to write, e.g. model.pt")
    demo.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                      help="which demo model (default: mlp, the quickstart's)")
    demo.add_argument("--force", action="store_true", help=FORCE_HELP)
