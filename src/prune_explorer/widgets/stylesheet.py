"""The explorer's own CSS, in one small ``<style>`` HTML widget (class ``pe-stylesheet``).

Only classes the explorer sets (``pe-*``) are styled, so it changes nothing else on the page:

* a stale preview (the controls hold invalid input) is dimmed and its counts struck through;
* the Explore tab wraps: below about 860 px of width the controls sit above the picture
  instead of beside it, so nothing is truncated on a projector or next to the file browser;
* pictures keep their aspect ratio (never stretched by a taller neighbour);
* text for screen readers only (``pe-sr-only``: the picture in words) is kept off screen.

Examples
--------
>>> ".pe-stale" in stylesheet().value
True
"""

from __future__ import annotations

import ipywidgets as widgets

__all__ = ["CSS", "stylesheet"]

CSS = """
.pe-stale { opacity: 0.35; filter: grayscale(100%); }
.pe-preview-info.pe-stale { text-decoration: line-through; }
.pe-explore-row { flex-wrap: wrap; align-items: flex-start; gap: 8px; }
.pe-explore-controls { flex: 1 1 400px; min-width: 0; max-width: 460px; }
.pe-explore-controls .widget-button { flex: 0 0 auto; width: auto; min-width: 80px; }
.pe-explore-controls .widget-button, .pe-explore-controls .widget-label {
  overflow: visible; text-overflow: clip;
}
.pe-explore-picture { flex: 0 1 auto; max-width: 100%; }
.pe-preview { flex: 0 1 auto; max-width: 100%; height: auto !important;
  object-fit: contain; align-self: flex-start; }
.pe-sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden;
  clip: rect(0 0 0 0); white-space: nowrap; }
"""


def stylesheet() -> widgets.HTML:
    """A fresh ``<style>`` widget holding :data:`CSS` (put one in the explorer's root)."""
    return widgets.HTML(value=f"<style>{CSS}</style>")
