"""Reports with fixed columns, totals and memory, compared with pandas' helpers."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from helpers.session import convnet, mlp
from prune_explorer import prune
from prune_explorer.session import Session

COLUMNS = ["name", "module_type", "shape", "numel", "zeros", "sparsity", "channels_pruned",
           "methods", "aliases"]
MEMORY_COLUMNS = ["name", "orig_bytes", "mask_bytes", "pruned_copy_bytes", "bytes_before",
                  "bytes_after", "freed"]


def _values(model, name):
    module_name, _, tensor = name.rpartition(".")
    module = model.get_submodule(module_name)
    if hasattr(module, tensor + "_orig"):
        return (getattr(module, tensor + "_orig") * getattr(module, tensor + "_mask")).detach()
    return getattr(module, tensor).detach()


def _dead_slices(values, dim):
    return sum(1 for i in range(values.shape[dim]) if not values.select(dim, i).any())


def _expected_report(model, methods):
    rows = []
    for module_name, module in model.named_modules():
        for param_name, _ in module.named_parameters(recurse=False):
            tensor = param_name.removesuffix("_orig")
            name = f"{module_name}.{tensor}"
            values = _values(model, name)
            zeros = int((values == 0).sum())
            rows.append({
                "name": name,
                "module_type": type(module).__name__,
                "shape": tuple(values.shape),
                "numel": values.numel(),
                "zeros": zeros,
                "sparsity": zeros / values.numel(),
                "channels_pruned": {d: _dead_slices(values, d) for d in range(values.dim())},
                "methods": methods.get(name, ()),
                "aliases": (),  # no tied parameters here (tests/test_tied_parameters.py)
            })
    return pd.DataFrame(rows, columns=COLUMNS)


def _order(frame, names):
    return frame.set_index("name").loc[names].reset_index()


def test_report_matches_an_independent_computation():
    model = convnet()
    prune.l1_unstructured(model.features[0], "weight", amount=0.2)  # found by the session
    s = Session(model)
    s.apply("features.0.weight", "ln_structured", amount=1, n=2, dim=0)
    s.apply("features.2.weight", "random_structured", amount=2, dim=1)
    s.apply_global(["features.2.weight", "classifier.weight"], amount=0.3)
    s.apply("classifier.bias", "l1_unstructured", amount=2)
    methods = {
        "features.0.weight": ("l1_unstructured", "ln_structured"),
        "features.2.weight": ("random_structured", "global_unstructured"),
        "classifier.weight": ("global_unstructured",),
        "classifier.bias": ("l1_unstructured",),
    }
    report = s.report()
    assert report.columns.tolist() == COLUMNS
    expected = _order(_expected_report(model, methods), list(s.names))
    pd.testing.assert_frame_equal(report, expected)
    # the structured step shows up as fully pruned input channels of the second conv
    row = report.set_index("name").loc["features.2.weight"]
    assert row["channels_pruned"][1] >= 2


def test_report_totals_row():
    s = Session(mlp())
    s.apply("0.weight", "l1_unstructured", amount=10)
    s.apply("2.bias", "l1_unstructured", amount=1)
    report = s.report(totals=True)
    body, total = report.iloc[:-1], report.iloc[-1]
    pd.testing.assert_frame_equal(body, s.report())
    numel = sum(p.numel() for p in mlp().parameters())
    assert total["name"] == "TOTAL"
    assert total["numel"] == numel
    assert total["zeros"] == 11
    assert total["sparsity"] == pytest.approx(11 / numel)
    assert total["shape"] == ()
    assert total["channels_pruned"] == {}
    assert total["methods"] == ()


def test_report_counts_committed_pruning_and_keeps_the_method_chain():
    s = Session(mlp())
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    s.commit()
    row = s.report().set_index("name").loc["0.weight"]
    assert row["zeros"] == 15
    assert row["methods"] == ("l1_unstructured", "remove")


def test_memory_report_matches_the_tensors_it_describes():
    model = mlp()
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    s.apply("4.bias", "identity")
    expected = []
    for module, tensor, name in [(model[0], "weight", "0.weight"), (model[4], "bias", "4.bias")]:
        orig = getattr(module, tensor + "_orig")
        mask = getattr(module, tensor + "_mask")
        copy = getattr(module, tensor)
        o = orig.untyped_storage().nbytes()
        m = mask.untyped_storage().nbytes()
        c = copy.untyped_storage().nbytes()
        expected.append([name, o, m, c, o + m + c, c, o + m])
    expected.append(["TOTAL", *[sum(r[i] for r in expected) for i in range(1, 7)]])
    frame = pd.DataFrame(expected, columns=MEMORY_COLUMNS)
    pd.testing.assert_frame_equal(s.memory_report(), frame)
    # and commit frees exactly that
    assert s.commit().freed == frame.iloc[-1]["freed"]


def test_report_of_an_untouched_model_has_no_zeros_and_empty_chains():
    s = Session(mlp())
    report = s.report()
    assert (report["zeros"] == 0).all()
    assert report["methods"].tolist() == [()] * len(s.names)
    assert report["channels_pruned"].tolist()[0] == {0: 0, 1: 0}


def test_reprs_tell_what_they_hold():
    model = mlp()
    s = Session(model)
    assert repr(s) == ("Session(Sequential: 6 tensors, 0 pruned, 0 steps (0 undoable), 0 of 74 "
                       "entries masked (0.0%))")
    s.apply("0.weight", "l1_unstructured", amount=15)
    s.commit()
    s.apply("2.weight", "random_unstructured", amount=0.5, seed=4)
    assert repr(s) == ("Session(Sequential: 6 tensors, 1 pruned, 3 steps (1 undoable), 25 of 74 "
                       "entries masked (33.8%))")
    assert repr(s.plan) == (
        "Plan([\n"
        "  Step('l1_unstructured', '0.weight', amount=15),\n"
        "  Step('remove', '0.weight'),\n"
        "  Step('random_unstructured', '2.weight', amount=0.5, seed=4),\n"
        "])"
    )


def test_mask_and_tensor_accessors():
    model = mlp()
    s = Session(model)
    assert s.mask("0.weight").dtype == torch.bool
    assert s.mask("0.weight").all()
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    assert torch.equal(s.mask("0.weight"), model[0].weight_mask != 0)
    assert torch.equal(s.tensor("0.weight"), model[0].weight_orig.detach() * model[0].weight_mask)
    assert not s.tensor("0.weight").requires_grad
