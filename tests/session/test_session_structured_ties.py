"""Issue 21, must-hold 1 in the session: structured steps whose norms tie at the cut.

The session keeps the tied slices of lowest index on every device (the core's rule): its previews
(the slider's cached slice scores for numeric ``n``, the core for ``'fro'``) equal what apply
installs bit for bit, the CPU path and the device path (run on CPU tensors, with another
device's ``topk`` stood in) give the same masks, each step notes the tie it split, and the
exported snippet reproduces the masks on stock ``torch.nn.utils.prune``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import nn

from helpers.session import locate
from helpers.snippet_replay import assert_same_state_dict, replay_on_stock_torch
from helpers.structured_ties import (
    kept_slices,
    lowest_index_kept,
    norms_of,
    on_both_paths,
    straddles,
    tied_slices,
)
from prune_explorer.session import Session

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# (target, settings): chained on one tensor, so later steps see dead slices; n=0 ties every
# slice (its snippet ranks with n=1), 'fro' is previewed by the core, not the cached scores
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("0.weight", {"amount": 11, "n": 2, "dim": 0}),
    ("0.weight", {"amount": 0.3, "n": "fro", "dim": 0}),
    ("1.weight", {"amount": 9, "n": math.inf, "dim": 1}),
    ("1.weight", {"amount": 0.25, "n": 0, "dim": 1}),
    ("1.weight", {"amount": 4, "n": 1, "dim": 1}),
]


def build(dtype: torch.dtype) -> nn.Module:
    """Layer 0: 40 output rows that tie in groups; layer 1: 40 input columns that do."""
    model = nn.Sequential(nn.Linear(16, 40), nn.Linear(40, 24))
    with torch.no_grad():
        model[0].weight.copy_(tied_slices(40, 16, 0, torch.float32, seed=1))
        model[1].weight.copy_(tied_slices(40, 24, 1, torch.float32, seed=2))
        for layer in model:
            layer.bias.copy_(torch.linspace(-1, 1, layer.bias.numel()))
    return model.to(dtype)


def run(dtype: torch.dtype) -> tuple[Session, list[dict[str, Any]]]:
    """The steps, each previewed then applied: per step what the test checks."""
    s = Session(build(dtype))
    seen = []
    for target, settings in STEPS:
        module, name = locate(s.model, target)
        dim = settings["dim"]
        current = getattr(module, name).detach()
        alive = kept_slices(getattr(module, name + "_mask"), dim) \
            if hasattr(module, name + "_mask") else torch.ones(current.shape[dim], dtype=torch.bool)
        norms = norms_of(current.index_select(dim, torch.nonzero(alive).view(-1)),
                         settings["n"], dim)
        k = settings["amount"] if isinstance(settings["amount"], int) \
            else round(settings["amount"] * len(norms))
        expected = torch.zeros_like(alive)
        expected[alive] = lowest_index_kept(norms, k)
        preview = s.preview(target, "ln_structured", **settings)
        step = s.apply(target, "ln_structured", **settings)
        seen.append({"preview": preview, "installed": getattr(module, name + "_mask").clone(),
                     "expected": expected, "straddles": straddles(norms, k), "ties": step.ties})
    return s, seen


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
def test_tied_structured_steps_keep_lowest_index_on_both_paths(dtype, monkeypatch):
    (s_cpu, cpu), (s_dev, dev) = on_both_paths(lambda: run(dtype), monkeypatch)
    assert sum(c["straddles"] for c in cpu) >= 4  # the data: nearly every cut splits a tie
    for i, (c, d) in enumerate(zip(cpu, dev, strict=True)):
        for got in (c, d):
            assert torch.equal(got["preview"].to(got["installed"].dtype), got["installed"]), i
            assert torch.equal(kept_slices(got["installed"], STEPS[i][1]["dim"]),
                               got["expected"]), i
            # the cut slices of a straddling tie are its highest-index ones
            assert got["ties"] == ("highest" if got["straddles"] else None), i
        assert torch.equal(c["installed"], d["installed"]), i
    assert s_cpu.plan.to_snippet() == s_dev.plan.to_snippet()


def test_only_a_step_that_split_a_tie_gets_ranks_in_the_snippet():
    s = Session(build(torch.float32))
    norms = norms_of(s.model[0].weight.detach(), 2, 0)
    k = next(k for k in range(1, 40) if not straddles(norms, k))  # a cut between two values
    assert s.apply("0.weight", "ln_structured", amount=k, n=2, dim=0).ties is None
    norms = norms_of(s.model[1].weight.detach(), 1, 1)
    k = next(k for k in range(1, 40) if straddles(norms, k))
    assert s.apply("1.weight", "ln_structured", amount=k, n=1, dim=1).ties == "highest"
    source = s.plan.to_snippet()
    plain = 'prune.ln_structured(model.get_submodule("0"), "weight", amount='
    assert source.count(plain) == 1
    assert source.count("slice_ranks(module.weight.detach()") == 1


def conv1d() -> nn.Module:
    """A rank-3 weight (``'nuc'`` is defined there) of 12 filters, one pattern times 1, 2, 4."""
    model = nn.Sequential(nn.Conv1d(4, 12, 5))
    base = torch.randint(-4, 5, (4, 5), generator=torch.Generator().manual_seed(3)) / 4
    with torch.no_grad():
        model[0].weight.copy_(torch.stack([base * 2.0 ** (i % 3) for i in range(12)]))
        model[0].bias.zero_()
    return model


def conv1d_steps(s: Session) -> None:
    s.apply("0.weight", "ln_structured", amount=5, n="nuc", dim=0)
    s.apply("0.weight", "ln_structured", amount=2, n=-math.inf, dim=1)
    s.apply("0.weight", "ln_structured", amount=1, n=0.5, dim=0)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    sessions, cases = {}, {}
    for name, dtype in DTYPES.items():
        s, _ = run(dtype)
        sessions[name] = s
        cases[name] = (build(dtype), s.plan.to_snippet())
    s = Session(conv1d())
    conv1d_steps(s)
    sessions["conv1d"] = s
    cases["conv1d"] = (conv1d(), s.plan.to_snippet())
    replay = replay_on_stock_torch(tmp_path_factory.mktemp("structured_ties"), cases)
    assert not replay.errors, replay.errors
    return sessions, replay.results


@pytest.mark.parametrize("case", list(DTYPES))
def test_snippet_reproduces_tied_structured_masks_on_stock_torch(replayed, case):
    sessions, results = replayed
    source = sessions[case].plan.to_snippet()
    noted = sum(step.ties is not None for step in sessions[case].steps)
    assert noted >= 4
    assert source.count("slice_ranks(module.weight.detach()") == noted
    assert source.count("def slice_ranks(") == 1
    assert "n=1, dim=1,\n" in source  # the n=0 step ranks with n=1
    expected = sessions[case].model.state_dict()
    got = results[case]
    assert_same_state_dict(got, expected)


def test_snippet_reproduces_nuc_minus_inf_and_fractional_norms(replayed):
    sessions, results = replayed
    assert [step.ties for step in sessions["conv1d"].steps] == ["highest"] * 3
    for key, value in sessions["conv1d"].model.state_dict().items():
        assert torch.equal(results["conv1d"][key], value), key


@pytest.mark.parametrize("off_cpu", [False, True])
def test_snippet_ranks_slices_by_the_cores_norms(off_cpu, monkeypatch):
    """The snippet's ``slice_ranks`` orders slices as the core's ``slice_norms`` does (off the
    CPU: 2-byte floats summed in float64; both branches run here on CPU tensors), equal norms
    highest index first, and ranks only the slices the mask keeps."""
    from prune_explorer.prune import methods

    source = run(torch.bfloat16)[0].plan.to_snippet()
    helpers = source[source.index("def stable_rank("):source.index("# step 1")]
    assert helpers.count('w.device.type != "cpu"') == 1
    if off_cpu:
        helpers = helpers.replace('w.device.type != "cpu"', "True")
        monkeypatch.setattr(methods, "_exact_norms_wanted", lambda t: True)
    namespace: dict[str, Any] = {"torch": torch}
    exec(helpers, namespace)
    g = torch.Generator().manual_seed(5)
    plain = (torch.randn(40, 700, generator=g) * 0.02).to(torch.bfloat16)
    for w in (plain, tied_slices(40, 24, 1, torch.bfloat16, seed=6).T.contiguous()):
        mask = torch.ones_like(w)
        mask[3] = 0
        mask[17] = 0
        for n in (1, 2, math.inf):
            ranks = namespace["slice_ranks"](w, mask, n, 0, "highest")
            assert ranks.shape == w.shape
            assert ranks.dtype == torch.float64
            per_slice = ranks[:, 0].tolist()
            alive = [i for i in range(40) if i not in (3, 17)]
            assert per_slice[3] == per_slice[17] == 0
            norms = methods.slice_norms(w[alive], n, 0).double().tolist()
            order = sorted(range(38), key=lambda j: (norms[j], -j))
            assert [per_slice[alive[j]] for j in order] == list(range(1, 39)), n
