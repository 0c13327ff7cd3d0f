"""Odd inputs get clear errors that name the argument: sensitivity ``amounts`` and the
``*_orig``/``*_mask`` names that pruning creates (which must not be pruned themselves)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as torch_prune

from helpers.session import mlp
from prune_explorer import prune
from prune_explorer.prune._module import PruningStateError
from prune_explorer.session import InvalidStepError, Session


@pytest.mark.parametrize(("amounts", "shown"), [
    (["0.5x"], "'0.5x'"), ([True], "True"), (None, "None"), ([], "an empty list"),
    ("0.5", "'0.5'"), ([float("nan")], "nan"),
])
def test_sensitivity_amounts_are_validated_with_a_message_naming_them(amounts, shown):
    s = Session(mlp())
    with pytest.raises(InvalidStepError, match=r"^Session\.sensitivity: amounts must be ") as info:
        s.sensitivity(lambda m: 1.0, amounts=amounts, progress=False)
    assert info.value.field == "amounts"
    assert str(info.value).endswith(f"got {shown}")


@pytest.mark.parametrize("suffix", ["_orig", "_mask"])
@pytest.mark.parametrize("pruned_by", [prune, torch_prune], ids=["ours", "torch"])
def test_the_orig_and_mask_of_a_pruned_tensor_cannot_be_pruned(suffix, pruned_by):
    layer = torch.nn.Linear(4, 3)
    pruned_by.l1_unstructured(layer, "weight", amount=0.5)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    with pytest.raises(PruningStateError,
                       match=rf"^l1_unstructured: name must be a tensor to prune, not the .* of "
                             rf"the pruned tensor 'weight'; prune 'weight' itself .*; got "
                             rf"'weight{suffix}'$"):
        prune.l1_unstructured(layer, "weight" + suffix, amount=0.5)
    assert list(layer.state_dict()) == list(before)
    prune.l1_unstructured(layer, "weight", amount=0.5)  # the tensor itself still prunes
    assert int((layer.weight_mask == 0).sum()) == 9


def test_a_plain_parameter_named_like_orig_can_still_be_pruned():
    layer = torch.nn.Module()
    layer.weight_orig = torch.nn.Parameter(torch.randn(3, 3))  # not the _orig of anything
    prune.l1_unstructured(layer, "weight_orig", amount=0.5)
    assert hasattr(layer, "weight_orig_mask")


def test_the_session_names_the_pruned_tensor_when_given_its_orig():
    model = mlp()
    torch_prune.l1_unstructured(model[0], "weight", amount=0.5)
    s = Session(model)
    with pytest.raises(InvalidStepError,
                       match=r"'0\.weight_orig' is not a prunable tensor of this model; it is "
                             r"the original values of the pruned tensor '0\.weight'"):
        s.apply("0.weight_orig", "l1_unstructured", amount=0.5)
