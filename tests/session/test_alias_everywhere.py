"""An alias of a tied tensor works wherever its listed address does, and means that tensor.

``Session.tied`` promises it; every public entry that takes a tensor name is checked here on a
small GPT-2 (``lm_head.weight`` *is* ``transformer.wte.weight``), twice: with a vocabulary small
enough for the core's own masks (plain previews) and one large enough for the session's cached
orders and slice scores (lazy previews, cell counts, windows). Each entry runs on two identical
sessions, one given the listed address and one the alias, and the results must be equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import transformers as T  # in the test extras
from torch import nn

from prune_explorer import Session
from prune_explorer.prune.engine import SMALL
from prune_explorer.session import Plan, Step
from prune_explorer.session.preview.masks import kept_count, slices_pruned, window_reader

T.logging.set_verbosity_error()

LISTED, ALIAS = "transformer.wte.weight", "lm_head.weight"
OTHER = "transformer.h.0.mlp.c_fc.weight"
EMBD = 32
VOCABS = {"small": 97, "cached": SMALL // EMBD + 500}  # wte above SMALL: the orders' paths
IDS = torch.arange(12).reshape(1, 12) * 7 % 97
ROWS = {"small": np.array([0, 40, 97]), "cached": np.array([0, 1000, VOCABS["cached"]])}
COLS = np.array([0, 8, EMBD])


def gpt2(vocab: int) -> nn.Module:
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=1, n_embd=EMBD, n_head=2, vocab_size=vocab, n_positions=16,
                       bos_token_id=0, eos_token_id=0)
    return T.GPT2LMHeadModel(cfg).eval()


def session(size: str) -> Session:
    """A session with some history: the tied tensor and another one pruned a little."""
    s = Session(gpt2(VOCABS[size]))
    s.apply(OTHER, "l1_unstructured", amount=0.2)
    s.apply(LISTED, "l1_unstructured", amount=0.1)
    return s


def logits(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS).logits


def window(masks: Any, name: str) -> Any:
    reader = window_reader(masks, name)
    return None if reader is None else reader(slice(3, 40), slice(2, 20))


def lookups(masks: Any, name: str) -> Any:
    """Everything a caller reads of a preview's masks through ``name``."""
    return (name in masks, masks.get(name), masks[name], kept_count(masks, name),
            slices_pruned(masks, name), window(masks, name), list(masks), len(masks))


def cells(s: Session, name: str, size: str, **kw: Any) -> Any:
    return s.preview_cells(name, row_edges=ROWS[size], col_edges=COLS, **kw)


GLOBAL = {"pruning_method": "l1_unstructured", "amount": 0.3}

# Read-only entries: ``(session, name, size) -> result``.
READS: dict[str, Callable[[Session, str, str], Any]] = {
    "info": lambda s, n, _: s.info(n),
    "preview": lambda s, n, _: s.preview(n, "l1_unstructured", amount=0.3),
    "preview_masks": lambda s, n, _: lookups(
        s.preview_masks(n, "l1_unstructured", amount=0.3), n),
    "preview_masks_random": lambda s, n, _: lookups(
        s.preview_masks(n, "random_unstructured", amount=0.3, seed=4), n),
    "preview_masks_structured": lambda s, n, _: lookups(
        s.preview_masks(n, "ln_structured", amount=0.25, n=2, dim=0), n),
    "preview_global": lambda s, n, _: lookups(s.preview_global([n, OTHER], amount=0.3), n),
    "preview_global_zeros": lambda s, n, _: s.preview_global([n, OTHER], amount=0.3).zeros(n)
    if hasattr(s.preview_global([n, OTHER], amount=0.3), "zeros") else None,
    "zeros_after": lambda s, n, _: s.zeros_after(s.preview_global([n, OTHER], amount=0.3)),
    "preview_cells": lambda s, n, size: cells(s, n, size, method="l1_unstructured",
                                              amount=0.3),
    "preview_cells_structured": lambda s, n, size: cells(
        s, n, size, method="ln_structured", amount=0.25, n=2, dim=0),
    "preview_cells_global_target": lambda s, n, size: cells(
        s, n, size, method="global_unstructured", targets=[LISTED, OTHER], **GLOBAL),
    "preview_cells_global_targets": lambda s, n, size: cells(
        s, LISTED, size, method="global_unstructured", targets=[n, OTHER], **GLOBAL),
    "mask": lambda s, n, _: s.mask(n),
    "tensor": lambda s, n, _: s.tensor(n),
    "alive": lambda s, n, _: (s.alive(n), s.alive(n, s.preview(n, "l1_unstructured",
                                                                amount=0.5))),
    "kept_count": lambda s, n, _: (s.kept_count(n), s.kept_count(n, alive=True)),
    "magnitudes": lambda s, n, _: (s.magnitudes(n).count, s.magnitudes(n).cut(5),
                                   s.magnitudes(n, n=2, dim=0).count),
    "history": lambda s, n, _: (s.history(n).name, s.history(n).pruned_counts(),
                                s.history(n).mask(1), s.history(n).newly_pruned(1)),
    "methods": lambda s, n, _: s.methods(n),
    "review_commit": lambda s, n, _: s.review_commit(n),
    "compare_global_local": lambda s, n, _: s.compare_global_local([n, OTHER], 0.3),
    "sensitivity": lambda s, n, _: s.sensitivity(lambda m: float(logits(m).abs().sum()),
                                                 targets=[n, OTHER], amounts=[0.5]),
}


