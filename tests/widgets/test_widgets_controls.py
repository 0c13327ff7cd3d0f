"""Controls do what they promise: a custom mask can be given in the explorer,
``n`` offers only norms that work, Reset asks first, a count is a whole number, and the Explore
tab warns about layer collapse as Global vs local does.

Driven as a user would, with synchronous previews (``debounce=None``).
"""

from __future__ import annotations

import datetime
import io

import numpy as np
import pytest
import torch
from torch import nn

from helpers.widgets import assert_same_state, cnn, mlp, state
from prune_explorer.session import Session
from prune_explorer.widgets import Explorer
from prune_explorer.widgets.tabs.explore.controls import N_CHOICES

COMPARE = 2
CALLED: list[str] = []


def make(model: nn.Module | None = None, **kwargs) -> Explorer:
    return Explorer(model if model is not None else mlp(), debounce=None, **kwargs)


@pytest.fixture
def ex():
    explorer = make()
    yield explorer
    explorer.close()


def shown(ex: Explorer, name: str) -> bool:
    return ex.ui[name].layout.display != "none"


# -- custom mask: upload a .pt or .npy file -----------------------------------------------------
def upload(ex: Explorer, name: str, content: bytes) -> None:
    ex.ui.custom_upload.value = ({
        "name": name, "type": "application/octet-stream", "size": len(content),
        "content": memoryview(content), "last_modified": datetime.datetime(2024, 1, 1),
    },)


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def pt(value: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _record_call() -> str:
    CALLED.append("ran")
    return "ran"


class Payload:
    """Pickles as a call of ``_record_call``: what a hostile checkpoint would do."""

    def __reduce__(self):
        return (_record_call, ())


def test_the_upload_is_shown_for_custom_mask_only_with_a_hint_for_code(ex):
    assert not shown(ex, "custom_upload")
    assert ex.ui.custom_upload.accept == ".pt,.npy"
    ex.ui.method.value = "custom_from_mask"
    assert shown(ex, "custom_upload")
    assert not ex.ui.custom_upload.disabled
    hint = ex.ui.custom.value
    assert "upload a .pt or .npy file" in hint
    assert "explorer.set_custom_mask(&#x27;0.weight&#x27;, mask)" in hint or (
        "explorer.set_custom_mask('0.weight', mask)" in hint)
    # No mask yet: Apply is disabled and the one message says how to give one.
    assert ex.ui.apply.disabled
    assert ex.status.kind == "error"
    assert "no mask was given for '0.weight'; upload a .pt or .npy file" in ex.status.text
    ex.ui.method.value = "l1_unstructured"
    assert not shown(ex, "custom_upload")


@pytest.mark.parametrize("kind", ["npy", "pt", "npy-bool"])
def test_an_uploaded_mask_is_previewed_and_applied(kind):
    model = mlp()
    ex = make(model)
    ex.ui.method.value = "custom_from_mask"
    mask = (torch.arange(96).reshape(8, 12) % 4 != 0)
    content = {"npy": lambda: npy(mask.numpy().astype(np.float32)),
               "pt": lambda: pt(mask.float()),
               "npy-bool": lambda: npy(mask.numpy())}[kind]()
    upload(ex, f"mask.{kind[:3]}", content)
    assert ex.status.kind == "ok", ex.status.text
    assert ex.status.text.startswith(f"Loaded the custom mask for '0.weight' from mask.{kind[:3]}")
    assert torch.equal(ex.custom_masks["0.weight"] != 0, mask)
    assert "keeps 72 of 96" in ex.ui.custom.value
    assert torch.equal(ex.preview_mask != 0, mask)
    assert not ex.ui.apply.disabled
    assert ex.ui.custom_upload.value == ()  # the same file can be chosen again
    ex.ui.apply.click()
    assert torch.equal(model[0].weight_mask != 0, mask)
    ex.close()


@pytest.mark.parametrize(("filename", "content", "expected"), [
    ("mask.npy", lambda: npy(np.ones(3)),
     "mask must have the shape of '0.weight', (8, 12); got shape (3,)"),
    ("mask.npy", lambda: npy(np.full((8, 12), 0.5)), "mask must hold only 0 and 1"),
    ("mask.npy", lambda: npy(np.array([{"a": 1}], dtype=object)),
     "file 'mask.npy' must be a .npy file holding one tensor of 0/1 values, readable as data "
     "only; reading it failed"),
    ("mask.pt", lambda: pt({"mask": torch.ones(8, 12)}),
     "file 'mask.pt' must hold one tensor (torch.save(mask, file)); got dict"),
    ("mask.pt", lambda: pt(Payload()),
     "file 'mask.pt' must be a .pt file holding one tensor of 0/1 values, readable as data only"),
    ("mask.pt", lambda: b"not a checkpoint", "file 'mask.pt' must be a .pt file"),
    ("mask.txt", lambda: b"1 0 1", "file 'mask.txt' must end in .pt or .npy; got '.txt'"),
])
def test_a_bad_upload_is_refused_with_one_message_and_changes_nothing(filename, content,
                                                                       expected):
    model = mlp()
    good = torch.ones(8, 12)
    ex = make(model, custom_masks={"0.weight": good})
    ex.ui.method.value = "custom_from_mask"
    before = state(model)
    CALLED.clear()
    upload(ex, filename, content())
    assert not CALLED  # nothing in the file ran
    assert ex.status.kind == "error"
    assert ex.status.text.startswith("Upload custom mask failed: ")
    assert expected in ex.status.text
    assert "Traceback" not in ex.ui.status.value
    assert ex.custom_masks["0.weight"] is not None
    assert torch.equal(ex.custom_masks["0.weight"], good)  # the mask given before stays
    assert_same_state(model, before)
    assert ex.session.steps == ()
    ex.close()


# -- n: only the norms that work on the tensor on show ------------------------------------------
@pytest.mark.parametrize(("model", "name", "offered"), [
    (mlp(), "0.weight", ("1", "2", "inf", "-inf", "fro")),
    (cnn(), "0.weight", ("1", "2", "inf", "-inf")),
    (nn.Sequential(nn.Conv1d(2, 4, 3)), "0.weight", N_CHOICES),
])
def test_n_offers_exactly_the_norms_the_session_accepts(model, name, offered):
    ex = make(model)
    ex.select(name)
    ex.ui.method.value = "ln_structured"
    assert tuple(ex.ui.n.options) == offered
    for text in N_CHOICES:  # the session is the judge: offered iff a preview works
        n = float(text) if text in ("inf", "-inf") else text if not text.isdigit() else int(text)
        try:
            Session(model).preview(name, "ln_structured", amount=0.5, n=n, dim=0)
            works = True
        except (ValueError, RuntimeError):
            works = False
        assert works == (text in ex.ui.n.options), text
    ex.close()


def test_n_choices_follow_the_tensor_picker():
    model = nn.Sequential(nn.Conv1d(2, 4, 3), nn.Flatten(), nn.Linear(4, 2))
    ex = make(model)
    ex.ui.method.value = "ln_structured"
    assert "nuc" in ex.ui.n.options
    ex.select("2.weight")
    assert "nuc" not in ex.ui.n.options
    assert "fro" in ex.ui.n.options
    assert "nuc" not in ex.ui.n.placeholder
    ex.close()


# -- Reset asks first -----------------------------------------------------------------------------
def test_one_click_on_reset_only_asks_and_confirm_resets(ex):
    original = state(ex.model)
    ex.ui.apply.click()
    ex.ui.amount.value = 0.6
    ex.ui.apply.click()
    assert not shown(ex, "reset_confirm")
    ex.ui.reset.click()
    assert len(ex.session.steps) == 2  # nothing happened yet
    assert shown(ex, "reset_confirm")
    assert shown(ex, "reset_cancel")
    assert ex.explore_pane.asking_reset
    assert "Undo all 2 steps? Reset cannot be undone." in ex.ui.reset_question.value
    ex.ui.reset_confirm.click()
    assert ex.session.steps == ()
    assert ex.status.text == "Reset: the model is back to how the session found it."
    assert_same_state(ex.model, original)
    assert not ex.explore_pane.asking_reset


def test_cancel_or_any_session_change_withdraws_the_reset_question(ex):
    ex.ui.apply.click()
    ex.ui.reset.click()
    ex.ui.reset_cancel.click()
    assert not shown(ex, "reset_confirm")
    assert ex.ui.reset_confirm.disabled
    ex.ui.reset_confirm.click()  # hidden and disabled; a stray click does nothing
    assert len(ex.session.steps) == 1
    ex.ui.reset.click()
    ex.session.apply("2.weight", "l1_unstructured", amount=0.5)  # from code, meanwhile
    assert not ex.explore_pane.asking_reset  # the question was about the state before
    ex.ui.reset_confirm.click()
    assert len(ex.session.steps) == 2


# -- count: a whole number, or a message ----------------------------------------------------------
@pytest.mark.parametrize("typed", ["2.5", "1e3", "ten", ""])
def test_a_count_that_is_not_a_whole_number_is_refused_not_changed(ex, typed):
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = "5"
    assert ex.preview_error is None
    ex.ui.count.value = typed
    assert ex.ui.count.value == typed  # held as typed: "2.5" does not become 25
    assert ex.preview_mask is None
    assert ex.ui.apply.disabled
    assert ex.status.text == (
        "Preview failed: count: must be a whole number of entries to prune (0, 1, 2, ...); "
        f"got {typed!r}"
    )
    ex.apply()  # from code: refused too, nothing changes
    assert ex.session.steps == ()
    ex.ui.count.value = " 7 "
    assert int((ex.preview_mask == 0).sum()) == 7
    assert ex.status.text == ""


def test_the_count_names_channels_for_structured_methods_and_takes_ints_from_code(ex):
    ex.ui.method.value = "ln_structured"
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = 2  # an int from code is kept as its text
    assert ex.ui.count.value == "2"
    assert ex.preview_stats.units_pruned == 2
    ex.ui.count.value = "2.0"
    assert "must be a whole number of output rows (dim 0) to prune" in ex.status.text


# -- layer collapse: the Explore tab warns before Apply --------------------------------------------
def test_a_global_preview_that_empties_a_layer_warns_like_global_vs_local():
    model = mlp()
    with torch.no_grad():
        model[2].weight.mul_(1e-3)  # tiny weights: global pruning takes this layer first
    ex = make(model)
    ex.ui.method.value = "global_unstructured"
    ex.ui.amount.value = 0.2  # 26 of its 32 entries
    assert ex.explore_pane.collapsed == []
    assert ex.ui.collapse_warning.value == ""
    ex.ui.amount.value = 0.7
    assert ex.explore_pane.collapsed == ["2.weight"]
    warning = ex.ui.collapse_warning.value
    assert "Layer collapse with global pruning: 2.weight" in warning
    # The same rule as the Global vs local tab, at the same amount.
    ex.ui.tabs.selected_index = COMPARE
    ex.ui.compare_amount.value = 0.7
    frame = ex.compare_pane.frame.set_index("name")
    assert [n for n in ("0.weight", "2.weight") if frame.loc[n, "collapsed_global"]] == \
        ex.explore_pane.collapsed
    ex.ui.amount.value = 1.0
    assert ex.explore_pane.collapsed == ["0.weight", "2.weight"]
    ex.ui.global_targets.value = ("2.weight",)  # the tensor on show is not a target: still said
    assert ex.tensor == "0.weight"
    assert "Layer collapse with global pruning: 2.weight" in ex.ui.collapse_warning.value
    ex.ui.amount.value = 0.1
    assert ex.ui.collapse_warning.value == ""
    ex.close()


def test_a_local_step_that_empties_its_layer_warns_and_a_failed_preview_clears_it(ex):
    ex.ui.amount.value = 1.0
    assert "Layer collapse with this step: 0.weight" in ex.ui.collapse_warning.value
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = "2.5"
    assert ex.ui.collapse_warning.value == ""


# -- Export: Copy buttons -------------------------------------------------------------------------
EXPORT = 4


def test_the_copy_buttons_hold_the_snippet_and_json_and_confirm_a_copy(ex):
    ex.ui.apply.click()
    assert ex.ui.copy_snippet.text == ""  # nothing built while the tab is hidden
    ex.ui.tabs.selected_index = EXPORT
    assert ex.ui.copy_snippet.text == ex.ui.snippet.value == ex.session.plan.to_snippet()
    assert ex.ui.copy_json.text == ex.ui.json.value == ex.session.plan.to_json()
    assert "prune.l1_unstructured(" in ex.ui.copy_snippet.text
    ex.ui.copy_snippet.copies += 1  # what the browser reports after writing the clipboard
    assert ex.status.text == "Copied the Python snippet to the clipboard."
    ex.ui.copy_json.copies += 1
    assert ex.status.text == "Copied the plan as JSON to the clipboard."
    ex.ui.apply.click()  # the texts follow the session
    assert ex.ui.copy_snippet.text == ex.session.plan.to_snippet()
    assert len(ex.session.steps) == 2
