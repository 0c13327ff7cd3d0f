"""Bad input raises before anything changes, with a message naming the problem.

Each case runs on a session with some history; afterwards the model (state_dict, Parameter
objects, hooks), the session (steps, histories), the global RNG and the session's seed stream
must be exactly as before.
"""

from __future__ import annotations

import re

import pytest
import torch

from helpers.session import assert_exact_state, convnet, exact_state
from prune_explorer.session import InvalidStepError, Session, Step

W = "features.2.weight"  # shape (6, 4, 3, 3)

CASES = [
    # (call, args, kwargs, message)
    ("apply", ("features.2.wieght", "l1_unstructured"), {"amount": 0.5},
     "Session.apply: target 'features.2.wieght' is not a prunable tensor of this model; did you "
     "mean 'features.2.weight'"),
    ("apply", (W, "l2_unstructured"), {"amount": 0.5},
     "Session.apply: method must be one of 'identity', 'random_unstructured', "
     "'l1_unstructured', 'random_structured', 'ln_structured', 'custom_from_mask', "
     "'semi_structured', 'block_structured', 'global_unstructured', 'wanda_rows', 'sparsegpt', "
     "'remove'; "
     "got 'l2_unstructured'"),
    ("apply", (W, "l1_unstructured"), {"amount": 1.5},
     "Session.apply: amount must be a float in [0, 1] or an int >= 0; got 1.5"),
    ("apply", (W, "l1_unstructured"), {"amount": float("nan")},
     "Session.apply: amount must be a float in [0, 1] or an int >= 0; got nan"),
    ("apply", (W, "l1_unstructured"), {"amount": True},
     "Session.apply: amount must be a float in [0, 1] or an int >= 0; got True"),
    ("apply", (W, "l1_unstructured"), {"amount": lambda left: left + 1},
     "Session.apply: amount must be at most the number of entries of 'features.2.weight' still "
     "unpruned ({left}); got {over}"),
    ("apply", (W, "l1_unstructured"), {},
     "Session.apply: missing setting 'amount' for l1_unstructured; it needs: amount"),
    ("apply", (W, "l1_unstructured"), {"amount": 0.5, "dim": 0},
     "Session.apply: unexpected setting 'dim' for l1_unstructured; its settings are: amount"),
    ("apply", (W, "ln_structured"), {"amount": 0.5, "n": float("nan"), "dim": 0},
     "Session.apply: n must be a number (int, float, inf or -inf, not nan, within the range "
     "of a float), 'fro' or 'nuc'; got nan"),
    ("apply", (W, "ln_structured"), {"amount": 0.5, "n": 2, "dim": 4},
     "Session.apply: dim must be in [-4, 3] for 'features.2.weight' of shape (6, 4, 3, 3); "
     "got 4"),
    ("apply", (W, "ln_structured"), {"amount": 0.5, "n": 2, "dim": 1.0},
     "Session.apply: dim must be an int; got 1.0"),
    ("apply", (W, "ln_structured"), {"amount": 6, "n": 2, "dim": 0},
     "Session.apply: amount must be at most the number of channels of 'features.2.weight' "
     "along dim 0 still unpruned (5); got 6"),
    ("apply", (W, "ln_structured"), {"amount": 1, "n": "fro", "dim": 0},
     "Session.apply: n must be a number for 'features.2.weight' of shape (6, 4, 3, 3) ('fro' "
     "runs over at most two dims: only for tensors of at most 3-D; n=2 is the same norm); "
     "got 'fro'"),
    ("apply", (W, "ln_structured"), {"amount": 1, "n": "nuc", "dim": 0},
     "Session.apply: n must be a number or 'fro' for 'features.2.weight' of shape "
     "(6, 4, 3, 3) ('nuc' is a matrix norm: only for 3-D tensors, whose slices are matrices); "
     "got 'nuc'"),
    ("apply", ("features.2.bias", "random_structured"), {"amount": 1, "dim": 0},
     "Session.apply: tensor 'features.2.bias' must be at least 2-D for structured pruning "
     "(use an unstructured method for 1-D tensors such as biases); got shape (6,)"),
    ("apply", (W, "custom_from_mask"), {"mask": torch.ones(6, 4)},
     "Session.apply: mask must have the shape of 'features.2.weight', (6, 4, 3, 3); got shape "
     "(6, 4)"),
    ("apply", (W, "custom_from_mask"), {"mask": torch.full((6, 4, 3, 3), 0.5)},
     "Session.apply: mask must hold only 0 and 1 (or bools); got tensor of shape (6, 4, 3, 3) "
     "and dtype torch.float32"),
    ("apply", (W, "custom_from_mask"), {"mask": [1, 0]},
     "Session.apply: mask must be a torch.Tensor of 0/1 values or a PackedMask; got [1, 0]"),
    ("apply", (W, "l1_unstructured"), {"amount": 0.5, "seed": 3},
     "Session.apply: seed must be None for l1_unstructured, which draws no random numbers; "
     "got 3"),
    ("apply", (W, "random_unstructured"), {"amount": 0.5, "seed": -3},
     "Session.apply: seed must be an int in [0, 2**63); got -3"),
    ("apply", (["a.w", "b.w"], "global_unstructured"), {"amount": 0.5},
     "Session.apply: method 'global_unstructured' acts on several tensors; use "
     "Session.apply_global(targets, method, amount=...)"),
    ("apply", (W, "remove"), {},
     "Session.apply: method 'remove' makes pruning permanent; use Session.commit(names)"),
    ("apply", (["features.2.weight"], "l1_unstructured"), {"amount": 0.5},
     "Session.apply: target must be a tensor address such as 'features.0.weight' "
     "(dot-separated, no empty parts); got ['features.2.weight']"),
    ("apply_global", ("features.2.weight",), {"amount": 0.5},
     "Session.apply_global: targets must be a non-empty list of tensor addresses for "
     "global_unstructured; got 'features.2.weight'"),
    ("apply_global", ([W, "classifier.weight", W],), {"amount": 0.5},
     "Session.apply_global: targets must not repeat a tensor; 'features.2.weight' appears "
     "twice"),
    ("apply_global", ([W, "classifier.weigh"],), {"amount": 0.5},
     "Session.apply_global: targets 'classifier.weigh' is not a prunable tensor of this model; "
     "did you mean 'classifier.weight'"),
    ("apply_global", ([W], "ln_structured"), {"amount": 0.5},
     "Session.apply_global: pruning_method must be one of 'l1_unstructured', "
     "'random_unstructured'; got 'ln_structured'"),
    ("apply_global", ([W, "classifier.weight"],), {"amount": lambda left: left + 31},
     "Session.apply_global: amount must be at most the number of entries still unpruned in "
     "targets ({left_30}); got {over}"),
    ("preview", (W, "ln_structured"), {"amount": 0.5, "n": 2, "dim": -5},
     "Session.preview: dim must be in [-4, 3] for 'features.2.weight' of shape (6, 4, 3, 3); "
     "got -5"),
    ("preview", ("nope", "identity"), {},
     "Session.preview: target 'nope' is not a prunable tensor of this model (Session.names "
     "lists all 6)"),
    ("preview_global", ([W],), {"amount": -0.1},
     "Session.preview_global: amount must be a float in [0, 1] or an int >= 0; got -0.1"),
    ("apply_step", (Step("l1_unstructured", "features.9.weight", amount=0.5),), {},
     "Session.apply_step: target 'features.9.weight' is not a prunable tensor of this model; "
     "did you mean"),
    ("commit", (["classifier.bias"],), {},
     "Session.commit: target 'classifier.bias' is not pruned, so there is no pruning to make "
     "permanent"),
    ("history", ("classifier",), {},
     "Session.history: name 'classifier' is not a prunable tensor of this model; did you mean"),
    ("mask", (3,), {}, "Session.mask: name must be a tensor address string; got 3"),
]


