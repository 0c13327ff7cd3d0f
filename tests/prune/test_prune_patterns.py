"""N:M semi-structured and block pruning: masks by hand, a brute-force reference, composition,
validation and module state."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.utils.prune as theirs
from torch import nn

from prune_explorer import prune
from prune_explorer.prune.validation import CONSTRAINTS, METHOD_PARAMETERS, pattern_counts


# --------------------------------------------------------------------------- references
def brute_nm(t: torch.Tensor, keep_n: int, m: int, dim: int,
             default: torch.Tensor | None = None) -> torch.Tensor:
    """Element by element: in each group of m along dim, keep the keep_n largest |t| among the
    entries still alive; ties: the lower index is pruned first."""
    default = torch.ones_like(t) if default is None else default
    moved_t, moved_d = t.movedim(dim, -1), default.movedim(dim, -1)
    out = torch.zeros_like(moved_t)
    for idx in itertools.product(*(range(s) for s in moved_t.shape[:-1])):
        for g in range(0, moved_t.shape[-1], m):
            alive = [j for j in range(g, g + m) if moved_d[(*idx, j)] != 0]
            # sort by (|t|, index) descending -> the first keep_n are kept
            ranked = sorted(alive, key=lambda j: (abs(float(moved_t[(*idx, j)])), j),
                            reverse=True)
            for j in ranked[:keep_n]:
                out[(*idx, j)] = 1
    return out.movedim(-1, dim)


def brute_blocks(t: torch.Tensor, amount, block: tuple[int, ...], n: float,
                 default: torch.Tensor | None = None) -> torch.Tensor:
    """Block by block (row-major): prune the `amount` live blocks of lowest n-norm, ties by
    lowest block index."""
    default = torch.ones_like(t) if default is None else default
    full = tuple(block) + tuple(t.shape[len(block):])
    grid = [range(0, s, b) for s, b in zip(t.shape, full, strict=False)]
    blocks = []
    for corner in itertools.product(*grid):
        sl = tuple(slice(c, c + b) for c, b in zip(corner, full, strict=False))
        blocks.append((sl, float(torch.linalg.vector_norm(t[sl].abs().double(), ord=n)),
                       bool(default[sl].any())))
    live = [i for i, b in enumerate(blocks) if b[2]]
    k = amount if isinstance(amount, int) else round(amount * len(live))
    order = sorted(live, key=lambda i: (blocks[i][1], i))
    out = default.clone()
    for i, (sl, _, alive) in enumerate(blocks):
        if not alive or i in order[:k]:
            out[sl] = 0
    return out


def _ones(t):
    return torch.ones_like(t)


# --------------------------------------------------------------------------- by hand
def test_two_of_four_by_hand_last_dim():
    t = torch.tensor([[0.5, -4.0, 3.0, 0.1, 7.0, 6.0, -5.0, 8.0],
                      [1.0, 2.0, 3.0, 4.0, -1.0, -1.0, 2.0, 2.0]])
    mask = prune.SemiStructured("2:4").compute_mask(t, _ones(t))
    assert mask.tolist() == [[0, 1, 1, 0, 1, 0, 0, 1],
                             [0, 0, 1, 1, 0, 0, 1, 1]]


def test_one_of_two_along_dim_zero_by_hand():
    t = torch.tensor([[1.0, -9.0, 2.0],
                      [3.0, 0.0, 2.0],
                      [0.0, 5.0, -1.0],
                      [4.0, 4.5, 1.0]])
    mask = prune.SemiStructured("1:2", dim=0).compute_mask(t, _ones(t))
    # column groups: rows (0,1) and (2,3); the tie 2.0 vs 2.0 prunes the lower row (0)
    assert mask.tolist() == [[0, 1, 0],
                             [1, 0, 1],
                             [0, 1, 0],
                             [1, 0, 1]]


def test_ties_prune_the_lowest_index_first():
    t = torch.ones(2, 8)
    mask = prune.SemiStructured("2:4").compute_mask(t, _ones(t))
    assert mask.tolist() == [[0, 0, 1, 1] * 2] * 2
    mask = prune.SemiStructured("1:4").compute_mask(t, _ones(t))
    assert mask.tolist() == [[0, 0, 0, 1] * 2] * 2


def test_nan_is_kept_first_as_a_sort_would():
    t = torch.tensor([[float("nan"), 1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 2.0]])
    mask = prune.SemiStructured("2:4").compute_mask(t, _ones(t))
    assert mask.tolist() == [[1, 0, 0, 1, 1, 0, 0, 1]]


def test_blocks_by_hand():
    t = torch.tensor([[1.0, 1.0, 9.0, 9.0, 0.0, 0.0],
                      [1.0, 1.0, 9.0, 9.0, 0.0, 0.1],
                      [5.0, 5.0, 0.0, 0.0, 2.0, 2.0],
                      [5.0, 5.0, 0.0, 0.0, 2.0, 2.0]])
    # 2x2 blocks, L1 norms: [[4, 36, 0.1], [20, 0, 8]]; prune 3 -> norms 0, 0.1, 4
    mask = prune.BlockStructured(3, block=(2, 2), n=1).compute_mask(t, _ones(t))
    assert mask.tolist() == [[0, 0, 1, 1, 0, 0],
                             [0, 0, 1, 1, 0, 0],
                             [1, 1, 0, 0, 1, 1],
                             [1, 1, 0, 0, 1, 1]]


def test_block_ties_prune_the_lowest_block_first_and_short_block_takes_whole_dims():
    t = torch.ones(4, 2, 3)  # block=(2,) -> blocks of shape (2, 2, 3): two of them, tied
    mask = prune.BlockStructured(1, block=(2,)).compute_mask(t, _ones(t))
    assert mask[:2].sum() == 0
    assert bool(mask[2:].all())


# --------------------------------------------------------------------------- brute force
@pytest.mark.parametrize(("shape", "pattern", "dim"), [
    ((6, 8), "2:4", -1), ((8, 6), "2:4", 0), ((3, 4, 6), "1:3", 2), ((4, 6, 2, 2), "2:3", 1),
    ((5, 12), "3:4", 1), ((2, 8), "0:4", -1), ((2, 8), "4:4", -1), ((3, 10), "1:1", 0),
    ((4, 20), "3:10", -1), ((6, 16), "5:8", 1),  # sorted rows (m > 8) and the largest pairwise m
])
def test_semi_structured_matches_brute_force_on_random_tensors(shape, pattern, dim):
    gen = torch.Generator().manual_seed(sum(shape))
    keep_n, m = (int(x) for x in pattern.split(":"))
    for trial in range(3):
        t = torch.randn(shape, generator=gen)
        if trial == 2:  # many ties
            t = torch.randint(-2, 3, shape, generator=gen).float()
        got = prune.SemiStructured(pattern, dim=dim).compute_mask(t, _ones(t))
        assert torch.equal(got, brute_nm(t, keep_n, m, dim))


@pytest.mark.parametrize(("shape", "block", "amount", "n"), [
    ((8, 8), (4, 4), 0.5, 1), ((8, 12), (2, 3), 5, 2), ((6, 4, 3, 3), (2, 2), 0.25, 1),
    ((4, 6, 2), (1, 3, 2), 0.75, float("inf")), ((8, 4), (2,), 0.5, 2), ((4, 4), (1, 1), 7, 1),
])
def test_block_structured_matches_brute_force_on_random_tensors(shape, block, amount, n):
    gen = torch.Generator().manual_seed(len(shape) + sum(block))
    for trial in range(3):
        t = torch.randn(shape, generator=gen)
        if trial == 2:
            t = torch.randint(-1, 2, shape, generator=gen).float()
        got = prune.BlockStructured(amount, block=block, n=n).compute_mask(t, _ones(t))
        assert torch.equal(got, brute_blocks(t, amount, block, n))


# --------------------------------------------------------------------------- composition
def test_pattern_in_a_container_respects_the_mask_so_far():
    torch.manual_seed(0)
    layer = nn.Linear(12, 6)
    prune.l1_unstructured(layer, "weight", amount=0.4)
    before = layer.weight_mask.clone()
    prune.semi_structured(layer, "weight", pattern="2:4")
    hook = next(iter(layer._forward_pre_hooks.values()))
    assert [type(m).__name__ for m in hook] == ["L1Unstructured", "SemiStructured"]
    expected = brute_nm(layer.weight_orig.detach(), 2, 4, -1, default=before)
    assert torch.equal(layer.weight_mask, expected)
    assert prune.satisfies_pattern(layer.weight_mask, "2:4")


def test_blocks_in_a_container_count_only_live_blocks():
    torch.manual_seed(1)
    layer = nn.Linear(8, 8)
    prune.ln_structured(layer, "weight", amount=4, n=2, dim=0)  # 4 rows: 4 of 8 (2x4) blocks
    before = layer.weight_mask.clone()
    prune.block_structured(layer, "weight", amount=0.5, block=(2, 4), n=1)
    # as in torch, the importance of a pruned tensor is its current (masked) value
    current = (layer.weight_orig * before).detach()
    expected = brute_blocks(current, 0.5, (2, 4), 1, default=before)
    assert torch.equal(layer.weight_mask, expected)


def test_structured_after_pattern_composes_in_our_and_torchs_container():
    torch.manual_seed(2)
    layer = nn.Linear(8, 6)
    prune.semi_structured(layer, "weight", pattern="2:4")
    first = layer.weight_mask.clone()
    prune.ln_structured(layer, "weight", amount=2, n=1, dim=0)
    assert bool((layer.weight_mask <= first).all())
    assert int((layer.weight_mask.sum(1) == 0).sum()) == 2
    assert isinstance(next(iter(layer._forward_pre_hooks.values())), theirs.PruningContainer)


def test_importance_scores_decide_instead_of_the_weights():
    layer = nn.Linear(4, 2, bias=False)
    scores = torch.tensor([[4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    prune.semi_structured(layer, "weight", pattern="2:4", importance_scores=scores)
    assert layer.weight_mask.tolist() == [[1, 1, 0, 0], [0, 0, 1, 1]]
    layer2 = nn.Linear(4, 4, bias=False)
    scores2 = torch.arange(16.0).view(4, 4)
    prune.block_structured(layer2, "weight", amount=1, block=(2, 2), importance_scores=scores2)
    assert layer2.weight_mask[:2, :2].sum() == 0
    assert layer2.weight_mask.sum() == 12


def test_module_state_matches_the_other_methods_and_torch_remove_works():
    layer = nn.Conv2d(8, 4, 3)
    param = layer.weight
    prune.semi_structured(layer, "weight", pattern="2:4", dim=1)
    assert sorted(layer.state_dict()) == ["bias", "weight_mask", "weight_orig"]
    assert layer.weight_orig is param
    out = layer(torch.randn(1, 8, 5, 5))
    assert out.shape == (1, 4, 3, 3)
    theirs.remove(layer, "weight")
    assert prune.satisfies_pattern(layer.weight, "2:4", dim=1)


def test_repr_says_the_settings():
    assert repr(prune.SemiStructured("1:4", dim=0)) == "SemiStructured(pattern='1:4', dim=0)"
    assert repr(prune.BlockStructured(0.5, block=(2, 8), n=2)) == (
        "BlockStructured(amount=0.5, block=(2, 8), n=2)")


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda m: prune.semi_structured(m, "weight", pattern="2-4"), ValueError,
     "semi_structured: pattern must be a string 'N:M' with integers M >= 1 and 0 <= N <= M; "
     "got '2-4'"),
    (lambda m: prune.semi_structured(m, "weight", pattern="5:4"), ValueError,
     "got '5:4'"),
    (lambda m: prune.semi_structured(m, "weight", pattern=(2, 4)), TypeError, "got (2, 4)"),
    (lambda m: prune.semi_structured(m, "weight", pattern="2:4", dim=0.5), TypeError,
     "semi_structured: dim must be an int; got 0.5"),
    (lambda m: prune.semi_structured(m, "weight", pattern="2:4", dim=0), ValueError,
     "semi_structured: pattern must be 'N:M' with M dividing the size along dim=0 (6; groups "
     "are never partial); got 'M=4'"),
    (lambda m: prune.semi_structured(m, "weight", pattern="2:4", dim=2), IndexError,
     "semi_structured: dim must be in [-2, 1] for a 2-D tensor; got 2"),
    (lambda m: prune.block_structured(m, "weight", 0.5, block=(4, 4, 1)), ValueError,
     "block_structured: block must be at most 2 sizes for a 2-D tensor of shape (6, 8); "
     "got (4, 4, 1)"),
    (lambda m: prune.block_structured(m, "weight", 0.5, block=(4, 4)), ValueError,
     "block_structured: block must be sizes that divide the tensor's shape (6, 8) (dim 0: 4 "
     "does not divide 6; blocks are never partial); got (4, 4)"),
    (lambda m: prune.block_structured(m, "weight", 0.5, block=(0, 4)), ValueError,
     "block_structured: block must be a tuple of one or more ints >= 1; got (0, 4)"),
    (lambda m: prune.block_structured(m, "weight", 0.5, block=4), TypeError, "got 4"),
    (lambda m: prune.block_structured(m, "weight", 1.5, block=(2, 2)), ValueError,
     "block_structured: amount must be a float in [0, 1] or an int >= 0; got 1.5"),
    (lambda m: prune.block_structured(m, "weight", 13, block=(2, 2)), ValueError,
     "block_structured: amount must be at most the number of prunable blocks (12); got 13"),
    (lambda m: prune.block_structured(m, "weight", 1, block=(2, 2), n="nuc"), RuntimeError,
     "or 'fro' (a vector norm over each block's entries); got 'nuc'"),
])
def test_bad_settings_name_call_rule_and_value_and_leave_the_module_alone(call, error, message):
    layer = nn.Linear(8, 6)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    with pytest.raises(error) as info:
        call(layer)
    assert message in str(info.value)
    assert {k: v for k, v in layer.state_dict().items()}.keys() == before.keys()
    assert all(torch.equal(layer.state_dict()[k], v) for k, v in before.items())
    assert not layer._forward_pre_hooks


def test_constraint_table_covers_every_pattern_parameter():
    for name in ("semi_structured", "block_structured"):
        cls, params = METHOD_PARAMETERS[name]
        assert hasattr(prune, name)
        assert hasattr(prune, cls)
        assert {"pattern", "block"} & set(params)
    for param in ("pattern", "block"):
        assert CONSTRAINTS[param].error("not valid" if param == "block" else 7) is TypeError


@pytest.mark.parametrize(("mask", "pattern", "dim", "ok"), [
    (torch.tensor([[1, 0, 1, 0], [0, 0, 0, 1]]), "2:4", -1, True),
    (torch.tensor([[1, 1, 1, 0], [0, 0, 0, 1]]), "2:4", -1, False),
    (torch.tensor([[1, 1, 1], [0, 0, 0]]), "1:2", 0, True),
    (torch.ones(3, 6), "2:4", -1, False),  # 4 does not divide 6
])
def test_satisfies_pattern(mask, pattern, dim, ok):
    assert prune.satisfies_pattern(mask, pattern, dim) is ok


def test_pattern_counts_reads_an_accepted_pattern_and_refuses_any_other():
    assert pattern_counts(" 2 : 4 ") == (2, 4)
    for bad in ("5:4", "2-4", None):
        with pytest.raises(ValueError, match=r"pattern_counts: pattern must be a string 'N:M'"):
            pattern_counts(bad)
