"""Sliders whose value the kernel does not echo back to the page.

ipywidgets 8 echoes every value a front end sends back to it, so that other views of the widget
stay in step. During a drag the page sends a value every few milliseconds and the echoes of the
intermediate ones keep arriving after the last: in ``benchmarks/bench_browser.py`` the amount
handle's value changed again after the last picture in 5 of 6 drags of a run; with these
sliders, in none (two runs, 4096x4096 fp32 and bf16). Only this page sets these sliders, so
there is no other view to keep in step; a value the kernel sets itself still reaches the page.

Examples
--------
>>> s = FloatSlider(value=0.3, min=0.0, max=1.0)
>>> s.trait_metadata("value", "echo_update"), s.value
(False, 0.3)
"""

from __future__ import annotations

import ipywidgets as widgets
import traitlets

__all__ = ["FloatSlider", "IntSlider"]


class FloatSlider(widgets.FloatSlider):  # type: ignore[misc]  # ipywidgets is untyped
    """``ipywidgets.FloatSlider`` without the echo of received values (module docstring)."""

    value = traitlets.CFloat(0.0, help="Float value").tag(sync=True, echo_update=False)


class IntSlider(widgets.IntSlider):  # type: ignore[misc]  # ipywidgets is untyped
    """``ipywidgets.IntSlider`` without the echo of received values (module docstring)."""

    value = traitlets.CInt(0, help="Int value").tag(sync=True, echo_update=False)
