"""Reading a JSON plan and applying it to the checkpoint's model, for ``report`` and ``apply``.

Plans are parsed by :meth:`Plan.from_json` (strict validation; no pickle, no eval); every
failure becomes a :class:`CLIError` naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from .errors import CLIError, check_input_file

if TYPE_CHECKING:
    from torch import nn

    from prune_explorer.session import Plan, Session

__all__ = ["apply_plan", "read_plan"]


def read_plan(path: Path, what: str) -> Plan:
    """Read a JSON plan, turning every failure into a :class:`CLIError` naming ``what``."""
    from prune_explorer.session import Plan

    check_input_file(path, what)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CLIError(f"{what} {str(path)!r} cannot be read ({exc.strerror})") from None
    try:
        return Plan.from_json(data)  # the one parser: decoding, JSON and the plan format
    except ValueError as exc:
        raise CLIError(f"{what} {str(path)!r} is not a valid plan: {exc}") from None


def apply_plan(plan: Plan, model: nn.Module, plan_path: Path, ckpt_path: Path) -> Session:
    """Apply ``plan`` to ``model`` all-or-nothing; errors name both files."""
    try:
        return cast("Session", plan.apply(model))  # Plan.apply runs it with a Session
    except (ValueError, TypeError, RuntimeError, KeyError, IndexError) as exc:
        raise CLIError(
            f"plan {str(plan_path)!r} does not fit the model of CHECKPOINT "
            f"{str(ckpt_path)!r}: {exc}"
        ) from None
