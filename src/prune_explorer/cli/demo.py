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
from .checkpoints import checkpoint_bytes, output_format

__all__ = ["cmd_demo_checkpoint"]


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
