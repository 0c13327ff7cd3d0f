"""Colours, colour maps and title text shared by every picture.

Colour choices are made for readers with colour-vision deficiencies:

* masks use the ``cividis`` map (designed to read the same for the common colour-vision
  deficiencies), reversed so that a kept weight is dark blue and a pruned weight is pale
  yellow -- pruned cells look like holes in the paper;
* the accent colours come from the Okabe-Ito palette (blue / orange / vermillion / sky blue),
  and every categorical encoding is doubled by a second cue (hatching, marker or line style);
* every picture carries a colour bar or a legend that names what the colours mean;
* one meaning per colour, in every picture, notebook and document: dark blue = kept, pale
  yellow = pruned (before the step on show), vermillion = pruned by the step on show, sky
  blue = revived; a weight-magnitude picture draws kept weights in blues and pruned cells in
  the same lemon yellow (and, on a log scale, values exactly 0 that are not pruned light
  grey); charts of global vs local pruning draw global reddish purple and
  local bluish green (in bars and in the sensitivity curves, whose tensors differ by marker
  and a grey of their own).

Examples
--------
>>> from prune_explorer.viz.style import format_title
>>> format_title(name="fc.weight", method="l1_unstructured", settings={"amount": 0.5},
...              sparsity=0.5)
'fc.weight\\nl1_unstructured(amount=0.5) · sparsity 50.0%'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib as mpl
from matplotlib.colors import Colormap, LinearSegmentedColormap, to_rgb

# Okabe-Ito palette (colour-blind safe).
BLUE = "#0072B2"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
VERMILLION = "#D55E00"
GREEN = "#009E73"
PURPLE = "#CC79A7"
YELLOW = "#F0E442"
BLACK = "#000000"
OKABE_ITO = (BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY_BLUE, YELLOW, BLACK)

# The two ends of the reversed cividis map used for masks.
KEPT_COLOR = "#00224e"  # cividis(0.0): dark blue
PRUNED_COLOR = "#fee838"  # cividis(1.0): lemon yellow
NEW_PRUNED_COLOR = VERMILLION  # units newly pruned by a step
REVIVED_COLOR = SKY_BLUE  # units pruned before and kept after (only after an undo / custom mask)
MAGNITUDE_PRUNED_COLOR = PRUNED_COLOR  # pruned cells in a weight-magnitude picture
GAP_COLOR = "#ffffff"  # the 1-cell gaps between kernel tiles
ZERO_COLOR = "#c8c8c8"  # light grey: exactly 0 and not pruned, on a log scale (a dead input)
# Global and local pruning in charts (never a mask colour: blue and orange read as kept and
# pruned by a step next to the mask pictures).
GLOBAL_COLOR = PURPLE  # reddish purple
LOCAL_COLOR = GREEN  # bluish green

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def mask_cmap() -> Colormap:
    """Colour map for kept fractions: 1 (kept) is dark blue, 0 (pruned) is lemon yellow.

    Cells without any element (gaps between kernel tiles) are drawn white.

    Examples
    --------
    >>> from matplotlib.colors import to_hex
    >>> cmap = mask_cmap()
    >>> to_hex(cmap(1.0)), to_hex(cmap(0.0))
    ('#00224e', '#fee838')
    """
    return mpl.colormaps["cividis_r"].with_extremes(bad=GAP_COLOR)


def magnitude_cmap() -> Colormap:
    """Colour map for weight magnitudes: light to dark blue; fully pruned cells lemon yellow
    (:data:`PRUNED_COLOR`, as in every mask picture).

    Examples
    --------
    >>> from matplotlib.colors import to_hex
    >>> to_hex(magnitude_cmap().get_bad())
    '#fee838'
    """
    blues = mpl.colormaps["Blues"]
    colours = [blues(0.12 + 0.88 * i / 255) for i in range(256)]
    cmap = LinearSegmentedColormap.from_list("prune_magnitude", colours)
    return cmap.with_extremes(bad=MAGNITUDE_PRUNED_COLOR)


def overlay_cmap(colour: str, name: str) -> Colormap:
    """Single-hue colour map whose opacity grows with the value (0.55 at 0, opaque at 1).

    Used to lay "newly pruned" or "revived" fractions over a mask picture: any cell that
    contains such a unit gets at least a clearly visible tint.

    Examples
    --------
    >>> cmap = overlay_cmap("#D55E00", "new")
    >>> round(float(cmap(0.0)[3]), 2), round(float(cmap(1.0)[3]), 2)
    (0.55, 1.0)
    """
    r, g, b = to_rgb(colour)
    return LinearSegmentedColormap.from_list(name, [(r, g, b, 0.55), (r, g, b, 1.0)]).with_extremes(
        bad=(0.0, 0.0, 0.0, 0.0)
    )


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def format_settings(settings: Mapping[str, Any] | str | None) -> str:
    """Render method settings as ``key=value`` pairs.

    Examples
    --------
    >>> format_settings({"amount": 0.3, "n": 2, "dim": 0})
    'amount=0.3, n=2, dim=0'
    >>> format_settings(None)
    ''
    """
    if settings is None:
        return ""
    if isinstance(settings, str):
        return settings
    return ", ".join(f"{key}={_format_value(value)}" for key, value in settings.items())


def format_title(
    *,
    name: str | None = None,
    method: str | None = None,
    settings: Mapping[str, Any] | str | None = None,
    sparsity: float | None = None,
    title: str | None = None,
) -> str:
    """Build a picture title that states tensor, method, settings and sparsity.

    The first line is ``title`` (or ``name``); the second line holds the method with its
    settings and the sparsity, each only when given.

    Examples
    --------
    >>> format_title(name="conv.weight", method="ln_structured",
    ...              settings={"amount": 0.25, "n": 2, "dim": 0})
    'conv.weight\\nln_structured(amount=0.25, n=2, dim=0)'
    >>> format_title(sparsity=0.125)
    'sparsity 12.5%'
    """
    first = title if title is not None else (name or "")
    details = []
    if method:
        details.append(f"{method}({format_settings(settings)})")
    elif settings:
        details.append(format_settings(settings))
    if sparsity is not None:
        details.append(f"sparsity {100.0 * sparsity:.1f}%")
    second = " · ".join(details)
    return "\n".join(part for part in (first, second) if part)
