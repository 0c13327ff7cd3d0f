"""The session's one transaction: every multi-step action is all or nothing, interrupts included.

A failure is injected into the core call that runs a step (``run_step``) on its Nth call, as an
ordinary exception and as a ``KeyboardInterrupt``; afterwards model (tensors, Parameter objects,
hooks and their contents), history, plan, commits, the next seed and the events must be exactly
as before.
"""

from __future__ import annotations

import pytest
import torch

from helpers.session import assert_exact_state, exact_state, mlp
from helpers.widgets import mlp as widget_mlp
from prune_explorer.session import Plan, Session, Step
from prune_explorer.session.parts import stepping as session_module
from prune_explorer.widgets import Explorer

PLAN = Plan([
    Step("l1_unstructured", "0.weight", amount=0.5),
    Step("remove", "0.weight"),
    Step("l1_unstructured", "2.weight", amount=0.5),
])


class Boom(RuntimeError):
    """The injected failure."""


def _outside_checks(monkeypatch) -> list[int]:
    """A flag list that is non-empty while ``Session.plan_blocker`` runs: its check of a plan
    that acts twice on a tensor applies the plan in a rolled-back transaction, and those runs
    are not the action's."""
    checking: list[int] = []
    real = Session.plan_blocker

    def blocker(self, steps):
        checking.append(1)
        try:
            return real(self, steps)
        finally:
            checking.pop()

    monkeypatch.setattr(Session, "plan_blocker", blocker)
    return checking


def fail_on_call(monkeypatch, n: int, error: BaseException) -> list[int]:
    """Make the session's call that runs a step raise ``error`` on its ``n``-th call (calls
    made by ``plan_blocker``'s checks not counted)."""
    real = session_module.run_step
    calls: list[int] = []
    checking = _outside_checks(monkeypatch)

    def flaky(model, step, *masks):
        if checking:
            return real(model, step, *masks)
        calls.append(1)
        if len(calls) == n:
            raise error
        return real(model, step, *masks)

    monkeypatch.setattr(session_module, "run_step", flaky)
    return calls


def real_run_of(monkeypatch, step: Step, action) -> int:
    """The call number at which ``action()`` runs ``step`` for real: the last time it runs it (an
    implementation may dry-run a plan first; the failure must hit the real application)."""
    real = session_module.run_step
    ran: list[Step] = []
    checking = _outside_checks(monkeypatch)

    def recording(model, s, *masks):
        if not checking:
            ran.append(s)
        return real(model, s, *masks)

    monkeypatch.setattr(session_module, "run_step", recording)
    action()
    monkeypatch.undo()
    return max(i for i, s in enumerate(ran, start=1) if s == step)


def session_state(s: Session) -> dict:
    return {
        "model": exact_state(s.model),
        "steps": s.steps,
        "histories": {n: [(e.index, e.step, e.mask) for e in s.history(n)] for n in s.names},
        "commits": s.commits,
        "next_seed": s.preview("0.weight", "random_unstructured", amount=0.5),
        "repr": repr(s),
    }


def assert_same_session(before: dict, s: Session) -> None:
    after = session_state(s)
    assert_exact_state(before["model"], after["model"])
    for key in ("steps", "histories", "commits", "repr"):
        assert after[key] == before[key], key
    assert torch.equal(after["next_seed"], before["next_seed"])


@pytest.fixture
def session():
    model = mlp()
    s = Session(model)
    s.apply("2.weight", "random_unstructured", amount=0.25)  # some state to go back to
    return s


@pytest.mark.parametrize("error", [Boom("injected"), KeyboardInterrupt()])
def test_a_plan_that_fails_in_step_3_leaves_everything_as_before(session, monkeypatch, error):
    # Step 2 commits 0.weight: the rollback must bring back its _orig, mask and hook too.
    before = session_state(session)
    seen = []
    session.on_change(seen.append)
    calls = fail_on_call(monkeypatch, 3, error)
    with pytest.raises(type(error)):
        session.apply_all(PLAN)
    assert len(calls) == 3
    monkeypatch.undo()
    assert_same_session(before, session)
    assert seen == []  # no event for a transaction that was rolled back
    session.undo()  # the earlier step is still undoable, exactly
    assert session.steps == ()


@pytest.mark.parametrize("error", [Boom("injected"), KeyboardInterrupt()])
def test_plan_apply_on_a_model_is_all_or_nothing(monkeypatch, error):
    model = mlp()
    before = exact_state(model)
    fail_on_call(monkeypatch, 3, error)
    with pytest.raises(type(error)):
        PLAN.apply(model)
    assert_exact_state(before, exact_state(model))


def test_a_successful_transaction_sends_its_events_after_it_ends(session):
    seen = []
    session.on_change(seen.append)
    with session.transaction():
        session.apply("0.weight", "l1_unstructured", amount=0.5)
        assert seen == []
    assert [e.kind for e in seen] == ["apply"]


