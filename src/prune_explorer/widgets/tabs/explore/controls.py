"""The pruning controls: method, amount (fraction or count), n, dim, global options, view.

Which controls a method uses comes from the session's method table
(:data:`prune_explorer.session.steps.methods.METHODS`): ``amount``, ``n`` and ``dim`` settings show
their control, ``pruning_method`` shows the global options and ``mask`` the custom-mask note
and upload;
``pattern`` (``"N:M"``) and ``block`` (e.g. ``4,4``) those of the two hardware patterns.
The others are hidden and disabled.

Examples
--------
>>> c = PruningControls()
>>> c.method.value = "ln_structured"
>>> c.set_tensor(rank=4, left={"entries": 100, "dim": [8, 3, 3, 3]})
>>> sorted(name for name, w in c.optional.items() if w.layout.display != "none")
['amount', 'amount_mode', 'dim', 'importance', 'left', 'n']
>>> c.n.options  # only the norms that suit a 4-D tensor ('fro', 'nuc' would fail)
('1', '2', 'inf', '-inf')
>>> parse_n("inf"), parse_n("2"), parse_n("fro"), parse_n("1.5")
(inf, 2, 'fro', 1.5)
>>> parse_count("12")
12
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import traitlets

from prune_explorer.importance.criteria import CRITERIA
from prune_explorer.session.analysis.wording import noun, plural, slice_unit
from prune_explorer.session.steps.methods import GLOBAL_METHODS, METHODS, norm_suits_rank

from ...errors import WidgetInputError

__all__ = ["LAYOUT_CHOICES", "METHOD_CHOICES", "N_CHOICES", "PATTERN_CHOICES", "CountText",
           "PruningControls", "n_choices", "parse_block", "parse_count", "parse_n"]

#: Methods offered, in the order of the session's table (``remove`` is the Commit tab; methods
#: computed from calibration, which the explorer cannot run yet, are the session's only).
METHOD_CHOICES: tuple[tuple[str, str], ...] = tuple(
    ("custom mask (custom_from_mask)" if name == "custom_from_mask" else name, name)
    for name, spec in METHODS.items()
    if name != "remove" and spec.compute is None
)
#: Suggestions for the N:M pattern of ``semi_structured``; any "N:M" can be typed.
PATTERN_CHOICES = ("2:4", "1:4", "4:8", "1:2")
#: Suggestions for the norm order ``n``; any number can be typed. Only those that suit the
#: tensor on show are offered (:func:`n_choices`).
N_CHOICES = ("1", "2", "inf", "-inf", "fro", "nuc")
LAYOUT_CHOICES = (("matrix", "auto"), ("kernels", "kernels"), ("channels", "channels"))

_STYLE = {"description_width": "90px"}


def _wide() -> widgets.Layout:
    # One Layout per widget: a shared Layout would hide every widget that uses it at once.
    return widgets.Layout(width="380px")


def parse_n(text: str) -> int | float | str:
    """The norm order typed in the ``n`` box: an int, a float (``inf``, ``-inf``) or the text.

    Text that is not a number (``"fro"``, ``"nuc"``, typos) is passed on as it is, so the
    session's validation names what is accepted.
    """
    text = str(text).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def n_choices(rank: int) -> tuple[str, ...]:
    """The suggestions of :data:`N_CHOICES` that can prune a ``rank``-D tensor (the session's
    rule: 'nuc' only for 3-D, 'fro' up to 3-D)."""
    return tuple(n for n in N_CHOICES if norm_suits_rank(parse_n(n), rank))


def parse_count(text: Any, unit: str = "entry") -> int:
    """The whole number typed in the ``count`` box.

    Raises
    ------
    WidgetInputError
        The text is not a whole number ("2.5", "1e3", "ten"): it is refused, never rounded or
        stripped to another number. A negative count passes on (the session names its rule).
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    stripped = str(text).strip()
    if not re.fullmatch(r"[+-]?[0-9]+", stripped):
        raise WidgetInputError(
            f"count: must be a whole number of {noun(2, unit)} to prune (0, 1, 2, ...); "
            f"got {str(text)!r}"
        )
    return int(stripped)


class CountText(widgets.Text):  # type: ignore[misc]  # ipywidgets is untyped
    """The ``count`` box: holds the text as typed, so "2.5" reaches the explorer and is refused
    with a message (a number box drops the "." and shows 25). Code may assign an int."""

    value = traitlets.CUnicode("", help="the count as typed").tag(sync=True)


def parse_block(text: str) -> tuple[int, ...] | str:
    """The block shape typed in the ``block`` box ("4,4" or "4x4"), or the text if it is not
    one (the session's validation then names what is accepted)."""
    parts = str(text).replace("x", ",").split(",")
    try:
        return tuple(int(part) for part in parts)
    except ValueError:
        return str(text)


def uses(method: str) -> set[str]:
    """Optional controls the method needs (``amount``, ``n``, ``dim``, ``global``, ``custom``,
    ``importance`` for the methods that take a criterion's scores)."""
    out = set()
    for setting in METHODS[method].settings:
        out.add({"pruning_method": "global", "mask": "custom"}.get(setting, setting))
    if METHODS[method].scores:
        out.add("importance")
    return out


