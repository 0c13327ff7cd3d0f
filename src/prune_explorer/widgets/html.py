"""Small HTML helpers for the explorer's text panes (escaping, tables, download links).

Everything that reaches an ``ipywidgets.HTML`` goes through :func:`esc` or is built here, so a
tensor name or an error message can never inject markup.

Examples
--------
>>> esc("<b>")
'&lt;b&gt;'
>>> human_bytes(3 * 1024 * 1024)
'3.0 MiB'
>>> link = download_link("plan.json", "{}", "application/json", "pe-download-json")
>>> link.startswith('<a class="pe-download-json" download="plan.json" href="data:application/json')
True
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from typing import Any

import pandas as pd

__all__ = ["collapse_warning", "download_link", "esc", "frame_table", "human_bytes", "message",
           "percent"]

# Colours of the status kinds (Okabe-Ito-like, readable on white and on dark themes' cards).
_KIND_STYLE = {
    "ok": "color:#1b7837",
    "error": "color:#b2182b;font-weight:600",
    "working": "color:#555555;font-style:italic",
    "info": "color:#333333",
    "warning": "color:#8c510a;font-weight:600",
}


def esc(value: Any, quote: bool = False) -> str:
    """``str(value)`` with ``&``, ``<`` and ``>`` escaped (and quotes, for attribute values)."""
    return html.escape(str(value), quote=quote)


def percent(fraction: float, digits: int = 1) -> str:
    """``0.25 -> '25.0%'``."""
    return f"{100.0 * float(fraction):.{digits}f}%"


def human_bytes(count: int) -> str:
    """Bytes as B, KiB, MiB or GiB with one decimal."""
    value = float(count)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024.0:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024.0
    return f"{value:.1f} GiB"


def message(kind: str, text: str) -> str:
    """A one-line status message; ``kind`` is ok, error, working, info or warning."""
    style = _KIND_STYLE.get(kind, _KIND_STYLE["info"])
    return f'<span class="pe-status-{esc(kind, True)}" style="{style}">{esc(text)}</span>'


def collapse_warning(what: str, names: Sequence[str]) -> str:
    """The warning for the layers ``what`` ("global pruning", "this step") would collapse (the
    session's rule: ``session.reports.collapses``), as a message."""
    return message(
        "warning",
        f"Layer collapse with {what}: {', '.join(names)} would be (almost) entirely "
        "pruned, or lose every slice along a dim; the network can no longer pass signal "
        "through it.",
    )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return ", ".join(value) if value else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in value.items()) if value else "-"
    return str(value)


def frame_table(
    frame: pd.DataFrame,
    *,
    css_class: str,
    columns: Sequence[str] | None = None,
    highlight_row: int | None = None,
    percent_columns: Sequence[str] = (),
) -> str:
    """Render ``frame`` as a small HTML table (escaped), optionally highlighting one row."""
    columns = list(frame.columns) if columns is None else list(columns)
    head = "".join(f'<th style="padding:2px 8px;text-align:left">{esc(c)}</th>' for c in columns)
    rows = []
    for position, (_, row) in enumerate(frame.iterrows()):
        style = ' style="background:#fff3b0"' if position == highlight_row else ""
        cells = []
        for column in columns:
            value = row[column]
            text = percent(value) if column in percent_columns else _cell(value)
            cells.append(f'<td style="padding:2px 8px">{esc(text)}</td>')
        rows.append(f'<tr{style} data-row="{position}">{"".join(cells)}</tr>')
    return (
        f'<table class="{esc(css_class, True)}" style="border-collapse:collapse;font-size:12px">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def download_link(filename: str, text: str, mime: str, css_class: str) -> str:
    """An ``<a download>`` link carrying ``text`` in a base64 ``data:`` URI."""
    payload = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return (
        f'<a class="{esc(css_class, True)}" download="{esc(filename, True)}" '
        f'href="data:{esc(mime, True)};charset=utf-8;base64,{payload}" target="_blank" '
        'style="color:#1a73e8;text-decoration:underline">'
        f"download {esc(filename)}</a>"
    )
