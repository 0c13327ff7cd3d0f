"""A button that copies a text to the clipboard, in the browser.

Python cannot reach the browser's clipboard, and ``ipywidgets.HTML`` strips scripts, so the
button is a tiny `anywidget <https://anywidget.dev>`_ (a small, widely used package that ships
its own JupyterLab extension): a few lines of JavaScript call ``navigator.clipboard.writeText``
on click, with the ``execCommand("copy")`` fallback for pages that are not a secure context.
Each copy the browser made is counted in :attr:`CopyButton.copies`; if the browser refuses,
the button says to select the text and press Ctrl+C.

Examples
--------
>>> button = CopyButton(text="prune.l1_unstructured(model.fc, 'weight', amount=0.5)")
>>> button.label, button.copies
('Copy', 0)
>>> button
CopyButton(label='Copy', 53 characters, copies=0)
"""

from __future__ import annotations

import anywidget
import traitlets

__all__ = ["CopyButton"]

_ESM = r"""
function copyWithSelection(text) {
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
  area.remove();
  return ok;
}

function render({ model, el }) {
  const button = document.createElement("button");
  button.className = "jupyter-widgets jupyter-button widget-button pe-copy-button";
  button.type = "button";
  const showLabel = () => { button.textContent = model.get("label"); };
  showLabel();
  model.on("change:label", showLabel);
  button.addEventListener("click", async () => {
    const text = model.get("text");
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch (err) {
      ok = copyWithSelection(text);
    }
    if (ok) {
      model.set("copies", model.get("copies") + 1);
      model.save_changes();
      button.textContent = "Copied ✓";
    } else {
      button.textContent = "Copy blocked: select the text, then Ctrl+C";
    }
    setTimeout(showLabel, 2000);
  });
  el.appendChild(button);
}

export default { render };
"""


class CopyButton(anywidget.AnyWidget):
    """Copies :attr:`text` to the clipboard when clicked in the browser.

    Attributes
    ----------
    text : str
        What a click copies.
    label : str
        The button's caption.
    copies : int
        Copies the browser reports as done (observe it to confirm in Python).
    """

    _esm = _ESM
    text = traitlets.Unicode("").tag(sync=True)
    label = traitlets.Unicode("Copy").tag(sync=True)
    copies = traitlets.Int(0).tag(sync=True)

    def __repr__(self) -> str:
        return (f"CopyButton(label={self.label!r}, {len(self.text):,} characters, "
                f"copies={self.copies})")
