"""What the commands' arguments share: the exit statuses every ``--help`` lists and the help
texts of the arguments several commands take. Each command declares its own arguments in its
own module (``add_command``); :func:`prune_explorer.cli.build_parser` gathers them.

Examples
--------
>>> EXIT_STATUSES.split(";")[0]
'0 success'
"""

from __future__ import annotations

__all__ = ["CHECKPOINT_HELP", "EXIT_STATUSES", "FORCE_HELP", "MODEL_HELP"]

#: Exit statuses of every command, as ``--help`` lists them.
EXIT_STATUSES = (
    "0 success; 1 bad input: a missing, malformed, crafted or mismatched checkpoint or plan, or "
    "an output it must not replace (one line on stderr, no output written); 2 usage error; "
    "3 internal error (a bug: one line, please report it); 130 interrupted (Ctrl-C); "
    "128+N ended by signal N"
)

MODEL_HELP = (
    "architecture of the checkpoint: 'mlp' or 'cnn' (the demo models) or "
    "'package.module:factory', an importable callable returning the nn.Module (the current "
    "folder is importable). Default: the demo model whose keys match"
)

FORCE_HELP = ("replace an output file even if it is read-only or owned by another user "
              "(refused by default)")

CHECKPOINT_HELP = "state_dict file (.safetensors or .pt; the format is read from the contents)"
