"""Schedule: the targets, epochs and amounts of each kind, labels, JSON, and refusals."""

from __future__ import annotations

import json
import math

import pytest

from prune_explorer.session import Schedule
from prune_explorer.session.loop.schedule import relative_amount


def test_one_shot_is_one_round():
    s = Schedule.one_shot(0.9, epochs=10)
    assert (s.targets, s.epochs, s.rounds, s.round_numbers) == ((0.9,), (10,), 1, (1,))
    assert s.label == "one-shot, 10 epochs"
    assert Schedule.one_shot(0.9, epochs=0).label == "one-shot, no fine-tune"


@pytest.mark.parametrize(("target", "rounds"), [(0.9, 3), (0.98, 5), (0.5, 1)])
def test_iterative_prunes_the_same_share_each_round(target, rounds):
    s = Schedule.iterative(target, rounds=rounds, epochs_per_round=2)
    assert s.targets[-1] == target
    assert len(s.targets) == rounds
    p = 1 - (1 - target) ** (1 / rounds)  # (1 - p) ** n == 1 - s
    for amount in s.amounts():
        assert amount == pytest.approx(p, rel=1e-12)
    assert s.epochs == (2,) * rounds
    assert s.epochs_total == 2 * rounds


def test_gradual_is_zhu_and_gupta_cubic():
    s = Schedule.gradual(0.9, epochs=10, rounds=10)
    n = 10
    expected = [0.9 + (0.0 - 0.9) * (1 - t / n) ** 3 for t in range(1, n + 1)]
    assert s.targets == pytest.approx(expected, abs=1e-15)
    assert s.targets[-1] == 0.9
    assert s.epochs == (1,) * 10
    steps = [b - a for a, b in zip((0.0, *s.targets), s.targets, strict=False)]
    assert steps == sorted(steps, reverse=True)  # fast first, slow at the end
    assert s.label == "gradual cubic, 10 epochs"
    uneven = Schedule.gradual(0.5, epochs=7, rounds=3, initial=0.2)
    assert uneven.epochs == (2, 2, 3)
    assert uneven.targets[0] > 0.2
    assert uneven.targets[-1] == 0.5


@pytest.mark.parametrize(("epochs", "rounds"), [(10, 5), (11, 5), (1, 1), (2, 1), (3, 1)])
def test_gradual_prunes_every_second_epoch_by_default(epochs, rounds):
    s = Schedule.gradual(0.9, epochs=epochs)
    assert s.rounds == rounds
    assert s.epochs_total == epochs
    assert s.targets == Schedule.gradual(0.9, epochs=epochs, rounds=rounds).targets


def test_lottery_ticket_has_a_dense_round_zero_and_more_epochs():
    s = Schedule.lottery_ticket(0.98, rounds=3, epochs_per_round=30)
    assert s.round_numbers == (0, 1, 2, 3)
    assert s.targets[0] == 0.0
    assert s.targets[1:] == Schedule.iterative(0.98, 3, 30).targets
    assert s.epochs_total == 120
    assert s.label == "lottery ticket, 3 rounds, rewind to init, 120 epochs"
    late = Schedule.lottery_ticket(0.9, rounds=2, epochs_per_round=10, rewind_to=3)
    assert late.epochs == (10, 7, 7)
    assert "rewind to epoch 3" in late.label


def test_amounts_are_torchs_relative_share_of_what_remains():
    s = Schedule.gradual(0.95, epochs=4)
    previous = 0.0
    for target, amount in zip(s.targets, s.amounts(), strict=True):
        assert amount == (target - previous) / (1 - previous)
        assert 1 - (1 - previous) * (1 - amount) == pytest.approx(target, abs=1e-12)
        previous = target
    assert relative_amount(0.5, 0.4) == 0.0  # already past the target: nothing more


@pytest.mark.parametrize("schedule", [
    Schedule.one_shot(0.9, 10), Schedule.iterative(0.8, 4, 2),
    Schedule.gradual(0.9, 10, rounds=5, initial=0.1),
    Schedule.lottery_ticket(0.9, 3, 5, rewind_to=2), Schedule.lottery_ticket(0.5, 1, 1),
])
def test_json_round_trip(schedule):
    data = json.loads(json.dumps(schedule.to_dict()))
    assert Schedule.from_dict(data) == schedule
    assert Schedule.from_dict(data).targets == schedule.targets
    assert repr(schedule).startswith(f"Schedule.{schedule.kind}(")


@pytest.mark.parametrize(("make", "words"), [
    (lambda: Schedule.one_shot(1.0, 1), "target must be a number in [0, 1)"),
    (lambda: Schedule.one_shot(math.nan, 1), "target must be"),
    (lambda: Schedule.one_shot(0.5, -1), "epochs must be an int >= 0; got -1"),
    (lambda: Schedule.iterative(0.5, 0, 1), "rounds must be an int >= 1; got 0"),
    (lambda: Schedule.gradual(0.5, 0), "rounds must be given when epochs is 0"),
    (lambda: Schedule.gradual(0.5, 3, initial=0.6), "initial must be a number in [0, target]"),
    (lambda: Schedule.lottery_ticket(0.5, 2, 3, rewind_to=4), "rewind_to must be 'init' or"),
    (lambda: Schedule.lottery_ticket(0.5, 2, 3, rewind_to="end"), "rewind_to must be 'init'"),
    (lambda: Schedule.from_dict({"kind": "cosine", "target": 0.5}), "kind must be one of"),
    (lambda: Schedule.from_dict({"kind": "one_shot", "target": 0.5}), "missing ['epochs']"),
    (lambda: Schedule.from_dict({"kind": "one_shot", "target": 0.5, "epochs": 1, "x": 1}),
     "unexpected ['x']"),
])
def test_refusals_name_the_argument_and_the_rule(make, words):
    with pytest.raises(ValueError, match="Schedule") as err:
        make()
    assert words in str(err.value)


def test_of_kind_builds_what_each_kinds_constructor_builds():
    direct = {
        "one_shot": Schedule.one_shot(0.8, 6),
        "iterative": Schedule.iterative(0.8, 3, 6),
        "gradual": Schedule.gradual(0.8, 6),
        "lottery_ticket": Schedule.lottery_ticket(0.8, 3, 6, rewind_to=2),
    }
    for kind, expected in direct.items():
        got = Schedule.of_kind(kind, 0.8, epochs=6, rounds=3, rewind_to=2)
        assert (got.kind, got.settings) == (expected.kind, expected.settings)
    with pytest.raises(ValueError, match="kind must be one of"):
        Schedule.of_kind("cubic", 0.8, epochs=6, rounds=3)
