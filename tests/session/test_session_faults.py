"""Stateful property test: the explorer's actions under injected faults are all or nothing.

A hypothesis state machine drives an explorer (and its session) with the actions a user has:
Apply, Apply global and Apply local (comparison tab), Undo, Reset, Commit (review + confirm),
Import plan, and a sensitivity sweep. Before each action it may arm a fault: the core call that
runs a step, the packing of a mask (before the step, for the snapshot, or after it, for the
history) or the score function raises an ordinary exception or ``KeyboardInterrupt`` on its Nth
call. Whenever an action fails, for whatever reason, the model (every tensor, buffer, Parameter
object and hook), the history, the plan, the commits, the next seed and every widget value must
be exactly what they were before it.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from helpers.session import assert_exact_state, exact_state, fill_tie_free
from prune_explorer.session import Plan, Step
from prune_explorer.session.parts import stepping as transaction_module
from prune_explorer.session.tensors.packed import PackedMask
from prune_explorer.widgets import Explorer

TENSORS = ("0.weight", "0.bias", "2.weight")
METHODS = ("l1_unstructured", "random_unstructured", "ln_structured", "random_structured")


class Boom(RuntimeError):
    """The injected failure."""


def _model() -> torch.nn.Module:
    return fill_tie_free(torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(),
                                             torch.nn.Linear(4, 3)), 0)


@contextlib.contextmanager
def fault(where: str | None, n: int, error: BaseException) -> Iterator[list[int]]:
    """Make ``where`` raise ``error`` on its ``n``-th call inside the block."""
    calls: list[int] = []
    if where is None:
        yield calls
        return

    def flaky(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) == n:
                raise error
            return real(*args, **kwargs)
        return call

    if where == "run_step":
        real = transaction_module.run_step
        transaction_module.run_step = flaky(real)
        try:
            yield calls
        finally:
            transaction_module.run_step = real
    else:  # "pack": every mask the session packs (snapshots before a step, history after it)
        real_pack = PackedMask.from_tensor.__func__  # type: ignore[attr-defined]
        PackedMask.from_tensor = classmethod(  # type: ignore[method-assign]
            flaky(lambda *a, **k: real_pack(PackedMask, *a[1:], **k)))
        try:
            yield calls
        finally:
            PackedMask.from_tensor = classmethod(real_pack)  # type: ignore[method-assign]


FAULTS = st.one_of(
    st.just((None, 0, None)),
    st.tuples(st.sampled_from(["run_step", "pack"]), st.integers(1, 4),
              st.sampled_from(["boom", "interrupt"])),
)


def _error(kind: str | None) -> BaseException:
    return KeyboardInterrupt() if kind == "interrupt" else Boom("injected")


class ExplorerUnderFaults(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ex = Explorer(_model(), debounce=None)
        self.session = self.ex.session
        self.failures = 0

    def teardown(self) -> None:
        self.ex.close()

    # -- the state that must survive a failed action --------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        s = self.session
        return {
            "model": exact_state(s.model),
            "steps": s.steps,
            "histories": {n: [(e.index, e.step, e.mask) for e in s.history(n)] for n in s.names},
            "commits": s.commits,
            "next_seed": s.preview("2.weight", "random_unstructured", amount=0.5),
            "widgets": {name: w.value for name, w in self.ex.ui.items()
                        if hasattr(w, "value") and name not in ("status", "progress")},
        }

    def check_same(self, before: dict[str, Any]) -> None:
        after = self.snapshot()
        assert_exact_state(before["model"], after["model"])
        for key in ("steps", "histories", "commits", "widgets"):
            assert after[key] == before[key], key
        assert torch.equal(after["next_seed"], before["next_seed"])

    def run(self, what: str, action: Callable[[], Any], armed: tuple) -> None:
        """Run ``action`` with the fault armed; if it fails, nothing may have changed."""
        where, n, kind = armed
        before = self.snapshot()
        status_before = self.ex.status.text
        failed = False
        try:
            with fault(where, n, _error(kind)):
                action()
        except (Boom, KeyboardInterrupt, ValueError, RuntimeError):
            failed = True
        if self.ex.status.text != status_before and self.ex.status.text.startswith(
            f"{what} failed"
        ):
            failed = True
        if failed:
            self.failures += 1
            self.check_same(before)

    # -- actions --------------------------------------------------------------------------------
    @rule(tensor=st.sampled_from(TENSORS), method=st.sampled_from(METHODS),
          amount=st.sampled_from([0.0, 0.3, 0.5, 1.0]), armed=FAULTS)
    def apply(self, tensor: str, method: str, amount: float, armed: tuple) -> None:
        self.ex.ui.tensor.value = tensor
        self.ex.ui.method.value = method
        self.ex.ui.amount.value = amount
        self.run("Apply", self.ex.ui.apply.click, armed)

    @rule(amount=st.sampled_from([0.2, 0.6]), armed=FAULTS)
    def apply_global(self, amount: float, armed: tuple) -> None:
        self.ex.ui.compare_amount.value = amount
        self.run("Apply global", self.ex.ui.apply_global.click, armed)

    @rule(amount=st.sampled_from([0.2, 0.6]), armed=FAULTS)
    def apply_local(self, amount: float, armed: tuple) -> None:
        self.ex.ui.compare_amount.value = amount
        self.run("Apply local", self.ex.ui.apply_local.click, armed)

    @rule(armed=FAULTS)
    def undo(self, armed: tuple) -> None:
        self.run("Undo", self.ex.ui.undo.click, armed)

    @rule(armed=FAULTS)
    def reset(self, armed: tuple) -> None:
        self.run("Reset", self.ex.ui.reset.click, armed)

    @precondition(lambda self: bool(self.session.found) or any(
        s.method != "remove" for s in self.session.steps))
    @rule(armed=FAULTS)
    def commit(self, armed: tuple) -> None:
        self.ex.ui.commit_review.click()
        self.run("Commit", self.ex.ui.commit_confirm.click, armed)

    @rule(picks=st.lists(st.tuples(st.sampled_from(TENSORS),
                                   st.sampled_from(["l1_unstructured", "remove"])),
                         min_size=1, max_size=3),
          armed=FAULTS)
    def import_plan(self, picks: list[tuple[str, str]], armed: tuple) -> None:
        plan = Plan([Step(m, t, amount=0.5) if m != "remove" else Step(m, t) for t, m in picks])
        self.ex.ui.import_text.value = plan.to_json()
        self.run("Import plan", self.ex.ui.import_plan.click, armed)

    @rule(n=st.integers(1, 6), kind=st.sampled_from(["boom", "interrupt"]))
    def sensitivity(self, n: int, kind: str) -> None:
        calls: list[int] = []

        def evaluate(model: torch.nn.Module) -> float:
            calls.append(1)
            if len(calls) == n:
                raise _error(kind)
            return random.random()

        self.run("Sensitivity", lambda: self.session.sensitivity(
            evaluate, targets=["0.weight", "2.weight"], amounts=[0.5], progress=False),
            (None, 0, None))

    # -- what holds after every action ----------------------------------------------------------
    @invariant()
    def history_describes_the_model(self) -> None:
        for name in self.session.names:
            recorded = self.session.history(name).mask(-1)
            if self.session.history(name)[-1].method == "remove":  # committed: zeros baked in
                assert not self.session.tensor(name)[~recorded].any()
            else:
                assert torch.equal(recorded, self.session.mask(name))


ExplorerUnderFaults.TestCase.settings = settings(
    max_examples=8, stateful_step_count=6, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_explorer_actions_under_faults() -> None:
    ExplorerUnderFaults.TestCase().runTest()
