"""Sliders whose value the kernel does not echo back to the page.

ipywidgets 8 echoes every value a front end sends back to it, so that other views stay in step.
During a fast drag the echo of an intermediate value can arrive after the page has moved on and
overwrite its newer value, which is then never sent: seen in a real browser
(``benchmarks/bench_browser.py``), the amount handle ended at 0.40 while the readout, the kernel
and so the picture said 0.42. Without the echo the page's last value is the one the kernel gets;
a value the kernel sets itself still reaches the page as usual.

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
