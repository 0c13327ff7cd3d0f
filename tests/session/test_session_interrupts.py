"""Ctrl-C, case by case: held sections, interrupts after the commit, reset's warning.

The systematic check (an interrupt at sampled lines of every public action) is
``test_interrupt_exact.py``; these tests pin each mechanism it relies on.
"""

from __future__ import annotations

import signal
import threading
import warnings

import pytest
import torch

from helpers.session import assert_exact_state, exact_state, mlp
from helpers.widgets import mlp as widget_mlp
from prune_explorer import prune
from prune_explorer.session import InterruptedAfterCommit, Session
from prune_explorer.session.transaction.interrupts import held_interrupts
from prune_explorer.widgets import Explorer


def ctrl_c() -> None:
    signal.raise_signal(signal.SIGINT)


def test_a_held_section_raises_ctrl_c_when_it_ends_not_where_it_came():
    reached = []

    def section() -> None:
        with held_interrupts() as gate:
            ctrl_c()
            reached.append(gate.pending)

    with pytest.raises(KeyboardInterrupt):
        section()
    assert reached == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_open_gate_lets_ctrl_c_through_at_once():
    reached = []

    def through(gate) -> None:
        with gate.open():
            ctrl_c()
            reached.append("after")

    with held_interrupts() as gate:
        with pytest.raises(KeyboardInterrupt):
            through(gate)
        assert not gate.pending
    assert reached == []


def test_outside_the_main_thread_nothing_is_held():
    seen = []

    def worker() -> None:
        with held_interrupts() as gate:
            seen.append(gate.pending)
        seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [False, signal.default_int_handler]


def test_ctrl_c_in_a_subscriber_after_the_commit_is_reported_as_done():
    s = Session(mlp())
    heard: list[str] = []

    def interrupted(event):
        heard.append("first")
        if len(heard) == 1:
            raise KeyboardInterrupt

    s.on_change(interrupted)
    s.on_change(lambda event: heard.append("second"))
    with pytest.raises(InterruptedAfterCommit) as caught:
        s.apply("0.weight", "l1_unstructured", amount=0.5)
    assert isinstance(caught.value, KeyboardInterrupt)
    assert heard == ["first", "second"]  # every subscriber heard of it
    assert len(s.steps) == 1
    assert s.revision == 1  # it is done
    s.undo()  # and the session works on
    assert s.steps == ()
    assert s.revision == 2
    assert heard[2:] == ["first", "second"]


def test_an_ordinary_subscriber_error_still_lets_the_others_hear():
    s = Session(mlp())
    heard: list[str] = []
    s.on_change(lambda event: 1 / 0)
    s.on_change(lambda event: heard.append(event.kind))
    with pytest.raises(ZeroDivisionError):
        s.apply("0.weight", "l1_unstructured", amount=0.5)
    assert heard == ["apply"]


def test_undo_interrupted_half_way_through_restoring_is_whole(monkeypatch):
    # Ctrl-C while undo puts the layer back (in the finding, the Linear was left with
    # weight_orig but no weight, mask or hook): the restore finishes with Ctrl-C held. Then
    # either the transaction takes the whole undo back (a plain KeyboardInterrupt), or the undo
    # is done and the session says so (InterruptedAfterCommit: the Ctrl-C is raised once the
    # action took effect) -- never half of it.
    s = Session(mlp())
    unpruned = exact_state(s.model)
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    before = exact_state(s.model)
    from prune_explorer.prune import _module

    real, calls = _module._reorder, []

    def reorder(mapping, order):
        calls.append(1)
        if len(calls) == 1:
            ctrl_c()
        real(mapping, order)

    monkeypatch.setattr(_module, "_reorder", reorder)
    with pytest.raises(KeyboardInterrupt) as caught:
        s.undo()
    assert calls
    if isinstance(caught.value, InterruptedAfterCommit):  # done, and said so
        assert_exact_state(unpruned, exact_state(s.model))
        assert len(s.steps) == 0
        assert s.revision == 2
        return
    assert_exact_state(before, exact_state(s.model))  # all of it back, the same objects
    assert len(s.steps) == 1
    assert s.revision == 1
    s.undo()
    assert s.steps == ()
    assert list(s.model.state_dict())[:2] == ["0.weight", "0.bias"]


def test_reset_says_which_tensors_it_cannot_take_back():
    model = mlp()
    prune.l1_unstructured(model[0], "weight", amount=0.5)
    s = Session(model)
    with pytest.warns(UserWarning, match=r"Session.reset: \['0.weight'\] stay pruned: .*"
                                         "done outside the session"):
        s.reset()  # no steps: before, it said nothing
    prune.random_unstructured(model[2], "weight", amount=0.5)  # behind the session's back
    with pytest.warns(UserWarning, match=r"\['0.weight', '2.weight'\] stay pruned"):
        s.reset()


def test_reset_of_a_model_the_session_pruned_alone_is_silent():
    s = Session(mlp())
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.reset()
    assert s.steps == ()


def test_the_explorer_reports_an_apply_whose_redraw_was_interrupted_as_applied(monkeypatch):
    reference = Explorer(widget_mlp(), debounce=None)
    reference.select("0.weight")
    reference.apply()
    expected = reference.status.text
    reference.close()

    ex = Explorer(widget_mlp(), debounce=None)
    ex.select("0.weight")
    real, calls = ex.refresh, []

    def refresh() -> None:
        calls.append(1)
        if len(calls) == 1:
            ctrl_c()  # Ctrl-C while the pictures are redrawn: it waits for the redraw
        real()
        calls.append("drawn")

    monkeypatch.setattr(ex, "refresh", refresh)
    with pytest.raises(KeyboardInterrupt):
        ex.apply()
    assert len(ex.session.steps) == 1  # the step is applied ...
    assert ex.status.kind == "ok"
    assert ex.status.text == expected  # ... and the explorer says so
    assert expected.startswith("Applied")
    assert calls == [1, "drawn"]  # the redraw was finished
    ex.close()


def test_a_ctrl_c_held_in_a_nested_section_waits_for_the_section_around():
    # the explorer redraws with Ctrl-C held; the session's reads inside hold it too and then
    # open their gate: a Ctrl-C held by the inner section must wait for the outer one
    reached = []

    def sections() -> None:
        with held_interrupts() as outer:
            with held_interrupts() as inner:
                ctrl_c()
                with inner.open():
                    reached.append("inner open")
            reached.append(outer.pending)

    with pytest.raises(KeyboardInterrupt):  # raised as the outer section ends
        sections()
    assert reached == ["inner open", True]


def test_the_explorer_says_failed_when_nothing_changed(monkeypatch):
    ex = Explorer(widget_mlp(), debounce=None)
    ex.select("0.weight")
    before = exact_state(ex.session.model)
    from prune_explorer.session.parts import stepping as transaction

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(transaction, "run_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ex.apply()
    assert ex.status.text == "Apply failed: interrupted (KeyboardInterrupt)"
    assert ex.session.steps == ()
    assert ex.session.revision == 0
    assert_exact_state(before, exact_state(ex.session.model))
    assert torch.equal(ex.session.mask("0.weight"), torch.ones(8, 12, dtype=torch.bool))
    ex.close()
