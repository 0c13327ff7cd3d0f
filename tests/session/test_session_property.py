"""Property test over random sequences of session operations.

Random sequences of preview / apply / apply_global / undo / commit on a small MLP. After every
operation:

* the model equals the same sequence of steps done with stock ``torch.nn.utils.prune`` on a fresh
  copy (state_dict keys, order and values; hook chains; pruned copies),
* ``weight == weight_orig * mask`` and masks are binary,
* each tensor's history is monotone (kept sets only shrink) between commits, and its last entry is
  the current mask,
* replaying the session's plan on a fresh model gives the same masks,
* the global RNG state is untouched.
Invalid operations (e.g. an int amount larger than what is left) must raise InvalidStepError and
change nothing.
"""

from __future__ import annotations

import math

import torch
import torch.nn.utils.prune as torch_prune
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers.session import assert_exact_state, assert_same_pruning, exact_state, mlp, torch_apply
from prune_explorer.session import InvalidStepError, NotUndoableError, Session

# Few tensors, so that steps pile up on the same tensor (containers, undo of later steps).
WEIGHTS = ["0.weight", "2.weight"]
BIASES = ["2.bias"]
NAMES = WEIGHTS + BIASES
SHAPES = {"0.weight": (5, 6), "2.weight": (4, 5), "4.weight": (3, 4),
          "0.bias": (5,), "2.bias": (4,), "4.bias": (3,)}

amounts = st.one_of(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0]), st.integers(0, 4))
dims = st.sampled_from([0, 1, -1])
norms = st.sampled_from([1, 2, math.inf, -math.inf])


@st.composite
def local_ops(draw):
    method = draw(st.sampled_from(["identity", "random_unstructured", "l1_unstructured",
                                   "random_structured", "ln_structured", "custom_from_mask"]))
    target = draw(st.sampled_from(WEIGHTS if "structured" in method
                                  and "unstructured" not in method else NAMES))
    kwargs: dict = {}
    if method in ("random_unstructured", "l1_unstructured"):
        kwargs = {"amount": draw(amounts)}
    elif method == "random_structured":
        kwargs = {"amount": draw(amounts), "dim": draw(dims)}
    elif method == "ln_structured":
        kwargs = {"amount": draw(amounts), "n": draw(norms), "dim": draw(dims)}
    elif method == "custom_from_mask":
        generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        kwargs = {"mask": torch.rand(SHAPES[target], generator=generator) > 0.3}
    kind = draw(st.sampled_from(["apply", "apply", "preview_then_apply", "preview"]))
    return (kind, target, method, kwargs)


@st.composite
def global_ops(draw):
    targets = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    method = draw(st.sampled_from(["l1_unstructured", "random_unstructured"]))
    kind = draw(st.sampled_from(["apply_global", "preview_global"]))
    return (kind, targets, method, {"amount": draw(amounts)})


operations = st.lists(
    st.one_of(
        local_ops(),
        global_ops(),
        st.just(("undo",)),
        st.just(("undo",)),
        st.tuples(st.just("commit"), st.sampled_from(NAMES)),
    ),
    min_size=1,
    max_size=10,
)


def _oracle(steps):
    """The same steps done with stock torch.nn.utils.prune on a fresh model."""
    model = mlp()
    for step in steps:
        if step.method == "remove":
            module_name, _, tensor = step.target.rpartition(".")
            torch_prune.remove(model.get_submodule(module_name), tensor)
        else:
            torch_apply(model, step)
    return model


def _check_invariants(s: Session) -> None:
    model = s.model
    for name in NAMES:
        module_name, _, tensor = name.rpartition(".")
        module = model.get_submodule(module_name)
        history = s.history(name)
        if hasattr(module, tensor + "_mask"):
            mask = getattr(module, tensor + "_mask")
            orig = getattr(module, tensor + "_orig")
            assert torch.equal(getattr(module, tensor), orig * mask)
            assert bool(((mask == 0) | (mask == 1)).all())
            assert torch.equal(history.mask(-1), mask != 0)
        elif history[-1].method not in ("initial", "remove"):
            raise AssertionError(f"{name}: history says pruned but the model is not")
        for k in range(1, len(history)):
            if history[k - 1].method == "remove":
                continue  # a new pruning after a commit starts from an all-ones mask
            before, after = history.mask(k - 1), history.mask(k)
            assert not bool((after & ~before).any()), f"{name}: mask grew at step {k}"


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(operations)
@example([  # a container grown by a third step, then undone
    ("apply", "0.weight", "l1_unstructured", {"amount": 0.2}),
    ("apply", "0.weight", "random_unstructured", {"amount": 3}),
    ("apply_global", ["0.weight", "2.bias"], "l1_unstructured", {"amount": 0.5}),
    ("undo",),
    ("undo",),
])
@example([  # commit between steps, then pruning again and undo back to the commit
    ("apply", "2.weight", "ln_structured", {"amount": 1, "n": 2, "dim": 0}),
    ("commit", "2.weight"),
    ("apply", "2.weight", "l1_unstructured", {"amount": 0.5}),
    ("undo",),
    ("undo",),
])
@example([  # committed zeros tie at a global cut: the oracle must split the tie as the session
    ("apply", "2.weight", "random_unstructured", {"amount": 0.1}),
    ("commit", "2.weight"),
    ("apply_global", ["0.weight", "2.weight"], "l1_unstructured", {"amount": 1}),
])
def test_random_operation_sequences_keep_the_invariants(ops):
    model = mlp()
    s = Session(model, seed=0)
    rng = torch.random.get_rng_state()
    for op in ops:
        kind = op[0]
        state = exact_state(model)
        steps_before = s.steps
        try:
            if kind == "undo":
                try:
                    s.undo()
                except NotUndoableError:
                    assert_exact_state(state, exact_state(model))
            elif kind == "commit":
                s.commit([op[1]])
            elif kind == "preview":
                s.preview(op[1], op[2], **op[3])
                assert_exact_state(state, exact_state(model))
            elif kind == "preview_global":
                s.preview_global(op[1], op[2], **op[3])
                assert_exact_state(state, exact_state(model))
            elif kind == "preview_then_apply":
                mask = s.preview(op[1], op[2], **op[3])
                s.apply(op[1], op[2], **op[3])
                module_name, _, tensor = op[1].rpartition(".")
                assert torch.equal(mask, getattr(model.get_submodule(module_name),
                                                 tensor + "_mask"))
            elif kind == "apply":
                s.apply(op[1], op[2], **op[3])
            elif kind == "apply_global":
                s.apply_global(op[1], op[2], **op[3])
        except InvalidStepError:
            # bad input (too large an int amount, unpruned commit...): nothing changed
            assert_exact_state(state, exact_state(model))
            assert s.steps == steps_before
        _check_invariants(s)
        assert_same_pruning(model, _oracle(s.steps))
    assert torch.equal(rng, torch.random.get_rng_state())
    replay = mlp()
    s.plan.apply(replay)
    assert_same_pruning(replay, model)
