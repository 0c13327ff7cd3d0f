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
    ex.session.apply("0.weight", "l1_unstructured", amount=0.5)
    ex.ui.shrink.click()
    assert ex.shrink_pane.report is None
    assert "example_inputs" in ex.ui.status.value
    ex.close()


def test_shrink_is_off_with_its_reason_while_nothing_is_pruned_and_on_after_a_step():
    ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2)),
                  debounce=None)
    ex.example_inputs = torch.zeros(1, 4)
    assert ex.ui.shrink.disabled
    assert "Shrink is off: nothing is pruned" in ex.ui.shrink_note.value
    ex.shrink_pane.do_shrink()  # called anyway: refused, nothing reported as removed
    assert ex.shrink_pane.report is None
    assert "nothing is pruned" in ex.ui.status.value
    ex.session.apply("0.weight", "ln_structured", amount=1, n=1, dim=0)
    assert not ex.ui.shrink.disabled
    assert ex.ui.shrink_note.value == ""
    ex.session.undo()
    assert ex.ui.shrink.disabled
    ex.close()
