"""The explorer's widget registry (:class:`UI`) and its header: tensor picker, device, summary."""

from __future__ import annotations

import ipywidgets as widgets
import torch
from torch import nn

__all__ = ["UI", "add_header", "devices", "model_device"]


class UI(dict[str, widgets.Widget]):
    """The explorer's widgets by name; ``ui.amount`` is ``ui["amount"]`` (CSS ``pe-amount``)."""

    def __getattr__(self, name: str) -> widgets.Widget:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"Explorer.ui has no widget {name!r}; it has {sorted(self)}"
                                 ) from None

    def add(self, name: str, widget: widgets.Widget) -> widgets.Widget:
        """Register ``widget`` as ``name`` and give it the CSS class ``pe-<name>``."""
        widget.add_class("pe-" + name.replace("_", "-"))
        self[name] = widget
        return widget


def devices() -> list[str]:
    """The devices the model may move to: ``"cpu"`` and each visible CUDA device."""
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return out


def model_device(model: nn.Module) -> str:
    """Where ``model`` lives, as the device picker names it (``"cpu"``, ``"cuda:0"``...)."""
    for tensor in (*model.parameters(), *model.buffers()):
        device = tensor.device
        if device.type == "cuda":
            return f"cuda:{device.index or 0}"
        return str(device)
    return "cpu"


def add_header(ui: UI, model: nn.Module) -> None:
    """Add the header widgets to ``ui``: ``tensor`` (picker), ``device`` and ``summary``.

    Examples
    --------
    >>> ui = UI()
    >>> add_header(ui, torch.nn.Linear(2, 2))
    >>> ui.device.value, sorted(ui)
    ('cpu', ['device', 'summary', 'tensor'])
    """
    ui.add("tensor", widgets.Dropdown(options=[], description="tensor",
                                      layout=widgets.Layout(width="460px"),
                                      style={"description_width": "60px"}))
    device = model_device(model)
    choices = devices()
    ui.add("device", widgets.Dropdown(options=choices + [device] * (device not in choices),
                                      value=device, description="device",
                                      layout=widgets.Layout(width="180px"),
                                      style={"description_width": "50px"}))
    ui.add("summary", widgets.HTML(value=""))
