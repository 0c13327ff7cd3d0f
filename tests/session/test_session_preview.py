"""Preview computes exactly the mask apply would produce, changing nothing."""

from __future__ import annotations

import copy

import pytest
import torch

from helpers.session import assert_exact_state, convnet, exact_state, masks, torch_apply
from prune_explorer.session import Session, Step
from prune_explorer.session.steps.methods import SEED_LIMIT

TARGET = "features.2.weight"  # Conv2d(4, 6, 3): shape (6, 4, 3, 3)

CUSTOM = (torch.arange(6 * 4 * 3 * 3).reshape(6, 4, 3, 3) % 5 != 0).float()

METHODS = [
    ("identity", {}),
    ("random_unstructured", {"amount": 0.3}),
    ("random_unstructured", {"amount": 7}),
    ("l1_unstructured", {"amount": 0.4}),
    ("l1_unstructured", {"amount": 11}),
    ("random_structured", {"amount": 0.5, "dim": 0}),
    ("random_structured", {"amount": 1, "dim": -1}),
    ("ln_structured", {"amount": 0.25, "n": 2, "dim": 0}),
    ("ln_structured", {"amount": 2, "n": 1, "dim": 1}),
    ("ln_structured", {"amount": 0.5, "n": float("inf"), "dim": 0}),
    ("ln_structured", {"amount": 0.5, "n": float("-inf"), "dim": 1}),
    ("custom_from_mask", {"mask": CUSTOM}),
]

BEFORE = {
    "fresh": [],
    "after_l1": [("l1_unstructured", {"amount": 0.3})],
    "after_structured": [
        ("ln_structured", {"amount": 2, "n": 2, "dim": 0}),
        ("random_unstructured", {"amount": 0.2}),
    ],
    "after_identity": [("identity", {})],
    "after_custom": [("custom_from_mask", {"mask": CUSTOM.flip(0)})],
}


def _ids(value):
    return value[0] if isinstance(value, tuple) else None


@pytest.mark.parametrize("before", list(BEFORE), ids=list(BEFORE))
@pytest.mark.parametrize(("method", "settings"), METHODS, ids=[m for m, _ in METHODS])
def test_preview_equals_apply_and_torch_and_changes_nothing(before, method, settings):
    model, oracle = convnet(), convnet()
    s = Session(model, seed=123)
    for m, kw in BEFORE[before]:
        torch_apply(oracle, s.apply(TARGET, m, **kw))
    state, rng = exact_state(model), torch.random.get_rng_state()
    steps, history = s.steps, s.history(TARGET).pruned_counts()

    mask = s.preview(TARGET, method, **settings)
    again = s.preview(TARGET, method, **settings)

    assert_exact_state(state, exact_state(model))
    assert torch.equal(rng, torch.random.get_rng_state())
    assert s.steps == steps
    assert s.history(TARGET).pruned_counts() == history
    assert torch.equal(mask, again)

    step = s.apply(TARGET, method, **settings)
    applied = model.get_submodule("features.2").weight_mask
    assert mask.dtype == applied.dtype
    assert mask.shape == applied.shape
    assert torch.equal(mask, applied)

    torch_apply(oracle, step)
    assert torch.equal(masks(oracle)[TARGET], applied)


@pytest.mark.parametrize("method", ["random_unstructured", "random_structured"])
def test_random_preview_uses_the_seed_the_next_apply_uses(method):
    settings = {"amount": 0.5} if method == "random_unstructured" else {"amount": 3, "dim": 0}
    s = Session(convnet(), seed=7)
    first = s.preview(TARGET, method, **settings)
    step = s.apply(TARGET, method, **settings)
    assert torch.equal(first, s.model.features[2].weight_mask)
    # the next apply draws a new seed, and previews follow it
    nxt = s.preview("classifier.weight", method, **settings)
    step2 = s.apply("classifier.weight", method, **settings)
    assert step2.seed != step.seed
    assert torch.equal(nxt, s.model.classifier.weight_mask)


def test_explicit_seed_in_preview_and_apply():
    s = Session(convnet())
    a = s.preview(TARGET, "random_unstructured", amount=0.5, seed=99)
    b = s.preview(TARGET, "random_unstructured", amount=0.5, seed=100)
    assert not torch.equal(a, b)
    step = s.apply(TARGET, "random_unstructured", amount=0.5, seed=99)
    assert step.seed == 99
    assert torch.equal(a, s.model.features[2].weight_mask)