def test_nested_transactions_roll_back_only_the_inner_one_when_it_is_caught(session):
    with session.transaction():
        session.apply("0.weight", "l1_unstructured", amount=0.5)
        inner = session_state(session)
        def inner_block() -> None:
            with session.transaction():
                session.apply("0.weight", "l1_unstructured", amount=0.5)
                raise Boom("inner")

        with pytest.raises(Boom):
            inner_block()
        assert_same_session(inner, session)
    assert len(session.steps) == 2


def test_undo_inside_a_transaction_cannot_reach_steps_from_before_it(session):
    before = session_state(session)
    def undo_in_transaction() -> None:
        with session.transaction():
            session.undo()

    with pytest.raises(RuntimeError, match=r"nothing to undo.*inside this transaction"):
        undo_in_transaction()
    assert_same_session(before, session)


def test_a_dry_run_leaves_no_trace(session):
    before = session_state(session)
    seen = []
    session.on_change(seen.append)
    with session.transaction(dry_run=True):
        session.apply("0.weight", "random_unstructured", amount=0.5)
        session.commit()
        assert session.steps[-1].method == "remove"
    assert_same_session(before, session)
    assert seen == []


@pytest.mark.parametrize("error", [Boom("injected"), KeyboardInterrupt()])
def test_commit_of_three_tensors_failing_on_the_second_commits_none(monkeypatch, error):
    s = Session(mlp())
    for name in ("0.weight", "0.bias", "2.weight"):
        s.apply(name, "l1_unstructured", amount=0.5)
    before = session_state(s)
    fail_on_call(monkeypatch, 2, error)
    with pytest.raises(type(error)):
        s.commit(["0.weight", "0.bias", "2.weight"])
    monkeypatch.undo()
    assert_same_session(before, s)
    assert s.commits == ()
    assert s.commit().names == ("0.weight", "0.bias", "2.weight")  # and it still works


@pytest.mark.parametrize("error", [Boom("injected"), KeyboardInterrupt()])
def test_sensitivity_interrupted_in_evaluate_leaves_the_session_as_it_was(session, error):
    before = session_state(session)
    seen = []
    session.on_change(seen.append)
    calls = []

    def evaluate(model):
        calls.append(1)
        if len(calls) == 4:
            raise error
        return 1.0

    with pytest.raises(type(error)):
        session.sensitivity(evaluate, amounts=[0.2, 0.5], progress=False)
    assert_same_session(before, session)
    assert seen == []


# -- through the explorer -------------------------------------------------------------------------
def _widget_values(ex: Explorer) -> dict:
    return {name: getattr(w, "value", None) for name, w in ex.ui.items()
            if name not in ("status", "progress", "preview", "preview_info")}


def _import(ex: Explorer) -> None:
    ex.ui.import_text.value = PLAN.to_json()
    ex.ui.import_plan.click()


def _step3_call(monkeypatch) -> int:
    probe = Explorer(widget_mlp(), debounce=None)
    probe.session.apply("2.weight", "l1_unstructured", amount=0.25)
    n = real_run_of(monkeypatch, PLAN[2], lambda: _import(probe))
    assert probe.session.steps[-1] == PLAN[2]  # the import itself works
    probe.close()
    return n


def test_import_button_failing_in_step_3_changes_nothing_and_shows_the_error(monkeypatch):
    n = _step3_call(monkeypatch)
    ex = Explorer(widget_mlp(), debounce=None)
    ex.session.apply("2.weight", "l1_unstructured", amount=0.25)
    before = session_state(ex.session)
    widgets_before = _widget_values(ex)
    fail_on_call(monkeypatch, n, Boom("disk on fire"))
    _import(ex)
    assert ex.status.kind == "error"
    assert ex.status.text == "Import plan failed: Boom: disk on fire"
    monkeypatch.undo()
    assert_same_session(before, ex.session)
    after = _widget_values(ex)
    for derived in ("import_text", "import_note"):  # the note says why the box is refused
        after.pop(derived), widgets_before.pop(derived)
    assert after == widgets_before
    ex.close()


def test_import_button_interrupted_in_step_3_changes_nothing(monkeypatch):
    n = _step3_call(monkeypatch)
    ex = Explorer(widget_mlp(), debounce=None)
    ex.session.apply("2.weight", "l1_unstructured", amount=0.25)
    before = session_state(ex.session)
    fail_on_call(monkeypatch, n, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):  # the kernel sees the interrupt...
        _import(ex)
    monkeypatch.undo()
    assert_same_session(before, ex.session)  # ...and the model is as before
    assert ex.status.text == "Import plan failed: interrupted (KeyboardInterrupt)"
    ex.close()


def test_compare_tab_apply_local_failing_on_the_second_tensor_applies_none(monkeypatch):
    ex = Explorer(widget_mlp(), debounce=None)
    before = session_state(ex.session)
    ex.ui.compare_targets.value = ("0.weight", "2.weight")
    fail_on_call(monkeypatch, 2, Boom("second"))
    ex.ui.apply_local.click()
    assert ex.status.text == "Apply local failed: Boom: second"
    monkeypatch.undo()
    assert_same_session(before, ex.session)
    ex.close()
