"""The CLI's one error type and the checks every command makes on its input paths."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PROG", "CLIError", "check_input_file", "one_line"]

PROG = "prune-explorer"


class CLIError(Exception):
    """A failure caused by the user's input; printed without a traceback, exit status 1."""


def check_input_file(path: Path, what: str) -> None:
    """Refuse an input ``path`` that is missing or a folder, naming the option ``what``.

    Examples
    --------
    >>> check_input_file(Path("no-such-file.pt"), "CHECKPOINT")
    Traceback (most recent call last):
    ...
    prune_explorer.cli.errors.CLIError: CHECKPOINT 'no-such-file.pt' does not exist
    """
    if not path.exists():
        raise CLIError(f"{what} {str(path)!r} does not exist")
    if path.is_dir():
        raise CLIError(f"{what} {str(path)!r} is a folder; expected a file")


def one_line(exc: BaseException) -> str:
    """:func:`prune_explorer.session.errors.one_line`, imported when an error needs it: the CLI
    loads torch, pandas and the session only in the commands that use them."""
    from prune_explorer.session.errors import one_line as describe

    return describe(exc)
