"""Group boundaries of the hardware patterns, drawn over a mask shown at full resolution.

A 2:4 mask looks like noise unless you can see its groups. For ``semi_structured`` and
``block_structured`` settings, :func:`pattern_bounds` says where the groups (or blocks) end in the
matrix view of a tensor (rows = dim 0, columns = the other dims flattened, row-major), and
:func:`draw_pattern_lines` draws those boundaries as thin lines -- only when every entry has its
own cell (a pooled picture has no room for them).

* N:M along ``dim = 0``: a line every ``M`` rows. Along a later dim ``d``: a line every
  ``M * prod(shape[d+1:])`` columns -- each band then holds whole groups (for a conv weight with
  ``dim=1``: ``M`` input channels with all their kernel positions).
* blocks: a line every ``block[0]`` rows and, when the block has a second size, every
  ``block[1] * prod(shape[2:])`` columns if the block takes the dims past 1 whole.

Examples
--------
>>> pattern_bounds((8, 12), "semi_structured", {"pattern": "2:4", "dim": -1})
([], [4, 8])
>>> pattern_bounds((6, 4, 3, 3), "semi_structured", {"pattern": "1:2", "dim": 1})
([], [18])
>>> pattern_bounds((8, 8), "block_structured", {"block": (4, 2), "amount": 0.5, "n": 1})
([4], [2, 4, 6])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

__all__ = ["draw_pattern_lines", "pattern_bounds"]

_COLOR = "0.55"


def _every(step: int, size: int) -> list[int]:
    return list(range(step, size, step)) if 0 < step < size else []


def pattern_bounds(
    shape: Sequence[int], method: str | None, settings: Mapping[str, Any] | None
) -> tuple[list[int], list[int]]:
    """``(rows, columns)`` after which a group or block ends, in the matrix view of ``shape``."""
    if len(shape) < 2 or not settings or method not in ("semi_structured", "block_structured"):
        return [], []
    rows, cols = int(shape[0]), int(prod(shape[1:]))
    if method == "semi_structured":
        try:
            m = int(str(settings["pattern"]).split(":")[1])
            dim = int(settings["dim"]) % len(shape)
        except (KeyError, ValueError, IndexError):
            return [], []
        if dim == 0:
            return _every(m, rows), []
        return [], _every(m * int(prod(shape[dim + 1:])), cols)
    try:
        block = [int(b) for b in settings["block"]]
    except (KeyError, TypeError, ValueError):
        return [], []
    if not block or len(block) > len(shape):
        return [], []
    row_lines = _every(block[0], rows)
    whole_rest = all(b == s for b, s in zip(block[2:], shape[2:], strict=False))
    col_lines = _every(block[1] * int(prod(shape[2:])), cols) if len(block) > 1 and (
        whole_rest) else []
    return row_lines, col_lines


def draw_pattern_lines(
    ax: Axes, shape: Sequence[int], method: str | None, settings: Mapping[str, Any] | None,
    *, full_resolution: bool,
) -> list[Line2D]:
    """Draw the boundaries of :func:`pattern_bounds` on an image of the matrix view.

    Cells sit at integer coordinates (``extent`` from -0.5), so a boundary after index ``k``
    is at ``k - 0.5``. Nothing is drawn unless ``full_resolution``.
    """
    if not full_resolution:
        return []
    row_lines, col_lines = pattern_bounds(shape, method, settings)
    drawn = [ax.axhline(r - 0.5, color=_COLOR, linewidth=0.6, alpha=0.9) for r in row_lines]
    drawn += [ax.axvline(c - 0.5, color=_COLOR, linewidth=0.6, alpha=0.9) for c in col_lines]
    return drawn
