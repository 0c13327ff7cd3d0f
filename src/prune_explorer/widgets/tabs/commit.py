"""The Commit tab: make pruning permanent (``prune.remove``), after seeing what will change.

Pick one pruned tensor or all of them (``pe-commit-target``) and press *Review*
(``pe-commit-review``): the tab lists the memory before and after and the ``state_dict`` keys
that disappear (``<name>_orig``, ``<name>_mask``) and appear (``<name>``). Only then does
*Confirm commit* (``pe-commit-confirm``) do it. Any change to the choice or to the session
cancels the review.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 2)), debounce=None)
>>> ex.ui.apply.click()
>>> ex.ui.commit_review.click()
>>> ex.commit_pane.reviewed, ex.commit_pane.keys_removed
(('0.weight',), ['0.weight_orig', '0.weight_mask'])
>>> ex.ui.commit_confirm.click()
>>> sorted(ex.model.state_dict())
['0.bias', '0.weight']
>>> ex.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from prune_explorer.session.analysis.wording import plural

from ..errors import WidgetInputError
from ..parts.html import esc, human_bytes, message
from ..parts.pane import Pane

if TYPE_CHECKING:
    from ..context import TabContext

__all__ = ["ALL", "CommitPane"]

#: Value of the "all pruned tensors" choice.
ALL = "__all__"


class CommitPane(Pane):
    """Target choice, review, confirm and cancel.

    Attributes
    ----------
    reviewed : tuple of str or None
        Tensors the last review covered; Confirm commits exactly these. None: no valid review.
    keys_removed, keys_added : list of str
        ``state_dict`` keys the reviewed commit removes and adds.
    """

    def __init__(self, explorer: TabContext) -> None:
        self.ex = explorer
        ui = explorer.ui
        self.target = ui.add("commit_target", widgets.Dropdown(
            options=[("all pruned tensors", ALL)], value=ALL, description="commit",
            layout=widgets.Layout(width="420px"),
        ))
        self.review = ui.add("commit_review", widgets.Button(
            description="Review", tooltip="show what the commit would change"))
        self.confirm = ui.add("commit_confirm", widgets.Button(
            description="Confirm commit", button_style="danger", disabled=True,
            tooltip="prune.remove: permanent, cannot be undone",
            layout=widgets.Layout(display="none"),
        ))
        self.cancel = ui.add("commit_cancel", widgets.Button(
            description="Cancel", disabled=True, layout=widgets.Layout(display="none")))
        self.details = ui.add("commit_details", widgets.HTML(value=""))
        hint = widgets.HTML(
            "Commit calls <code>prune.remove</code>: the pruned values become the parameter "
            "and the <code>_orig</code> copy and <code>_mask</code> buffer are freed. It cannot "
            "be undone. Review first, then confirm."
        )
        self.box = widgets.VBox([
            hint,
            widgets.HBox([self.target, self.review, self.confirm, self.cancel]),
            self.details,
        ])
        self.reviewed: tuple[str, ...] | None = None
        self.keys_removed: list[str] = []
        self.keys_added: list[str] = []
        self.target.observe(lambda _: self._drop_review(), names="value")
        self.review.on_click(lambda _: self.do_review())
        self.confirm.on_click(lambda _: self.do_confirm())
        self.cancel.on_click(lambda _: self.do_cancel())

    # -- state ------------------------------------------------------------------------------------
    def pruned(self) -> list[str]:
        """Tensors that are pruned now (those a commit can make permanent)."""
        memory = self.ex.session.memory_report()
        return [str(n) for n in memory["name"] if n != "TOTAL"]

    def invalidate(self) -> None:
        """The session changed: new choices, and any review is void."""
        pruned = self.pruned()
        options = [(f"all pruned tensors ({len(pruned)})", ALL), *[(n, n) for n in pruned]]
        with self.ex.quiet():
            old = self.target.value
            self.target.options = options
            self.target.value = old if old in [v for _, v in options] else ALL
        # Review only when there is something to commit; else say so by the button
        self.review.disabled = not pruned
        self.review.tooltip = ("show what the commit would change" if pruned else
                               "Review is off: nothing to commit; no tensor is pruned")
        self._drop_review("" if pruned else "Review is off: nothing to commit; no tensor is "
                          "pruned (apply a step first).")

    def _drop_review(self, note: str = "") -> None:
        self.reviewed = None
        self.keys_removed, self.keys_added = [], []
        for button in (self.confirm, self.cancel):
            button.disabled = True
            button.layout.display = "none"
        self.details.value = message("info", note) if note else ""

    # -- actions ----------------------------------------------------------------------------------
    def do_review(self) -> None:
        """Show memory and state_dict changes of the chosen commit; enable Confirm."""
        self.ex.act("Review commit", lambda _: self._review(),
                    done=lambda names: f"Review: committing {plural(len(names), 'tensor')} "
                                       "frees the memory shown; press Confirm commit to do it.")

    def _review(self) -> tuple[str, ...]:
        self._drop_review()
        pruned = self.pruned()
        names = tuple(pruned) if self.target.value == ALL else (self.target.value,)
        if not names:
            raise WidgetInputError("Commit: nothing to commit; no tensor is pruned")
        missing = [n for n in names if n not in pruned]
        if missing:
            raise WidgetInputError(f"Commit: {missing[0]!r} is not pruned; nothing to commit")
        review = self.ex.session.review_commit(names)  # the numbers commit will report
        removed, added = list(review.keys_removed), list(review.keys_added)
        before, after = review.bytes_before, review.bytes_after
        rows = "".join(
            f"<tr><td>{esc(n)}</td><td>{human_bytes(b)}</td><td>{human_bytes(a)}</td>"
            f"<td>{human_bytes(f)}</td></tr>"
            for n, b, a, f in review.rows
        )
        self.details.value = (
            '<div class="pe-commit-summary">'
            f"<b>Commit {plural(len(names), 'tensor')}</b>: memory {human_bytes(before)} → "
            f"{human_bytes(after)} (frees {human_bytes(before - after)}). "
            "The pruned values become the parameter; the original values and masks are "
            "dropped. <b>This cannot be undone.</b></div>"
            '<table class="pe-commit-table" style="font-size:12px"><thead><tr><th>Tensor</th>'
            "<th>Before</th><th>After</th><th>Freed</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            f'<div class="pe-commit-keys-removed">state_dict keys removed: '
            f"{esc(', '.join(removed) or '-')}</div>"
            f'<div class="pe-commit-keys-added">state_dict keys added: '
            f"{esc(', '.join(added) or '-')}</div>"
        )
        self.reviewed = names
        self.keys_removed, self.keys_added = removed, added
        for button in (self.confirm, self.cancel):
            button.disabled = False
            button.layout.display = ""
        return names

    def do_cancel(self) -> None:
        """Drop the review (the Cancel button); the status line says nothing was committed,
        in place of the review's "press Confirm commit"."""
        self._drop_review("Commit cancelled.")
        self.ex.status.show("info", "Commit cancelled: nothing was committed; press Review "
                                    "to review again.")

    def do_confirm(self) -> None:
        """Commit the reviewed tensors (refuses without a review)."""
        names = self.reviewed

        def run(_: Any) -> Any:
            if names is None:
                raise WidgetInputError("Commit: press Review first, then Confirm commit")
            return self.ex.session.commit(list(names))

        self.ex.act("Commit", run,
                    done=lambda r: f"Committed {plural(len(r.names), 'tensor')}; freed "
                                   f"{human_bytes(r.freed)}.")
