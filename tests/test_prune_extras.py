"""Tests of what prune_explorer.prune adds on top of torch.nn.utils.prune.

The oracle is still torch where one exists (same seeds -> same masks), or a plain sort.
"""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import torch.nn.utils.prune as theirs
from torch import nn

from prune_explorer import prune as ours
from prune_explorer.prune._select import SMALL, select_smallest

BIG = (600, 400)  # 240k entries: above SMALL, so the threshold selection runs
assert BIG[0] * BIG[1] > SMALL


def _linear(shape=BIG, seed=0, levels=None):
    g = torch.Generator().manual_seed(seed)
    m = nn.Linear(shape[1], shape[0])
    with torch.no_grad():
        if levels is None:
            m.weight.copy_(torch.randn(shape, generator=g))
        else:  # heavy ties: few distinct magnitudes
            m.weight.copy_(torch.randint(0, levels, shape, generator=g).float() - levels // 2)
    return m


# ---------------------------------------------------------------------------- select_smallest


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["randn", "ties", "sorted", "constant"])
def test_select_smallest_matches_a_full_sort(dtype, kind):
    g = torch.Generator().manual_seed(1)
    n = 200_003
    if kind == "randn":
        x = torch.randn(n, generator=g).abs()
    elif kind == "ties":
        x = torch.randint(0, 5, (n,), generator=g).float()
    elif kind == "sorted":  # adversarial for a strided sample
        x = torch.linspace(0, 1, n)
    else:
        x = torch.full((n,), 0.25)
    x = x.to(dtype)
    for k in (1, 17, n // 7, n // 2, n - 3, n):
        thr = select_smallest([x], k, exact_ties=False)
        chosen = thr.selected(x)
        assert int(chosen.sum()) == k
        kth = torch.sort(x.double()).values[k - 1]
        assert bool((x[chosen].double() <= kth).all())
        assert bool((x[~chosen].double() >= kth).all())
        if not thr.inclusive:  # ties split lowest index first
            tied = torch.nonzero(x == thr.value).view(-1)
            taken = chosen[tied]
            assert bool(taken[: int(taken.sum())].all())


def test_select_smallest_across_tensors_equals_concatenation():
    g = torch.Generator().manual_seed(2)
    parts = [torch.randn(n, generator=g).abs() for n in (150_000, 7, 90_000, 1)]
    whole = torch.cat(parts)
    for k in (1, 1000, whole.numel() // 2, whole.numel()):
        thr = select_smallest(parts, k, exact_ties=True)
        chosen = torch.cat([thr.selected(p, i) for i, p in enumerate(parts)])
        expected = torch.zeros_like(whole, dtype=torch.bool)
        expected[torch.topk(whole, k, largest=False).indices] = True
        assert torch.equal(chosen, expected)


def test_select_smallest_rejects_bad_k():
    with pytest.raises(ValueError, match=r"k must be in \[1, 3\]; got 4"):
        select_smallest([torch.ones(3)], 4, exact_ties=False)


# ---------------------------------------------------------------------------- tie rules


@pytest.mark.parametrize("amount", [0.3, 0.5, 0.77])
def test_tie_break_torch_gives_torch_masks_on_heavy_ties(amount):
    a, b = _linear(levels=7), None
    b = copy.deepcopy(a)
    theirs.l1_unstructured(a, "weight", amount)
    with ours.tie_break("torch"):
        ours.l1_unstructured(b, "weight", amount)
    assert ours.get_tie_break() == "index"  # the context manager restores the default
    assert torch.equal(a.weight_mask, b.weight_mask)


def test_tie_break_index_prunes_same_count_lowest_index_first():
    a = _linear(levels=7)
    b = copy.deepcopy(a)
    theirs.l1_unstructured(a, "weight", 0.5)
    ours.l1_unstructured(b, "weight", 0.5)
    assert int((a.weight_mask == 0).sum()) == int((b.weight_mask == 0).sum())
    mags = b.weight_orig.detach().abs().view(-1)
    pruned = (b.weight_mask == 0).view(-1)
    cut = mags[pruned].max()
    assert bool((mags[~pruned] >= cut).all())
    tied = torch.nonzero(mags == cut).view(-1)
    flags = pruned[tied]
    n_taken = int(flags.sum())
    assert bool(flags[:n_taken].all())
    assert not bool(flags[n_taken:].any())


def test_set_tie_break_validates():
    with pytest.raises(ValueError, match=r"mode must be one of .*; got 'fast'"):
        ours.set_tie_break("fast")


@pytest.mark.parametrize("levels", [3, 11])
def test_global_tie_break_torch_matches_torch(levels):
    mods_t = [_linear(seed=s, levels=levels) for s in (1, 2)]
    mods_o = copy.deepcopy(mods_t)
    theirs.global_unstructured([(m, "weight") for m in mods_t], theirs.L1Unstructured, amount=0.4)
    with ours.tie_break("torch"):
        ours.global_unstructured([(m, "weight") for m in mods_o], ours.L1Unstructured, amount=0.4)
    for a, b in zip(mods_t, mods_o, strict=True):
        assert torch.equal(a.weight_mask, b.weight_mask)


# ---------------------------------------------------------------------------- generators


@pytest.mark.parametrize("shape", [(5, 7), BIG])
def test_generator_draws_like_a_seeded_global_rng(shape):
    a = _linear(shape)
    b = copy.deepcopy(a)
    c = copy.deepcopy(a)
    torch.manual_seed(11)
    theirs.random_unstructured(a, "weight", 0.4)
    theirs.random_structured(a, "weight", 0.3, dim=0)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    g = torch.Generator().manual_seed(11)
    ours.random_unstructured(b, "weight", 0.4, generator=g)
    ours.random_structured(b, "weight", 0.3, dim=0, generator=g)
    assert torch.equal(state, torch.get_rng_state())  # the global RNG was not used
    assert torch.equal(a.weight_mask, b.weight_mask)
    # the global path gives the same again
    torch.manual_seed(11)
    ours.random_unstructured(c, "weight", 0.4)
    ours.random_structured(c, "weight", 0.3, dim=0)
    assert torch.equal(a.weight_mask, c.weight_mask)


def test_generator_must_be_a_generator():
    with pytest.raises(TypeError, match=r"random_unstructured: generator must be a "
                                        r"torch.Generator or None; got 'int'"):
        ours.random_unstructured(nn.Linear(2, 2), "weight", 0.5, generator=3)


def test_pruned_module_with_generator_pickles():
    m = ours.random_unstructured(nn.Linear(4, 4), "weight", 0.5,
                                 generator=torch.Generator().manual_seed(0))
    clone = pickle.loads(pickle.dumps(m))
    assert torch.equal(clone.weight_mask, m.weight_mask)
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert torch.equal(loaded(torch.ones(1, 4)), m(torch.ones(1, 4)))


# ---------------------------------------------------------------------------- helpers


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Sequential(nn.Conv1d(2, 3, 2)))


def test_pruned_parameters_lists_chains_by_qualified_name():
    net = _net()
    ours.l1_unstructured(net[0], "weight", 0.5)
    ours.ln_structured(net[0], "weight", 1, n=2, dim=0)
    ours.random_unstructured(net[2][0], "bias", 1)
    got = {k: [type(m).__name__ for m in v] for k, v in ours.pruned_parameters(net).items()}
    assert got == {"0.weight": ["L1Unstructured", "LnStructured"],
                   "2.0.bias": ["RandomUnstructured"]}
    assert ours.pruned_parameters(net[0], recurse=False).keys() == {"weight"}


def test_remove_all_matches_torch_remove_everywhere():
    a = _net()
    b = copy.deepcopy(a)
    ids = {n: id(p) for n, p in b.named_parameters()}
    for net, lib in ((a, theirs), (b, ours)):
        lib.l1_unstructured(net[0], "weight", 0.5)
        lib.l1_unstructured(net[0], "bias", 2)
        lib.l1_unstructured(net[2][0], "weight", 0.3)
    theirs.remove(a[0], "weight")
    theirs.remove(a[0], "bias")
    theirs.remove(a[2][0], "weight")
    ours.remove_all(b)
    assert not ours.is_pruned(b)
    assert sorted(a.state_dict()) == sorted(b.state_dict())
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k])
    assert {n: id(p) for n, p in b.named_parameters()} == ids


