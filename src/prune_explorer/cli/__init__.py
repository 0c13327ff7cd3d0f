"""The ``prune-explorer`` command line.

``prune-explorer lab [--dir DIR] [--port N] [--no-browser] [--ip ADDRESS]``
    Copy the bundled teaching notebooks into a working folder (never over a copy you edited)
    and start JupyterLab on the quickstart notebook, bound to 127.0.0.1 (or ``--ip``) with
    Jupyter's own token authentication, which is mandatory off loopback.
``prune-explorer demo-checkpoint OUTPUT [--model mlp|cnn]``
    Save the trained demo model's ``state_dict`` (the one the notebooks use), a checkpoint to
    try ``report`` and ``apply`` on.
``prune-explorer report CHECKPOINT [--model M] [--plan PLAN] [--csv OUT]``
    Print the sparsity report (:meth:`Session.report`) of a saved ``state_dict``, after
    applying a JSON plan if one is given.
``prune-explorer apply CHECKPOINT PLAN -o OUT [--commit] [--model M] [--shrink [--input-shape S]``
``[--input-kind float|tokens]]``
    Apply a JSON plan to a saved ``state_dict`` and save the resulting ``state_dict``.

Checkpoints are ``.safetensors`` files (read with the ``safetensors`` library) or ``torch.save``
files (read with ``torch.load(weights_only=True)``), told apart by their contents: plain
tensors only, never pickled code (:mod:`prune_explorer.cli.checkpoints`). Masks saved as
``<name>_mask`` must be 0/1 and shaped like ``<name>_orig``. The architecture comes from
``--model``: a demo model name (``mlp``, ``cnn``) or an importable ``package.module:factory``
callable that returns the ``nn.Module``. Outputs go through one safe writer
(:mod:`prune_explorer._files`): a regular file is replaced atomically and stays undoable until
the command returns success, so a failed or interrupted command (Ctrl-C, SIGTERM) ends with
every output file as it was, and no partial, temporary or backup file behind; devices,
FIFOs and ``-`` (standard output) are written through, never replaced; an output that is one of
the command's inputs is refused.

The package has one module per job: one per command, each declaring its own arguments
(``lab``: JupyterLab, with ``lab_auth``: its login made mandatory off loopback; ``report``;
``apply``, with ``shrink``: its ``--shrink``; ``demo``: ``demo-checkpoint``), ``arguments``
(what the commands' arguments share), ``checkpoints`` (file formats), ``model`` (the
architecture and loading the weights), ``plans``, ``files`` (outputs) and ``errors``.

Errors in the input (missing, corrupt, crafted or mismatched files, bad arguments) print one
line ``prune-explorer <command>: error: <message>`` on stderr and exit with status 1; usage
errors caught by the argument parser exit with status 2. The statuses (:data:`EXIT_STATUSES`,
also in ``--help``):

0 success; 1 bad input (one line on stderr; no output written); 2 usage error; 3 internal error
(a bug: one line, please report it); 130 interrupted (Ctrl-C); 128+N ended by signal N.

Examples
--------
>>> import tempfile, torch
>>> from prune_explorer.demo import load_mlp
>>> folder = tempfile.mkdtemp()
>>> torch.save(load_mlp().state_dict(), f"{folder}/mlp.pt")
>>> main(["report", f"{folder}/mlp.pt", "--model", "mlp"])  # doctest: +ELLIPSIS
Checkpoint: .../mlp.pt
Model:      demo model 'mlp' (DigitsMLP)
      name module_type  shape  numel  zeros sparsity channels_pruned methods
fc1.weight      Linear 128x64   8192      0     0.0%               -       -
...
     TOTAL                  -  17226      0     0.0%               -       -
0
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence
from typing import IO

from prune_explorer._files import Provisional, Terminated, provisional

from . import apply, demo, lab, report
from .arguments import EXIT_STATUSES
from .errors import PROG, CLIError
from .lab import (
    DEFAULT_LAB_DIR,
    QUICKSTART,
    bundled_notebooks,
    copy_notebooks,
    lab_command,
)

__all__ = [
    "DEFAULT_LAB_DIR",
    "EXIT_STATUSES",
    "QUICKSTART",
    "CLIError",
    "build_parser",
    "bundled_notebooks",
    "copy_notebooks",
    "lab_command",
    "main",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``prune-explorer`` (see the module docstring)."""
    from prune_explorer import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Explore, teach and plan neural-network pruning in PyTorch.",
        epilog=f"Exit status: {EXIT_STATUSES}.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (lab, demo, report, apply):  # each declares its own arguments
        command.add_command(commands)
    return parser


_COMMANDS: dict[str, Callable[[argparse.Namespace, IO[str]], int]] = {
    "lab": lab.cmd_lab,
    "report": report.cmd_report,
    "apply": apply.cmd_apply,
    "demo-checkpoint": demo.cmd_demo_checkpoint,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``prune-explorer`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success, 1 when the input is wrong (message on stderr, no output file written),
    2 for usage errors reported by the argument parser; see :data:`EXIT_STATUSES`.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    # Outputs stay undoable until the command returns success: an error, Ctrl-C or SIGTERM
    # before that puts the old files back (lab hands the process to JupyterLab: no outputs).
    outputs = Provisional()
    kept = contextlib.nullcontext() if args.command == "lab" else provisional(outputs)
    try:
        with kept:
            code = _run(args)
            outputs.succeeded = code == 0
    except BaseException as exc:
        if not outputs.final:  # a signal as the command returned: its outputs are undone
            code = _failed(args.command, exc)
        elif isinstance(exc, KeyboardInterrupt):  # one that came after they became final
            outputs.late = getattr(exc, "signum", signal.SIGINT)
        else:
            raise
    if outputs.late is not None:
        print(f"{PROG} {args.command}: {signal.Signals(outputs.late).name} came after the "
              "outputs were complete; they are kept", file=sys.stderr)
    return code


def _run(args: argparse.Namespace) -> int:
    try:
        return _COMMANDS[args.command](args, sys.stdout)
    except BaseException as exc:
        return _failed(args.command, exc)


def _failed(command: str, exc: BaseException) -> int:
    # The one line for a command that raised, and its exit status (see EXIT_STATUSES).
    if isinstance(exc, CLIError):
        print(f"{PROG} {command}: error: {exc}", file=sys.stderr)
        return 1
    if isinstance(exc, Terminated):
        print(f"{PROG} {command}: {exc}", file=sys.stderr)
        return 128 + exc.signum
    if isinstance(exc, KeyboardInterrupt):
        print(f"{PROG} {command}: interrupted", file=sys.stderr)
        return 130
    if isinstance(exc, Exception):  # a bug, not the input: one line, a status of its own
        from .errors import one_line

        print(f"{PROG} {command}: internal error: {one_line(exc)} (please report it)",
              file=sys.stderr)
        return 3
    raise exc  # SystemExit and the like: not ours to turn into a status