def test_session_seed_makes_sessions_reproducible():
    a = Session(convnet(), seed=5).apply(TARGET, "random_unstructured", amount=0.5)
    b = Session(convnet(), seed=5).apply(TARGET, "random_unstructured", amount=0.5)
    c = Session(convnet(), seed=6).apply(TARGET, "random_unstructured", amount=0.5)
    assert a.seed == b.seed
    assert a.seed != c.seed


def test_drawn_seeds_come_from_the_range_a_step_accepts():
    # one seed range: what the session draws is what Step validation accepts, [0, 2**63)
    seeds = [Session(convnet(), seed=k).apply(TARGET, "random_unstructured", amount=0.5).seed
             for k in range(8)]
    assert all(0 <= seed < SEED_LIMIT for seed in seeds)
    assert max(seeds) >= 2**32  # drawn from the whole range, not a 32-bit slice of it
    for seed in seeds:
        assert Step("random_unstructured", TARGET, amount=0.5, seed=seed).seed == seed


GLOBAL_TARGETS = ["features.0.weight", "features.2.weight", "classifier.weight"]


@pytest.mark.parametrize("method", ["l1_unstructured", "random_unstructured"])
@pytest.mark.parametrize("amount", [0.5, 40])
@pytest.mark.parametrize("before", ["fresh", "after_steps"])
def test_preview_global_equals_apply_global_and_torch(method, amount, before):
    model, oracle = convnet(), convnet()
    s = Session(model, seed=11)
    if before == "after_steps":
        torch_apply(oracle, s.apply("features.0.weight", "ln_structured", amount=1, n=1, dim=0))
        torch_apply(oracle, s.apply("classifier.weight", "l1_unstructured", amount=0.5))
        torch_apply(oracle, s.apply_global(GLOBAL_TARGETS[1:], method, amount=0.2))
    state, rng = exact_state(model), torch.random.get_rng_state()

    preview = s.preview_global(GLOBAL_TARGETS, method, amount=amount)

    assert_exact_state(state, exact_state(model))
    assert torch.equal(rng, torch.random.get_rng_state())
    assert list(preview) == GLOBAL_TARGETS
    step = s.apply_global(GLOBAL_TARGETS, method, amount=amount)
    torch_apply(oracle, step)
    applied, expected = masks(model), masks(oracle)
    for name in GLOBAL_TARGETS:
        assert preview[name].dtype == applied[name].dtype
        assert torch.equal(preview[name], applied[name]), name
        assert torch.equal(applied[name], expected[name]), name


def test_preview_global_can_include_biases_of_the_same_module():
    model, oracle = convnet(), convnet()
    s = Session(model)
    names = ["classifier.weight", "classifier.bias"]
    preview = s.preview_global(names, amount=0.5)
    torch_apply(oracle, s.apply_global(names, amount=0.5))
    for name in names:
        assert torch.equal(preview[name], masks(model)[name])
        assert torch.equal(masks(model)[name], masks(oracle)[name])


def test_preview_does_not_consume_the_pending_seed_or_add_history():
    s = Session(convnet(), seed=3)
    for _ in range(3):
        s.preview_global(GLOBAL_TARGETS, "random_unstructured", amount=0.3)
    step = s.apply_global(GLOBAL_TARGETS, "random_unstructured", amount=0.3)
    fresh = Session(convnet(), seed=3).apply_global(GLOBAL_TARGETS, "random_unstructured",
                                                   amount=0.3)
    assert step.seed == fresh.seed
    assert [len(s.history(n)) for n in GLOBAL_TARGETS] == [2, 2, 2]


def test_preview_of_step_object_matches_steps_in_plans():
    s = Session(convnet())
    mask = s.preview(TARGET, "l1_unstructured", amount=0.5)
    s.apply_step(Step("l1_unstructured", TARGET, amount=0.5))
    assert torch.equal(mask, s.model.features[2].weight_mask)


