"""Ctrl-C anywhere: every public action is exact under a ``KeyboardInterrupt`` at any line.

For each public action (``apply``, ``apply_global``, ``undo``, ``reset``, ``commit``, ``to``, a
plan's ``apply_all``, ``sensitivity``, ``preview``, and the explorer's Apply, Undo and Import
plan) a tracer
raises ``KeyboardInterrupt`` at the Nth line event of prune_explorer's code (see
``_interrupts.Interrupter``). Afterwards the whole state (``_interrupts.state_of``: model with
Parameter/hook identities, buffers, state_dict bytes, history, plan, journal, watch, lock, events,
explorer status) must equal the state before the action or the state after an uninterrupted run,
and the next action must give what it gives from that state.

Points: the first and last ``EDGE`` line events of each action (where transactions open and
close and events are sent) and ``SAMPLED`` more drawn with ``random.Random(SEED)`` from the rest:
50 points for each of the 8 session actions and 30 for each of the 3 explorer actions (whose
fixtures cost more), 490 points in all (about a minute of CPU). At ``AGAIN`` of those points
(drawn with the same seed) the run is repeated with a second Ctrl-C at a line event drawn from
those that followed the first (the rollback, the error report, the explorer's redraw): any
number of Ctrl-Cs leave the state before or after, and the explorer's status line and widgets
(``_interrupts.widgets_of``) say which.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from helpers.interrupts import Interrupter, Labels, differences, labels_of, state_of
from helpers.session_models import mlp
from prune_explorer.session import Plan, Session, Step
from prune_explorer.widgets import Explorer

SEED = 23
EDGE = {False: 12, True: 8}  # by "with an explorer"
SAMPLED = {False: 26, True: 14}
# of those points, how many get a second Ctrl-C (the explorer's: fewer, its fixtures cost more)
AGAIN = {False: 12, True: 10}

PLAN = Plan([
    Step("l1_unstructured", "4.weight", amount=0.5),
    Step("remove", "0.weight"),
    Step("random_unstructured", "2.bias", amount=0.5, seed=3),
])


@dataclass
class Fixture:
    session: Session
    explorer: Explorer | None
    labels: Labels
    events: list[Any] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        return state_of(self.session, self.labels, self.events, self.explorer)

    def close(self) -> None:
        if self.explorer is not None:
            self.explorer.close()


def build(with_explorer: bool) -> Fixture:
    model = mlp()
    explorer = Explorer(model, debounce=None) if with_explorer else None
    session = explorer.session if explorer is not None else Session(model)
    session.apply("0.weight", "l1_unstructured", amount=0.3)
    session.apply("2.weight", "random_unstructured", amount=0.25)
    if explorer is not None:
        explorer.select("4.weight")
        explorer.flush()
    fx = Fixture(session, explorer, labels_of(model))
    session.on_change(fx.events.append)
    return fx


def _sensitivity(fx: Fixture) -> Any:
    return fx.session.sensitivity(lambda m: float(m[0].weight.sum()), amounts=[0.5],
                                  targets=["0.weight", "4.weight"], progress=False)


def _import(fx: Fixture) -> None:
    assert fx.explorer is not None
    fx.explorer.ui.import_text.value = PLAN.to_json()
    fx.explorer.ui.import_plan.click()


# The explorer's name of each of its actions: an interrupted one says "<name> failed: ...".
SAID = {"explorer_apply": "Apply", "explorer_undo": "Undo", "explorer_import": "Import plan"}

ACTIONS: dict[str, tuple[bool, Callable[[Fixture], Any]]] = {
    "apply": (False, lambda fx: fx.session.apply("4.weight", "random_unstructured", amount=0.5)),
    "apply_global": (False, lambda fx: fx.session.apply_global(["0.weight", "2.weight"],
                                                                amount=0.5)),
    "undo": (False, lambda fx: fx.session.undo()),
    "reset": (False, lambda fx: fx.session.reset()),
    "commit": (False, lambda fx: fx.session.commit()),
    "to": (False, lambda fx: fx.session.to("cpu")),
    "plan": (False, lambda fx: fx.session.apply_all(PLAN)),
    "sensitivity": (False, _sensitivity),
    # nothing changes: a Ctrl-C must not leave the thread's state changed either
    "preview": (False, lambda fx: fx.session.preview("4.weight", "l1_unstructured", amount=0.5)),

    "explorer_apply": (True, lambda fx: fx.explorer.apply()),  # type: ignore[union-attr]
    "explorer_undo": (True, lambda fx: fx.explorer.undo()),  # type: ignore[union-attr]
    "explorer_import": (True, _import),
}


def next_action(fx: Fixture) -> None:
    """What the user does next: it must work as it does from an uninterrupted state."""
    if fx.explorer is not None:
        fx.explorer.select("2.weight")
        fx.explorer.apply()
        return
    fx.session.apply("2.weight", "l1_unstructured", amount=0.3)
    fx.session.apply("4.bias", "l1_unstructured", amount=0.5)
    fx.session.undo()


def run(action: Callable[[Fixture], Any], fx: Fixture, n: int,
        then: int | None = None) -> Interrupter:
    with Interrupter(n, then=then) as interrupter:
        try:
            action(fx)
        except KeyboardInterrupt:
            if not interrupter.fired:
                raise
    return interrupter


def references(with_explorer: bool, action: Callable[[Fixture], Any]) -> dict[str, Any]:
    """States before and after the uninterrupted action, and after the next action from each;
    and how many line events the action has."""
    fx = build(with_explorer)
    before = fx.state()
    lines = run(action, fx, 0).count
    after = fx.state()
    next_action(fx)
    after_next = fx.state()
    fx.close()
    fx = build(with_explorer)
    next_action(fx)
    before_next = fx.state()
    fx.close()
    return {"before": before, "after": after, "before_next": before_next,
            "after_next": after_next, "lines": lines}


def points(lines: int, with_explorer: bool) -> list[int]:
    edge, sampled = EDGE[with_explorer], SAMPLED[with_explorer]
    edges = set(range(1, min(edge, lines) + 1)) | set(range(max(1, lines - edge + 1), lines + 1))
    rest = sorted(set(range(1, lines + 1)) - edges)
    return sorted(edges | set(random.Random(SEED).sample(rest, min(sampled, len(rest)))))


def judge(name: str, ref: dict[str, Any], fx: Fixture, interrupter: Interrupter,
          point: Any) -> list[Any]:
    """The problems of one interrupted run (none: the state is exactly before or after, the
    status says so, and the next action gives what it gives from there)."""
    got = fx.state()
    if not interrupter.fired:  # no check point after line n: Ctrl-C comes after the action
        wrong = differences(got, ref["after"])
        return [(point, "not sent", wrong)] if wrong else []
    where = (interrupter.where, interrupter.where_again)
    status, before_status = got.pop("status"), ref["before"]["status"]
    after = {k: v for k, v in ref["after"].items() if k != "status"}
    before = {k: v for k, v in ref["before"].items() if k != "status"}
    if differences(got, after) == []:
        which, right = "after", [ref["after"]["status"]]
    elif differences(got, before) == []:
        which = "before"
        right = [before_status, ("error", f"{SAID.get(name)} failed: interrupted "
                                          "(KeyboardInterrupt)")]
    else:
        return [(point, where, "state", differences(got, before), differences(got, after))]
    problems: list[Any] = []
    if status not in right:
        problems.append((point, where, f"status, state {which}", status))
    try:
        next_action(fx)
    except Exception as err:  # reported below
        problems.append((point, where, "next action raised", repr(err)[:200]))
    else:
        wrong = differences(fx.state(), ref[f"{which}_next"])
        if wrong:
            problems.append((point, where, f"next action from {which}", wrong))
    return problems


@pytest.mark.parametrize("name", list(ACTIONS))
def test_an_interrupt_at_any_line_leaves_the_state_before_or_after(name):
    with_explorer, action = ACTIONS[name]
    ref = references(with_explorer, action)
    assert ref["before"] != ref["after"] or name in ("sensitivity", "preview")
    problems = []
    chosen = points(ref["lines"], with_explorer)
    # a second Ctrl-C, during what the first one set off (the rollback), at these points
    again = set(random.Random(SEED + 1).sample(chosen, min(AGAIN[with_explorer], len(chosen))))
    draw = random.Random(SEED + 2)
    twice = 0
    for n in chosen:
        fx = build(with_explorer)
        # then=0: count the line events after it, where a second Ctrl-C will be drawn
        interrupter = run(action, fx, n, then=0 if n in again else None)
        problems += judge(name, ref, fx, interrupter, n)
        fx.close()
        if n not in again or not interrupter.fired or interrupter.after == 0:
            continue
        k = draw.randint(1, interrupter.after)
        fx = build(with_explorer)
        interrupter = run(action, fx, n, then=k)
        twice += interrupter.fired_again
        problems += judge(name, ref, fx, interrupter, (n, k))
        fx.close()
    assert not problems, (f"{name}: {len(problems)} of {len(chosen)} points (of "
                          f"{ref['lines']} line events) broke the state: {problems[:8]}")
    assert twice or not AGAIN[with_explorer], "no second Ctrl-C was delivered: the test is vacuous"
