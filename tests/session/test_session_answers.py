"""The session answers the questions widgets ask (can I undo, what would commit free, which
tensors by default); the widgets display those answers and keep no rules of their own."""

from __future__ import annotations

import re
import threading

import torch
from torch import nn

from helpers import REPO
from helpers.session import mlp
from prune_explorer.session import Session
from prune_explorer.widgets import Explorer


def test_can_undo_is_what_undo_does():
    s = Session(mlp())
    assert not s.can_undo
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    assert s.can_undo
    s.commit()
    assert not s.can_undo  # the last action is a commit
    s.apply("2.weight", "l1_unstructured", amount=0.5)
    assert s.can_undo
    s.undo()
    assert not s.can_undo


def test_the_undo_button_follows_can_undo():
    ex = Explorer(mlp(), debounce=None)
    assert ex.ui.undo.disabled
    ex.ui.apply.click()
    assert not ex.ui.undo.disabled
    ex.session.commit()
    assert ex.ui.undo.disabled == (not ex.session.can_undo) is True
    ex.close()


def test_review_commit_gives_the_numbers_commit_reports():
    s = Session(mlp())
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    s.apply("2.weight", "random_unstructured", amount=0.5)
    review = s.review_commit()
    assert review.names == ("0.weight", "2.weight")
    assert review.keys_removed == ("0.weight_orig", "0.weight_mask", "2.weight_orig",
                                   "2.weight_mask")
    assert review.keys_added == ("0.weight", "2.weight")
    result = s.commit()
    assert (result.bytes_before, result.bytes_after) == (review.bytes_before, review.bytes_after)
    assert result.freed == review.freed == sum(r[3] for r in review.rows)


def test_one_default_targets_rule_everywhere():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    model.add_module("rnn", nn.GRU(2, 2))
    s = Session(model)
    assert s.default_targets() == ["0.weight", "2.weight"]
    assert list(s.compare_global_local()["name"])[:-1] == s.default_targets()
    table = s.sensitivity(lambda m: 0.0, amounts=[0.5], scopes=["local"], progress=False)
    assert sorted(set(table["target"])) == s.default_targets()
    ex = Explorer(session=s, debounce=None)
    assert list(ex.ui.compare_targets.value) == s.default_targets()
    assert list(ex.ui.global_targets.value) == s.default_targets()
    assert ex.tensor == "0.weight"
    ex.close()
    gru = Session(nn.GRU(2, 3))  # no tensor named "weight": every tensor of rank >= 2
    assert gru.default_targets() == ["weight_ih_l0", "weight_hh_l0"]


def test_panes_use_no_private_member_of_the_explorer():
    widgets = REPO / "src" / "prune_explorer" / "widgets"
    for path in widgets.glob("*.py"):
        if path.name == "explorer.py":
            continue
        found = re.findall(r"\bex\._[a-z]\w*", path.read_text(encoding="utf-8"))
        assert found == [], (path.name, found)


def test_a_preview_on_another_thread_draws_no_seed():
    s = Session(mlp())
    seen = []

    worker = threading.Thread(target=lambda: seen.append(
        s.preview("0.weight", "random_unstructured", amount=0.5)))
    worker.start()
    worker.join()
    step = s.apply("0.weight", "random_unstructured", amount=0.5)
    again = Session(mlp()).apply("0.weight", "random_unstructured", amount=0.5)
    assert step.seed == again.seed  # the preview consumed nothing
    assert torch.equal(seen[0], s.model[0].weight_mask)