def test_global_masks_changes_nothing_and_equals_what_global_unstructured_installs():
    net = _net()
    ours.l1_unstructured(net[0], "weight", 0.2)
    pairs = [(net[0], "weight"), (net[2][0], "weight")]
    before = {k: v.clone() for k, v in net.state_dict().items()}
    hooks = [dict(m._forward_pre_hooks) for m in net.modules()]
    masks = ours.global_masks(pairs, ours.L1Unstructured, amount=0.5)
    assert {k: v for k, v in net.state_dict().items()}.keys() == before.keys()
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    assert [dict(m._forward_pre_hooks) for m in net.modules()] == hooks
    ours.global_unstructured(pairs, ours.L1Unstructured, amount=0.5)
    assert torch.equal(masks[0], net[0].weight_mask)
    assert torch.equal(masks[1], net[2][0].weight_mask)


def test_global_unstructured_is_atomic_when_a_late_install_fails(monkeypatch):
    net = _net()
    pairs = [(net[0], "weight"), (net[2][0], "weight")]
    keys = sorted(net.state_dict())
    from prune_explorer.prune import _module

    real = _module.install
    calls = []

    def flaky(module, name, method, mask, old):
        calls.append(name)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real(module, name, method, mask, old)

    monkeypatch.setattr(_module, "install", flaky)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ours.global_unstructured(pairs, ours.L1Unstructured, amount=0.5)
    assert sorted(net.state_dict()) == keys
    assert not ours.is_pruned(net)


