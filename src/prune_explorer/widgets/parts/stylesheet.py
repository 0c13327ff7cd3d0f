"""The explorer's own CSS, in one small ``<style>`` HTML widget (class ``pe-stylesheet``).

Only classes the explorer sets (``pe-*``) are styled, so it changes nothing else on the page:

* a stale preview (the controls hold invalid input) is dimmed and its counts struck through;
  a stale readout is greyed;
* the Explore tab wraps: below about 780 px of width the controls sit above the picture
  instead of beside it, so nothing is truncated on a projector or next to the file browser;
* the picture's column takes the rest of the row (the size probe measures it and the picture
  is drawn for it); the slider and the count line sit at its top, over the picture;
* pictures keep their aspect ratio (never stretched by a taller neighbour), and never overflow
  their column; History's picture and the Global vs local chart take the rest of their row
  (their size probes measure it; the table beside them wraps under them when narrow); the
  zoom's figure shows its toolbar whole (ipympl's box cut its right margin, 3-4 px);
* table cells and button labels are never cut: long tables scroll sideways in their own box;
  cells are padded so columns never run together;
* the slider shares a row with Apply, Undo and Reset (the row wraps when narrow), over the
  picture: what the class watches and the button that acts are on one screen;
* Presentation (class ``pe-presenting`` on the explorer) sets the explorer's text at 15 px
  (from 12-13 px; the count and accuracy lines at 14 px, so each keeps to one line at
  1024x768) and puts the controls under the picture, whose column then takes the whole row;
  the notes on why a button is off give way (the input error stays over the picture);
* no control is wider than its column (a dropdown narrows, its options stay whole in the list);
* the tab labels keep their whole text: the tab bar wraps onto a second row when narrow (a
  projector at 150 % zoom) instead of cutting them;
* the header wraps (the summary on a line of its own) instead of squeezing the pickers;
* code (the exported snippet, the JSON) never soft-wraps: it scrolls sideways;
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
.pe-preview-info.pe-stale, .pe-count-line.pe-stale { text-decoration: line-through; }
.pe-metric.pe-stale { opacity: 0.5; }
.pe-explore-row { flex-wrap: wrap; align-items: flex-start; gap: 8px; width: 100%; }
.pe-explore-controls { flex: 0 1 390px; min-width: 0; max-width: 460px; }
.pe-explore-controls .widget-button, .pe-commit .widget-button, .widget-button {
  flex: 0 0 auto; width: auto; min-width: 80px;
}
.pe-explorer .widget-button, .pe-explorer .widget-label, .pe-explorer .widget-toggle-button {
  overflow: visible; text-overflow: clip;
}
.pe-explore-picture { flex: 1 1 360px; min-width: 0; max-width: 100%; }
.pe-picture-head .widget-slider, .pe-picture-head .widget-text { max-width: 100%; }
.pe-slider-row { flex-wrap: wrap; align-items: center; column-gap: 8px; row-gap: 2px; }
.pe-slider-row .pe-amount, .pe-slider-row .pe-count { flex: 1 1 260px;
  width: auto !important; min-width: 220px; max-width: 440px; }
.pe-slider-row .pe-amount .slider-container { min-width: 100px; }
.pe-slider-row .pe-buttons { flex: 0 1 auto; min-width: 0; max-width: 100%; flex-wrap: wrap;
  row-gap: 2px; }
.pe-presenting .pe-picture-head, .pe-presenting .pe-explore-controls, .pe-presenting .pe-status,
.pe-presenting .widget-label, .pe-presenting .widget-readout { font-size: 15px; }
.pe-presenting .pe-count-line .widget-html-content,
.pe-presenting .pe-metric .widget-html-content { font-size: 14px; }
.pe-presenting .pe-explore-row { flex-direction: column-reverse; }
.pe-presenting .pe-button-note { display: none; }
.pe-presenting .pe-explore-controls { flex: 0 0 auto; max-width: 100%; }
.pe-presenting .pe-explore-picture { flex: 0 0 auto; width: 100%; }
.pe-count-line { font-weight: 600; }
.pe-count-line, .pe-input-error, .pe-control-error, .pe-button-note, .pe-summary {
  white-space: normal; overflow-wrap: anywhere;
}
.pe-count-line .widget-html-content, .pe-input-error .widget-html-content,
.pe-control-error .widget-html-content, .pe-button-note .widget-html-content,
.pe-summary .widget-html-content, .pe-metric .widget-html-content {
  white-space: normal; line-height: 1.35;
}
.pe-button-note { font-size: 12px; color: #555555; }
.pe-preview, .pe-history-image, .pe-compare-chart, .pe-weight-heatmap-picture {
  flex: 0 1 auto; max-width: 100%; height: auto !important; object-fit: contain;
  align-self: flex-start; }
.pe-history-picture, .pe-compare-picture { flex: 1 1 360px; min-width: 0; max-width: 100%; }
.pe-history-steps, .pe-compare-table { flex: 0 1 auto; min-width: 0; max-width: 100%; }
.pe-magnitudes-column { width: 100%; min-width: 0; }
.pe-magnitudes-picture svg { max-width: 100%; height: auto; }
.pe-zoom .jupyter-matplotlib-figure { overflow: visible; }
.pe-header { flex-wrap: wrap; align-items: baseline; column-gap: 8px; }
.pe-header .pe-tensor { flex: 0 1 460px; min-width: 300px; }
.pe-header .pe-device { flex: 0 0 180px; }
.pe-header .pe-summary { flex: 1 1 320px; min-width: 260px; }
.pe-snippet textarea, .pe-json textarea { white-space: pre; overflow-wrap: normal;
  overflow-x: auto; }
.pe-explorer table td, .pe-explorer table th { padding: 2px 10px 2px 0; text-align: left; }
.pe-explorer table td + td, .pe-explorer table th + th { padding-left: 10px; }
.pe-explorer table { max-width: 100%; }
.pe-explorer .widget-html-content { overflow-x: auto; }
.pe-explorer .lm-TabBar-content, .pe-explorer .p-TabBar-content { flex-wrap: wrap; }
.pe-explorer .lm-TabBar, .pe-explorer .p-TabBar { height: auto !important;
  max-height: none !important; min-height: 0; overflow: visible; }
.pe-explorer .lm-TabBar-tab, .pe-explorer .p-TabBar-tab { flex: 0 0 auto !important;
  max-width: none !important; min-width: 0 !important; }
.pe-explorer .widget-inline-hbox, .pe-explorer .widget-inline-vbox { max-width: 100%; }
.pe-explorer .widget-hbox { flex-wrap: wrap; max-width: 100%; }
.pe-explorer .widget-dropdown > select, .pe-explorer .widget-select > select {
  min-width: 0; flex: 1 1 auto; }
.pe-sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden;
  clip: rect(0 0 0 0); white-space: nowrap; }
"""


def stylesheet() -> widgets.HTML:
    """A fresh ``<style>`` widget holding :data:`CSS` (put one in the explorer's root)."""
    return widgets.HTML(value=f"<style>{CSS}</style>")
