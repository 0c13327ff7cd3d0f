"""The CLI's outputs, through the package's one safe writer (:mod:`prune_explorer._files`).

Its errors become :class:`CLIError`; see that module for the rules (atomic replacement of
regular files, write-through to devices, FIFOs and standard output, inputs never overwritten).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prune_explorer._files import OutputError, check_output, is_stdout, write_output

from .errors import CLIError

__all__ = ["Inputs", "check", "is_stdout", "write"]

Inputs = Sequence[tuple[str, Path]]


def check(path: Path, what: str, inputs: Inputs) -> None:
    """Refuse, before any work, an output that cannot be written or is one of ``inputs``."""
    try:
        check_output(path, what, inputs)
    except OutputError as exc:
        raise CLIError(str(exc)) from None


def write(path: Path, data: bytes, what: str, inputs: Inputs) -> None:
    """Write ``data`` to the output ``path`` (option ``what``) safely."""
    try:
        write_output(path, data, what, inputs)
    except OutputError as exc:
        raise CLIError(str(exc)) from None
