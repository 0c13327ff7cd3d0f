"""Pruning changed on the model behind the session's back is refused, naming the tensor.

The session never reports a state that is not the model's: after a direct ``prune.remove`` or
``prune.l1_unstructured`` on a tensor it manages, undo/reset/apply/commit on that tensor raise
:class:`ModelChangedError` and change nothing. Pruning found when the session starts is its
declared starting point (``Session.found``).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as torch_prune

from helpers.session import assert_exact_state, exact_state, mlp
from prune_explorer import prune
from prune_explorer.session import ModelChangedError, NotUndoableError, Session


@pytest.mark.parametrize("module", [prune, torch_prune], ids=["ours", "torch"])
def test_undo_after_an_external_remove_is_refused(module):
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    module.remove(model[0], "weight")
    state = exact_state(model)
    with pytest.raises(ModelChangedError,
                       match=r"^Session\.undo: tensor '0\.weight' was changed outside the "
                             r"session \(it is no longer pruned"):
        s.undo()
    with pytest.raises(ModelChangedError, match=r"'0\.weight'"):
        s.reset()
    assert isinstance(ModelChangedError("x"), NotUndoableError)
    assert_exact_state(state, exact_state(model))
    assert len(s.steps) == 1  # nothing was popped either


def test_apply_on_a_tensor_pruned_again_outside_the_session_is_refused():
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    torch_prune.random_unstructured(model[0], "weight", amount=0.5)
    with pytest.raises(ModelChangedError, match=r"'0\.weight'.*pruned again"):
        s.apply("0.weight", "l1_unstructured", amount=0.2)
    with pytest.raises(ModelChangedError, match=r"'0\.weight'"):
        s.commit("0.weight")
    s.apply("2.weight", "l1_unstructured", amount=0.5)  # other tensors are fine
    with pytest.raises(ModelChangedError):
        s.reset()


def test_a_tensor_pruned_outside_the_session_after_it_started_is_refused():
    model = mlp()
    s = Session(model)
    prune.l1_unstructured(model[2], "weight", amount=0.5)
    with pytest.raises(ModelChangedError, match=r"'2\.weight' was changed outside the session "
                                                r"\(it was pruned by a call"):
        s.apply("2.weight", "l1_unstructured", amount=0.5)


def test_moving_or_reloading_the_model_is_not_a_change():
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    model.to(torch.float32)  # buffers are replaced by equal ones
    model.load_state_dict(model.state_dict())
    s.undo()
    assert s.steps == ()


def test_a_mask_written_in_place_with_other_values_is_refused():
    # load_state_dict copies into the mask buffer: same object, new values. Before the version
    # check the session went on from the loaded mask while its history and plan still said 50%.
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    loaded = {k: v.clone() for k, v in model.state_dict().items()}
    loaded["0.weight_mask"].fill_(1)
    mask = model[0].weight_mask
    model.load_state_dict(loaded)
    assert model[0].weight_mask is mask  # written in place, not replaced
    state = exact_state(model)
    with pytest.raises(ModelChangedError,
                       match=r"^Session\.apply: tensor '0\.weight' was changed outside the "
                             r"session \(its mask was written in place"):
        s.apply("0.weight", "l1_unstructured", amount=0.25)
    with pytest.raises(ModelChangedError, match=r"'0\.weight'.*written in place"):
        s.undo()
    assert_exact_state(state, exact_state(model))
    assert len(s.steps) == 1


def test_a_mask_rewritten_with_its_own_values_is_not_a_change():
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    with torch.no_grad():
        model[0].weight_mask.mul_(1)  # the version moves, the values do not
    s.apply("0.weight", "l1_unstructured", amount=0.25)
    # 30 entries: 15 pruned, then round(0.25 * 15) = 4 of the 15 left
    assert [e.pruned for e in s.history("0.weight")] == [0, 15, 19]


def test_pruning_found_at_the_start_is_the_declared_starting_point():
    model = mlp()
    torch_prune.l1_unstructured(model[0], "weight", amount=0.5)
    s = Session(model)
    assert s.found == {"0.weight": ("l1_unstructured",)}
    found = exact_state(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    with pytest.warns(UserWarning, match=r"\['0.weight'\] stay pruned"):
        s.reset()
    assert_exact_state(found, exact_state(model))