def test_global_unstructured_rejects_duplicates_and_empty():
    net = _net()
    with pytest.raises(ValueError, match=r"global_unstructured: parameters\[1\] must be "
                                         r"listed only once; got 'weight'"):
        ours.global_unstructured([(net[0], "weight"), (net[0], "weight")],
                                 ours.L1Unstructured, amount=0.5)
    with pytest.raises(ValueError, match="non-empty"):
        ours.global_unstructured([], ours.L1Unstructured, amount=0.5)


def test_interop_with_torch_in_both_directions():
    a = _net()
    ours.l1_unstructured(a[0], "weight", 0.5)
    assert theirs.is_pruned(a)
    theirs.remove(a[0], "weight")  # torch removes our pruning
    assert not ours.is_pruned(a)
    theirs.l1_unstructured(a[0], "weight", 0.5)
    ours.l1_unstructured(a[0], "weight", 0.5)  # ours stacks on torch's hook
    chain = ours.pruned_parameters(a)["0.weight"]
    assert [type(m).__module__ for m in chain] == ["torch.nn.utils.prune",
                                                   "prune_explorer.prune.methods"]
    assert int((a[0].weight_mask == 0).sum()) == 15 + 8
    ours.remove(a[0], "weight")
    assert not theirs.is_pruned(a)


def test_reprs_say_what_they_hold():
    m = ours.l1_unstructured(nn.Linear(3, 3), "weight", 0.5)
    ours.ln_structured(m, "weight", 1, n=2, dim=0)
    hook = next(iter(m._forward_pre_hooks.values()))
    assert repr(hook) == ("PruningContainer([L1Unstructured(amount=0.5, tensor='weight'), "
                          "LnStructured(amount=1, n=2, dim=0, tensor='weight')], tensor='weight')")
    assert repr(ours.CustomFromMask(torch.tensor([1.0, 0.0]))) == (
        "CustomFromMask(mask='<(2,), 1 kept>')")


def test_remove_on_unpruned_names_the_pruned_ones():
    m = ours.l1_unstructured(nn.Linear(3, 3), "weight", 0.5)
    with pytest.raises(ValueError, match=r"remove: name must be a pruned tensor of Linear "
                                         r"\(pruned: \['weight'\]\); got 'bias'"):
        ours.remove(m, "bias")
