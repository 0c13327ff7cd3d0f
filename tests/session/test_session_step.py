"""Step: validation, value semantics, repr and dict form."""

from __future__ import annotations

import math

import pytest
import torch

from prune_explorer.session import InvalidStepError, PackedMask, Step


def test_step_properties_and_repr():
    step = Step("ln_structured", "features.0.weight", amount=0.25, n=2, dim=0)
    assert step.method == "ln_structured"
    assert step.target == "features.0.weight"
    assert step.targets == ("features.0.weight",)
    assert dict(step.settings) == {"amount": 0.25, "n": 2, "dim": 0}
    assert step.seed is None
    assert not step.is_random
    assert not step.is_global
    assert repr(step) == "Step('ln_structured', 'features.0.weight', amount=0.25, n=2, dim=0)"
    with pytest.raises(TypeError):
        step.settings["amount"] = 0.5  # read-only


def test_settings_are_put_in_canonical_order_and_normalised():
    step = Step("ln_structured", "w", dim=1, n="inf", amount=3)
    assert list(step.settings) == ["amount", "n", "dim"]
    assert step.settings["n"] == math.inf
    assert step.to_dict()["n"] == "inf"
    assert Step("ln_structured", "w", amount=3, n=-math.inf, dim=1).to_dict()["n"] == "-inf"
    assert step == Step("ln_structured", "w", amount=3, n=math.inf, dim=1)


def test_global_step():
    step = Step("global_unstructured", ("a.weight", "b.weight"),
                pruning_method="random_unstructured", amount=10, seed=3)
    assert step.is_global
    assert step.is_random
    assert step.target == ("a.weight", "b.weight")
    assert repr(step) == ("Step('global_unstructured', ['a.weight', 'b.weight'], "
                          "pruning_method='random_unstructured', amount=10, seed=3)")
    assert Step.from_dict(step.to_dict()) == step


def test_custom_mask_is_stored_packed_and_compared_by_value():
    step = Step("custom_from_mask", "w", mask=torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
    mask = step.settings["mask"]
    assert isinstance(mask, PackedMask)
    assert mask.shape == (2, 2)
    assert mask.pruned == 1
    assert Step.from_dict(step.to_dict()) == step
    assert repr(step) == ("Step('custom_from_mask', 'w', mask=PackedMask(shape=(2, 2), kept=3, "
                          "pruned=1, 1 byte))")


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("identity", "w"), {"amount": 0.1},
         "Step: unexpected setting 'amount' for identity; its settings are: none"),
        (("random_unstructured", "w"), {"amount": 0.1},
         "Step: seed must be an int in [0, 2**63) for a random method (random_unstructured), so "
         "that its mask can be reproduced; got None"),
        (("random_unstructured", "w"), {"amount": 0.1, "seed": 2**63},
         "Step: seed must be an int in [0, 2**63); got 9223372036854775808"),
        (("random_unstructured", "w"), {"amount": 0.1, "seed": True},
         "Step: seed must be an int in [0, 2**63); got True"),
        (("remove", "w"), {"seed": 1},
         "Step: seed must be None for remove, which draws no random numbers; got 1"),
        (("l1_unstructured", ""), {"amount": 0.1},
         "Step: target must be a tensor address such as 'features.0.weight' (dot-separated, no "
         "empty parts); got ''"),
        (("l1_unstructured", "a."), {"amount": 0.1}, "Step: target must be a tensor address"),
        (("global_unstructured", ["a.w"]), {"pruning_method": "l1_unstructured"},
         "Step: missing setting 'amount' for global_unstructured; it needs: pruning_method, "
         "amount"),
        (("custom_from_mask", "w"), {"mask": torch.tensor([2.0])},
         "Step: mask must hold only 0 and 1 (or bools); got tensor of shape (1,) and dtype "
         "torch.float32"),
    ],
)
def test_step_rejects_bad_input(args, kwargs, message):
    with pytest.raises(InvalidStepError) as info:
        Step(*args, **kwargs)
    assert str(info.value).startswith(message)


def test_steps_are_hashable_values():
    a = Step("l1_unstructured", "w", amount=0.5)
    b = Step("l1_unstructured", "w", amount=0.5)
    c = Step("l1_unstructured", "w", amount=1)
    assert a == b
    assert len({a, b, c}) == 2
    assert a != "l1_unstructured"


def test_each_method_name_is_the_function_name_in_torch_and_in_our_core():
    # the snippet and the session call ``prune.<name>`` directly, so the names must be torch's
    import torch.nn.utils.prune as torch_prune

    from prune_explorer import prune
    from prune_explorer.session.codegen.pattern_lines import PATTERN_METHODS
    from prune_explorer.session.steps.methods import METHODS

    for name, spec in METHODS.items():
        assert spec.name == name
        if spec.compute is not None:  # computed from calibration, installed as a custom mask
            assert spec.cls is None, name
            assert not hasattr(torch_prune, name), name
            continue
        assert callable(getattr(prune, name)), name
        if spec.cls is not None:
            assert isinstance(getattr(prune, spec.cls), type), spec.cls
        if name in PATTERN_METHODS:  # not in torch: the snippet builds their masks itself
            assert not hasattr(torch_prune, name), name
            continue
        assert callable(getattr(torch_prune, name)), name
        if spec.cls is not None:
            assert isinstance(getattr(torch_prune, spec.cls), type), spec.cls