def _action(do: Callable[[Session, str], Any]) -> Callable[[Session, str, str], Any]:
    """An entry that changes the session: its result and what it left, all compared."""
    def run(s: Session, name: str, _: str) -> Any:
        result = do(s, name)
        state = sorted((k, v.clone()) for k, v in s.model.state_dict().items())
        return (result, s.steps, s.plan.to_json(), s.plan.to_snippet(), s.report(totals=True),
                state, logits(s.model))
    return run


ACTIONS: dict[str, Callable[[Session, str, str], Any]] = {
    "apply": _action(lambda s, n: s.apply(n, "l1_unstructured", amount=0.3)),
    "apply_random": _action(lambda s, n: s.apply(n, "random_unstructured", amount=0.3)),
    "apply_structured": _action(lambda s, n: s.apply(n, "ln_structured", amount=0.25, n=2,
                                                     dim=0)),
    "apply_global": _action(lambda s, n: s.apply_global([n, OTHER], amount=0.3)),
    "apply_step": _action(lambda s, n: s.apply_step(Step("l1_unstructured", n, amount=0.3))),
    "plan_import": _action(lambda s, n: s.apply_all(Plan.from_json(
        Plan([Step("l1_unstructured", n, amount=0.3), Step("remove", n)]).to_json()))),
    "commit": _action(lambda s, n: (s.apply(n, "l1_unstructured", amount=0.3), s.commit(n))),
    "undo": _action(lambda s, n: (s.apply(n, "l1_unstructured", amount=0.3), s.undo(),
                                  s.history(n).pruned_counts())),
    "plan_snippet": _action(lambda s, n: Plan(
        [Step("l1_unstructured", n, amount=0.3), Step("global_unstructured", [n, OTHER],
                                                      pruning_method="l1_unstructured",
                                                      amount=0.2)],
        tied=s.tied).to_snippet()),
}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and \
            a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and \
            np.array_equal(a, b)
    if isinstance(a, pd.DataFrame):
        return isinstance(b, pd.DataFrame) and a.equals(b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@pytest.mark.parametrize("size", sorted(VOCABS))
@pytest.mark.parametrize("entry", sorted(READS) + sorted(ACTIONS))
def test_an_alias_gives_what_the_listed_address_gives(entry, size):
    fn = READS.get(entry) or ACTIONS[entry]
    listed, alias = session(size), session(size)
    assert alias.tied == {LISTED: (ALIAS,)}
    expected = fn(listed, LISTED, size)
    got = fn(alias, ALIAS, size)
    assert same(got, expected), entry


def test_the_lazy_paths_are_what_the_cached_size_exercises():
    # The "cached" model reaches the previews that build no mask (else the test above would
    # check the plain masks twice): the global L1 preview is lazy, the cells come from orders.
    s = session("cached")
    masks = s.preview_global([ALIAS, OTHER], amount=0.3)
    assert "masks built" in repr(masks)
    assert window(s.preview_masks(ALIAS, "l1_unstructured", amount=0.3), ALIAS) is not None
    assert cells(s, ALIAS, "cached", method="l1_unstructured", amount=0.3) is not None


def test_a_preview_lists_a_tied_tensor_once_and_refuses_other_names():
    s = session("small")
    masks = s.preview_global([LISTED, ALIAS, OTHER], amount=0.3)
    assert list(masks) == [LISTED, OTHER]  # counted once
    assert len(masks) == 2
    assert masks.get("transformer.h.0.attn.c_attn.weight") is None
    assert "transformer.h.0.attn.c_attn.weight" not in masks
    with pytest.raises(KeyError, match="c_attn"):
        masks.kept("transformer.h.0.attn.c_attn.weight")