def _session():
    s = Session(convnet(), seed=5)
    s.apply(W, "l1_unstructured", amount=30)
    s.apply(W, "ln_structured", amount=1, n=1, dim=0)  # one of the 6 channels
    return s


@pytest.mark.parametrize(("call", "args", "kwargs", "message"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_input_raises_before_anything_changes(call, args, kwargs, message):
    s = _session()
    model = s.model
    # counts that depend on the state: computed from the model, not from the session
    left = int((model.features[2].weight_mask != 0).sum())
    if callable(kwargs.get("amount")):
        kwargs = {**kwargs, "amount": kwargs["amount"](left)}
        message = message.format(over=kwargs["amount"], left=left, left_30=left + 30)

    state, rng = exact_state(model), torch.random.get_rng_state()
    steps = s.steps
    histories = {n: s.history(n).pruned_counts() for n in s.names}
    with pytest.raises(InvalidStepError, match="^" + re.escape(message)):
        getattr(s, call)(*args, **kwargs)
    assert_exact_state(state, exact_state(model))
    assert torch.equal(rng, torch.random.get_rng_state())
    assert s.steps == steps
    assert {n: s.history(n).pruned_counts() for n in s.names} == histories
    # the seed stream is untouched: the next random step gets the seed a clean session gets
    expected_seed = _session().apply(W, "random_unstructured", amount=0.1).seed
    assert s.apply(W, "random_unstructured", amount=0.1).seed == expected_seed
    s.undo()
    s.undo()
    s.undo()
    assert not hasattr(model.features[2], "weight_mask")


def test_errors_are_value_and_type_errors_with_a_field():
    with pytest.raises(TypeError) as info:
        Session(convnet()).apply(W, "l1_unstructured", amount="half")
    assert isinstance(info.value, ValueError)
    assert info.value.field == "amount"


def test_session_needs_a_module():
    with pytest.raises(TypeError, match=r"Session: model must be a torch.nn.Module; got dict"):
        Session({})


def test_the_session_reads_hooks_with_the_core_reader_duplicates_are_an_error():
    from prune_explorer import prune
    from prune_explorer.session.model.hooks import find_hook
    from prune_explorer.session.steps.methods import CLASS_TO_NAME

    layer = torch.nn.Linear(3, 2)
    prune.l1_unstructured(layer, "weight", amount=1)
    key, hook = find_hook(layer, "weight")
    assert layer._forward_pre_hooks[key] is hook
    layer.register_forward_pre_hook(prune.L1Unstructured(amount=1))  # a second hook ...
    list(layer._forward_pre_hooks.values())[-1]._tensor_name = "weight"  # ... on "weight"
    with pytest.raises(prune.PruningStateError, match=r"'weight' of Linear has 2 pruning hooks"):
        find_hook(layer, "weight")
    assert CLASS_TO_NAME["L1Unstructured"] == "l1_unstructured"
