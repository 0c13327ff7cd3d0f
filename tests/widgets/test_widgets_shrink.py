"""The Commit tab's Shrink action: report shown, new model, session untouched."""

from __future__ import annotations

import torch

from prune_explorer.demo import load_mlp
from prune_explorer.widgets import Explorer


def test_shrink_button_shows_the_report_and_leaves_the_session_alone():
    model = load_mlp()
    ex = Explorer(model, debounce=None)
    ex.session.apply("fc1.weight", "ln_structured", amount=8, n=1, dim=0)
    dead = ex.session.mask("fc1.weight").sum(1) == 0
    ex.session.apply("fc1.bias", "custom_from_mask", mask=~dead)
    steps = ex.session.steps
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ex.ui.shrink.click()  # demo model: traced on its own input layout
    report = ex.shrink_pane.report
    assert report.removed == {"fc1": 8}
    assert report.model.fc1.out_features == 120
    assert "state_dict bytes" in ex.ui.shrink_details.value
    assert "not</b> part of undo" in ex.shrink_pane.box.children[0].value
    assert ex.session.steps == steps
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    ex.close()


def test_shrink_without_example_inputs_says_what_to_set():
    ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 3)), debounce=None)
    ex.ui.shrink.click()
    assert ex.shrink_pane.report is None
    assert "example_inputs" in ex.ui.status.value
    ex.close()
