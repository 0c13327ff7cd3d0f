"""Global vs local pruning side by side, with totals and layer collapse."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import torch.nn.utils.prune as torch_prune

from helpers.session import (
    assert_exact_state,
    convnet,
    exact_state,
    fresh_copy,
    locate,
    mlp,
    torch_apply,
)
from prune_explorer.session import Session
from prune_explorer.session.analysis.frames import is_collapsed

COLUMNS = ["name", "numel", "sparsity_global", "sparsity_local", "pruned_global", "pruned_local",
           "collapsed_global", "collapsed_local"]


def _collapsed(mask: torch.Tensor, threshold: float) -> bool:
    zero = mask == 0
    if zero.float().mean().item() >= threshold:
        return True
    for dim in range(mask.dim()):
        per_slice = zero.transpose(0, dim).reshape(mask.shape[dim], -1).all(dim=1)
        if bool(per_slice.all()):
            return True
    return False


def _expected(model, names, amount, threshold=0.99, setup=()):
    """Compute the table with torch.nn.utils.prune on two copies of the model.

    ``model`` is unpruned (deepcopy cannot copy a pruned model); ``setup`` steps run first.
    """
    g_model, l_model = fresh_copy(model), fresh_copy(model)
    for step in setup:
        torch_apply(g_model, step)
        torch_apply(l_model, step)
    torch_prune.global_unstructured(
        [locate(g_model, n) for n in names], pruning_method=torch_prune.L1Unstructured,
        amount=amount,
    )
    for name in names:
        module, tensor = locate(l_model, name)
        torch_prune.l1_unstructured(module, tensor, amount=amount)
    rows = []
    for name in names:
        g_module, tensor = locate(g_model, name)
        l_module, _ = locate(l_model, name)
        g_mask, l_mask = getattr(g_module, tensor + "_mask"), getattr(l_module, tensor + "_mask")
        numel = g_mask.numel()
        g_pruned, l_pruned = int((g_mask == 0).sum()), int((l_mask == 0).sum())
        rows.append([name, numel, g_pruned / numel, l_pruned / numel, g_pruned, l_pruned,
                     _collapsed(g_mask, threshold), _collapsed(l_mask, threshold)])
    numel = sum(r[1] for r in rows)
    g, lo = sum(r[4] for r in rows), sum(r[5] for r in rows)
    rows.append(["TOTAL", numel, g / numel, lo / numel, g, lo, any(r[6] for r in rows),
                 any(r[7] for r in rows)])
    return pd.DataFrame(rows, columns=COLUMNS)


@pytest.mark.parametrize("amount", [0.3, 0.7, 25])
def test_compare_matches_torch_and_changes_nothing(amount):
    model = convnet()
    s = Session(model)
    names = ["features.0.weight", "features.2.weight", "classifier.weight"]
    expected = _expected(model, names, amount)
    state, rng = exact_state(model), torch.random.get_rng_state()
    frame = s.compare_global_local(names, amount)
    assert_exact_state(state, exact_state(model))
    assert torch.equal(rng, torch.random.get_rng_state())
    assert s.steps == ()
    pd.testing.assert_frame_equal(frame, expected)


def test_compare_on_top_of_earlier_pruning_matches_torch():
    model = convnet()
    expected_setup = fresh_copy(model)
    s = Session(model)
    setup = [
        s.apply("features.2.weight", "ln_structured", amount=2, n=1, dim=0),
        s.apply("classifier.weight", "l1_unstructured", amount=0.5),
    ]
    names = ["features.0.weight", "features.2.weight", "classifier.weight"]
    pd.testing.assert_frame_equal(s.compare_global_local(names, 0.5),
                                  _expected(expected_setup, names, 0.5, setup=setup))


def test_default_names_are_the_tensors_with_two_or_more_dims():
    s = Session(convnet())
    frame = s.compare_global_local(amount=0.5)
    assert frame["name"].tolist() == ["features.0.weight", "features.2.weight",
                                      "classifier.weight", "TOTAL"]
    assert frame.columns.tolist() == COLUMNS


def test_global_pruning_collapses_a_layer_of_small_weights():
    model = mlp()
    with torch.no_grad():
        model[2].weight.mul_(1e-4)  # a layer of tiny weights: global pruning takes it all
    s = Session(model)
    names = ["0.weight", "2.weight", "4.weight"]
    frame = s.compare_global_local(names, 0.6).set_index("name")
    assert frame.loc["2.weight", "collapsed_global"]
    assert frame.loc["2.weight", "sparsity_global"] == 1.0
    assert not frame.loc["2.weight", "collapsed_local"]
    assert frame.loc["TOTAL", "collapsed_global"]
    assert not frame.loc["TOTAL", "collapsed_local"]
    pd.testing.assert_frame_equal(frame.reset_index(), _expected(model, names, 0.6))


def test_collapse_threshold_is_configurable():
    s = Session(mlp())
    frame = s.compare_global_local(["0.weight"], 0.5, collapse_threshold=0.5)
    assert frame["collapsed_local"].tolist() == [True, True]
    with pytest.raises(ValueError, match=r"Session.compare_global_local: collapse_threshold must "
                                         r"be a float in \(0, 1\]; got 0"):
        s.compare_global_local(["0.weight"], 0.5, collapse_threshold=0)


def test_is_collapsed_rules():
    almost = torch.ones(100)
    almost[:98] = 0
    assert not is_collapsed(almost)  # 98% pruned
    almost[98] = 0
    assert is_collapsed(almost)  # 99% pruned
    channels = torch.ones(4, 50)
    channels[:, :49] = 0  # 98% pruned, but every row still has one entry
    assert not is_collapsed(channels)
    assert not is_collapsed(torch.ones(0))


def test_compare_rejects_bad_input_naming_the_call():
    s = Session(mlp())
    with pytest.raises(ValueError, match=r"Session.compare_global_local: targets '0.wieght' is "
                                         r"not a prunable tensor"):
        s.compare_global_local(["0.wieght"], 0.5)
    with pytest.raises(ValueError, match=r"Session.compare_global_local: amount must be a float "
                                         r"in \[0, 1\] or an int >= 0; got 1.5"):
        s.compare_global_local(["0.weight"], 1.5)
    with pytest.raises(ValueError, match=r"Session.compare_global_local: amount must be at most "
                                         r"the number of entries still unpruned in targets "
                                         r"\(30\); got 31"):
        s.compare_global_local(["0.weight"], 31)
