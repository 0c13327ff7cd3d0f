"""Bad input and failed pruning: same exception type as torch, a message naming the call,
the argument and the value, and a module left exactly as it was (ours is stricter than
torch here: torch reorders ``_parameters`` on rollback and, when an already pruned tensor
fails to prune again, drops its hook; those cases xfail while ours is the torch shim).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as theirs
from torch import nn

from helpers.prune import (
    assert_message,
    assert_pruned_alike,
    assert_unchanged,
    call_both,
    hooks_desc,
    make_input,
    make_module,
    mask_of,
    snapshot,
    twin,
)
from prune_explorer import prune as ours
from prune_explorer.prune.validation import METHOD_PARAMETERS, constraint

L1 = ("l1_unstructured", "L1Unstructured")
RU = ("random_unstructured", "RandomUnstructured")
RS = ("random_structured", "RandomStructured")
LN = ("ln_structured", "LnStructured")
GL = ("global_unstructured",)


def _l1(impl, m, **kw):
    return impl.l1_unstructured(m, "weight", **kw)


def _ru(impl, m, **kw):
    return impl.random_unstructured(m, "weight", **kw)


def _rs(impl, m, name="weight", **kw):
    return impl.random_structured(m, name, **kw)


def _ln(impl, m, name="weight", **kw):
    return impl.ln_structured(m, name, **kw)


def _global(impl, m, method="L1Unstructured", **kw):
    impl.global_unstructured([(m, "weight"), (m, "bias")], getattr(impl, method), **kw)


def _remove(impl, m, name="weight"):
    impl.remove(m, name)


def _missing(impl, m):
    impl.l1_unstructured(m, "foo", amount=0.5)


def _custom(impl, m):
    impl.custom_from_mask(m, "weight", mask=torch.ones(2, 2))


# Linear(6, 5): weight (5, 6) = 30 entries, bias (5,)
# (id, call(impl, module), names any of which the message must contain, regex for arg+value)
ERROR_CASES = [
    ("amount=-1", lambda i, m: _l1(i, m, amount=-1), L1, r"amount.*-1\b"),
    ("amount=1.5", lambda i, m: _l1(i, m, amount=1.5), L1, r"amount.*1\.5"),
    ("amount='x'", lambda i, m: _l1(i, m, amount="x"), L1, r"amount.*\bx\b"),
    ("amount=-0.1-random", lambda i, m: _ru(i, m, amount=-0.1), RU, r"amount.*-0\.1"),
    ("amount>numel-l1", lambda i, m: _l1(i, m, amount=31), L1, r"amount.*\b31\b"),
    ("amount>numel-random", lambda i, m: _ru(i, m, amount=31), RU, r"amount.*\b31\b"),
    ("amount>size-ln", lambda i, m: _ln(i, m, amount=6, n=2, dim=0), LN, r"amount.*\b6\b"),
    ("amount>size-rs", lambda i, m: _rs(i, m, amount=7, dim=1), RS, r"amount.*\b7\b"),
    ("dim=2-ln", lambda i, m: _ln(i, m, amount=1, n=2, dim=2), LN, r"\bdim\b.*\b2\b"),
    ("dim=-3-ln", lambda i, m: _ln(i, m, amount=1, n=2, dim=-3), LN, r"\bdim\b.*-3\b"),
    ("dim=2-rs", lambda i, m: _rs(i, m, amount=1, dim=2), RS, r"\bdim\b.*\b2\b"),
    ("dim=-3-rs", lambda i, m: _rs(i, m, amount=1, dim=-3), RS, r"\bdim\b.*-3\b"),
    ("n='x'", lambda i, m: _ln(i, m, amount=1, n="x", dim=0), LN, r"\bn\b.*\bx\b"),
    ("n='nuc'-rank2", lambda i, m: _ln(i, m, amount=1, n="nuc", dim=0), LN, r"\bn\b.*nuc"),
    ("1-D-ln", lambda i, m: _ln(i, m, "bias", amount=1, n=2, dim=0), LN, r"bias"),
    ("1-D-rs", lambda i, m: _rs(i, m, "bias", amount=1, dim=0), RS, r"bias"),
    ("global-LnStructured",
     lambda i, m: _global(i, m, "LnStructured", amount=0.5, n=2, dim=0),
     GL, r"pruning_method.*LnStructured"),
    ("global-RandomStructured",
     lambda i, m: _global(i, m, "RandomStructured", amount=0.5, dim=0),
     GL, r"pruning_method.*RandomStructured"),
    ("global-amount=1.5", lambda i, m: _global(i, m, amount=1.5), (*GL, *L1), r"amount.*1\.5"),
    ("global-amount>numel", lambda i, m: _global(i, m, amount=36), (*GL, *L1), r"amount.*36"),
    ("remove-unpruned", lambda i, m: _remove(i, m), ("remove",), r"weight"),
    ("missing-name", _missing, L1, r"\bfoo\b"),
    ("importance-shape-l1",
     lambda i, m: _l1(i, m, amount=0.5, importance_scores=torch.ones(2, 2)),
     L1, r"importance_scores.*2, 2"),
    ("importance-shape-ln",
     lambda i, m: _ln(i, m, amount=1, n=2, dim=0, importance_scores=torch.ones(2, 2)),
     LN, r"importance_scores.*2, 2"),
    ("mask-shape", _custom, ("custom_from_mask", "CustomFromMask"), r"mask.*2, 2"),
]  # fmt: skip
ERROR_IDS = [c[0] for c in ERROR_CASES]


def _prepruned_linear() -> nn.Linear:
    """A Linear whose weight is pruned twice (a container) and whose bias once."""
    m = make_module("linear", seed=40)
    theirs.l1_unstructured(m, "weight", amount=4)
    theirs.ln_structured(m, "weight", amount=1, n=1, dim=1)
    theirs.l1_unstructured(m, "bias", amount=1)
    return m


def _raise_alike(call, module_ours, module_theirs):
    """torch's exception on its twin, then ours (same type), returned as (torch, ours)."""
    exc_t = call_both(lambda: call(ours, module_ours), lambda: call(theirs, module_theirs))
    assert exc_t is not None, "torch accepted this call: the case is not an error case"
    return exc_t


