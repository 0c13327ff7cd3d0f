"""Where ties straddle a cut on large tensors, the preview is still exactly what apply installs.

Below 131,072 entries the core always uses torch.topk; these tensors are larger, and their
weights take few distinct values (quantised fp32, bf16, fp16), so a tie at the cut is certain.
The session splits such ties lowest flat index first (the core's fast rule) and notes it on the
step; tests/test_session_tie_snippet.py checks that the snippet reproduces that on stock torch.
"""

from __future__ import annotations

import copy
import threading

import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from prune_explorer import prune
from prune_explorer.session import Session

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
AMOUNTS = [0.0, 0.05, 0.2, 0.33, 0.5, 0.61, 0.8, 0.97, 1.0, 1234]


def _tied_model(dtype: torch.dtype = torch.float32) -> nn.Module:
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(500, 400), nn.Linear(400, 400))
    with torch.no_grad():
        for layer in model:
            w = torch.randn(layer.weight.shape, generator=g) * 0.05
            layer.weight.copy_(torch.round(w * 64) / 64 if dtype == torch.float32 else w)
    return model.to(dtype)


def _stable_rank(keys: torch.Tensor) -> torch.Tensor:
    order = torch.sort(keys.flatten(), stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel())
    return rank.view(keys.shape)


def _check_preview_is_apply(s: Session, target: str, method: str, **settings) -> None:
    preview = s.preview(target, method, **settings)
    s.apply(target, method, **settings)
    assert torch.equal(preview, s.model.get_submodule(target.rsplit(".", 1)[0]).weight_mask)
    s.undo()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("method", "settings"), [
    ("l1_unstructured", {}),
    ("random_unstructured", {}),
    ("ln_structured", {"n": 2, "dim": 1}),
    ("random_structured", {"dim": 0}),
])
def test_preview_is_apply_at_every_slider_position(dtype, method, settings):
    s = Session(_tied_model(dtype))
    for pruned_first in (False, True):
        if pruned_first:  # iterative: the second step works on what is left
            s.apply("0.weight", "l1_unstructured", amount=0.3)
        for amount in AMOUNTS:
            if isinstance(amount, int) and "dim" in settings:
                amount = 7
            _check_preview_is_apply(s, "0.weight", method, amount=amount, **settings)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inner", ["l1_unstructured", "random_unstructured"])
def test_global_preview_is_apply_at_every_slider_position(dtype, inner):
    s = Session(_tied_model(dtype))
    targets = ["0.weight", "1.weight"]
    for pruned_first in (False, True):
        if pruned_first:
            s.apply("1.weight", "l1_unstructured", amount=0.4)
        for amount in AMOUNTS:
            previews = s.preview_global(targets, inner, amount=amount)
            s.apply_global(targets, inner, amount=amount)
            for name in targets:
                assert torch.equal(previews[name], s.model.get_submodule(name[0]).weight_mask)
            s.undo()


@pytest.mark.parametrize("dtype", DTYPES)
def test_tied_l1_masks_are_stock_torch_on_a_stable_rank(dtype):
    """The session's rule, with stock torch as the oracle: the masks are torch's L1 masks on
    importance scores that rank |w| with ties lowest flat index first -- locally, again on an
    already-pruned tensor, and globally over the tensors in order."""
    model = _tied_model(dtype)
    oracle = _tied_model(dtype)
    s = Session(model)
    first = s.apply("0.weight", "l1_unstructured", amount=0.45)
    second = s.apply("0.weight", "l1_unstructured", amount=0.3)
    third = s.apply_global(["1.weight", "0.weight"], "l1_unstructured", amount=0.5)
    assert (first.ties, second.ties, third.ties) == ("lowest", "lowest", "lowest")
    layer = oracle[0]
    for amount in (0.45, 0.3):
        torch_prune.l1_unstructured(layer, "weight", amount=amount,
                                    importance_scores=_stable_rank(layer.weight.detach().abs()))
    pairs = [(oracle[1], "weight"), (oracle[0], "weight")]
    keys = torch.cat([getattr(m, n).detach().abs().flatten() for m, n in pairs])
    ranks = _stable_rank(keys).split([getattr(m, n).numel() for m, n in pairs])
    torch_prune.global_unstructured(
        pairs, torch_prune.L1Unstructured, amount=0.5,
        importance_scores={p: r.view(getattr(*p).shape) for p, r in zip(pairs, ranks, strict=True)})
    for a, b in zip(model, oracle, strict=True):
        assert torch.equal(a.weight_mask, b.weight_mask)
    assert prune.get_tie_break() == "index"  # the session does not leak its tie rule


@pytest.mark.parametrize("method", ["l1_unstructured", "random_unstructured"])
def test_the_session_names_its_tie_rule_whatever_the_ambient_block_or_thread(method):
    # The session passes ties= on every call: a tie_break block around a preview, or a preview
    # run on another thread, must give the very mask apply installs outside any block.
    s = Session(_tied_model(torch.bfloat16))
    seed = {"seed": 3} if method.startswith("random") else {}
    with prune.tie_break("torch"):
        in_block = s.preview("1.weight", method, amount=0.45, **seed)
    on_thread = []
    worker = threading.Thread(
        target=lambda: on_thread.append(s.preview("1.weight", method, amount=0.45, **seed)))
    worker.start()
    worker.join()
    s.apply("1.weight", method, amount=0.45, **seed)
    installed = s.model[1].weight_mask
    assert torch.equal(in_block, installed)
    assert torch.equal(on_thread[0], installed)


def test_steps_after_a_commit_note_ties_from_the_all_ones_mask_they_start_from():
    # After a commit the tensor has no mask: every entry is kept again, the committed ones as
    # zeros. An L1 step pruning 9 of the 15 zeros splits a tie (at |w| = 0); a random step
    # draws over all 30 entries, which do not tie. Both snippets replay on stock torch.
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 5))
    twin = copy.deepcopy(model)
    s = Session(model, seed=0)
    s.apply("0.weight", "l1_unstructured", amount=15)
    s.commit("0.weight")
    tied = s.apply("0.weight", "l1_unstructured", amount=9)
    assert tied.ties == "lowest"
    s.commit("0.weight")
    drawn = s.apply("0.weight", "random_unstructured", amount=0.5)
    assert drawn.ties is None  # 30 distinct draws (it was noted when read against 15 flags)
    exec(compile(s.plan.to_snippet(), "<snippet>", "exec"), {"model": twin})
    assert torch.equal(twin[0].weight_mask, model[0].weight_mask)
    assert torch.equal(twin[0].weight, model[0].weight)
