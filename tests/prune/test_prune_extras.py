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
from prune_explorer.prune._select import SMALL, select

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


# ---------------------------------------------------------------------------- select


def _stable_first_k(x, k, largest):
    """The reference of the index rule: the first k of a stable sort (NaN above everything)."""
    chosen = torch.zeros(x.numel(), dtype=torch.bool)
    chosen[torch.sort(x, descending=largest, stable=True).indices[:k]] = True
    return chosen


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["randn", "ties", "sorted", "constant"])
@pytest.mark.parametrize("largest", [False, True])
def test_select_index_rule_is_the_first_k_of_a_stable_sort(dtype, kind, largest):
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
    for k in (0, 1, 17, n // 7, n // 2, n - 3, n):
        chosen = select([x], k, largest=largest, ties="index").selected(x)
        assert torch.equal(chosen, _stable_first_k(x, k, largest)), k


@pytest.mark.parametrize("n", [7, 1000, SMALL + 5])
def test_select_index_rule_with_nan_keys(n):
    g = torch.Generator().manual_seed(4)
    x = torch.randint(0, 3, (n,), generator=g).float()
    x[torch.randperm(n, generator=g)[: n // 3]] = float("nan")
    for k in (1, n // 2, n - n // 3 + 1, n):
        assert torch.equal(select([x], k).selected(x), _stable_first_k(x, k, False))


def test_select_across_tensors_equals_concatenation():
    g = torch.Generator().manual_seed(2)
    parts = [torch.randint(0, 50, (n,), generator=g).float() for n in (150_000, 7, 90_000, 1)]
    whole = torch.cat(parts)
    for ties in ("index", "torch"):
        for largest in (False, True):
            for k in (1, 1000, whole.numel() // 2, whole.numel()):
                sel = select(parts, k, largest=largest, ties=ties)
                chosen = torch.cat([sel.selected(p, i) for i, p in enumerate(parts)])
                if ties == "torch":
                    expected = torch.zeros_like(whole, dtype=torch.bool)
                    expected[torch.topk(whole, k, largest=largest).indices] = True
                else:
                    expected = _stable_first_k(whole, k, largest)
                assert torch.equal(chosen, expected)


def test_select_write_kept_is_the_complement_in_place():
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 9, (SMALL * 2,), generator=g).float()
    x[::101] = float("nan")
    for largest in (False, True):
        keys = x.nan_to_num(0.5) if largest else x.clone()
        for k in (1, 70_000, keys.numel() - 5):
            sel = select([keys], k, largest=largest)
            expected = (~sel.selected(keys)).float()
            assert torch.equal(sel.write_kept(keys, keys.clone()), expected)


def test_select_rejects_bad_k_and_rule():
    with pytest.raises(ValueError, match=r"k must be in \[0, 3\]; got 4"):
        select([torch.ones(3)], 4)
    with pytest.raises(ValueError, match=r"ties must be one of \('index', 'torch'\); got 'fast'"):
        select([torch.ones(3)], 1, ties="fast")


# ---------------------------------------------------------------------------- tie rules


@pytest.mark.parametrize("amount", [0.3, 0.5, 0.77])
def test_tie_break_torch_gives_torch_masks_on_heavy_ties(amount):
    a = _linear(levels=7)
    b, c = copy.deepcopy(a), copy.deepcopy(a)
    theirs.l1_unstructured(a, "weight", amount)
    with ours.tie_break("torch"):
        ours.l1_unstructured(b, "weight", amount)
    assert ours.get_tie_break() == "index"  # the context manager restores the default
    assert torch.equal(a.weight_mask, b.weight_mask)
    ours.l1_unstructured(c, "weight", amount, ties="torch")  # the keyword form
    assert torch.equal(a.weight_mask, c.weight_mask)


def _stable_rank(keys, descending=False):
    order = torch.sort(keys.flatten(), descending=descending, stable=True).indices
    rank = torch.empty(order.numel(), dtype=torch.float64)
    rank[order] = torch.arange(order.numel(), dtype=torch.float64)
    return rank.view(keys.shape)


@pytest.mark.parametrize("shape", [(3, 4), (30, 40), BIG])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_index_rule_is_reproduced_on_torch_by_a_stable_rank(shape, dtype):
    """L1: lowest flat index first among tied |w|; random: lowest flat index first among tied
    draws -- on stock torch, an L1 prune by the stable rank gives the same masks."""
    a = _linear(shape, levels=7).to(dtype)
    for amount in (0.3, 0.5):
        ours_l1, ours_rand, t_l1, t_rand = (copy.deepcopy(a) for _ in range(4))
        ours.l1_unstructured(ours_l1, "weight", amount)
        theirs.l1_unstructured(t_l1, "weight", amount,
                               importance_scores=_stable_rank(a.weight.detach().abs()))
        assert torch.equal(ours_l1.weight_mask, t_l1.weight_mask)
        torch.manual_seed(5)
        ours.random_unstructured(ours_rand, "weight", amount)
        torch.manual_seed(5)
        draws = torch.rand_like(a.weight)
        theirs.l1_unstructured(t_rand, "weight", amount,
                               importance_scores=_stable_rank(draws, descending=True))
        assert torch.equal(ours_rand.weight_mask, t_rand.weight_mask)


def test_random_index_rule_splits_bf16_ties_without_torch():
    """bf16 draws tie at every cut of a large tensor: index mode gives the stable-rank choice,
    torch mode torch's own."""
    a = _linear(BIG).to(torch.bfloat16)
    b, c = copy.deepcopy(a), copy.deepcopy(a)
    torch.manual_seed(9)
    theirs.random_unstructured(a, "weight", 0.4)
    torch.manual_seed(9)
    ours.random_unstructured(b, "weight", 0.4, ties="torch")
    assert torch.equal(a.weight_mask, b.weight_mask)
    torch.manual_seed(9)
    draws = torch.rand_like(c.weight)
    torch.manual_seed(9)
    ours.random_unstructured(c, "weight", 0.4)
    expected = ~_stable_first_k(draws.detach().flatten(), int(0.4 * draws.numel() + 0.5), True)
    assert torch.equal(c.weight_mask.flatten().bool(), expected)


def test_tie_rule_validates():
    with pytest.raises(ValueError, match=r"tie_break: ties must be one of .*; got 'fast'"), \
            ours.tie_break("fast"):
        pass
    with pytest.raises(ValueError, match=r"l1_unstructured: ties must be None or one of .*"
                                         r"; got 'fast'"):
        ours.l1_unstructured(nn.Linear(2, 2), "weight", 0.5, ties="fast")
    assert not hasattr(ours, "set_tie_break")


def test_tie_rule_keyword_reaches_threads_the_block_does_not():
    import threading

    a = _linear(levels=3)
    b = copy.deepcopy(a)
    theirs.l1_unstructured(a, "weight", 0.5)
    seen = []
    with ours.tie_break("torch"):
        t = threading.Thread(target=lambda: seen.append(ours.get_tie_break()))
        t.start()
        t.join()
    assert seen == ["index"]  # a block is scoped to its own thread of control
    t = threading.Thread(target=lambda: ours.l1_unstructured(b, "weight", 0.5, ties="torch"))
    t.start()
    t.join()
    assert torch.equal(a.weight_mask, b.weight_mask)


@pytest.mark.parametrize("levels", [3, 11])
def test_global_tie_break_torch_matches_torch(levels):
    mods_t = [_linear(seed=s, levels=levels) for s in (1, 2)]
    mods_o = copy.deepcopy(mods_t)
    theirs.global_unstructured([(m, "weight") for m in mods_t], theirs.L1Unstructured, amount=0.4)
    with ours.tie_break("torch"):
        ours.global_unstructured([(m, "weight") for m in mods_o], ours.L1Unstructured, amount=0.4)
    for a, b in zip(mods_t, mods_o, strict=True):
        assert torch.equal(a.weight_mask, b.weight_mask)


@pytest.mark.parametrize("method", ["L1Unstructured", "RandomUnstructured"])
def test_global_index_rule_is_the_stable_rule_over_the_surviving_entries(method):
    mods = [_linear(seed=s, levels=5) for s in (1, 2)]
    ours.l1_unstructured(mods[1], "weight", 0.2)  # the second one is pruned already
    # reference: torch's own global rule (one gathered vector) with the index rule inside
    weights = [mods[0].weight.detach().clone(), mods[1].weight_orig.detach().clone()]
    alive = torch.cat([torch.ones_like(weights[0]).flatten(), mods[1].weight_mask.flatten()]) == 1
    torch.manual_seed(3)
    ours.global_unstructured([(m, "weight") for m in mods], getattr(ours, method), amount=0.4)
    torch.manual_seed(3)
    if method == "L1Unstructured":
        keys = torch.cat([w.abs().flatten() for w in weights])[alive]
    else:
        keys = torch.rand(int(alive.sum()))
    k = round(0.4 * keys.numel())
    pruned_alive = _stable_first_k(keys, k, method == "RandomUnstructured")
    expected = alive.clone()
    expected[alive] = ~pruned_alive
    got = torch.cat([m.weight_mask.flatten() for m in mods]).bool()
    assert torch.equal(got, expected)


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

    def flaky(module, name, method, mask, old, container):
        calls.append(name)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real(module, name, method, mask, old, container)

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


@pytest.mark.parametrize("n", [1000, SMALL * 2 + 7])
def test_select_by_magnitude_equals_select_on_the_absolute_values(n):
    g = torch.Generator().manual_seed(6)
    x = (torch.randint(-4, 5, (n,), generator=g).float() * 0.5).to(torch.bfloat16)
    x[::97] = float("nan")
    for k in (1, n // 3, n - 10):
        by_magnitude = select([x], k, magnitude=True)
        plain = select([x.abs()], k)
        assert torch.equal(by_magnitude.selected(x), plain.selected(x.abs()))
        out = torch.empty(n)
        assert torch.equal(by_magnitude.write_kept(x, out), (~plain.selected(x.abs())).float())


def test_index_rule_on_an_already_pruned_tensor_is_reproduced_by_a_stable_rank():
    """Iterative pruning: the rule applies to the surviving entries in flat order (torch's
    gathered vector); a stable rank of those, scattered back, reproduces it on stock torch."""
    a = _linear(BIG, levels=5).to(torch.bfloat16)
    ours_m, torch_m = copy.deepcopy(a), copy.deepcopy(a)
    w = a.weight.detach()
    ours.l1_unstructured(ours_m, "weight", 0.3)
    theirs.l1_unstructured(torch_m, "weight", 0.3, importance_scores=_stable_rank(w.abs()))
    assert torch.equal(ours_m.weight_mask, torch_m.weight_mask)
    alive = torch_m.weight_mask == 1
    torch.manual_seed(8)
    ours.random_unstructured(ours_m, "weight", 0.4)
    torch.manual_seed(8)
    draws = torch.rand(int(alive.sum()), dtype=w.dtype)  # torch draws over the gathered vector
    scores = torch.zeros(w.shape, dtype=torch.float64)
    scores[alive] = _stable_rank(draws, descending=True)
    theirs.l1_unstructured(torch_m, "weight", 0.4, importance_scores=scores)
    assert torch.equal(ours_m.weight_mask, torch_m.weight_mask)
    ours.l1_unstructured(ours_m, "weight", 0.2)
    theirs.l1_unstructured(torch_m, "weight", 0.2, importance_scores=_stable_rank(w.abs()))
    assert torch.equal(ours_m.weight_mask, torch_m.weight_mask)
