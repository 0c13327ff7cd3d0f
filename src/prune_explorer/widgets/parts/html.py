"""Small HTML helpers for the explorer's text panes (escaping, tables, download links).

Everything that reaches an ``ipywidgets.HTML`` goes through :func:`esc` or is built here, so a
tensor name or an error message can never inject markup. Words and numbers are formatted by
:mod:`prune_explorer.session.analysis.wording` (``percent``, ``human_bytes`` and every table's
cells and
headers), the one place for that.

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
import torch

from prune_explorer.session.analysis.wording import display_table, human_bytes, percent

__all__ = ["collapse_warning", "custom_note", "download_link", "esc", "frame_table", "human_bytes",
           "message", "percent", "why_off"]

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


def frame_table(
    frame: pd.DataFrame,
    *,
    css_class: str,
    columns: Sequence[str] | None = None,
    highlight_row: int | None = None,
    percent_columns: Sequence[str] = (),
) -> str:
    """Render ``frame`` as a small HTML table (escaped), optionally highlighting one row.

    Cells and headers are those of :func:`~prune_explorer.session.analysis.wording.display_table`
    (human headers, percentages, separators, Yes/No, blank for none); ``columns`` picks and
    orders them, ``percent_columns`` adds percentage columns to the ``sparsity`` ones.
    """
    shown = display_table(frame, columns, percent_columns=percent_columns)
    head = "".join(f'<th style="padding:2px 8px;text-align:left">{esc(c)}</th>'
                   for c in shown.columns)
    rows = []
    for position, values in enumerate(shown.itertuples(index=False, name=None)):
        style = ' style="background:#fff3b0"' if position == highlight_row else ""
        cells = "".join(f'<td style="padding:2px 8px">{esc(text)}</td>' for text in values)
        rows.append(f'<tr{style} data-row="{position}">{cells}</tr>')
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


def custom_note(name: str | None, mask: torch.Tensor | None) -> str:
    """The line under the method "custom mask": what ``mask`` (None: none given yet) keeps of
    tensor ``name``, or how to give one."""
    if mask is None:
        text = (f"No custom mask for {name!r}: upload a .pt or .npy file of 0/1 values "
                f"(1 = keep, 0 = prune), or from code call explorer.set_custom_mask("
                f"{name!r}, mask) or explore(model, custom_masks={{{name!r}: mask}}).")
    else:
        text = (f"Custom mask for {name!r}: shape {tuple(mask.shape)}, keeps "
                f"{int(mask.count_nonzero()):,} of {mask.numel():,}.")
    return f'<span class="pe-custom-text">{esc(text)}</span>'


def why_off(lines: Sequence[str]) -> str:
    """The lines saying why buttons are off, for the note under them (class ``pe-button-note``).

    >>> why_off(["Undo is off: nothing to undo."])
    '<div class="pe-button-why">Undo is off: nothing to undo.</div>'
    """
    return "".join(f'<div class="pe-button-why">{esc(line)}</div>' for line in lines)
