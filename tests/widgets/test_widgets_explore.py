"""The Explore tab driven as a user would -- picker, every control, preview, buttons.

Widgets are driven by setting their values and calling ``Button.click()``; results are checked
against the session and against stock ``torch.nn.utils.prune`` (the oracle) on a copy of the
model. Previews render synchronously (``debounce=None``) so every check is deterministic.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from helpers.widgets import assert_same_state, cnn, mlp, state
from prune_explorer.session import Session
from prune_explorer.viz import pool_view, tensor_view
from prune_explorer.widgets import Explorer, WidgetInputError, explore

# -- models and helpers -----------------------------------------------------------------------












def make(model: nn.Module | None = None, **kwargs) -> Explorer:
    return Explorer(model if model is not None else mlp(), debounce=None, **kwargs)


def torch_mask(model: nn.Module, address: str, fn, **kwargs) -> torch.Tensor:
    """The mask stock torch leaves on a deep copy of ``model``."""
    copied = copy.deepcopy(model)
    module_name, _, tensor_name = address.rpartition(".")
    module = copied.get_submodule(module_name)
    fn(module, tensor_name, **kwargs)
    return getattr(module, tensor_name + "_mask")


def shown(ex: Explorer, name: str) -> bool:
    return ex.ui[name].layout.display != "none"


@pytest.fixture
def ex():
    explorer = make()
    yield explorer
    explorer.close()


# -- construction and display -----------------------------------------------------------------


def test_top_level_lazy_exports():
    import prune_explorer

    assert prune_explorer.Explorer is Explorer
    assert prune_explorer.explore is explore


def test_explore_returns_explorer_on_a_new_session():
    model = mlp()
    ex = explore(model, debounce=None)
    assert isinstance(ex, Explorer)
    assert ex.model is model
    assert ex.session.model is model
    ex.close()


def test_explorer_on_existing_session_and_bad_arguments():
    model = mlp()
    session = Session(model)
    session.apply("0.weight", "l1_unstructured", amount=0.5)
    ex = Explorer(session=session, debounce=None)
    assert ex.session is session
    assert "50.0% pruned" in dict((v, k) for k, v in ex.ui.tensor.options)["0.weight"]
    ex.close()
    with pytest.raises(TypeError, match="Explorer: give a model or a session; got neither"):
        Explorer()
    with pytest.raises(TypeError, match="Explorer: session must be a Session; got Linear"):
        Explorer(session=nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"Explorer: model must be session\.model"):
        Explorer(mlp(), session=session)


def test_repr_mimebundle_is_the_root_widget_view(ex):
    bundle = ex._repr_mimebundle_()
    view = bundle["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == ex.widget.model_id
    assert bundle["text/plain"] == repr(ex)
    assert repr(ex).startswith("Explorer(Session(Sequential: 4 tensors")


EXPECTED_CLASSES = [
    "pe-explorer", "pe-tensor", "pe-device", "pe-summary", "pe-method", "pe-amount-mode",
    "pe-amount", "pe-count", "pe-left", "pe-n", "pe-dim", "pe-global-method",
    "pe-global-targets", "pe-custom", "pe-layout", "pe-preview", "pe-preview-info", "pe-apply",
    "pe-undo", "pe-reset", "pe-tabs", "pe-explore-tab", "pe-history-tab", "pe-compare-tab",
    "pe-commit-tab", "pe-export-tab", "pe-history", "pe-history-image", "pe-history-steps",
    "pe-history-label", "pe-compare-targets", "pe-compare-amount", "pe-compare-table",
    "pe-compare-chart", "pe-compare-warnings", "pe-apply-global", "pe-apply-local",
    "pe-commit-target", "pe-commit-review", "pe-commit-confirm", "pe-commit-cancel",
    "pe-commit-details", "pe-snippet", "pe-json", "pe-download", "pe-import-text",
    "pe-import-upload", "pe-import-plan", "pe-status", "pe-progress",
]


def test_key_widgets_carry_their_stable_css_class(ex):
    for css in EXPECTED_CLASSES:
        name = css[3:].replace("-", "_")
        assert css in ex.ui[name]._dom_classes, css
    assert ex.ui.tabs.titles == ("Explore", "History", "Global vs local", "Commit", "Export",
                                 "Fine-tune")
    assert ex.ui.preview.format == "png"


def test_model_without_parameters_shows_a_warning_not_an_error():
    ex = make(nn.Sequential(nn.ReLU()))
    assert ex.tensor is None
    assert ex.status.kind == "warning"
    assert ex.status.text == "This model has no parameters to prune."
    ex.ui.apply.click()
    assert ex.status.text == "Apply failed: no tensor is chosen (the model has none)"
    ex.close()


# -- tensor picker ----------------------------------------------------------------------------


def test_picker_lists_every_tensor_with_shape_and_sparsity_and_follows_changes(ex):
    labels = dict((v, k) for k, v in ex.ui.tensor.options)
    assert list(labels) == list(ex.session.names)
    assert labels["0.weight"] == "0.weight · 8×12 · 0.0% pruned"
    assert labels["2.bias"] == "2.bias · 4 · 0.0% pruned"
    assert ex.tensor == "0.weight"  # first tensor of rank >= 2
    ex.ui.amount.value = 0.25
    ex.ui.apply.click()
    labels = dict((v, k) for k, v in ex.ui.tensor.options)
    assert labels["0.weight"] == "0.weight · 8×12 · 25.0% pruned"
    assert ex.tensor == "0.weight"  # the choice survives the refresh
    ex.session.apply("2.weight", "l1_unstructured", amount=0.5)  # from code, not the widget
    labels = dict((v, k) for k, v in ex.ui.tensor.options)
    assert labels["2.weight"] == "2.weight · 4×8 · 50.0% pruned"


def test_picking_a_tensor_previews_it_and_adapts_dim_and_view_choices():
    model = cnn()
    ex = make(model)
    assert ex.tensor == "0.weight"
    assert list(ex.ui.dim.options) == [0, 1, 2, 3]
    assert [v for _, v in ex.ui.layout.options] == ["auto", "kernels", "channels"]
    ex.ui.tensor.value = "3.weight"
    assert list(ex.ui.dim.options) == [0, 1]
    assert [v for _, v in ex.ui.layout.options] == ["auto", "channels"]
    expected = torch_mask(model, "3.weight", torch_prune.l1_unstructured, amount=0.3)
    assert torch.equal(ex.preview_mask, expected)
    assert ex.preview_request.target == "3.weight"
    ex.ui.tensor.value = "0.bias"
    assert list(ex.ui.dim.options) == [0]
    ex.select("3.bias")
    assert ex.tensor == "3.bias"
    with pytest.raises(WidgetInputError, match=r"Explorer.select: name 'nope' is not a prunable"):
        ex.select("nope")
    ex.close()


# -- method and the controls it shows -----------------------------------------------------------

VISIBLE = {
    "identity": set(),
    "random_unstructured": {"amount_mode", "amount", "left"},
    "l1_unstructured": {"amount_mode", "amount", "left"},
    "random_structured": {"amount_mode", "amount", "left", "dim"},
    "ln_structured": {"amount_mode", "amount", "left", "n", "dim"},
    "global_unstructured": {"amount_mode", "amount", "left", "global_method", "global_targets"},
    "custom_from_mask": {"custom"},
    "semi_structured": {"pattern", "dim"},
    "block_structured": {"amount_mode", "amount", "left", "block", "n"},
}
OPTIONAL = ["amount_mode", "amount", "count", "left", "n", "dim", "global_method",
            "global_targets", "custom", "pattern", "block"]


@pytest.mark.parametrize("method", list(VISIBLE))
def test_method_shows_only_the_controls_it_uses(ex, method):
    assert [v for _, v in ex.ui.method.options] == [
        "identity", "random_unstructured", "l1_unstructured", "random_structured",
        "ln_structured", "custom_from_mask", "semi_structured", "block_structured",
        "global_unstructured",
    ]
    ex.ui.method.value = method
    visible = {name for name in OPTIONAL if shown(ex, name)}
    assert visible == VISIBLE[method]
    for name in OPTIONAL:
        widget = ex.ui[name]
        if hasattr(widget, "disabled"):
            assert widget.disabled == (name not in visible), name


@pytest.mark.parametrize(("method", "fn", "kwargs"), [
    ("identity", torch_prune.identity, {}),
    ("l1_unstructured", torch_prune.l1_unstructured, {"amount": 0.3}),
    ("ln_structured", torch_prune.ln_structured, {"amount": 0.3, "n": 2, "dim": 0}),
])
def test_deterministic_method_previews_the_torch_mask_and_apply_leaves_it(method, fn, kwargs):
    model = mlp()
    ex = make(model)
    expected = torch_mask(model, "0.weight", fn, **kwargs)
    ex.ui.method.value = method
    assert torch.equal(ex.preview_mask, expected)
    assert not hasattr(model[0], "weight_mask")  # preview changes nothing
    ex.ui.apply.click()
    assert ex.status.kind == "ok"
    assert torch.equal(model[0].weight_mask, expected)
    ex.close()


@pytest.mark.parametrize("method", ["random_unstructured", "random_structured"])
def test_random_method_preview_is_what_apply_then_does(method):
    model = mlp()
    ex = make(model)
    ex.ui.method.value = method
    previewed = ex.preview_mask.clone()
    ex.ui.apply.click()
    step = ex.session.steps[-1]
    assert step.method == method
    assert step.seed is not None
    assert torch.equal(model[0].weight_mask, previewed)
    # The recorded seed replays the same mask with stock torch.
    torch.manual_seed(step.seed)
    fn = getattr(torch_prune, method)
    extra = {"dim": 0} if method == "random_structured" else {}
    fresh = mlp()
    torch.manual_seed(step.seed)
    fn(fresh[0], "weight", amount=0.3, **extra)
    assert torch.equal(fresh[0].weight_mask, previewed)
    ex.close()


# -- amount: fraction slider and integer count --------------------------------------------------


def test_amount_slider_moves_the_preview_image_and_array():
    model = mlp()
    ex = make(model)
    before_png, before_count = ex.ui.preview.value, ex.render_count
    assert before_png[:8] == b"\x89PNG\r\n\x1a\n"
    ex.ui.amount.value = 0.75
    assert ex.render_count == before_count + 1
    assert ex.ui.preview.value != before_png
    expected = torch_mask(model, "0.weight", torch_prune.l1_unstructured, amount=0.75)
    assert torch.equal(ex.preview_mask, expected)
    cells = ex.preview_pane.picture.max_cells
    pooled = pool_view(tensor_view(expected), cells).values
    np.testing.assert_array_equal(ex.preview_array, pooled)
    assert ex.preview_array.shape == (8, 12)  # small tensors are shown at full resolution
    assert ex.preview_stats.newly_pruned == 72 == int((expected == 0).sum())
    ex.close()


def test_preview_text_states_counts_rounding_and_what_is_already_pruned(ex):
    ex.ui.amount.value = 0.3  # 0.3 * 96 = 28.8 -> torch rounds to 29
    info = ex.ui.preview_info.value
    assert "already pruned: 0 (0.0%)" in info
    assert "this step prunes 29 more entries (30.2% of it)" in info
    assert "rounding: 30% of 96 entries left = 28.8, rounded to 29" in info
    assert "after: 29 pruned (30.2%)" in info
    ex.ui.apply.click()
    ex.ui.amount.value = 0.5  # of the 67 left: 33.5 -> 34 (round half to even)
    stats = ex.preview_stats
    assert (stats.pruned_before, stats.left, stats.units_pruned) == (29, 67, 34)
    assert "rounding: 50% of 67 entries left = 33.5, rounded to 34" in ex.ui.preview_info.value
    assert "already pruned: 29 (30.2%)" in ex.ui.preview_info.value


def test_structured_preview_counts_channels(ex):
    ex.ui.method.value = "ln_structured"
    ex.ui.dim.value = 1
    stats = ex.preview_stats
    assert stats.unit == "input column (dim 1)"
    assert (stats.left, stats.units_pruned, stats.newly_pruned) == (12, 4, 32)  # 3.6 -> 4
    assert "4 input columns (dim 1)" in ex.ui.preview_info.value


def test_count_mode_converts_the_fraction_and_prunes_exactly_that_count():
    model = mlp()
    ex = make(model)
    ex.ui.amount.value = 0.5
    ex.ui.amount_mode.value = "count"
    assert ex.ui.count.value == "48"
    assert shown(ex, "count")
    assert not shown(ex, "amount")
    assert "96 entries left to prune" in ex.ui.left.value
    ex.ui.count.value = 5
    assert int((ex.preview_mask == 0).sum()) == 5
    assert "rounding: 5 of 96 entries left" in ex.ui.preview_info.value
    ex.ui.apply.click()
    assert ex.session.steps[-1].settings["amount"] == 5
    expected = torch_mask(mlp(), "0.weight", torch_prune.l1_unstructured, amount=5)
    assert torch.equal(model[0].weight_mask, expected)
    assert "91 entries left to prune" in ex.ui.left.value
    ex.close()


def test_count_larger_than_what_is_left_is_an_error_and_changes_nothing():
    model = mlp()
    ex = make(model)
    ex.ui.amount_mode.value = "count"
    png = ex.ui.preview.value
    ex.ui.count.value = 97
    assert ex.preview_mask is None
    assert ex.ui.preview.value == png  # no new picture for a bad value
    assert ex.status.kind == "error"
    assert ex.status.text.startswith("Preview failed: amount must be at most")
    assert "97" in ex.status.text
    assert "96" in ex.status.text
    assert ex.preview_pane.stale  # the old picture is dimmed, the message is in one place
    assert "97" not in ex.ui.preview_info.value
    assert ex.ui.apply.disabled
    original = state(model)
    ex.apply()  # from code (the button is disabled): refused, nothing changes
    assert ex.status.text.startswith("Apply failed: amount must be at most")
    assert_same_state(model, original)
    assert ex.session.steps == ()
    assert "Traceback" not in ex.ui.status.value
    ex.ui.count.value = 96  # a good value brings the preview back
    assert ex.preview_error is None
    assert int((ex.preview_mask == 0).sum()) == 96
    assert not ex.preview_pane.stale
    assert not ex.ui.apply.disabled
    assert ex.status.text == ""  # the Apply error was about the bad value: cleared
    ex.close()


def test_an_error_is_shown_once_and_an_ok_message_outlives_later_previews(ex):
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = 500
    texts = [w.value for w in ex.ui.values() if isinstance(w, type(ex.ui.preview_info))]
    assert sum("500" in t for t in texts) == 1  # the status line only
    ex.ui.count.value = 5
    ex.ui.apply.click()
    assert ex.status.text.startswith("Applied")
    ex.ui.count.value = 4
    assert ex.status.text.startswith("Applied")  # a success is not an error to clear


def test_a_busy_indicator_shows_while_an_action_or_a_first_visit_runs(ex, monkeypatch):
    ex.status.busy_delay = 0  # at once (the explorer waits 0.3 s; no timing in unit tests)
    seen = []
    read = ex.session.kept_count

    def slow_count(name, **kwargs):
        seen.append((ex.ui.busy.layout.display, ex.ui.busy.value))
        return read(name, **kwargs)

    monkeypatch.setattr(ex.session, "kept_count", slow_count)
    ex.ui.tensor.value = "2.weight"  # first visit: its mask is counted
    assert seen
    assert seen[0][0] == ""
    assert "working: reading 2.weight" in seen[0][1]
    assert ex.ui.busy.layout.display == "none"
    seen.clear()
    ex.ui.apply.click()  # apply, then the refresh reads the new masks
    assert seen
    assert all(display == "" for display, _ in seen)
    assert ex.ui.busy.layout.display == "none"


def test_a_good_value_clears_the_preview_error():
    ex = make()
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = 500
    assert ex.status.kind == "error"
    assert ex.status.source == "preview"
    ex.ui.count.value = 3
    assert ex.status.kind == "info"
    assert ex.status.text == ""
    ex.close()


def test_negative_count_is_rejected_by_the_session(ex):
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = -1
    assert ex.preview_error == (
        "Session.preview_masks: amount must be a float in [0, 1] or an int >= 0; got -1"
    )


def test_switching_tensor_clamps_the_count_to_what_is_left(ex):
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = 90
    ex.ui.tensor.value = "2.weight"  # 32 entries
    assert ex.ui.count.value == "32"
    assert ex.preview_error is None


# -- n and dim ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "n"), [
    ("1", 1), ("2", 2), ("inf", float("inf")), ("-inf", float("-inf")), ("fro", "fro"),
    ("3.5", 3.5),
])
def test_n_choices_preview_the_torch_ln_structured_mask(text, n):
    model = mlp()
    ex = make(model)
    ex.ui.method.value = "ln_structured"
    ex.ui.n.value = text
    ex.ui.dim.value = 1
    assert ex.preview_error is None
    expected = torch_mask(model, "0.weight", torch_prune.ln_structured, amount=0.3, n=n, dim=1)
    assert torch.equal(ex.preview_mask, expected)
    ex.close()


def test_bad_n_shows_the_session_message(ex):
    ex.ui.method.value = "ln_structured"
    assert "nuc" not in ex.ui.n.options  # offered only where valid (see test_widgets_controls)
    ex.ui.n.value = "abc"
    assert ex.status.text.startswith("Preview failed: n must be a number")
    assert ex.status.text.endswith("got 'abc'")
    ex.ui.n.value = "nuc"  # typed anyway: a matrix norm needs two dims, a Linear slice has one
    assert ex.status.kind == "error"
    assert "nuc" in ex.status.text
    ex.ui.n.value = "2"
    assert ex.status.kind == "info"


def test_dim_is_limited_to_the_rank_and_drives_structured_pruning():
    model = cnn()
    ex = make(model)
    ex.ui.method.value = "random_structured"
    for dim in ex.ui.dim.options:
        ex.ui.dim.value = dim
        assert ex.preview_request.settings["dim"] == dim
        kept = ex.preview_mask != 0
        others = [d for d in range(4) if d != dim]
        per_slice = kept.sum(dim=others)
        full = kept.numel() // kept.shape[dim]
        assert set(per_slice.tolist()) <= {0, full}  # whole slices only
        assert 0 in per_slice.tolist()
    ex.close()


# -- view ---------------------------------------------------------------------------------------


def test_view_choice_changes_the_picture_layout():
    ex = make(cnn())
    assert ex.preview_array.shape == (6, 18)  # out x (in·kh·kw)
    ex.ui.layout.value = "kernels"
    assert ex.preview_array.shape == (6 * 3, 2 * 3)  # tiles edge to edge, borders drawn
    picture = ex.preview_pane.picture
    assert picture._tile_lines is not None
    assert len(picture._tile_lines.get_segments()) == 5 + 1
    ex.ui.layout.value = "channels"
    assert shown(ex, "dim")  # the channel view needs a dim even for unstructured methods
    ex.ui.dim.value = 0
    assert ex.preview_array.shape == (1, 6)
    ex.ui.dim.value = 1
    assert ex.preview_array.shape == (1, 2)
    ex.close()


# -- global and custom --------------------------------------------------------------------------


def test_global_preview_and_apply_match_torch_global_unstructured():
    model = cnn()
    ex = make(model)
    ex.ui.method.value = "global_unstructured"
    assert ex.ui.global_targets.value == ("0.weight", "3.weight")  # Conv and Linear weights
    copied = copy.deepcopy(model)
    torch_prune.global_unstructured(
        [(copied[0], "weight"), (copied[3], "weight")], torch_prune.L1Unstructured, amount=0.3
    )
    assert torch.equal(ex.preview_mask, copied[0].weight_mask)
    assert ex.preview_stats.unit == "entry over 2 tensors"
    assert ex.preview_stats.left == 108 + 72
    assert "180 entries left to prune" in ex.ui.left.value
    ex.ui.apply.click()
    assert ex.session.steps[-1].targets == ("0.weight", "3.weight")
    assert torch.equal(model[0].weight_mask, copied[0].weight_mask)
    assert torch.equal(model[3].weight_mask, copied[3].weight_mask)
    ex.close()


def test_global_with_the_shown_tensor_outside_the_targets_shows_its_current_mask(ex):
    ex.ui.method.value = "global_unstructured"
    ex.ui.global_targets.value = ("2.weight",)
    assert "0.weight is not among the global targets" in ex.ui.preview_info.value
    assert bool(ex.preview_mask.all())
    assert "32 entries left to prune" in ex.ui.left.value
    ex.ui.global_method.value = "random_unstructured"
    ex.ui.apply.click()
    assert ex.session.steps[-1].settings["pruning_method"] == "random_unstructured"
    assert not hasattr(ex.model[0], "weight_mask")
    ex.ui.global_targets.value = ()
    assert ex.status.kind == "error"
    assert "targets" in ex.status.text


def test_custom_mask_from_constructor_and_from_set_custom_mask():
    model = mlp()
    mask = (torch.arange(96).reshape(8, 12) % 3 != 0).float()
    ex = make(model, custom_masks={"0.weight": mask})
    assert ex.custom_masks["0.weight"] is not mask
    assert torch.equal(ex.custom_masks["0.weight"], mask)
    ex.ui.method.value = "custom_from_mask"
    assert "keeps 64 of 96" in ex.ui.custom.value
    assert torch.equal(ex.preview_mask, mask)
    ex.ui.apply.click()
    assert torch.equal(model[0].weight_mask, mask)
    ex.ui.tensor.value = "2.weight"
    assert ex.preview_error.startswith("custom mask: no mask was given for '2.weight'")
    assert "No custom mask for '2.weight'" in ex.ui.custom.value
    ex.set_custom_mask("2.weight", torch.ones(3))
    assert ex.status.text.startswith("Preview failed: mask must have the shape")
    ex.set_custom_mask("2.weight", torch.zeros(4, 8))
    assert ex.preview_error is None
    assert int(ex.preview_mask.sum()) == 0
    with pytest.raises(WidgetInputError, match="set_custom_mask: name 'x' is not a prunable"):
        ex.set_custom_mask("x", mask)
    with pytest.raises(WidgetInputError, match=r"mask must be a torch\.Tensor of 0/1 values; "
                                               r"got list"):
        ex.set_custom_mask("2.weight", [1, 0])
    ex.close()


# -- device -------------------------------------------------------------------------------------


def test_device_offers_cpu_only_without_cuda(ex):
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert ex.ui.device.options == ("cpu",)
    assert ex.ui.device.value == "cpu"


def test_failed_device_move_is_reported_and_reverted(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("CUDA present: the move would succeed")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    model = mlp()
    ex = make(model)
    assert ex.ui.device.options == ("cpu", "cuda:0")
    original = state(model)
    ex.ui.device.value = "cuda:0"
    assert ex.status.kind == "error"
    assert ex.status.text.startswith("Move to cuda:0 failed: ")
    assert ex.ui.device.value == "cpu"
    assert_same_state(model, original)
    assert all(p.device.type == "cpu" for p in model.parameters())
    ex.close()


@pytest.mark.cuda
def test_device_move_to_cuda_and_back():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model = mlp()
    ex = make(model)
    ex.ui.apply.click()
    ex.ui.device.value = "cuda:0"
    assert ex.status.kind == "ok"
    assert model[0].weight_mask.device.type == "cuda"
    assert ex.preview_mask.device.type == "cuda"
    ex.ui.device.value = "cpu"
    assert model[0].weight_mask.device.type == "cpu"
    ex.close()


# -- Apply, Undo, Reset -------------------------------------------------------------------------


def test_apply_undo_reset_buttons(ex):
    model = ex.model
    original = state(model)
    assert ex.ui.undo.disabled
    assert ex.ui.reset.disabled
    ex.ui.apply.click()
    assert ex.status.text == ("Applied L1 magnitude, 30% of 0.weight: 29 entries pruned "
                              "(now 30.2% of 0.weight pruned).")
    assert not ex.ui.undo.disabled
    assert not ex.ui.reset.disabled
    ex.ui.method.value = "ln_structured"
    ex.ui.apply.click()
    assert len(ex.session.steps) == 2
    ex.ui.undo.click()
    assert ex.status.text.startswith("Undid Ln-norm structured (n=2, dim=0), 30% of 0.weight: ")
    assert ex.status.text.endswith(" entries restored (now 30.2% of 0.weight pruned).")
    assert [s.method for s in ex.session.steps] == ["l1_unstructured"]
    ex.ui.tensor.value = "2.weight"
    ex.ui.apply.click()
    ex.ui.reset.click()
    ex.ui.reset_confirm.click()  # Reset asks first (see test_widgets_controls)
    assert ex.status.text == "Reset: the model is back to how the session found it."
    assert ex.session.steps == ()
    assert_same_state(model, original)
    assert ex.ui.undo.disabled
    assert ex.ui.reset.disabled


def test_undo_with_nothing_to_undo_reports_the_session_message(ex):
    ex.ui.undo.click()
    assert ex.status.kind == "error"
    assert ex.status.text == "Undo failed: nothing to undo; no steps are applied"
    assert "Traceback" not in ex.ui.status.value


def test_apply_after_undo_reflects_in_every_view(ex):
    ex.ui.tabs.selected_index = 4  # Export (built only while on show)
    ex.ui.apply.click()
    snippet_after_apply = ex.ui.snippet.value
    assert "l1_unstructured" in snippet_after_apply
    ex.ui.undo.click()
    assert "l1_unstructured" not in ex.ui.snippet.value
    assert "0 steps" in ex.ui.summary.value
    assert "0.weight · 8×12 · 0.0% pruned" in [k for k, _ in ex.ui.tensor.options]


def test_unexpected_errors_become_messages_with_their_type(ex, monkeypatch):
    def boom(*args, **kwargs):
        raise KeyError("weird")

    monkeypatch.setattr(ex.session, "apply", boom)
    ex.ui.apply.click()
    assert ex.status.text == "Apply failed: KeyError: 'weird'"
    assert ex.status.last_error.__class__ is KeyError


def test_preview_mentions_zeros_left_by_a_commit(ex):
    ex.ui.apply.click()  # 29 of 96 masked
    ex.session.commit()
    assert ex.preview_stats.pruned_before == 29  # no mask any more, but 29 zeros
    assert "29 entries are exactly 0 without a mask" in ex.ui.preview_info.value
    ex.ui.tensor.value = "2.weight"
    assert "without a mask" not in ex.ui.preview_info.value


def test_after_a_commit_the_picture_and_counts_include_the_committed_zeros(ex):
    ex.ui.method.value = "global_unstructured"
    ex.ui.global_targets.value = ("0.weight", "2.weight")
    ex.ui.amount.value = 0.6
    ex.ui.apply.click()
    ex.session.commit()
    zeros = int((ex.model[0].weight == 0).sum())
    assert zeros == ex.session.report()["zeros"][0] > 0
    # A non-target tensor shows its committed zeros, not an all-kept picture.
    ex.ui.global_targets.value = ("2.weight",)
    assert "not among the global targets" in ex.ui.preview_info.value
    assert ex.preview_array.mean() == pytest.approx(1 - zeros / 96)
    assert "sparsity 0.0%" not in ex.preview_pane.picture.ax.get_title()
    # An L1 step smaller than what is already zero selects only zeros: it prunes nothing more.
    ex.ui.method.value = "l1_unstructured"
    ex.ui.amount.value = 0.25
    stats = ex.preview_stats
    assert stats.pruned_before == stats.pruned_after == zeros
    assert stats.newly_pruned == 0
    assert f"already pruned: {zeros:,}" in ex.ui.preview_info.value
    assert "this step prunes 0 more entries" in ex.ui.preview_info.value
    assert ex.preview_array.mean() == pytest.approx(1 - zeros / 96)
    # More than what is zero: the new entries are counted once.
    ex.ui.amount.value = 0.9
    assert ex.preview_stats.pruned_after == int((ex.preview_mask == 0).sum())
    assert ex.preview_stats.newly_pruned == int((ex.preview_mask == 0).sum()) - zeros


class _Odd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.emb = nn.Embedding(20, 6)
        self.norm = nn.BatchNorm1d(6)
        self.conv3 = nn.Conv3d(2, 3, 2)
        self.conv1 = nn.Conv1d(2, 3, 3)


@pytest.mark.parametrize(("name", "views"), [
    ("scale", ["auto"]),
    ("emb.weight", ["auto", "channels"]),
    ("norm.weight", ["auto", "channels"]),
    ("conv3.weight", ["auto", "channels"]),  # no kernel grid for 3-D convolutions
    ("conv1.weight", ["auto", "kernels", "channels"]),
])
def test_every_offered_view_of_any_tensor_previews(name, views):
    ex = make(_Odd())
    ex.ui.tensor.value = name
    assert [v for _, v in ex.ui.layout.options] == views
    for view in views:
        ex.ui.layout.value = view
        assert ex.preview_error is None, (view, ex.preview_error)
        assert ex.preview_request.layout == view
    ex.ui.apply.click()
    assert ex.status.kind == "ok"
    ex.close()


def test_structured_method_on_a_vector_explains_why_not(ex):
    ex.ui.tensor.value = "0.bias"
    ex.ui.method.value = "ln_structured"
    assert ex.status.text.startswith("Preview failed: tensor '0.bias' must be "
                                     "at least 2-D for structured pruning")


def test_a_drawing_failure_is_a_message_not_a_traceback(ex, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no fonts")

    monkeypatch.setattr(ex.preview_pane.picture, "update", broken)
    ex.ui.amount.value = 0.6
    assert ex.status.text == "Preview failed: RuntimeError: no fonts"
    assert ex.preview_mask is None
    assert ex.preview_error == "RuntimeError: no fonts"


def test_bad_custom_masks_in_the_constructor_leave_the_session_untouched():
    session = Session(mlp())
    with pytest.raises(WidgetInputError, match=r"^Explorer: name 'fc\.weight' is not a prunable"):
        Explorer(session=session, custom_masks={"fc.weight": torch.ones(2)})
    with pytest.raises(WidgetInputError, match=r"^Explorer: mask must be a torch\.Tensor"):
        Explorer(session=session, custom_masks={"0.weight": "ones"})
    assert len(session._events) == 0  # no half-built explorer is still listening


def test_after_apply_the_picture_shows_state_and_step_apart_and_says_which_it_is(ex):
    ex.ui.amount.value = 0.5
    ex.ui.apply.click()  # 48 of 96 pruned; the picture shows that step until asked
    ex.ui.next_preview.click()  # the controls now preview the next 0.5
    picture = ex.preview_pane.picture
    title = picture.ax.get_title()
    assert "preview of the next step" in title
    assert "sparsity 50.0% now → 75.0% after" in title
    new = picture.new_image.get_array()
    pruned_now = ~ex.session.mask("0.weight").numpy()
    pruned_next = (ex.preview_mask == 0).numpy()
    # vermillion exactly on what this step prunes; pruned-before cells stay lemon yellow
    assert np.array_equal(~new.mask, pruned_next & ~pruned_now)
    assert np.array_equal(ex.preview_array == 0, pruned_next)
    # a tensor outside the global targets is the current state, with no step drawn
    ex.ui.method.value = "global_unstructured"
    ex.ui.global_targets.value = ("2.weight",)
    assert "current state" in picture.ax.get_title()
    assert picture.new_image.get_array().mask.all()
