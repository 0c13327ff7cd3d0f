"""Session.sensitivity: scores match stock torch pruning of a copy; the session is untouched."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from prune_explorer.session import InvalidStepError, Session


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


X = torch.randn(32, 6, generator=torch.Generator().manual_seed(1))


def _score(model):
    return float(model(X).pow(2).mean().detach())


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}, [
        id(p) for p in model.parameters()
    ], [dict(m._forward_pre_hooks) for m in model.modules()]


def _same_state(model, state):
    values, ids, hooks = state
    now = model.state_dict()
    assert list(now) == list(values)
    assert all(torch.equal(now[k], values[k]) for k in values)
    assert [id(p) for p in model.parameters()] == ids
    assert [dict(m._forward_pre_hooks) for m in model.modules()] == hooks


def test_scores_equal_torch_on_copies_and_nothing_changes():
    net = _net()
    s = Session(net)
    s.apply("0.weight", "l1_unstructured", amount=0.25)
    before = _state(net)
    events = []
    s.on_change(events.append)
    steps = s.steps
    df = s.sensitivity(_score, amounts=[0.3, 0.7], progress=False)
    _same_state(net, before)
    assert s.steps == steps
    assert events == []
    assert list(df.columns) == ["target", "scope", "amount", "sparsity", "score"]

    rows = []
    for name in ("0.weight", "2.weight"):
        rows.append((name, "local", 0.0, float((~s.mask(name)).float().mean()), _score(net)))
        for a in (0.3, 0.7):
            twin = copy.deepcopy(_net())
            torch_prune.l1_unstructured(twin[0], "weight", amount=0.25)
            module = twin.get_submodule(name.split(".")[0])
            torch_prune.l1_unstructured(module, "weight", amount=a)
            mask = module.weight_mask
            rows.append((name, "local", a, float((mask == 0).float().mean()), _score(twin)))
    w0, w2 = net[0].weight, net[2].weight
    rows.append(("global", "global", 0.0,
                 float(((net[0].weight_mask == 0).sum()) / (w0.numel() + w2.numel())),
                 _score(net)))
    for a in (0.3, 0.7):
        twin = copy.deepcopy(_net())
        torch_prune.l1_unstructured(twin[0], "weight", amount=0.25)
        torch_prune.global_unstructured([(twin[0], "weight"), (twin[2], "weight")],
                                        torch_prune.L1Unstructured, amount=a)
        zeros = int((twin[0].weight_mask == 0).sum() + (twin[2].weight_mask == 0).sum())
        rows.append(("global", "global", a, zeros / (w0.numel() + w2.numel()), _score(twin)))
    expected = pd.DataFrame(rows, columns=df.columns)
    pd.testing.assert_frame_equal(df, expected, check_exact=False, rtol=1e-6)


def test_random_method_uses_the_given_seed():
    net = _net()
    s = Session(net)
    df = s.sensitivity(_score, targets=["2.weight"], amounts=[0.5], method="random_unstructured",
                       scopes=["local"], seed=7, progress=False)
    twin = _net()
    torch.manual_seed(7)
    torch_prune.random_unstructured(twin[2], "weight", amount=0.5)
    assert df["score"].iloc[-1] == pytest.approx(_score(twin))


def test_model_is_restored_when_evaluate_raises():
    net = _net()
    s = Session(net)
    before = _state(net)
    calls = []

    def boom(model):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("evaluation crashed")
        return 0.0

    with pytest.raises(RuntimeError, match="evaluation crashed"):
        s.sensitivity(boom, amounts=[0.5, 0.9], progress=False)
    _same_state(net, before)
    assert s.steps == ()


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"method": "ln_structured"}, r"method must be one of .*; got 'ln_structured'"),
        ({"scopes": ["everywhere"]}, r"scopes must be a non-empty subset"),
        ({"amounts": [1.5]}, r"amounts must be fractions in \[0, 1\]; got 1.5"),
        ({"targets": []}, r"targets must name at least one tensor"),
        ({"targets": ["nope.weight"]}, r"nope.weight"),
    ],
)
def test_bad_options_raise_before_anything_runs(kwargs, pattern):
    net = _net()
    s = Session(net)
    before = _state(net)
    calls = []
    with pytest.raises((InvalidStepError, ValueError, KeyError), match=pattern):
        s.sensitivity(lambda m: calls.append(1) or 0.0, progress=False, **kwargs)
    assert calls == []
    _same_state(net, before)


def test_evaluate_must_be_callable_and_return_a_number():
    s = Session(_net())
    with pytest.raises(TypeError, match="evaluate must be a callable"):
        s.sensitivity(3)
    with pytest.raises(TypeError, match=r"evaluate must return a number; got 'high'"):
        s.sensitivity(lambda m: "high", amounts=[0.5], progress=False)


def test_progress_bar_runs(capsys):
    s = Session(_net())
    df = s.sensitivity(_score, amounts=[0.5], progress=True)
    assert len(df) == 2 * 2 + 2
