"""The session reproduces stock torch exactly, even where ties straddle a cut on large tensors.

The session names its tie rule on every call (``ties=``), so this holds on any thread. These
tensors are large (the core's threshold selection runs) and their weights take only a few
distinct magnitudes, so a tie at the cut is certain.
"""

from __future__ import annotations

import copy
import threading

import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from prune_explorer import prune
from prune_explorer.session import Session


def _tied_model():
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(500, 400), nn.Linear(400, 400))
    with torch.no_grad():
        for layer in model:
            layer.weight.copy_(torch.randint(-3, 4, layer.weight.shape, generator=g).float())
    return model


def test_local_steps_match_torch_on_ties():
    model = _tied_model()
    oracle = copy.deepcopy(model)
    s = Session(model)
    preview = s.preview("0.weight", "l1_unstructured", amount=0.45)
    s.apply("0.weight", "l1_unstructured", amount=0.45)
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    torch_prune.l1_unstructured(oracle[0], "weight", amount=0.45)
    first = oracle[0].weight_mask.clone()
    torch_prune.l1_unstructured(oracle[0], "weight", amount=0.3)
    assert torch.equal(preview.bool(), first.bool())
    assert torch.equal(model[0].weight_mask, oracle[0].weight_mask)
    assert prune.get_tie_break() == "index"  # the session does not leak its tie rule


def test_global_step_matches_torch_on_ties():
    model = _tied_model()
    oracle = copy.deepcopy(model)
    s = Session(model)
    s.apply_global(["0.weight", "1.weight"], "l1_unstructured", amount=0.6)
    torch_prune.global_unstructured([(oracle[0], "weight"), (oracle[1], "weight")],
                                    torch_prune.L1Unstructured, amount=0.6)
    for a, b in zip(model, oracle, strict=True):
        assert torch.equal(a.weight_mask, b.weight_mask)


def test_previews_on_a_worker_thread_match_torch_on_ties():
    model = _tied_model()
    oracle = copy.deepcopy(model)
    s = Session(model)
    got = []
    worker = threading.Thread(
        target=lambda: got.append(s.preview("1.weight", "l1_unstructured", amount=0.45)))
    with prune.tie_break("index"):  # a block on this thread does not reach the worker
        worker.start()
        worker.join()
    torch_prune.l1_unstructured(oracle[1], "weight", amount=0.45)
    assert torch.equal(got[0].bool(), oracle[1].weight_mask.bool())
