"""The metric readout: ``explore(model, evaluate=fn)`` shows fn for the current state and for
the previewed step, computed on a trial copy, without touching the model."""

from __future__ import annotations

import pytest
import torch

from helpers.widgets import assert_same_state, mlp, state
from prune_explorer.session import Session
from prune_explorer.session.model.trial import trial_copy
from prune_explorer.widgets import Explorer


def zero_share(model: torch.nn.Module) -> dict[str, float]:
    weight = model[0].weight
    return {"zeros": float((weight == 0).float().mean())}


def test_readout_shows_now_and_after_the_previewed_step_and_leaves_the_model_alone():
    model = mlp()
    before = state(model)
    ex = Explorer(model, debounce=None, evaluate=zero_share)
    ex.ui.amount.value = 0.25
    assert ex.metric.now == {"zeros": 0.0}
    assert ex.metric.after == {"zeros": 0.25}
    assert "zeros: now 0.0% → after this step 25.0% (+25.0 points)" in ex.ui.metric.value
    assert_same_state(model, before)
    ex.ui.apply.click()
    ex.ui.amount.value = 0.5  # half of what is left
    assert ex.metric.now == {"zeros": 0.25}
    assert ex.metric.after == {"zeros": 0.625}
    ex.close()


def test_a_plain_float_is_a_score_and_a_failure_is_a_message():
    calls = []

    def flaky(model):
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError("no data")
        return 0.5

    ex = Explorer(mlp(), debounce=None, evaluate=flaky)
    assert ex.metric.now == {"score": 0.5}
    ex.ui.amount.value = 0.4
    assert ex.metric.error == "RuntimeError: no data"
    assert "evaluate failed: RuntimeError: no data" in ex.ui.metric.value
    assert ex.status.kind != "error"  # the readout is the one place for its error
    ex.close()


def test_background_evaluations_are_superseded_not_queued():
    seen = []

    def record(model):
        seen.append(float((model[0].weight == 0).float().mean()))
        return seen[-1]

    ex = Explorer(mlp(), debounce=60.0, evaluate=record)  # nothing runs on its own
    for amount in (0.1, 0.2, 0.3, 0.4):
        ex.ui.amount.value = amount
        ex.explore_pane.runner.flush()
    ex.metric.runner.flush()
    assert seen == [0.0, pytest.approx(0.4, abs=0.01)]  # current state once, then the newest
    ex.close()


def test_trial_copy_installs_masks_on_a_copy_of_pruned_and_unpruned_tensors():
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    before = state(model)
    masks = s.preview_global(["0.weight", "2.weight"], amount=0.8)
    copy = trial_copy(s, masks)
    for name, mask in masks.items():
        module = copy.get_submodule(name.rpartition(".")[0])
        assert torch.equal(module.weight != 0, mask != 0)
    assert_same_state(model, before)


def test_evaluate_must_be_callable():
    with pytest.raises(TypeError, match="evaluate must be a callable"):
        Explorer(mlp(), debounce=None, evaluate=0.5)