def _show(widget: widgets.Widget, visible: bool) -> None:
    widget.layout.display = "" if visible else "none"
    if hasattr(widget, "disabled"):
        widget.disabled = not visible


class PruningControls:
    """The widgets that describe one pruning step.

    Attributes
    ----------
    method, amount_mode, amount, count, left, n, dim, global_method, global_targets, custom,
    custom_upload, layout : ipywidgets widgets
        ``count`` holds text (:class:`CountText`); ``n`` offers only the norms that suit the
        tensor on show (:func:`n_choices`).
    optional : dict
        The widgets shown only for some methods, by name.
    box : ipywidgets.VBox
    """

    def __init__(self) -> None:
        self.method = widgets.Dropdown(
            options=METHOD_CHOICES, value="l1_unstructured", description="method",
            layout=_wide(), style=_STYLE,
        )
        self.amount_mode = widgets.ToggleButtons(
            options=(("fraction", "fraction"), ("count", "count")), value="fraction",
            description="amount as", style={**_STYLE, "button_width": "80px"}, layout=_wide(),
        )
        self.amount = widgets.FloatSlider(
            value=0.3, min=0.0, max=1.0, step=0.01, readout_format=".2f",
            continuous_update=True, description="amount", layout=_wide(), style=_STYLE,
        )
        self.count = CountText(value="0", description="count", continuous_update=False,
                               placeholder="a whole number", layout=_wide(), style=_STYLE)
        self.left = widgets.HTML(value="")
        self.n = widgets.Combobox(
            options=n_choices(2), value="2", ensure_option=False, description="n (norm)",
            placeholder=f"{', '.join(n_choices(2))} or a number", layout=_wide(), style=_STYLE,
        )
        self.dim = widgets.Dropdown(options=[0], value=0, description="dim", layout=_wide(),
                                    style=_STYLE)
        self.global_method = widgets.Dropdown(
            options=GLOBAL_METHODS, value="l1_unstructured", description="ranked by",
            layout=_wide(), style=_STYLE,
        )
        self.global_targets = widgets.SelectMultiple(
            options=[], value=[], rows=5, description="targets", layout=_wide(), style=_STYLE,
        )
        self.custom = widgets.HTML(value="")
        self.custom_upload = widgets.FileUpload(
            accept=".pt,.npy", multiple=False, description="Upload mask",
            tooltip="a .pt (torch.save of a tensor) or .npy file of 0/1 values, 1 = keep",
        )
        self.pattern = widgets.Combobox(
            options=PATTERN_CHOICES, value="2:4", ensure_option=False, description="pattern",
            placeholder="N:M, e.g. 2:4", layout=_wide(), style=_STYLE,
        )
        self.block = widgets.Text(value="4,4", description="block", placeholder="e.g. 4,4",
                                  layout=_wide(), style=_STYLE)
        self.layout = widgets.Dropdown(
            options=LAYOUT_CHOICES, value="auto", description="view", layout=_wide(), style=_STYLE
        )
        self.importance = widgets.Dropdown(
            options=list(CRITERIA), value="magnitude", description="importance",
            layout=_wide(), style=_STYLE,
        )
        self.optional: dict[str, widgets.Widget] = {
            "amount_mode": self.amount_mode,
            "amount": self.amount,
            "count": self.count,
            "left": self.left,
            "n": self.n,
            "dim": self.dim,
            "global_method": self.global_method,
            "global_targets": self.global_targets,
            "custom": self.custom,
            "custom_upload": self.custom_upload,
            "pattern": self.pattern,
            "block": self.block,
            "importance": self.importance,
        }
        self.box = widgets.VBox([
            self.method, self.amount_mode, self.amount, self.count, self.left, self.pattern,
            self.block, self.n, self.dim, self.global_method, self.global_targets, self.custom,
            self.custom_upload, self.importance, self.layout,
        ])
        # A tooltip on every control: the browser shows it on the label (no title="null")
        tips = {
            "method": "how the entries to prune are chosen",
            "amount_mode": "give the amount as a fraction of what is left, or as a count",
            "amount": "fraction of what is left (entries, or slices along dim) to prune",
            "count": "how many of what is left to prune (a whole number)",
            "n": "the norm that ranks the slices: 1, 2, inf, -inf or a number",
            "dim": "the dimension whose slices are pruned (and shown in the channels view)",
            "global_method": "how entries are ranked across the targets",
            "global_targets": "the tensors pruned together",
            "pattern": "N:M: keep N of every M neighbours",
            "block": "block shape, e.g. 4,4",
            "layout": "how the tensor is drawn: matrix, kernel tiles or one cell per slice",
            "importance": "what ranks the entries: |w|, or a criterion from Session.calibrate",
        }
        for name, tip in tips.items():
            widget = getattr(self, name)
            if not getattr(widget, "tooltip", None):
                widget.tooltip = tip
        self.rank = 2
        self.module_type: str | None = None
        self._left: Mapping[str, Any] = {"entries": 0, "dim": []}
        self.update_visibility()

    # -- state ------------------------------------------------------------------------------------
    @property
    def uses(self) -> set[str]:
        """Optional controls the chosen method needs."""
        return uses(self.method.value)

    def set_tensor(self, rank: int, left: Mapping[str, Any],
                   module_type: str | None = None) -> None:
        """Adapt to the chosen tensor: dim choices up to its rank, view choices, what is left.

        ``left`` holds ``"entries"`` (unpruned entries; over all targets for a global step) and
        ``"dim"`` (per dim, the slices with something left); ``module_type`` (the owning layer's
        class name) names what each dim holds (a ``Conv1D`` weight is (in, out)).
        """
        self.rank = rank
        self._left = left
        self.module_type = module_type
        offered = n_choices(rank)
        if tuple(self.n.options) != offered:
            self.n.options = offered
            self.n.placeholder = f"{', '.join(offered)} or a number"
        dims = list(range(max(rank, 1)))
        if list(self.dim.options) != dims:
            old = self.dim.value
            self.dim.options = dims
            self.dim.value = old if old in dims else 0
        layouts = [
            c for c in LAYOUT_CHOICES
            if (c[1] != "kernels" or rank in (3, 4)) and (c[1] != "channels" or rank >= 1)
        ]
        if list(self.layout.options) != layouts:
            old = self.layout.value
            self.layout.options = layouts
            self.layout.value = old if old in [v for _, v in layouts] else "auto"
        self.update_visibility()

    @property
    def units_left(self) -> tuple[int, str]:
        """``(count, unit)`` that ``amount`` is relative to for the chosen method and dim (the
        unit singular, for :func:`~prune_explorer.session.analysis.wording.plural`)."""
        if "dim" in self.uses:
            per_dim: Sequence[int] = self._left.get("dim", [])
            dim = self.dim.value
            left = int(per_dim[dim]) if dim < len(per_dim) else 0
            return left, slice_unit(self.rank, dim, self.module_type)
        return int(self._left.get("entries", 0)), "entry"

    def update_visibility(self) -> None:
        """Show the controls the method uses, hide (and disable) the others."""
        used = self.uses
        counting = self.amount_mode.value == "count"
        _show(self.amount_mode, "amount" in used)
        _show(self.amount, "amount" in used and not counting)
        _show(self.count, "amount" in used and counting)
        _show(self.left, "amount" in used)
        _show(self.n, "n" in used)
        _show(self.dim, "dim" in used or self.layout.value == "channels")
        _show(self.global_method, "global" in used)
        _show(self.global_targets, "global" in used)
        _show(self.custom, "custom" in used)
        _show(self.custom_upload, "custom" in used)
        _show(self.pattern, "pattern" in used)
        _show(self.block, "block" in used)
        _show(self.importance, "importance" in used and (
            "global" not in used or self.global_method.value == "l1_unstructured"))
        count, unit = self.units_left
        self.left.value = f'<span class="pe-left-text">{plural(count, unit)} left to prune</span>'

    def set_view(self, view: str) -> None:
        """Show the picture as ``view``: ``"matrix"``, ``"kernels"`` or ``"channels"``.

        Only the views offered for the current tensor are accepted (kernels: rank 3 or 4).
        """
        offered = {label: value for label, value in self.layout.options}
        if view not in offered:
            raise WidgetInputError(
                f"view must be one of {list(offered)} for this rank-{self.rank} tensor; "
                f"got {view!r}"
            )
        self.layout.value = offered[view]

    def amount_value(self) -> float | int:
        """The amount as the session takes it: a float fraction or an int count."""
        if self.amount_mode.value == "count":
            return parse_count(self.count.value, self.units_left[1])
        return float(self.amount.value)

    def sync_count(self) -> None:
        """Set the count to what the fraction means now (used when switching to count)."""
        count, _ = self.units_left
        self.count.value = str(round(self.amount.value * count))

    def settings(self, custom_mask: Any = None) -> dict[str, Any]:
        """Keyword settings of the chosen method for ``Session.preview``/``apply``."""
        out: dict[str, Any] = {}
        used = self.uses
        if "global" in used:
            out["pruning_method"] = self.global_method.value
        if "amount" in used:
            out["amount"] = self.amount_value()
        if "n" in used:
            out["n"] = parse_n(self.n.value)
        if "dim" in used:
            out["dim"] = int(self.dim.value)
        if "custom" in used:
            out["mask"] = custom_mask
        if "pattern" in used:
            out["pattern"] = str(self.pattern.value).strip()
        if "block" in used:
            out["block"] = parse_block(self.block.value)
        if not self.importance.disabled and self.importance.value != "magnitude":
            out["importance"] = self.importance.value
        return out

    def observe_all(self, callback: Any) -> None:
        """Call ``callback(change)`` when any control's value changes."""
        for widget in (self.method, self.amount_mode, self.amount, self.count, self.n, self.dim,
                       self.global_method, self.global_targets, self.layout, self.pattern,
                       self.block, self.importance):
            widget.observe(callback, names="value")
