"""Issue 11: an apply after a preview installs the preview's cached masks and reads its tie note
off the cached order, instead of selecting and looking again.

Against a session without orders (the core's own selection and the full look after the step), on
tie-heavy data, for L1, seeded random and global L1 steps: the same masks bit for bit, the same
hooks and method objects, the same note (``Step.ties``).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import prune_explorer.prune.methods as core_methods
import prune_explorer.session.parts.stepping as transaction
from prune_explorer.session import Session
from prune_explorer.session.preview.masks import cached_cuts
from prune_explorer.session.steps.step import Step

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TARGETS = ["0.weight", "1.weight"]


def _model(dtype: torch.dtype) -> nn.Module:
    g = torch.Generator().manual_seed(2)
    model = nn.Sequential(nn.Linear(500, 400), nn.Linear(400, 350))
    with torch.no_grad():
        for layer in model:
            w = torch.randn(layer.weight.shape, generator=g) * 0.05
            layer.weight.copy_(torch.round(w * 64) / 64)  # quantised: every cut a tie
    return model.to(dtype)


def _steps() -> list[tuple[str, dict]]:
    out = []
    for amount in (0.1, 0.5, 1.0):
        out.append(("l1", {"amount": amount}))
        out.append(("random", {"amount": amount, "seed": 3}))
        out.append(("global", {"amount": amount}))
    out.append(("random", {"amount": 70_000, "seed": 8}))  # fp32 draws: no tie at this cut
    return out


def _preview_apply(s: Session, kind: str, target: str, kw: dict) -> Step:
    if kind == "l1":
        s.preview(target, "l1_unstructured", **kw)
        return s.apply(target, "l1_unstructured", **kw)
    if kind == "random":
        s.preview(target, "random_unstructured", **kw)
        return s.apply(target, "random_unstructured", **kw)
    s.preview_global(TARGETS, **kw)
    return s.apply_global(TARGETS, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
def test_note_from_the_order_is_the_full_looks(dtype, monkeypatch):
    fast, slow = Session(_model(dtype)), Session(_model(dtype))
    slow._orders.budget = 0  # no orders: every note comes from the full look
    full_looks = []
    note_ties = transaction.note_ties

    def counted(*args):
        full_looks.append(args[1])
        return note_ties(*args)

    selections = []
    select = core_methods.select

    def counted_select(*args, **kwargs):
        selections.append(1)
        return select(*args, **kwargs)

    monkeypatch.setattr(transaction, "note_ties", counted)
    monkeypatch.setattr(core_methods, "select", counted_select)
    fast.apply("0.weight", "l1_unstructured", amount=0.2)  # one target already pruned
    slow.apply("0.weight", "l1_unstructured", amount=0.2)
    notes = set()
    for kind, kw in _steps():
        for target in TARGETS:
            full_looks.clear()
            selections.clear()
            got = _preview_apply(fast, kind, target, kw)
            assert full_looks == []  # read off the order
            assert selections == []  # preview and apply: no selection, the order's masks
            expected = _preview_apply(slow, kind, target, kw)
            assert full_looks == [expected]
            assert got.ties == expected.ties, (kind, kw, target)
            notes.add(got.ties)
            for name in TARGETS:
                assert torch.equal(fast.mask(name), slow.mask(name)), (kind, kw, name)
                assert _hooks(fast, name) == _hooks(slow, name)
                buffer = fast.model.get_submodule(name[0])._buffers.get("weight_mask")
                if buffer is not None:
                    assert buffer.dtype == dtype
                    assert buffer.is_contiguous()
            fast.undo()
            slow.undo()
    assert notes == {None, "lowest"}  # both cases were met


def _hooks(s: Session, name: str) -> list:
    """The pruning hooks on ``name``'s module, as (class, settings) of each method."""
    module = s.model.get_submodule(name[0])
    out = []
    for hook in module._forward_pre_hooks.values():
        members = getattr(hook, "_pruning_methods", (hook,))
        out.append((type(hook).__name__, [(type(m).__name__, getattr(m, "amount", None),
                                           getattr(m, "ties", None)) for m in members]))
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_installed_mask_is_the_cached_orders(dtype):
    s = Session(_model(dtype))
    s.apply("1.weight", "random_unstructured", amount=0.3, seed=1)
    for step in (Step("l1_unstructured", "1.weight", amount=0.45),
                 Step("random_unstructured", "1.weight", amount=0.45, seed=5),
                 Step("global_unstructured", TARGETS, pruning_method="l1_unstructured",
                      amount=0.6)):
        s._preview_step(step, "test")
        cuts = cached_cuts(s.model, step, s._orders)
        assert cuts is not None
        # read before the step: carrying an L1 order past it consumes that order
        expected = [order.mask(cut) for order, cut in cuts]
        s.apply_step(step)
        for name, mask in zip(step.targets, expected, strict=True):
            assert torch.equal(s.mask(name), mask), (step, name)
        s.undo()


def test_no_cached_order_for_structured_or_unseen_steps():
    s = Session(_model(torch.float32))
    assert cached_cuts(s.model, Step("l1_unstructured", "0.weight", amount=0.5), s._orders) \
        is None  # nothing previewed yet
    s.preview("0.weight", "ln_structured", amount=0.5, n=2, dim=0)
    step = Step("ln_structured", "0.weight", amount=0.5, n=2, dim=0)
    assert cached_cuts(s.model, step, s._orders) is None


def test_interrupted_install_from_the_orders_changes_nothing(monkeypatch):
    import prune_explorer.prune._module as core_module

    s = Session(_model(torch.bfloat16))
    s.apply("1.weight", "l1_unstructured", amount=0.3)
    state = {k: v.clone() for k, v in s.model.state_dict().items()}
    hooks = [_hooks(s, n) for n in TARGETS]
    s.preview_global(TARGETS, amount=0.6)
    install = core_module.install
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return install(*args, **kwargs)

    monkeypatch.setattr(core_module, "install", interrupted)
    with pytest.raises(KeyboardInterrupt):
        s.apply_global(TARGETS, amount=0.6)
    assert len(calls) == 2  # the first target was installed, then rolled back
    after = s.model.state_dict()
    assert list(after) == list(state)
    assert all(torch.equal(after[k], v) for k, v in state.items())
    assert [_hooks(s, n) for n in TARGETS] == hooks
    assert len(s.steps) == 1
