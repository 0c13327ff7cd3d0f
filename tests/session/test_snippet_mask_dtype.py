"""Issue 23, must-hold 3: a snippet leaves every mask in the model's dtype.

A tie-broken L1 call passes integer ranks as ``importance_scores``; on a tensor that is already
pruned, stock torch then stores the combined mask in the dtype of those ranks (int64). The
snippet casts it back. Small tie-heavy tensors (few distinct values), every dtype, local and
global, L1 and random steps after earlier pruning, replayed on stock torch in one fresh
interpreter: masks must equal the session's in dtype and value.
"""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
from torch import nn

from helpers.snippet_replay import replay_on_stock_torch
from prune_explorer.session import Session

DTYPES = {"fp32": torch.float32, "fp64": torch.float64, "fp16": torch.float16,
          "bf16": torch.bfloat16}
W = ["0.weight", "1.weight"]


def _tied_model(dtype: torch.dtype, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(12, 10), nn.Linear(10, 9))
    with torch.no_grad():
        for p in model.parameters():  # values in {-2, -1.5, ..., 2}: ties at nearly every cut
            p.copy_(torch.clamp(torch.round(torch.randn(p.shape, generator=g) * 2) / 2, -2, 2))
    return model.to(dtype)


def _l1_twice(s: Session) -> None:
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    s.apply("0.weight", "l1_unstructured", amount=0.4)


def _random_then_l1(s: Session) -> None:
    s.apply("0.weight", "random_unstructured", amount=0.25)
    s.apply("0.weight", "l1_unstructured", amount=7)
    s.apply("0.bias", "l1_unstructured", amount=0.5)


def _global_after_local(s: Session) -> None:
    s.apply("1.weight", "l1_unstructured", amount=0.2)
    s.apply_global(W, "l1_unstructured", amount=0.35)
    s.apply_global(W, "random_unstructured", amount=0.2)


def _structured_then_l1(s: Session) -> None:
    s.apply("1.weight", "ln_structured", amount=2, n=1, dim=0)
    s.apply("1.weight", "l1_unstructured", amount=0.3)
    s.apply_global(W, "l1_unstructured", amount=11)


RUNS = [_l1_twice, _random_then_l1, _global_after_local, _structured_then_l1]
CASES = {f"{d}-{run.__name__}-{seed}": (d, run, seed)
         for d, run, seed in itertools.product(DTYPES, RUNS, range(2))}


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    sessions, cases = {}, {}
    for case, (dtype_name, run, seed) in CASES.items():
        model = _tied_model(DTYPES[dtype_name], seed)
        s = Session(copy.deepcopy(model), seed=seed)
        run(s)
        sessions[case] = s
        cases[case] = (model, s.plan.to_snippet())
    replay = replay_on_stock_torch(tmp_path_factory.mktemp("mask_dtype"), cases)
    assert not replay.errors, replay.errors
    return sessions, replay.results


def test_the_cases_hold_tie_broken_steps_on_already_pruned_tensors(replayed):
    # Without these the test below could not fail: L1 steps with a noted tie rule (integer
    # ranks in the snippet) on tensors an earlier step already pruned, in every dtype.
    sessions, _ = replayed
    for dtype_name in DTYPES:
        later = [st for case, s in sessions.items() if case.startswith(dtype_name + "-")
                 for st in s.steps[1:] if st.ties is not None]
        assert len(later) >= 4, dtype_name


@pytest.mark.parametrize("case", list(CASES))
def test_snippet_masks_keep_the_model_dtype_and_values(replayed, case):
    sessions, results = replayed
    expected = sessions[case].model.state_dict()
    got = results[case]
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key].dtype == value.dtype == DTYPES[case.split("-")[0]], key
        assert torch.equal(got[key], value), key
