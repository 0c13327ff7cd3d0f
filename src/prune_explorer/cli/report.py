"""``prune-explorer report``: the sparsity table of a checkpoint, after an optional plan.

The table goes to standard output (to standard error when ``--csv -`` sends the CSV there),
the CSV through the one safe writer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from . import files
from .arguments import CHECKPOINT_HELP, EXIT_STATUSES, FORCE_HELP, MODEL_HELP
from .model import load_checkpoint
from .plans import apply_plan, read_plan

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["add_command", "cmd_report", "csv_bytes", "printable"]


def printable(report: pd.DataFrame) -> pd.DataFrame:
    """``report`` with every column turned into the text the terminal table shows; the
    ``aliases`` column only when some tensor is tied."""
    shown = report.copy()
    shown["shape"] = [
        "x".join(str(s) for s in shape) if shape else "-" for shape in shown["shape"]
    ]
    shown["sparsity"] = [f"{value:.1%}" for value in shown["sparsity"]]
    shown["channels_pruned"] = [
        ", ".join(f"dim{d}: {n}" for d, n in value.items() if n) or "-"
        if isinstance(value, Mapping) else ""
        for value in shown["channels_pruned"]
    ]
    shown["methods"] = [
        " + ".join(value) or "-" if isinstance(value, tuple) else "" for value in shown["methods"]
    ]
    if not any(shown["aliases"]):
        return shown.drop(columns="aliases")
    shown["aliases"] = [
        ", ".join(value) or "-" if isinstance(value, tuple) else "" for value in shown["aliases"]
    ]
    return shown


def csv_bytes(report: pd.DataFrame) -> bytes:
    """``report`` as UTF-8 CSV: shapes ``a x b``, channels ``dim:count;...``, methods ``a+b``,
    aliases ``a;b``."""
    table = report.copy()
    table["shape"] = [" x ".join(map(str, s)) for s in table["shape"]]
    table["channels_pruned"] = [
        ";".join(f"{d}:{n}" for d, n in value.items()) for value in table["channels_pruned"]
    ]
    table["methods"] = ["+".join(value) for value in table["methods"]]
    table["aliases"] = [";".join(value) for value in table["aliases"]]
    return table.to_csv(index=False).encode("utf-8")


def cmd_report(args: argparse.Namespace, out: IO[str]) -> int:
    """Run ``prune-explorer report``."""
    checkpoint = Path(args.checkpoint)
    plan_path = Path(args.plan) if args.plan else None
    csv_path = Path(args.csv) if args.csv else None
    inputs = [("CHECKPOINT", checkpoint)] + ([("--plan", plan_path)] if plan_path else [])
    if csv_path is not None:
        files.check(csv_path, "--csv", inputs, force=getattr(args, "force", False))
        if files.is_stdout(csv_path):
            out = sys.stderr  # standard output carries the CSV alone
    loaded = load_checkpoint(checkpoint, args.model)
    plan = read_plan(plan_path, "--plan") if plan_path else None
    if plan is not None and plan_path is not None:
        session = apply_plan(plan, loaded.model, plan_path, checkpoint)
    else:
        from prune_explorer.session import Session

        session = Session(loaded.model)
    report = session.report()
    print(f"Checkpoint: {checkpoint}", file=out)
    print(f"Model:      {loaded.described}", file=out)
    if plan is not None:
        print(f"Plan:       {args.plan} ({len(plan)} step{'s' * (len(plan) != 1)} applied)",
              file=out)
    print(printable(session.report(totals=True)).to_string(index=False), file=out)
    if csv_path is not None:
        files.write(csv_path, csv_bytes(report), "--csv", inputs,
                    force=getattr(args, "force", False))
        print(f"Wrote {csv_path} ({len(report)} rows, columns {', '.join(report.columns)})",
              file=out)
    return 0


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare ``report`` and its arguments on the parser's ``commands``."""
    report = commands.add_parser(
        "report",
        epilog=f"Exit status: {EXIT_STATUSES}.",
        help="print the sparsity report of a saved state_dict",
        description="Print one row per tensor (shape, zeros, sparsity, fully pruned channels, "
        "methods) of a state_dict saved with torch.save(model.state_dict(), path), after "
        "applying a JSON plan if --plan is given. Pruning saved as <name>_orig/<name>_mask "
        "pairs is read back and listed as custom_from_mask.",
    )
    report.add_argument("checkpoint", metavar="CHECKPOINT", help=CHECKPOINT_HELP)
    report.add_argument("--model", help=MODEL_HELP)
    report.add_argument("--plan", help="JSON plan to apply first (exported by the explorer)")
    report.add_argument("--csv",
                        help="also write the report to this CSV file ('-': standard output)")
    report.add_argument("--force", action="store_true", help=FORCE_HELP)
