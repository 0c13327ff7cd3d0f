"""The Export tab: the session's plan as a Python snippet and as JSON; import a JSON plan.

The tab is built when it is shown (and rebuilt on every change while it is): the snippet of a
large custom mask is big, and nothing is computed or sent to the browser for a hidden tab.
Both texts sit in text areas you can select, each with a *Copy* button that puts it on the
clipboard (``pe-copy-snippet``, ``pe-copy-json``; see :mod:`..parts.copybutton`), and behind
download links (``pe-download-snippet``, ``pe-download-json``, ``data:`` URIs, no server
round trip). To import, paste a plan into ``pe-import-text`` or upload a ``.json`` file
(``pe-import-upload``, which fills the text area), then press *Import plan* (``pe-import``).
The plan is parsed strictly (``Plan.from_json``) and applied on top of the current state in one
session transaction (``Session.apply_all``): if any step fails, or the kernel is interrupted, the
steps already applied are undone exactly, commits included; the error is reported in the
status line and nothing changes. *Import plan* is on only for a plan the session would apply
(``Plan.from_json``, then ``Session.plan_blocker``); when it is off, the note under it
(``pe-import-note``) says why. A plan that starts with every step the session already holds
(the Export tab's own plan, pasted back, maybe extended) is not stacked silently: the pane asks
(``pe-import-row``) whether to apply only the new steps (``pe-import-new``), all of them again
(``pe-import-again``), or nothing (``pe-import-cancel``).

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 2)), debounce=None)
>>> ex.ui.snippet.value  # the Export tab is not on show: nothing built
''
>>> ex.ui.tabs.selected_index = 4  # Export
>>> "from torch.nn.utils import prune" in ex.ui.snippet.value
True
>>> ex.ui.import_text.value = '{"format": "prune-explorer-plan", "version": 1, "steps": [7]}'
>>> ex.ui.import_plan.disabled
True
>>> print(ex.export_pane.import_why)
steps[0]: a step must be a JSON object; got int
>>> ex.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from prune_explorer.session import InvalidPlanError, Plan
from prune_explorer.session.analysis.wording import plural
from prune_explorer.session.plans.format import plan_text

from ..errors import WidgetInputError
from ..parts.copybutton import CopyButton
from ..parts.html import download_link, message, why_off
from ..parts.pane import Pane
from ..parts.status import Progress, human_error
from .explore.maskfile import uploaded_file

if TYPE_CHECKING:
    from ..context import TabContext

__all__ = ["ExportPane"]

_TEXT_LAYOUT = {"width": "96%", "height": "220px"}


def _uploaded_text(value: Any) -> tuple[str, str] | None:
    """``(file name, text)`` of the first uploaded file, or None if there is none."""
    found = uploaded_file(value)
    if found is None:
        return None
    name, raw = found
    try:
        return name, plan_text(raw, where=f"Import plan: file {name!r}")  # as Plan.from_json
    except InvalidPlanError as err:
        raise WidgetInputError(str(err)) from None


class ExportPane(Pane):
    """Snippet, JSON, download links and the import controls.

    Attributes
    ----------
    imported : Plan or None
        The last plan imported successfully.
    """

    def __init__(self, explorer: TabContext) -> None:
        self.ex = explorer
        ui = explorer.ui
        self.snippet = ui.add("snippet", widgets.Textarea(
            value="", description="", layout=widgets.Layout(**_TEXT_LAYOUT)))
        self.json = ui.add("json", widgets.Textarea(
            value="", description="", layout=widgets.Layout(**_TEXT_LAYOUT)))
        self.copy_snippet = ui.add("copy_snippet", CopyButton(label="Copy snippet"))
        self.copy_json = ui.add("copy_json", CopyButton(label="Copy JSON"))
        self.downloads = ui.add("download", widgets.HTML(value=""))
        self.note = ui.add("export_note", widgets.HTML(value=""))
        self.import_text = ui.add("import_text", widgets.Textarea(
            value="", placeholder="paste a plan (JSON) here, or upload a .json file",
            layout=widgets.Layout(width="96%", height="120px")))
        self.upload = ui.add("import_upload", widgets.FileUpload(
            accept=".json,application/json", multiple=False, description="Upload .json"))
        self.import_button = ui.add("import_plan", widgets.Button(
            description="Import plan", button_style="primary",
            tooltip="check the plan, then apply its steps to this model"))
        self.import_note = ui.add("import_note", widgets.HTML(value=""))  # why Import is off
        self.import_note.add_class("pe-button-note")
        # Asked when the plan starts with the session's own steps (re-importing its export)
        self.import_question = ui.add("import_question", widgets.HTML(value=""))
        self.import_new = ui.add("import_new", widgets.Button(
            description="Apply the new steps", button_style="primary",
            tooltip="apply only the plan's steps after those the session already holds"))
        self.import_again = ui.add("import_again", widgets.Button(
            description="Apply all again", button_style="warning",
            tooltip="apply every step of the plan on top: its steps are applied twice"))
        self.import_cancel = ui.add("import_cancel", widgets.Button(
            description="Cancel", tooltip="apply nothing"))
        self.import_row = widgets.HBox(
            [self.import_question, self.import_new, self.import_again, self.import_cancel],
            layout=widgets.Layout(flex_flow="row wrap", display="none"))
        self.import_row.add_class("pe-import-row")
        self._asked: Plan | None = None  # the plan the question is about
        self.box = widgets.VBox([
            self.note,
            widgets.HBox([widgets.HTML("<b>Python snippet</b> (stock torch.nn.utils.prune; "
                                       "binds to <code>model</code>)"), self.copy_snippet]),
            self.snippet,
            widgets.HBox([widgets.HTML("<b>Plan as JSON</b>"), self.copy_json]),
            self.json,
            self.downloads,
            widgets.HTML("<b>Import a plan</b>"),
            self.import_text,
            widgets.HBox([self.upload, self.import_button]),
            self.import_note,
            self.import_row,
        ])
        self.imported: Plan | None = None
        self.import_why: str | None = None
        self.import_text.observe(lambda _: self.refresh_import(), names="value")
        self.refresh_import()
        self.upload.observe(self._on_upload, names="value")
        for button, what in ((self.copy_snippet, "the Python snippet"),
                             (self.copy_json, "the plan as JSON")):
            button.observe(lambda _, what=what: self.ex.status.show(
                "ok", f"Copied {what} to the clipboard."), names="copies")
        self.import_button.on_click(lambda _: self.do_import())
        self.import_new.on_click(lambda _: self._answer("new"))
        self.import_again.on_click(lambda _: self._answer("again"))
        self.import_cancel.on_click(lambda _: self._answer("cancel"))

    @property
    def visible(self) -> bool:
        """Whether the Export tab is on show (its content is built only then)."""
        return self.ex.shows(self)

    def invalidate(self) -> None:
        """The session changed: rebuild now if on show, else empty the pane until it is shown.

        The snippet and the download links can be large (custom masks), so they are not built
        for a pane nobody looks at.
        """
        self.refresh_import()
        if self.visible:
            self.refresh()
            return
        self.snippet.value = self.json.value = self.downloads.value = ""
        self.copy_snippet.text = self.copy_json.text = ""

    def refresh(self) -> None:
        """Show the session's current plan (and say when it starts from pruning found on the
        model)."""
        session = self.ex.session
        plan = session.plan
        found = session.found
        self.note.value = message(
            "warning",
            f"The plan starts from the pruning found on the model when the session started "
            f"({', '.join(found)}); replay it on a model in that same state.",
        ) if found else "" if len(plan) else message(
            "info", "The plan has no steps yet: what you apply appears here (copying or "
            "downloading it now gives a plan that prunes nothing).")
        snippet, text = plan.to_snippet(), plan.to_json()
        self.snippet.value = self.copy_snippet.text = snippet
        self.json.value = self.copy_json.text = text
        self.downloads.value = (
            download_link("pruning_plan.py", snippet, "text/x-python", "pe-download-snippet")
            + " · "
            + download_link("pruning_plan.json", text, "application/json", "pe-download-json")
        )

    def refresh_import(self) -> None:
        """Drop any question about an import (the box or the session changed); *Import
        plan* on exactly when the plan in the box would be applied: it parses
        (``Plan.from_json``) and the session would apply it now (``Session.plan_blocker``);
        else off, with the reason beside it (:attr:`import_why`)."""
        self._drop_question()
        text = self.import_text.value
        why = None
        if not text.strip():
            why = "the box is empty; paste a plan (JSON) or upload a .json file"
        else:
            try:
                why = self.ex.session.plan_blocker(Plan.from_json(text))
            except InvalidPlanError as err:
                why = human_error(err)
        self.import_why = why
        self.import_button.disabled = why is not None
        self.import_note.value = why_off([] if why is None else [f"Import plan is off: {why}"])

    def _on_upload(self, change: dict[str, Any]) -> None:
        try:
            found = _uploaded_text(change["new"])
        except WidgetInputError as err:
            self.ex.status.error(err, "Upload")
            return
        if found is not None:
            name, text = found
            self.import_text.value = text
            self.ex.status.show("info", f"Loaded {name}; press Import plan to apply it.")

    @property
    def asking(self) -> bool:
        """True while the question about re-importing the session's own steps is on show."""
        return self._asked is not None

    def _drop_question(self) -> None:
        self._asked = None
        self.import_question.value = ""
        for button in (self.import_new, self.import_again, self.import_cancel):
            button.disabled = True
        self.import_row.layout.display = "none"

    def held_steps(self, plan: Plan) -> int:
        """How many of the session's steps ``plan`` starts with: all of them (the plan
        re-imports the session's own steps, maybe with more after), else 0."""
        own = self.ex.session.plan.steps
        return len(own) if own and plan.steps[:len(own)] == own else 0

    def do_import(self) -> None:
        """Parse, check and apply the plan in the import box, all or nothing. A plan that
        starts with every step the session already holds (its own export, maybe extended) is
        not stacked silently: the pane asks first -- apply only the new steps, all of them
        again, or nothing."""
        text = self.import_text.value
        try:
            plan = Plan.from_json(text) if text.strip() else None
        except InvalidPlanError:
            plan = None  # run() names the problem
        held = 0 if plan is None else self.held_steps(plan)
        if plan is None or not held:
            self._import(text, skip=0)
            return
        new = len(plan) - held
        self._asked = plan
        self.import_question.value = message(
            "warning",
            f"This plan starts with the {plural(held, 'step')} the session already holds"
            + (f" and adds {plural(new, 'step')}" if new else " (it is the session's own plan)")
            + ". Applying it all would prune them twice.")
        self.import_new.description = (f"Apply the {plural(new, 'new step')}" if new else
                                       "Nothing new to apply")
        self.import_new.disabled = not new
        self.import_again.disabled = self.import_cancel.disabled = False
        self.import_row.layout.display = ""
        self.ex.status.show("warning", "Import plan: the session already holds its first "
                            f"{plural(held, 'step')}; choose below what to apply.")

    def _answer(self, choice: str) -> None:
        plan = self._asked
        if plan is None:
            return
        held = self.held_steps(plan)
        self._drop_question()
        if choice == "cancel":
            self.ex.status.show("info", "Import plan cancelled: nothing was applied.")
            return
        self._import(plan.to_json(), skip=held if choice == "new" else 0)

    def _import(self, text: str, *, skip: int) -> None:
        def run(progress: Progress) -> Plan:
            if not text.strip():
                raise WidgetInputError(
                    "Import plan: the box is empty; paste a plan (JSON) or upload a .json file"
                )
            plan = Plan.from_json(text)
            with self.ex.batch():  # one transaction: every step, or none of them
                self.ex.session.apply_all(plan if not skip else plan.steps[skip:],
                                          where="Import plan", progress=progress)
            return plan

        held = f" (the first {plural(skip, 'step')} were held already)" if skip else ""

        def done(plan: Plan) -> str:  # called once the plan took effect (also if Ctrl-C came)
            text = (f"Imported a plan of {plural(len(plan), 'step')} and applied "
                    f"{plural(len(plan) - skip, 'step')}{held}." if skip else
                    f"Imported a plan of {plural(len(plan), 'step')} and applied it.")
            self.imported = plan
            return text

        self.ex.act("Import plan", run, done=done)
