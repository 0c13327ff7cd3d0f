"""``prune.on_demand``: pruned tensors computed per forward and on access, never kept.

Against torch.nn.utils.prune on the same weights: masks, forward values, gradients,
state_dict and ``remove`` are torch's; only the ``orig * mask`` copy between forwards is gone.
"""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from prune_explorer import Session, prune


def _pair(seed: int = 0, dtype: torch.dtype = torch.float32) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(seed)
    ours = nn.Sequential(nn.Conv2d(2, 6, 3), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 4 * 4, 5))
    ours = ours.to(dtype)
    return prune.on_demand(ours), copy.deepcopy(ours)


def _steps(lib: object, net: nn.Module) -> None:
    lib.l1_unstructured(net[0], "weight", amount=0.4)  # type: ignore[attr-defined]
    lib.ln_structured(net[0], "weight", amount=0.34, n=2, dim=0)  # type: ignore[attr-defined]
    lib.global_unstructured([(net[0], "bias"), (net[3], "weight")],  # type: ignore[attr-defined]
                            pruning_method=lib.L1Unstructured, amount=0.3)  # type: ignore[attr-defined]
    torch.manual_seed(5)
    lib.random_unstructured(net[3], "bias", amount=2)  # type: ignore[attr-defined]


def _copies(net: nn.Module) -> list[str]:
    return [f"{name}.{t}" for name, m in net.named_modules()
            for t in ("weight", "bias") if t in vars(m)]


def test_on_demand_prunes_like_torch_and_keeps_no_copy() -> None:
    ours, theirs = _pair()
    theirs = copy.deepcopy(theirs)
    prune.on_demand(theirs, False)  # the deep copy carried the choice: take it back
    _steps(prune, ours)
    _steps(torch_prune, theirs)
    assert _copies(ours) == []
    assert _copies(theirs) == ["0.weight", "0.bias", "3.weight", "3.bias"]
    for (k1, v1), (k2, v2) in zip(ours.state_dict().items(), theirs.state_dict().items(),
                                  strict=True):
        assert k1 == k2
        assert torch.equal(v1, v2), k1
    for name in ("weight", "bias"):
        assert torch.equal(getattr(ours[0], name), getattr(theirs[0], name))
    x = torch.randn(4, 2, 6, 6)
    out_ours, out_theirs = ours(x), theirs(x)
    assert torch.equal(out_ours, out_theirs)
    assert _copies(ours) == []  # what the forward computed is dropped after it
    out_ours.square().sum().backward()
    out_theirs.square().sum().backward()
    for (n1, p1), (_, p2) in zip(ours.named_parameters(), theirs.named_parameters(),
                                 strict=True):
        assert p1.grad is not None
        assert p2.grad is not None
        assert torch.equal(p1.grad, p2.grad), n1


def test_remove_and_taking_the_choice_back() -> None:
    ours, theirs = _pair(1)
    prune.on_demand(theirs, False)
    _steps(prune, ours)
    _steps(torch_prune, theirs)
    prune.remove(ours[0], "weight")
    torch_prune.remove(theirs[0], "weight")
    assert torch.equal(ours[0].weight, theirs[0].weight)
    assert type(ours[0]).__dict__.get("_pruned_on_demand_base") is not None  # bias still is
    prune.remove(ours[0], "bias")
    assert type(ours[0]) is nn.Conv2d
    assert not ours[0]._forward_hooks
    prune.on_demand(ours, False)
    assert _copies(ours) == ["3.weight", "3.bias"]
    assert type(ours[3]) is nn.Linear
    assert not ours[3]._forward_hooks
    assert torch.equal(ours[3].weight, theirs[3].weight)
    # later pruning keeps its copy, as torch does
    prune.l1_unstructured(ours[0], "weight", amount=0.5)
    assert "weight" in vars(ours[0])


def test_pickle_and_deepcopy_carry_the_choice() -> None:
    ours, _ = _pair(2)
    prune.l1_unstructured(ours[3], "weight", amount=0.5)
    buffer = io.BytesIO()
    torch.save(ours, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    for again in (loaded, copy.deepcopy(ours), pickle.loads(pickle.dumps(ours))):
        assert _copies(again) == []
        assert torch.equal(again[3].weight, ours[3].weight)
        prune.l1_unstructured(again[0], "weight", amount=0.5)  # not yet pruned: on demand too
        assert _copies(again) == []


def test_session_apply_undo_and_rollback_stay_on_demand() -> None:
    ours, theirs = _pair(3, torch.bfloat16)
    prune.on_demand(theirs, False)
    s = Session(ours)
    s.apply_global(["0.weight", "3.weight"], amount=0.5)
    s.apply("3.weight", "l1_unstructured", amount=0.25)
    torch_prune.global_unstructured([(theirs[0], "weight"), (theirs[3], "weight")],
                                    pruning_method=torch_prune.L1Unstructured, amount=0.5)
    assert _copies(ours) == []
    assert torch.equal(ours[0].weight_mask, theirs[0].weight_mask)
    memory = s.memory_report().set_index("name")
    assert int(memory.loc["TOTAL", "pruned_copy_bytes"]) == 0
    s.undo()
    assert _copies(ours) == []
    assert torch.equal(ours[3].weight, theirs[3].weight)

    before = ours[3].weight_mask.clone()
    inside: list[list[str]] = []

    def interrupted_plan() -> None:
        with s.transaction():
            s.apply("3.weight", "l1_unstructured", amount=0.9)
            s.apply("0.bias", "l1_unstructured", amount=0.5)
            inside.append(_copies(ours))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted_plan()
    assert inside == [[]]
    assert _copies(ours) == []
    assert torch.equal(ours[3].weight_mask, before)
    assert "bias_orig" not in dict(ours[0].named_parameters())
    assert torch.equal(ours[3].weight, theirs[3].weight)


def test_enabled_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match=r"prune.on_demand: enabled must be a bool; got 'yes'"):
        prune.on_demand(nn.Linear(2, 2), "yes")  # type: ignore[arg-type]


def test_torchs_own_remove_works_on_tensors_pruned_on_demand() -> None:
    torch.manual_seed(4)
    ours = nn.Linear(6, 5)
    theirs = copy.deepcopy(ours)
    prune.on_demand(ours)
    prune.l1_unstructured(ours, "weight", amount=0.5)
    torch_prune.l1_unstructured(ours, "bias", amount=0.4)  # torch's method, converted below
    prune.on_demand(ours)
    assert _copies(nn.Sequential(ours)) == []
    torch_prune.l1_unstructured(theirs, "weight", amount=0.5)
    torch_prune.l1_unstructured(theirs, "bias", amount=0.4)
    for name in ("weight", "bias"):
        torch_prune.remove(ours, name)
        torch_prune.remove(theirs, name)
        assert torch.equal(getattr(ours, name), getattr(theirs, name))
    x = torch.randn(2, 6)
    assert torch.equal(ours(x), theirs(x))
    assert type(ours) is nn.Linear  # back to its class once nothing is pruned on demand
    assert not ours._forward_hooks
    assert sorted(n for n, _ in ours.named_parameters()) == ["bias", "weight"]