@pytest.mark.parametrize(("case", "call", "funcs", "pattern"), ERROR_CASES, ids=ERROR_IDS)
def test_bad_input_on_unpruned_module(case, call, funcs, pattern):
    m_o, m_t = twin(make_module("linear", seed=41))
    before = snapshot(m_o)
    exc = _raise_alike(call, m_o, m_t)
    assert_message(exc, funcs, pattern)
    # torch puts the parameter back at the end of _parameters; ours must not reorder
    assert_unchanged(before, m_o)
    # the module still works and can still be pruned like torch's
    fresh = make_module("linear", seed=41)
    call_both(lambda: ours.l1_unstructured(m_o, "weight", amount=0.5),
              lambda: theirs.l1_unstructured(fresh, "weight", amount=0.5))  # fmt: skip
    torch.testing.assert_close(m_o(make_input("linear")), fresh(make_input("linear")))


# cases that still raise once the tensors are already pruned. Not "remove-unpruned", and not
# structured pruning of the 1-D bias: once pruned, torch accepts it (its container indexes the
# bias with a 0-d boolean and prunes the whole bias), a quirk we do not require ours to copy.
PRUNED_CASES = [
    c for c in ERROR_CASES if c[0] not in ("remove-unpruned", "1-D-ln", "1-D-rs")
]


