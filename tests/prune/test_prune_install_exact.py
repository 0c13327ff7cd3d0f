"""A pruning call is all or nothing, on its fastest route too.

A tensor's first pruning installs through ``_module._install_fresh``: the pruned copy is computed
before anything changes, the few dict entries are written with Ctrl-C held, and a failure or an
interrupt raised there takes them back. These tests press Ctrl-C at every line event of each
pruning function (once, then again while the first is being handled), make a registration hook
fail, and nest the call in a held section: the module is always exactly as before or exactly as
after, autograd and the SIGINT handler are the caller's again.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from helpers.interrupts import Interrupter, labels_of, model_state
from prune_explorer import prune
from prune_explorer.prune import _module
from prune_explorer.prune.engine import held_interrupts


def _mask_of(module: nn.Module) -> torch.Tensor:
    return (torch.arange(module.weight.numel()).reshape(module.weight.shape) % 3 != 0).float()


#: Each call, on a module made by :func:`build` (``"again"``: on a module pruned once already,
#: the general route).
CALLS: dict[str, Callable[[nn.Module], Any]] = {
    "l1_unstructured": lambda m: prune.l1_unstructured(m, "weight", amount=0.5),
    "random_unstructured": lambda m: prune.random_unstructured(m, "weight", amount=0.5),
    "ln_structured": lambda m: prune.ln_structured(m, "weight", amount=0.5, n=2, dim=0),
    "random_structured": lambda m: prune.random_structured(m, "weight", amount=0.5, dim=1),
    "custom_from_mask": lambda m: prune.custom_from_mask(m, "weight", mask=_mask_of(m)),
    "again": lambda m: prune.l1_unstructured(m, "weight", amount=2),
}


def build(kind: str) -> nn.Module:
    torch.manual_seed(0)
    module = nn.Linear(6, 4)
    if kind == "again":
        prune.random_unstructured(module, "weight", amount=0.25)
    torch.manual_seed(1)  # the draws of the call itself
    return module


def run(kind: str, n: int, then: int | None = None) -> tuple[Interrupter, dict[str, Any],
                                                              dict[str, Any], dict[str, Any]]:
    """(the interrupter, state before, state now, state after an uninterrupted call)."""
    reference = build(kind)
    reference_labels = labels_of(reference)  # what existed before the call, by name
    CALLS[kind](reference)
    after = model_state(reference, reference_labels)
    module = build(kind)
    labels = labels_of(module)
    before = model_state(module, labels)
    with Interrupter(n, then=then) as interrupter, contextlib.suppress(KeyboardInterrupt):
        CALLS[kind](module)
    return interrupter, before, model_state(module, labels), after


def _check(kind: str, n: int, then: int | None) -> None:
    interrupter, before, now, after = run(kind, n, then)
    where = f"{kind}: Ctrl-C at line event {n} ({interrupter.where}), again {then} later " \
            f"({interrupter.where_again})"
    assert now in (before, after), where
    assert torch.is_grad_enabled(), where  # autograd is the caller's again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, where


def _line_events(kind: str) -> int:
    interrupter, *_ = run(kind, 0)
    return interrupter.count


@pytest.mark.parametrize("kind", CALLS)
def test_one_ctrl_c_anywhere_leaves_the_module_before_or_after(kind):
    count = _line_events(kind)
    assert count > 20  # the call was traced
    for n in range(1, count + 1):
        _check(kind, n, None)


@pytest.mark.parametrize("kind", ["l1_unstructured", "random_unstructured", "again"])
def test_a_second_ctrl_c_during_the_first_leaves_it_before_or_after(kind):
    count = _line_events(kind)
    for n in range(1, count + 1, 3):
        for then in (1, 2, 5):
            _check(kind, n, then)


def test_the_fresh_route_is_taken_for_a_first_pruning(monkeypatch):
    taken: list[bool] = []
    real = _module._install_fresh

    def spy(*args: Any) -> bool:
        taken.append(real(*args))
        return taken[-1]

    monkeypatch.setattr(_module, "_install_fresh", spy)
    module = build("l1_unstructured")
    CALLS["l1_unstructured"](module)
    assert taken == [True]
    CALLS["again"](module)  # a pruned tensor: the general route, a container
    assert taken == [True]
    hook = next(iter(module._forward_pre_hooks.values()))
    assert isinstance(hook, prune.PruningContainer)


def _failing_buffer_hook(module: nn.Module, name: str, buffer: Any) -> None:
    if name == "weight_mask":
        raise RuntimeError("the registration hook refuses")


@pytest.mark.parametrize("kind", CALLS)
def test_a_registration_hook_that_fails_leaves_the_module_as_before(kind):
    module = build(kind)
    labels = labels_of(module)
    before = model_state(module, labels)
    handle = nn.modules.module.register_module_buffer_registration_hook(_failing_buffer_hook)
    try:
        with pytest.raises(RuntimeError, match="refuses"):
            CALLS[kind](module)
    finally:
        handle.remove()
    assert model_state(module, labels) == before
    assert [n for n, _ in module.named_parameters()] == [n for n, _ in build(kind)
                                                         .named_parameters()]


def _ctrl_c_hook(module: nn.Module, name: str, buffer: Any) -> None:
    if name == "weight_mask":  # Ctrl-C while the install changes the module
        signal.raise_signal(signal.SIGINT)


def test_ctrl_c_during_the_changes_takes_them_back():
    module = build("l1_unstructured")
    labels = labels_of(module)
    before = model_state(module, labels)
    handle = nn.modules.module.register_module_buffer_registration_hook(_ctrl_c_hook)
    try:
        with pytest.raises(KeyboardInterrupt):
            CALLS["l1_unstructured"](module)
    finally:
        handle.remove()
    assert model_state(module, labels) == before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_section_around_that_holds_the_ctrl_c_gets_the_call_whole():
    # The section around holds the interrupt and goes on: the call must finish (its caller
    # believes it did), and the interrupt is raised when that section ends.
    module = build("l1_unstructured")
    reference = build("l1_unstructured")
    CALLS["l1_unstructured"](reference)
    handle = nn.modules.module.register_module_buffer_registration_hook(_ctrl_c_hook)
    finished = []

    def held_call() -> None:
        with held_interrupts():
            CALLS["l1_unstructured"](module)
            finished.append(True)

    try:
        with pytest.raises(KeyboardInterrupt):
            held_call()
    finally:
        handle.remove()
    assert finished == [True]
    assert torch.equal(module.weight_mask, reference.weight_mask)
    assert torch.equal(module.weight, reference.weight)
    assert list(module._parameters) == list(reference._parameters)


def test_in_another_thread_nothing_is_held():
    import threading

    seen: list[Any] = []

    def work() -> None:
        with held_interrupts() as gate:
            seen.append(type(gate).__name__)
        module = build("l1_unstructured")
        CALLS["l1_unstructured"](module)
        seen.append(int((module.weight_mask == 0).sum()))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == ["_Unheld", 12]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
