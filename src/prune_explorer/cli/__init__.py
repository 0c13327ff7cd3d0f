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
(:mod:`prune_explorer._files`): a regular file is replaced atomically, so a failed or
interrupted command (Ctrl-C, SIGTERM) never leaves a partial or temporary file behind; devices,
FIFOs and ``-`` (standard output) are written through, never replaced; an output that is one of
the command's inputs is refused.

The package has one module per job: ``lab`` (JupyterLab), ``checkpoints`` (file formats),
``model`` (the architecture and loading the weights), ``plans``, ``report``, ``apply``,
``demo`` (``demo-checkpoint``), ``files`` (outputs) and ``errors``.

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
import ipaddress
import re
import sys
from collections.abc import Callable, Sequence
from typing import IO

from prune_explorer._files import Terminated

from . import lab
from .apply import cmd_apply
from .demo import cmd_demo_checkpoint
from .errors import PROG, CLIError
from .lab import (
    DEFAULT_LAB_DIR,
    LOCALHOST,
    QUICKSTART,
    bundled_notebooks,
    copy_notebooks,
    lab_command,
)
from .report import cmd_report

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


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, 65535]; got {text!r}") \
            from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be an integer in [1, 65535]; got {value}")
    return value


_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")


def _ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    if not _HOST.match(text):
        raise argparse.ArgumentTypeError(
            "must be an IP address (127.0.0.1, 0.0.0.0 for every interface, 192.168.1.20) or a "
            f"host name; got {text!r}"
        )
    return text


_MODEL_HELP = (
    "architecture of the checkpoint: 'mlp' or 'cnn' (the demo models) or "
    "'package.module:factory', an importable callable returning the nn.Module (the current "
    "folder is importable). Default: the demo model whose keys match"
)


#: Exit statuses of every command, as ``--help`` lists them.
EXIT_STATUSES = (
    "0 success; 1 bad input: a missing, malformed, crafted or mismatched checkpoint or plan, or "
    "an output it must not replace (one line on stderr, no output written); 2 usage error; "
    "3 internal error (a bug: one line, please report it); 130 interrupted (Ctrl-C); "
    "128+N ended by signal N"
)

_FORCE_HELP = ("replace an output file even if it is read-only or owned by another user "
               "(refused by default)")

_CHECKPOINT_HELP = "state_dict file (.safetensors or .pt; the format is read from the contents)"


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

    lab = commands.add_parser(
        "lab",
        help="open the teaching notebooks in JupyterLab",
        description="Copy the bundled notebooks into a working folder (never over an edited "
        "copy) and start JupyterLab on the quickstart notebook, on 127.0.0.1 (or --ip) with "
        "token authentication.",
    )
    lab.add_argument("--dir", default=DEFAULT_LAB_DIR,
                     help=f"working folder for the notebooks (default: ./{DEFAULT_LAB_DIR})")
    lab.add_argument("--port", type=_port, default=None,
                     help="port to serve on (default: JupyterLab's, 8888 or the next free one)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    lab.add_argument("--ip", type=_ip, default=LOCALHOST, metavar="ADDRESS",
                     help="address to listen on (default: 127.0.0.1, this machine only); e.g. "
                     "0.0.0.0 for a classroom. Off loopback JupyterLab requires its token or a "
                     "password and refuses to start with authentication disabled")

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
    demo.add_argument("--force", action="store_true", help=_FORCE_HELP)

    report = commands.add_parser(
        "report",
        epilog=f"Exit status: {EXIT_STATUSES}.",
        help="print the sparsity report of a saved state_dict",
        description="Print one row per tensor (shape, zeros, sparsity, fully pruned channels, "
        "methods) of a state_dict saved with torch.save(model.state_dict(), path), after "
        "applying a JSON plan if --plan is given. Pruning saved as <name>_orig/<name>_mask "
        "pairs is read back and listed as custom_from_mask.",
    )
    report.add_argument("checkpoint", metavar="CHECKPOINT", help=_CHECKPOINT_HELP)
    report.add_argument("--model", help=_MODEL_HELP)
    report.add_argument("--plan", help="JSON plan to apply first (exported by the explorer)")
    report.add_argument("--csv",
                        help="also write the report to this CSV file ('-': standard output)")
    report.add_argument("--force", action="store_true", help=_FORCE_HELP)

    apply = commands.add_parser(
        "apply",
        epilog=f"Exit status: {EXIT_STATUSES}.",
        help="apply a JSON plan to a saved state_dict and save the result",
        description="Apply a JSON plan to the model in CHECKPOINT and save its state_dict to "
        "OUTPUT. Without --commit pruned tensors are saved as <name>_orig + <name>_mask (as "
        "torch.nn.utils.prune leaves them); with --commit pruning is made permanent "
        "(prune.remove) and the keys are those of the unpruned model.",
    )
    apply.add_argument("checkpoint", metavar="CHECKPOINT", help=_CHECKPOINT_HELP)
    apply.add_argument("plan", metavar="PLAN", help="JSON plan (exported by the explorer)")
    apply.add_argument("-o", "--output", required=True,
                       help="where to save the state_dict: .safetensors or .pt by its suffix, "
                       "else in the format of CHECKPOINT; '-' for standard output")
    apply.add_argument("--commit", action="store_true",
                       help="make pruning permanent (prune.remove) before saving")
    apply.add_argument("--model", help=_MODEL_HELP)
    apply.add_argument("--shrink", action="store_true",
                       help="remove the channels pruning made dead (Torch-Pruning) and save the "
                       "smaller state_dict plus OUTPUT.shrunk.json, the JSON description of the "
                       "layers to resize before loading it")
    apply.add_argument("--force", action="store_true", help=_FORCE_HELP)
    apply.add_argument("--input-shape",
                       help="with --shrink: shape of an input batch to trace, e.g. 1,3,32,32 "
                       "(the demo models know theirs; token ids: 1,8 by default)")
    apply.add_argument("--input-kind", choices=("float", "tokens"),
                       help="with --shrink: what the traced batch holds: float zeros, or "
                       "integer token ids for a language model (given as input_ids where "
                       "forward takes them). Default: tokens when the model's input is an "
                       "embedding table, else float")
    return parser


_COMMANDS: dict[str, Callable[[argparse.Namespace, IO[str]], int]] = {
    "lab": lab.cmd_lab,
    "report": cmd_report,
    "apply": cmd_apply,
    "demo-checkpoint": cmd_demo_checkpoint,
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
    try:
        return _COMMANDS[args.command](args, sys.stdout)
    except CLIError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except Terminated as exc:
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not the input: still one line, and a status of its own
        from .errors import one_line

        print(f"{PROG} {args.command}: internal error: {one_line(exc)} (please report it)",
              file=sys.stderr)
        return 3