@pytest.mark.parametrize(
    ("case", "call", "funcs", "pattern"), PRUNED_CASES, ids=[c[0] for c in PRUNED_CASES]
)
def test_bad_input_on_already_pruned_module(case, call, funcs, pattern):
    base, m_o, m_t = _prepruned_linear(), _prepruned_linear(), _prepruned_linear()
    before = snapshot(m_o)
    exc = _raise_alike(call, m_o, m_t)
    assert_message(exc, funcs, pattern)
    assert_unchanged(before, m_o)
    x = make_input("linear")
    torch.testing.assert_close(m_o(x), base(x), rtol=0, atol=0)


def test_remove_unknown_name_on_pruned_module():
    m_o, m_t = _prepruned_linear(), _prepruned_linear()
    before = snapshot(m_o)
    exc = _raise_alike(lambda i, m: _remove(i, m, "foo"), m_o, m_t)
    assert_message(exc, ("remove",), r"\bfoo\b")
    assert_unchanged(before, m_o)


def test_remove_twice():
    m_o, m_t = twin(make_module("linear", seed=42))
    call_both(lambda: ours.identity(m_o, "weight"), lambda: theirs.identity(m_t, "weight"))
    call_both(lambda: ours.remove(m_o, "weight"), lambda: theirs.remove(m_t, "weight"))
    before = snapshot(m_o)
    exc = _raise_alike(_remove, m_o, m_t)
    assert_message(exc, ("remove",), r"weight")
    assert_unchanged(before, m_o)


@pytest.mark.parametrize("amount", [float("nan"), float("inf"), True, None, [0.5]], ids=repr)
def test_odd_amounts_behave_like_torch(amount):
    """Whatever torch does with these (accept or refuse), ours does the same."""
    m_o, m_t = twin(make_module("linear", seed=43))
    exc = call_both(lambda: _l1(ours, m_o, amount=amount), lambda: _l1(theirs, m_t, amount=amount))
    if exc is None:
        assert_pruned_alike(m_o, m_t)


# --------------------------------------------------------------------------- rollback
def _boom(self, t, default_mask):
    raise RuntimeError("boom from compute_mask")


@pytest.mark.parametrize("kind", ["linear", "conv3d"])
@pytest.mark.parametrize("name", ["weight", "bias"])
def test_rollback_on_first_pruning(monkeypatch, kind, name):
    m = make_module(kind, seed=44)
    before = snapshot(m)
    param = getattr(m, name)
    monkeypatch.setattr(ours.L1Unstructured, "compute_mask", _boom)
    with pytest.raises(RuntimeError, match="boom from compute_mask"):
        ours.l1_unstructured(m, name, amount=0.5)
    assert_unchanged(before, m)
    assert getattr(m, name) is param
    assert name in dict(m.named_parameters())
    assert name + "_orig" not in dict(m.named_parameters())
    assert name + "_mask" not in dict(m.named_buffers())
    assert not ours.is_pruned(m)


@pytest.mark.parametrize("previous_steps", [1, 2])
def test_rollback_on_iterative_pruning(monkeypatch, previous_steps):
    """The second (or third) pruning of a tensor fails: the earlier pruning is intact."""

    def build():
        m = make_module("conv2d", seed=45)
        torch.manual_seed(0)
        ours.random_unstructured(m, "weight", amount=0.2)
        if previous_steps == 2:
            ours.ln_structured(m, "weight", amount=1, n=2, dim=0)
        ours.l1_unstructured(m, "bias", amount=1)
        return m

    m, pristine = build(), build()
    hook = next(h for h in m._forward_pre_hooks.values() if h._tensor_name == "weight")
    n_members = len(hook) if isinstance(hook, ours.PruningContainer) else None
    mask = mask_of(m).clone()
    x = make_input("conv2d")
    out = m(x)
    before = snapshot(m)

    monkeypatch.setattr(ours.L1Unstructured, "compute_mask", _boom)
    with pytest.raises(RuntimeError, match="boom from compute_mask"):
        ours.l1_unstructured(m, "weight", amount=0.3)
    monkeypatch.undo()
    assert_unchanged(before, m)
    assert hook in m._forward_pre_hooks.values(), "the hook of the first pruning is gone"
    if n_members is not None:
        assert len(hook) == n_members, "the failed method was left in the container"
    assert torch.equal(mask_of(m), mask)
    torch.testing.assert_close(m(x), out, rtol=0, atol=0)
    # a later pruning gives exactly what it gives on a module that never saw the failure
    ours.l1_unstructured(m, "weight", amount=0.3)
    ours.l1_unstructured(pristine, "weight", amount=0.3)
    assert torch.equal(mask_of(m), mask_of(pristine))
    assert hooks_desc(m) == hooks_desc(pristine)


