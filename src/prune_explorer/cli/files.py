"""The CLI's outputs, through the package's one safe writer (:mod:`prune_explorer._files`).

Its errors become :class:`CLIError`; see that module for the rules (atomic replacement of
regular files, write-through to devices, FIFOs and standard output, inputs never overwritten).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prune_explorer._files import (
    OutputError,
    check_output,
    is_stdout,
    write_output,
    write_outputs,
)

from .errors import CLIError

__all__ = ["Inputs", "check", "is_stdout", "write", "write_pair"]

Inputs = Sequence[tuple[str, Path]]


def check(path: Path, what: str, inputs: Inputs, *, force: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written or is one of ``inputs``
    (or, unless ``force``, a read-only file or one of another user)."""
    try:
        check_output(path, what, inputs, force=force)
    except OutputError as exc:
        raise CLIError(str(exc)) from None


def write(path: Path, data: bytes, what: str, inputs: Inputs, *, force: bool = False) -> None:
    """Write ``data`` to the output ``path`` (option ``what``) safely."""
    try:
        write_output(path, data, what, inputs, force=force)
    except OutputError as exc:
        raise CLIError(str(exc)) from None


def write_pair(outputs: Sequence[tuple[Path, bytes, str]], inputs: Inputs, *,
               force: bool = False) -> None:
    """Write several outputs so that they are all new or all old (see ``write_outputs``)."""
    try:
        write_outputs(outputs, inputs, force=force)
    except OutputError as exc:
        raise CLIError(str(exc)) from None
