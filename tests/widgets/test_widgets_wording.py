"""The explorer speaks to people: status lines, counts and tables without developer notation."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from helpers.widgets import mlp
from prune_explorer.session import InvalidStepError
from prune_explorer.widgets import Explorer
from prune_explorer.widgets.parts.status import StatusBar, human_error
from prune_explorer.widgets.tabs.titles import COMPARE_TAB, HISTORY_TAB

DEVELOPER_NOTATION = ("Step(", "(s)", "Session.", "_unstructured", "_structured", "nan",
                      "e+0", "True", "False")


def _cells(html: str) -> str:
    return " ".join(re.findall(r"<t[dh][^>]*>([^<]*)</t[dh]>", html))


@pytest.fixture
def big():
    torch.manual_seed(0)
    explorer = Explorer(nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)),
                        debounce=None)
    yield explorer
    explorer.close()


def test_apply_and_undo_say_what_happened_in_words_and_numbers(big):
    big.ui.amount.value = 0.5
    big.ui.apply.click()
    assert big.status.text == ("Applied L1 magnitude, 50% of 0.weight: 8,192 entries pruned "
                               "(now 50.0% of 0.weight pruned).")
    big.ui.undo.click()
    assert big.status.text == ("Undid L1 magnitude, 50% of 0.weight: 8,192 entries restored "
                               "(now 0.0% of 0.weight pruned).")
    for text in (big.status.text, big.ui.summary.value, big.ui.preview_info.value):
        assert not any(bad in text for bad in DEVELOPER_NOTATION), text


def test_counts_have_separators_and_the_singular_where_it_is_one(big):
    assert "16,384 entries" in big.ui.preview_info.value
    assert "16,384 entries left to prune" in big.ui.left.value
    assert "4 tensors" in big.ui.summary.value
    assert "0 steps" in big.ui.summary.value
    big.ui.amount_mode.value = "count"
    big.ui.count.value = 1
    assert "this step prunes 1 more entry (0.0% of it)" in big.ui.preview_info.value
    big.ui.apply.click()
    assert "1 entry pruned" in big.status.text
    assert "1 step," in big.ui.summary.value
    assert "16,383 entries left to prune" in big.ui.left.value


def test_one_unmasked_zero_is_one_entry():
    model = mlp()
    with torch.no_grad():
        model[0].weight[0, 0] = 0.0
    ex = Explorer(model, debounce=None)
    assert "1 entry is exactly 0 without a mask" in ex.ui.preview_info.value
    ex.close()


def test_errors_are_shown_without_the_api_location(big):
    big.ui.amount_mode.value = "count"
    big.ui.count.value = 20000
    assert big.status.kind == "error"
    assert big.status.text.startswith("Preview failed: amount must be at most the number of "
                                      "entries of '0.weight' still unpruned (16384)")
    assert "Session." not in big.status.text
    assert big.preview_error.startswith("Session.preview_masks: amount")  # the API's text is kept


def test_human_error_strips_only_our_own_api_locations():
    err = InvalidStepError("Session.apply_global: amount must be in [0, 1]; got 2", "amount")
    assert human_error(err) == "amount must be in [0, 1]; got 2"
    assert human_error(ValueError("Session.preview: x")) == "ValueError: Session.preview: x"
    assert human_error(KeyError("weird")) == "KeyError: 'weird'"
    bar = StatusBar()
    bar.error(InvalidStepError("Import plan: step 2: bad", "amount"), "Import plan")
    assert bar.text == "Import plan failed: step 2: bad"


def test_history_table_has_human_headers_integer_seeds_and_no_nan(big):
    big.ui.method.value = "random_unstructured"
    big.ui.amount.value = 0.25
    big.ui.apply.click()
    seed = big.session.steps[-1].seed
    assert seed is not None
    big.ui.tabs.selected_index = HISTORY_TAB
    table = big.ui.history_steps.value
    cells = _cells(table)
    assert "<th" in table
    assert "Seed" in cells
    assert "Sparsity" in cells
    assert "Pruned" in cells
    assert str(seed) in cells
    assert "25.0%" in cells
    assert "4,096" in cells
    for bad in ("nan", "e+", "None", "random_unstructured", "newly_pruned", "True", "False"):
        assert bad not in cells, bad
    assert "random, 25% of 0.weight (seed" in big.ui.history_label.value


def test_compare_table_has_human_headers_yes_no_and_percentages(big):
    big.ui.tabs.selected_index = COMPARE_TAB
    big.ui.compare_amount.value = 0.6
    cells = _cells(big.ui.compare_table.value)
    for header in ("Tensor", "Entries", "Sparsity (global)", "Sparsity (local)",
                   "Pruned (global)", "Collapses (global)"):
        assert header in cells, header
    assert "No" in cells
    assert "60.0%" in cells
    assert "16,384" in cells
    for bad in ("True", "False", "sparsity_global", "numel", "0.6 "):
        assert bad not in cells, bad
    assert big.compare_pane.frame["collapsed_global"].dtype == bool  # the API frame is kept


def test_commit_review_and_result_count_one_tensor_in_the_singular(big):
    big.ui.apply.click()
    big.ui.commit_review.click()
    assert "committing 1 tensor frees" in big.status.text
    details = big.ui.commit_details.value
    assert "Commit 1 tensor</b>" in details
    assert "<th>Tensor</th>" in details
    assert "(s)" not in details
    big.ui.commit_confirm.click()
    assert big.status.text.startswith("Committed 1 tensor; freed ")
