"""Session change events: plain callbacks with plain event objects."""

from __future__ import annotations

import pytest

from helpers.session import mlp
from prune_explorer.session import Session, SessionEvent


def test_every_change_emits_one_event_and_previews_and_failures_emit_none():
    s = Session(mlp())
    events: list[SessionEvent] = []
    s.on_change(events.append)
    s.preview("0.weight", "l1_unstructured", amount=0.5)
    s.preview_global(["0.weight", "2.weight"], amount=0.5)
    with pytest.raises(ValueError, match="amount"):
        s.apply("0.weight", "l1_unstructured", amount=2.0)
    assert events == []

    a = s.apply("0.weight", "l1_unstructured", amount=0.5)
    g = s.apply_global(["0.weight", "2.weight"], amount=0.5)
    s.undo()
    i = s.apply("2.bias", "identity")
    s.reset()
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    s.apply("2.weight", "l1_unstructured", amount=0.5)
    s.commit()
    s.to("cpu")
    assert [e.kind for e in events] == [
        "apply", "apply", "undo", "apply", "reset", "apply", "apply", "commit", "to",
    ]
    assert events[0] == SessionEvent("apply", ("0.weight",), (a,))
    assert events[1] == SessionEvent("apply", ("0.weight", "2.weight"), (g,))
    assert events[2] == SessionEvent("undo", ("0.weight", "2.weight"), (g,))
    assert events[4] == SessionEvent("reset", ("0.weight", "2.bias"), (a, i))
    assert events[7].names == ("0.weight", "2.weight")
    assert [step.method for step in events[7].steps] == ["remove", "remove"]
    assert events[8] == SessionEvent("to", (), ())


def test_unsubscribe_and_several_listeners():
    s = Session(mlp())
    first, second = [], []
    stop = s.on_change(first.append)
    s.on_change(second.append)
    s.apply("0.weight", "identity")
    stop()
    stop()  # idempotent
    s.apply("2.weight", "identity")
    assert len(first) == 1
    assert len(second) == 2


def test_callback_must_be_callable():
    with pytest.raises(TypeError, match=r"on_change: callback must be callable; got 3"):
        Session(mlp()).on_change(3)
