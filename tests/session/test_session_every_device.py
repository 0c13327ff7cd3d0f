"""The session's promises on every device: the same checks on CPU (normal suite) and CUDA.

Each test takes ``device``: ``cpu`` always runs; ``cuda`` is marked ``cuda`` and skipped without
a GPU, so ``pytest -m cuda`` on a GPU machine runs the very checks the CPU suite keeps green:
preview equals apply bit for bit (every method, fp32 and bf16, masks on the model's device and,
on CUDA, equal to the CPU's), undo, commit and the history scrub, global pruning over mixed
shapes against torch, ``on_demand``, ``shrink``, and the exported snippet replayed on stock torch.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from helpers.session import (
    assert_exact_state,
    assert_same_pruning,
    exact_state,
    locate,
    masks,
    torch_apply,
)
from helpers.session_models import fill_tie_free
from helpers.snippet_replay import replay_on_stock_torch
from helpers.structured_ties import kept_slices, lowest_index_kept, norms_of, tied_slices
from prune_explorer import prune
from prune_explorer.session import Session

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ]),
]
DTYPES = [torch.float32, torch.bfloat16]
METHODS = [
    ("l1_unstructured", {"amount": 0.5}),
    ("random_unstructured", {"amount": 0.4, "seed": 3}),
    ("ln_structured", {"amount": 0.5, "n": 2, "dim": 0}),
    ("ln_structured", {"amount": 3, "n": 1, "dim": 1}),
    ("random_structured", {"amount": 2, "dim": 0, "seed": 4}),
    ("semi_structured", {"pattern": "2:4", "dim": -1}),
    ("block_structured", {"amount": 0.5, "block": (4, 4), "n": 1}),
]
RANDOM = {"random_unstructured", "random_structured"}


def mixed(device: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> nn.Module:
    """Layers of three shapes and ranks (tie-free in float32), on ``device`` in ``dtype``."""
    with torch.random.fork_rng(devices=[]):
        model = nn.Sequential(
            nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
            nn.Linear(8 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 16),
        )
    return fill_tie_free(model, seed).to(device=device, dtype=dtype)


def weights(model: nn.Module) -> list[str]:
    return [f"{n}.weight" for n, m in model.named_modules() if isinstance(m, nn.Conv2d | nn.Linear)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
@pytest.mark.parametrize(("method", "settings"), METHODS,
                         ids=[f"{m}-{i}" for i, (m, _) in enumerate(METHODS)])
def test_preview_equals_apply_bit_for_bit(device, dtype, method, settings):
    model = mixed(device, dtype)
    s = Session(model)
    target = "3.weight"
    s.apply(target, "l1_unstructured", amount=0.25)  # a chain: the method sees a mask so far
    preview = s.preview(target, method, **settings)
    assert preview.device.type == device
    s.apply(target, method, **settings)
    module, name = locate(model, target)
    installed = getattr(module, name + "_mask")
    assert installed.device.type == device
    assert torch.equal(preview.to(installed.dtype), installed)
    if method == "semi_structured":
        assert prune.satisfies_pattern(installed, "2:4", -1)
    if device != "cpu" and method not in RANDOM:  # one tie rule on every device
        on_cpu = Session(mixed("cpu", dtype))
        on_cpu.apply(target, "l1_unstructured", amount=0.25)
        on_cpu.apply(target, method, **settings)
        assert torch.equal(on_cpu.mask(target), s.mask(target).cpu())


@pytest.mark.parametrize("device", DEVICES)
def test_undo_commit_and_history_scrub(device):
    model = mixed(device)
    s = Session(model)
    target = "3.weight"
    before = exact_state(model)
    seen = []
    for method, settings in METHODS[:3]:
        s.apply(target, method, **settings)
        seen.append(masks(model)[target])
    history = s.history(target)
    assert len(history) == 1 + len(seen)  # the unpruned start, then one entry per step
    for k, mask in enumerate(seen, start=1):
        scrubbed = history.mask(k)
        assert scrubbed.device.type == device
        assert torch.equal(scrubbed, mask.bool())
    for _ in seen:
        s.undo()
    assert_exact_state(before, exact_state(model))
    s.apply(target, "l1_unstructured", amount=0.5)
    kept = model[3].weight_orig.detach().clone() * model[3].weight_mask
    s.commit()
    assert not hasattr(model[3], "weight_mask")
    assert model[3].weight.device.type == device
    assert torch.equal(model[3].weight.detach(), kept)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
def test_global_over_mixed_shapes_like_torch(device, dtype):
    model, oracle = mixed(device, dtype), mixed(device, dtype)
    s = Session(model)
    targets = weights(model)
    preview = s.preview_global(targets, amount=0.6)
    step = s.apply_global(targets, amount=0.6)
    for target in targets:
        assert preview[target].device.type == device
        assert torch.equal(preview[target].to(s.mask(target).dtype), s.mask(target))
    torch_apply(oracle, step)  # stock torch (as the snippet where bf16 ties straddle the cut)
    assert_same_pruning(model, oracle)


@pytest.mark.parametrize("device", DEVICES)
def test_on_demand_prunes_like_torch(device):
    model, oracle = mixed(device), mixed(device)
    prune.on_demand(model)
    s = Session(model)
    torch_apply(oracle, s.apply("0.weight", "l1_unstructured", amount=0.5))
    torch_apply(oracle, s.apply_global(weights(model), amount=0.3))
    s.apply("5.weight", "semi_structured", pattern="2:4", dim=-1)
    prune.semi_structured(oracle[5], "weight", pattern="2:4", dim=-1)  # not in torch: ours
    assert masks(model).keys() == masks(oracle).keys()
    for target, mask in masks(oracle).items():
        assert torch.equal(masks(model)[target], mask), target
        module, name = locate(model, target)
        assert name not in module.__dict__  # on demand: no pruned copy kept
        assert torch.equal(getattr(module, name), getattr(locate(oracle, target)[0], name))
    x = torch.randn(3, 4, 4, 4, generator=torch.Generator().manual_seed(1)).to(device)
    torch.testing.assert_close(model(x), oracle(x))  # same weights; kernels may differ on GPU


@pytest.mark.parametrize("device", DEVICES)
def test_shrink_keeps_the_outputs(device):
    pytest.importorskip("torch_pruning")
    model = mixed(device)
    s = Session(model)
    s.apply("3.weight", "ln_structured", amount=10, n=1, dim=0)  # 10 of 32 hidden units dead
    alive = s.mask("3.weight").any(dim=1).cpu()  # a CPU mask: the session moves it
    s.apply("3.bias", "custom_from_mask", mask=alive)
    x = torch.randn(5, 4, 4, 4, generator=torch.Generator().manual_seed(2)).to(device)
    report = s.shrink(x, repeats=1)
    assert tuple(report.model[3].weight.shape) == (22, 128)
    assert tuple(report.model[5].weight.shape) == (16, 22)
    # the same function; the shrunk layers add fewer (zero) terms, so float32 sums may round
    # differently in the last bits (one output of 80 by 2e-6 relative with torch 2.13 here)
    torch.testing.assert_close(report.model(x), model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_snippet_replayed_on_stock_torch(device, tmp_path):
    model = mixed(device)
    fresh = copy.deepcopy(model)
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    s.apply("3.weight", "random_unstructured", amount=0.4, seed=7)
    s.apply("3.weight", "ln_structured", amount=4, n=2, dim=0)
    s.apply_global(weights(model), amount=0.5)
    s.apply("5.weight", "semi_structured", pattern="2:4", dim=-1)
    replay = replay_on_stock_torch(tmp_path, {"plan": (fresh, s.plan.to_snippet())})
    assert replay.errors == {}
    got = replay.results["plan"]
    want = model.state_dict()
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key].device.type == device, key
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "bf16"])
def test_tied_structured_masks_are_the_cpus_and_the_snippets(device, dtype, tmp_path):
    """Slice norms that tie at the cut (every row a permutation of one row): the tied slices
    are kept lowest index first on every device, and the snippet replays them on stock torch
    there (an H200 once kept other bf16 slices than the CPU: torch's topk splits ties by
    device)."""
    def tied_model(where: str) -> nn.Module:
        model = nn.Sequential(nn.Linear(16, 40))
        with torch.no_grad():
            model[0].weight.copy_(tied_slices(40, 16, 0, torch.float32, seed=1))
            model[0].bias.zero_()
        return model.to(device=where, dtype=dtype)

    model = tied_model(device)
    fresh = copy.deepcopy(model)
    s = Session(model)
    norms = norms_of(model[0].weight.detach().cpu(), 2, 0)
    for settings in ({"amount": 11, "n": 2, "dim": 0}, {"amount": 0.3, "n": 1, "dim": 0}):
        preview = s.preview("0.weight", "ln_structured", **settings)
        s.apply("0.weight", "ln_structured", **settings)
        assert torch.equal(preview.to(model[0].weight_mask.dtype), model[0].weight_mask)
    first = s.history("0.weight").mask(1).cpu()
    assert torch.equal(kept_slices(first, 0), lowest_index_kept(norms, 11))
    assert all(step.ties == "highest" for step in s.steps)
    if device != "cpu":
        on_cpu = Session(tied_model("cpu"))
        for step in s.steps:
            on_cpu.apply("0.weight", "ln_structured", **step.settings)
        assert torch.equal(on_cpu.mask("0.weight"), s.mask("0.weight").cpu())
    replay = replay_on_stock_torch(tmp_path, {"plan": (fresh, s.plan.to_snippet())})
    assert replay.errors == {}
    for key, value in model.state_dict().items():
        assert replay.results["plan"][key].device.type == device, key
        assert torch.equal(replay.results["plan"][key], value), key


@pytest.mark.parametrize("device", DEVICES)
def test_a_state_dict_saved_on_cpu_loads_into_a_model_on_the_device(device):
    from prune_explorer.session.model.state_dict import load_pruned_state_dict

    model = mixed(device)
    s = Session(model)
    s.apply_global(weights(model), amount=0.5)
    saved = {k: v.cpu() for k, v in model.state_dict().items()}  # as map_location="cpu" gives
    fresh = mixed(device, seed=1)
    load_pruned_state_dict(fresh, saved)
    for target, mask in masks(model).items():
        loaded = masks(fresh)[target]
        assert loaded.device.type == device
        assert torch.equal(loaded, mask), target
        module, name = locate(fresh, target)
        assert torch.equal(getattr(module, name), getattr(locate(model, target)[0], name))