def test_rollback_in_global_unstructured(monkeypatch):
    mods = [make_module("linear", seed=46), make_module("conv1d", seed=47)]
    ours.l1_unstructured(mods[1], "weight", amount=3)
    befores = [snapshot(m) for m in mods]
    monkeypatch.setattr(ours.L1Unstructured, "compute_mask", _boom)
    with pytest.raises(RuntimeError, match="boom from compute_mask"):
        ours.global_unstructured(
            [(mods[0], "weight"), (mods[1], "weight"), (mods[0], "bias")],
            ours.L1Unstructured,
            amount=0.5,
        )
    for before, m in zip(befores, mods, strict=True):
        assert_unchanged(before, m)


# --------------------------------------------------------------------------- constraint table
#: a valid value of every constrained parameter, and bad ones with the exception torch raises
GOOD = {"amount": 0.5, "n": 2, "dim": 0, "mask": torch.ones(5, 6), "generator": None,
        "ties": "index", "pattern": "1:1", "block": (1, 1)}
BAD = {"amount": [(1.5, ValueError), (-1, ValueError), ("x", TypeError)],
       "n": [("x", RuntimeError), (float("nan"), RuntimeError)],
       "dim": [(1.0, TypeError), ("0", TypeError)],
       "mask": [([1, 0], TypeError)],
       "generator": [(3, TypeError)],
       "ties": [("fast", ValueError)],
       "pattern": [("2-4", ValueError), ("5:4", ValueError), (24, TypeError)],
       "block": [((0, 4), ValueError), ((), ValueError), (4, TypeError)]}
SHOWN_AS_TYPE = ("mask", "generator")  # messages name their type, not their value

CONSTRAINT_CASES = [
    (function, param, value, error)
    for function, (_, params) in METHOD_PARAMETERS.items()
    for param in params
    for value, error in BAD[param]
]


@pytest.mark.parametrize(("function", "param", "value", "error"), CONSTRAINT_CASES,
                         ids=[f"{c[0]}-{c[1]}={c[2]!r}" for c in CONSTRAINT_CASES])
def test_every_constrained_parameter_of_every_method_says_where_rule_and_value(
        function, param, value, error):
    cls_name, params = METHOD_PARAMETERS[function]
    kwargs = {p: GOOD[p] for p in params}
    kwargs[param] = value
    shown = repr(type(value).__name__ if param in SHOWN_AS_TYPE else value)
    rule = constraint(param, function).rule
    cls = getattr(ours, cls_name)
    for where, call in (
        (function, lambda: getattr(ours, function)(nn.Linear(6, 5), "weight", **kwargs)),
        (cls_name, lambda: cls(**kwargs)),
    ):
        with pytest.raises(error) as info:
            call()
        assert str(info.value) == f"{where}: {param} must be {rule}; got {shown}"


def test_remove_with_a_mask_set_to_none_names_it():
    """A mask buffer registered as None by hand cannot be applied: remove refuses with a
    message naming the tensors, and leaves the module as it was."""
    m = make_module("linear", seed=44)
    ours.identity(m, "weight")
    m._buffers["weight_mask"] = None
    before = snapshot(m)
    with pytest.raises(ValueError, match=r"remove: weight_orig and weight_mask must be tensors"):
        ours.remove(m, "weight")
    assert_unchanged(before, m)