@pytest.mark.parametrize(
    ("model_factory", "target", "n"),
    [
        (lambda: torch.nn.Sequential(torch.nn.Linear(6, 5)), "0.weight", "fro"),
        (lambda: torch.nn.Sequential(torch.nn.Conv1d(3, 5, 4)), "0.weight", "fro"),
        (lambda: torch.nn.Sequential(torch.nn.Conv1d(3, 5, 4)), "0.weight", "nuc"),
    ],
)
@pytest.mark.parametrize("before", ["fresh", "after_l1"])
def test_named_norms_preview_equals_apply_and_torch(model_factory, target, n, before):
    torch.manual_seed(0)
    model = model_factory()
    oracle = copy.deepcopy(model)
    s = Session(model)
    if before == "after_l1":
        torch_apply(oracle, s.apply(target, "l1_unstructured", amount=0.3))
    mask = s.preview(target, "ln_structured", amount=2, n=n, dim=0)
    torch_apply(oracle, s.apply(target, "ln_structured", amount=2, n=n, dim=0))
    assert torch.equal(mask, masks(model)[target])
    assert torch.equal(masks(oracle)[target], masks(model)[target])


@pytest.mark.parametrize(
    ("shape", "method", "settings"),
    [
        ((9,), "l1_unstructured", {"amount": 0.3}),
        ((40, 30), "l1_unstructured", {"amount": 0.3}),
        ((300, 200), "l1_unstructured", {"amount": 0.3}),
        ((40, 30), "ln_structured", {"amount": 0.5, "n": 1, "dim": 0}),
        ((300, 200), "ln_structured", {"amount": 0.5, "n": 1, "dim": 0}),
    ],
)
def test_preview_equals_apply_on_tied_values(shape, method, settings):
    module = torch.nn.Module()
    module.w = torch.nn.Parameter(torch.ones(shape))
    with torch.no_grad():
        module.w.view(-1)[::3] = 2.0  # many ties at the cut
    oracle = torch.nn.Module()
    oracle.w = torch.nn.Parameter(module.w.detach().clone())
    s = Session(module)
    for _ in range(2):  # fresh, then on top of the first step (container path)
        mask = s.preview("w", method, **settings)
        step = s.apply("w", method, **settings)
        assert torch.equal(mask, module.w_mask)
        torch_apply(oracle, step)
        # ties may be broken differently from torch, but the pruned count is torch's
        assert int((module.w_mask == 0).sum()) == int((oracle.w_mask == 0).sum())


@pytest.mark.parametrize(("method", "settings"), [
    ("l1_unstructured", {"amount": 0.4}),
    ("random_unstructured", {"amount": 0.4, "seed": 3}),
    ("ln_structured", {"amount": 0.25, "n": 2, "dim": 1}),
    ("random_structured", {"amount": 0.25, "dim": 0, "seed": 5}),
])
def test_preview_masks_counts_without_a_mask_and_builds_preview_on_read(method, settings):
    from prune_explorer.session.preview.masks import kept_count, slices_pruned
    from prune_explorer.session.steps.checks import kept_slices

    model = torch.nn.Sequential(torch.nn.Linear(600, 400)).to(torch.bfloat16)  # cached, tied
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=0.1)  # a mask buffer to combine with
    masks = s.preview_masks("0.weight", method, **settings)
    assert "0.weight" in masks
    assert "0.bias" not in masks
    assert list(masks) == ["0.weight"]
    kept = kept_count(masks, "0.weight")
    pruned_slices = slices_pruned(masks, "0.weight")
    assert "not built" in repr(masks) or "dim" in settings  # counting built none
    mask = masks["0.weight"]
    assert torch.equal(mask, s.preview("0.weight", method, **settings))
    assert kept == int(mask.count_nonzero())
    if "dim" in settings:
        dim = settings["dim"]
        assert pruned_slices == kept_slices(s.mask("0.weight"), dim) - kept_slices(mask, dim)
    else:
        assert pruned_slices is None


def test_an_unbuilt_slice_preview_refuses_a_mask_buffer_written_since():
    s = Session(torch.nn.Sequential(torch.nn.Linear(600, 400)))
    s.apply("0.weight", "l1_unstructured", amount=0.1)
    masks = s.preview_masks("0.weight", "ln_structured", amount=0.5, n=1, dim=0)
    with torch.no_grad():
        s.model[0].weight_mask[0, 0] = 0  # written in place after the preview
    with pytest.raises(RuntimeError, match="written to after the preview"):
        masks["0.weight"]
