"""The model's behaviour beside the mask: ``explore(model, evaluate=fn)``.

``fn(model) -> float`` (or a dict of named floats) is called on a trial copy
(:func:`prune_explorer.session.model.trial.trial_copy`) for the current state and for the previewed
step, on a background thread (synchronously when ``debounce`` is None), off the slider path:
a newer preview supersedes a pending evaluation, and a result that arrives after a newer
request is dropped. The model itself is never touched.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 4))
>>> zeros = lambda m: float((m[0].weight == 0).float().mean())
>>> ex = Explorer(model, debounce=None, evaluate=zeros)
>>> ex.ui.amount.value = 0.5
>>> ex.metric.now, ex.metric.after
({'score': 0.0}, {'score': 0.5})
>>> ex.close()

The readout is named after what ``fn`` measures: ``Explorer(..., metric_label="test
accuracy")``, else ``fn.metric_label`` when the function carries one (the demo's
``evaluate`` does), else "score". A dict names its own values. While a newer evaluation is
due, the readout is greyed and says "computing…"; it is never shown beside a picture it does
not belong to without that mark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets
import torch
from torch import nn

from prune_explorer.session import Session
from prune_explorer.session.model.trial import trial_copy

from ...parts.html import esc
from ...parts.scheduler import LatestOnly
from ...parts.status import describe_error

__all__ = ["MetricReadout"]

Evaluate = Callable[[nn.Module], "float | Mapping[str, float]"]


def _as_dict(value: Any, label: str = "score") -> dict[str, float]:
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    return {label: float(value)}


def metric_label(evaluate: Any, label: str | None = None) -> str:
    """The name of what ``evaluate`` measures: ``label``, else its ``metric_label``
    attribute, else "score".

    >>> metric_label(lambda m: 0.0), metric_label(lambda m: 0.0, "loss")
    ('score', 'loss')
    """
    if label is not None:
        return str(label)
    return str(getattr(evaluate, "metric_label", None) or "score")


def _text(value: float) -> str:
    return f"{100 * value:.1f}%" if 0.0 <= value <= 1.0 else f"{value:.4g}"


class MetricReadout:
    """``evaluate`` for the current state and the previewed step (HTML ``pe-metric``).

    Attributes
    ----------
    html : ipywidgets.HTML
    now, after : dict of str to float, or None
        The last values for the current state and for the previewed step.
    error : str or None
        Why the last evaluation failed.
    runner : LatestOnly
    """

    def __init__(self, session: Session, evaluate: Evaluate, *, debounce: float | None,
                 label: str | None = None) -> None:
        if not callable(evaluate):
            raise TypeError(f"Explorer: evaluate must be a callable fn(model) -> float or dict; "
                            f"got {type(evaluate).__name__}")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise TypeError(f"Explorer: metric_label must be a non-empty str; got {label!r}")
        self.session = session
        self.evaluate = evaluate
        self.label = metric_label(evaluate, label)
        self.html = widgets.HTML(value="")
        self.html.add_class("pe-metric")
        self.now: dict[str, float] | None = None
        self.after: dict[str, float] | None = None
        self.error: str | None = None
        self._now_key: Any = None
        # Off the slider path: wait a little for the slider to settle (debounce) when live.
        self.runner = LatestOnly(self._run, debounce=None if debounce is None else
                                 max(debounce, 0.3), on_error=self._failed,
                                 name="prune-explorer-metric")

    def request(self, version: int, masks: Mapping[str, torch.Tensor] | None) -> None:
        """Evaluate the state of session ``version`` and, with ``masks``, the previewed step;
        the values on show are marked "computing…" until then."""
        self.mark_stale("computing…")
        self.runner.request((version, masks))

    @property
    def stale(self) -> bool:
        """True while the values on show are not of the current picture."""
        return "pe-stale" in self.html._dom_classes

    def mark_stale(self, note: str = "not of the current settings") -> None:
        """Grey the values on show and say why (the next result restores them)."""
        self.html.add_class("pe-stale")
        self._show(note)

    def _run(self, what: tuple[int, Mapping[str, torch.Tensor] | None]) -> None:
        version, masks = what
        if self._now_key != version:
            now = _as_dict(self.evaluate(trial_copy(self.session)), self.label)
            if self.runner.pending:
                return  # superseded: a newer request runs next
            self.now, self._now_key = now, version
        after = None if masks is None else _as_dict(
            self.evaluate(trial_copy(self.session, masks)), self.label)
        if self.runner.pending:
            return
        self.after, self.error = after, None
        self.html.remove_class("pe-stale")
        self._show()

    def _show(self, note: str | None = None) -> None:
        rows = []
        for key, value in (self.now or {}).items():
            text = f"{esc(key)}: now {_text(value)}"
            if self.after is not None and key in self.after:
                after = self.after[key]
                change = after - value
                shift = (f"{100 * change:+.1f} points" if min(value, after) >= 0
                         and max(value, after) <= 1 else f"{change:+.4g}")
                text += f" → after this step {_text(after)} ({shift})"
            rows.append(f"<div>{text}</div>")
        if note is not None and rows:  # on the last line: the readout keeps its height
            rows[-1] = rows[-1][:-len("</div>")] + (
                f' <span class="pe-metric-note">({esc(note)})</span></div>')
        elif note is not None:
            rows.append(f'<div class="pe-metric-note">{esc(self.label)}: {esc(note)}</div>')
        self.html.value = "".join(rows)

    def _failed(self, err: BaseException) -> None:
        self.error = describe_error(err)
        self.html.remove_class("pe-stale")
        self.html.value = f"<div>{esc(self.label)}: evaluate failed: {esc(self.error)}</div>"

    def close(self) -> None:
        """Stop the background evaluations."""
        self.runner.close()

    def __repr__(self) -> str:
        return f"MetricReadout(now={self.now}, after={self.after}, error={self.error!r})"
