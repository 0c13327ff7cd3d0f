"""The loop in a session: rounds match stock torch, rewinds and undo are exact, the cap on what
undo keeps, Stop and Ctrl-C, the plan and its replay."""

from __future__ import annotations

import copy
import signal

import pytest
import torch
from torch import nn
from torch.nn.utils import prune as torch_prune

from helpers.session import assert_exact_state, exact_state
from prune_explorer.session import (
    InvalidStepError,
    NotUndoableError,
    Plan,
    RunInterrupted,
    Schedule,
    Session,
    TrainingStep,
)

WEIGHTS = ("0.weight", "2.weight", "4.weight")


def model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 4))


def train(model: nn.Module, epochs: int) -> None:
    """Deterministic: a fresh Adam each call, 3 steps an epoch on fixed random data."""
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 12, generator=g), torch.randint(0, 4, (64,), generator=g)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(3 * epochs):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


def evaluate(model: nn.Module) -> float:
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(64, 12, generator=g), torch.randint(0, 4, (64,), generator=g)
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def masks_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items() if k.endswith("_mask")}


def same_state(a: nn.Module, b: nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


# -- 1. torch's semantics --------------------------------------------------------------------------
@pytest.mark.parametrize("scope", ["global", "local"])
def test_every_round_has_stock_torchs_masks_on_the_same_weights(scope):
    m, twin = model(), model()
    s = Session(m)
    previous = [0.0]
    checked = []

    def stock_round(result):  # the twin does the round with torch.nn.utils.prune itself
        target = result.target
        amount = (target - previous[0]) / (1 - previous[0])
        pairs = [(twin[int(a.split(".")[0])], "weight") for a in WEIGHTS]
        if scope == "global":
            torch_prune.global_unstructured(pairs, torch_prune.L1Unstructured, amount=amount)
        else:
            for module, name in pairs:
                torch_prune.l1_unstructured(module, name, amount=amount)
        assert result.amount == amount
        for key, mask in masks_of(twin).items():  # the masks of stock torch on these weights
            assert torch.equal(mask, m.state_dict()[key]), (result.index, key)
        pruned = sum(int((mask == 0).sum()) for mask in masks_of(twin).values())
        total = sum(mask.numel() for mask in masks_of(twin).values())
        assert result.realized == pruned / total  # torch's rounding, reported beside the target
        train(twin, result.epochs)
        evaluate(twin)  # a forward pass: the pruned copies are the trained weights' again
        same_state(m, twin)
        previous[0] = target
        checked.append(result.index)

    # the session prunes then trains; the twin is checked after the session's round, so it
    # prunes on the weights the session pruned (its state before the round is the same)
    run = s.fine_tune_schedule(Schedule.iterative(0.9, rounds=3, epochs_per_round=1), train,
                               evaluate, targets=list(WEIGHTS), scope=scope,
                               on_round=stock_round)
    assert checked == [1, 2, 3]
    assert not run.stopped
    assert [r.target for r in run.rounds] == list(Schedule.iterative(0.9, 3, 1).targets)
    assert all(abs(r.realized - r.target) < 2 / 400 for r in run.rounds)
    steps = [st for st in s.steps if not isinstance(st, TrainingStep)]
    assert [st.settings["amount"] for st in steps][:1] == [Schedule.iterative(0.9, 3, 1)
                                                          .amounts()[0]]


def test_rounds_compound_in_one_pruning_container():
    m = model()
    s = Session(m)
    s.fine_tune_schedule(Schedule.iterative(0.75, 2, 0), train, targets=["0.weight"],
                         scope="local")
    hook = next(iter(m[0]._forward_pre_hooks.values()))
    assert isinstance(hook, torch_prune.PruningContainer)
    assert len(list(hook)) == 2
    assert int((m[0].weight_mask == 0).sum()) == 96 + 48  # 192 * 0.5, then 96 * 0.5


def test_each_round_is_in_the_history_and_the_table():
    s = Session(model())
    run = s.fine_tune_schedule(Schedule.gradual(0.8, epochs=3, rounds=3), train, evaluate,
                               targets=list(WEIGHTS))
    assert [st.method for st in s.steps] == ["global_unstructured", "fine_tune"] * 3
    history = s.history("2.weight")
    assert [e.method for e in history][1:] == ["global_unstructured", "fine_tune"] * 3
    assert history.pruned_counts()[2] == history.pruned_counts()[1]  # fine-tune: same mask
    table = run.table()
    assert list(table["round"]) == [1, 2, 3]
    assert list(table["epochs"]) == [1, 1, 1]
    assert list(table["target"]) == list(Schedule.gradual(0.8, epochs=3, rounds=3).targets)
    assert table["realized sparsity"].is_monotonic_increasing
    assert table["mask IoU with previous"].between(0, 1).all()
    assert (table["kept for undo (bytes)"] >= sum(p.numel() * 4 for p in s.model.parameters())
            ).all()
    assert s.runs == (run,)
    assert run.label == "gradual cubic, 3 epochs"
    assert run.outcome == "finished round 3 of 3; the model is as at the end of round 3"


def test_training_steps_read_as_words():
    from prune_explorer.session.analysis.wording import describe_change, describe_step

    assert describe_step(TrainingStep.fine_tune(1), pruned=0, sparsity=0.5) == \
        "fine-tune, 1 epoch"
    assert describe_change("Undid", [TrainingStep.rewind()], {}, {}, {}) == \
        "Undid rewind every weight to the kept ones (masks unchanged)."
    assert "keep the weights" in describe_step(TrainingStep.keep_weights())


# -- 2. rewinding is exact -------------------------------------------------------------------------
@pytest.mark.parametrize("rewind_to", ["init", 1])
def test_lottery_ticket_rewind_is_bit_exact(rewind_to):
    m = model()
    init = {k: v.clone() for k, v in m.state_dict().items()}
    seen: dict[str, object] = {"calls": 0}

    def spying_train(model: nn.Module, epochs: int) -> None:
        seen["calls"] = int(seen["calls"]) + 1  # type: ignore[call-overload]
        state = model.state_dict()
        if "masks" in seen:  # right after a rewind: check it, bit for bit
            kept = seen["kept"]
            for key, value in state.items():
                if key.endswith("_mask"):
                    assert torch.equal(value, seen["masks"][key])  # masks unchanged
                    continue
                plain = key.removesuffix("_orig")
                assert torch.equal(value, kept[plain]), key  # every entry, pruned ones too
            seen["checked"] = int(seen.get("checked", 0)) + 1
            del seen["masks"]
        train(model, epochs)
        if rewind_to != "init" and seen["calls"] == 1:  # after epoch k of round 0
            seen["kept"] = {k: v.clone() for k, v in model.state_dict().items()}

    def note_masks() -> bool:  # asked before each training call: after the prune, before rewind
        if int(seen["calls"]) >= (1 if rewind_to == "init" else 2):  # type: ignore[call-overload]
            seen["masks"] = masks_of(m)
        return False

    if rewind_to == "init":
        seen["kept"] = init
    s = Session(m)
    run = s.fine_tune_schedule(Schedule.lottery_ticket(0.75, 2, 2, rewind_to=rewind_to),
                               spying_train, evaluate, targets=list(WEIGHTS),
                               should_stop=note_masks)
    assert seen["checked"] == 2
    assert [r.index for r in run.rounds] == [0, 1, 2]
    assert [st.method for st in s.steps].count("rewind") == 2


def test_rewind_without_kept_weights_is_refused():
    s = Session(model())
    with pytest.raises(InvalidStepError, match="no keep_weights step came before it"):
        s.apply_step(TrainingStep.rewind())
    assert s.steps == ()


# -- 3. undo ---------------------------------------------------------------------------------------
def test_undo_of_a_fine_tune_restores_the_weights_bit_for_bit():
    m = model()
    s = Session(m)
    s.apply_global(list(WEIGHTS), amount=0.5)
    evaluate(m)
    before = exact_state(m)
    step = s.fine_tune(train, 2)
    assert step == TrainingStep.fine_tune(2)
    assert s.steps[-1] == step
    assert not torch.equal(m[0].weight_orig, before["state_dict"][1][1])
    assert s.undo() == step
    assert_exact_state(before, exact_state(m))


def test_undoing_a_whole_run_gives_back_the_model_exactly():
    m = model()
    before = exact_state(m)
    s = Session(m)
    s.fine_tune_schedule(Schedule.lottery_ticket(0.8, 2, 1), train, evaluate)
    s.reset()
    assert_exact_state(before, exact_state(m))
    assert s.steps == ()
    assert len(s.runs) == 1


def test_past_the_cap_undo_refuses_in_one_clear_line():
    m = model()
    size = sum(p.numel() * p.element_size() for p in m.parameters())
    s = Session(m, undo_bytes=size)  # room for one fine-tune's weights
    s.fine_tune(train, 1)
    s.fine_tune(train, 1)
    assert s.undo_kept_bytes == size
    s.undo()  # the second: kept
    assert not s.can_undo
    why = s.undo_blocker()
    assert "\n" not in why
    assert "Session.undo_bytes = " + f"{size:,}" in why
    assert why.startswith("the last step, TrainingStep.fine_tune(epochs=1), cannot be undone")
    with pytest.raises(NotUndoableError, match=r"Session\.undo: the last step"):
        s.undo()
    assert s.reset_blocker().startswith("the model cannot go back to how the session found it "
                                        "because step TrainingStep.fine_tune(epochs=1) cannot")
    with pytest.raises(NotUndoableError, match=r"Session\.reset: the model cannot go back"):
        s.reset()
    assert len(s.steps) == 1  # refused: nothing changed
    s.undo_bytes = 0  # lowering the cap lets go of what it no longer allows
    assert s.undo_kept_bytes == 0
    with pytest.raises(ValueError, match=r"undo_bytes must be None .* got -1"):
        Session(m, undo_bytes=-1)


def test_a_failing_train_leaves_everything_as_before():
    m = model()
    s = Session(m)
    s.apply_global(list(WEIGHTS), amount=0.3)
    before, steps = exact_state(m), s.steps

    def broken(model: nn.Module, epochs: int) -> None:
        train(model, epochs)
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        s.fine_tune(broken, 1)
    assert_exact_state(before, exact_state(m))
    assert s.steps == steps
    assert len(s.history("0.weight")) == 2


# -- 5. Stop and Ctrl-C ----------------------------------------------------------------------------
def _stop_in_round(m: nn.Module, round_number: int, how: str):
    s = Session(m)
    states = {}
    calls = [0]

    def on_round(result):
        states[result.index] = exact_state(m)

    def stopping_train(model: nn.Module, epochs: int) -> None:
        calls[0] += 1
        train(model, epochs)
        if calls[0] == round_number and how == "ctrl-c":
            signal.raise_signal(signal.SIGINT)  # Ctrl-C in the middle of the round's work

    def should_stop() -> bool:
        return how == "stop" and calls[0] == round_number  # after the round's training
    start = exact_state(m)
    return s, states, start, stopping_train, should_stop, on_round


@pytest.mark.parametrize("how", ["stop", "ctrl-c"])
@pytest.mark.parametrize("round_number", [1, 2])
def test_stop_leaves_the_end_of_the_last_completed_round_or_the_start(how, round_number):
    m = model()
    s, states, start, stopping_train, should_stop, on_round = _stop_in_round(m, round_number,
                                                                             how)
    schedule = Schedule.iterative(0.8, rounds=3, epochs_per_round=1)
    if how == "stop":  # should_stop says True before round `round_number + 1`'s training...
        run = s.fine_tune_schedule(schedule, stopping_train, evaluate, on_round=on_round,
                                   should_stop=should_stop)
        done = round_number  # ... which is polled before the next round starts
    else:
        with pytest.raises(RunInterrupted) as err:
            s.fine_tune_schedule(schedule, stopping_train, evaluate, on_round=on_round)
        run = err.value.run
        assert str(err.value) == run.outcome
        assert s.runs[-1] is run
        done = round_number - 1
    assert run.stopped
    assert [r.index for r in run.rounds] == list(range(1, done + 1))
    if done:
        assert_exact_state(states[done], exact_state(m))
        assert run.outcome == (f"stopped after round {done} of 3; the model is exactly as at "
                               f"the end of round {done}")
    else:
        assert_exact_state(start, exact_state(m))
        assert run.outcome == "stopped during round 1 of 3; the model is exactly as before the run"
    assert len(s.steps) == 2 * done


def test_stop_in_the_middle_of_a_round_rolls_that_round_back():
    m = model()
    s = Session(m)
    start = exact_state(m)
    asked = [0]

    def should_stop() -> bool:  # asked before round 1, then before its training: stop there
        asked[0] += 1
        return asked[0] == 2

    run = s.fine_tune_schedule(Schedule.one_shot(0.5, 1), train, should_stop=should_stop)
    assert run.stopped
    assert run.rounds == ()
    assert s.steps == ()
    assert_exact_state(start, exact_state(m))


def train_with_progress(model: nn.Module, epochs: int, *, progress=None) -> None:
    for epoch in range(epochs):
        train(model, 1)
        if progress is not None:
            progress(epoch + 1)


def test_a_train_that_takes_progress_reports_and_stops_per_epoch():
    m = model()
    s = Session(m)
    seen: list[tuple[int, int, int]] = []
    run = s.fine_tune_schedule(Schedule.iterative(0.5, 2, 3), train_with_progress,
                               on_epoch=lambda *a: seen.append(a))
    assert seen == [(1, 0, 3), (1, 1, 3), (1, 2, 3), (1, 3, 3),
                    (2, 0, 3), (2, 1, 3), (2, 2, 3), (2, 3, 3)]
    assert not run.stopped
    # Stop seen after an epoch, in the middle of a training call: that round is rolled back
    m = model()
    s = Session(m)
    states = {}
    epochs_seen = []

    def on_epoch(index: int, done: int, total: int) -> None:
        epochs_seen.append((index, done))

    run = s.fine_tune_schedule(
        Schedule.iterative(0.5, 2, 3), train_with_progress, on_epoch=on_epoch,
        on_round=lambda r: states.setdefault(r.index, exact_state(m)),
        should_stop=lambda: epochs_seen[-1:] == [(2, 1)])
    assert run.stopped
    assert [r.index for r in run.rounds] == [1]
    assert epochs_seen[-1] == (2, 1)  # stopped after epoch 1 of round 2's 3
    assert_exact_state(states[1], exact_state(m))
    assert len(s.steps) == 2


# -- 6. export -------------------------------------------------------------------------------------
def test_the_plan_carries_the_training_steps_and_replays_with_the_same_train():
    m, twin = model(), model()
    s = Session(m)
    s.fine_tune_schedule(Schedule.lottery_ticket(0.7, 2, 2, rewind_to=1), train,
                         targets=list(WEIGHTS))
    plan = Plan.from_json(s.plan.to_json())
    assert plan == s.plan
    assert [st.method for st in plan][:3] == ["fine_tune", "keep_weights", "fine_tune"]
    assert plan.to_dict()["steps"][0] == {"method": "fine_tune", "epochs": 1}
    with pytest.raises(InvalidStepError, match=r"steps\[0\]: a fine_tune step needs train="):
        plan.apply(copy.deepcopy(twin))
    plan.apply(twin, train=train)
    same_state(m, twin)


def test_the_snippet_replays_the_schedule_on_stock_torch():
    m, twin = model(), model()
    s = Session(m)
    s.fine_tune_schedule(Schedule.gradual(0.9, epochs=3, rounds=3), train, evaluate,
                         scope="local",
                         targets=list(WEIGHTS))
    snippet = s.plan.to_snippet()
    assert "prune_explorer" not in snippet
    assert "train(model, 1)" in snippet
    exec(compile(snippet, "snippet", "exec"), {"model": twin, "train": train})
    same_state(m, twin)


@pytest.mark.parametrize(("step", "words"), [
    ({"method": "fine_tune"}, "steps[0]: missing field 'epochs'; fine_tune needs: epochs"),
    ({"method": "fine_tune", "epochs": 1.5}, "steps[0]: epochs must be an int >= 0; got 1.5"),
    ({"method": "fine_tune", "epochs": True}, "epochs must be an int >= 0; got True"),
    ({"method": "rewind", "target": "fc.weight"},
     "steps[0]: unexpected field 'target' for rewind; its fields are: method"),
    ({"method": "keep_weights", "seed": 1}, "unexpected field 'seed' for keep_weights"),
])
def test_malformed_training_steps_are_refused_naming_step_and_field(step, words):
    from prune_explorer.session import InvalidPlanError

    document = {"format": "prune-explorer-plan", "version": 2, "steps": [step]}
    with pytest.raises(InvalidPlanError) as err:
        Plan.from_dict(document)
    assert words in str(err.value)
    assert err.value.step == 0


def test_the_demo_train_reports_each_epoch_and_is_seen_to_take_progress():
    import functools

    from prune_explorer.demo import DigitsMLP
    from prune_explorer.demo import train as demo_train
    from prune_explorer.session.loop.runner import takes_progress

    assert takes_progress(functools.partial(demo_train, seed=3))
    assert takes_progress(train_with_progress)
    assert not takes_progress(train)
    assert not takes_progress(lambda m, e: demo_train(m, e, seed=3))
    done: list[int] = []
    torch.manual_seed(0)
    demo_train(DigitsMLP(), 2, progress=done.append)
    assert done == [1, 2]


@pytest.mark.parametrize("scope", ["global", "local"])
@pytest.mark.parametrize(("width", "expected"), [(16, 1), (400, 2)])  # 400x400 > prune SMALL
def test_small_targets_are_pruned_on_one_thread_and_train_keeps_the_callers(
        monkeypatch, scope, width, expected):
    from prune_explorer.prune.engine import SMALL

    assert (width * width > SMALL) == (expected == 2)
    seen: dict[str, list[int]] = {"prune": [], "train": [], "evaluate": []}
    for name in ("apply", "apply_global"):
        original = getattr(Session, name)

        def spy(self, *args, _original=original, **kwargs):
            seen["prune"].append(torch.get_num_threads())
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Session, name, spy)

    def fit(model: nn.Module, epochs: int) -> None:
        seen["train"].append(torch.get_num_threads())

    def score(model: nn.Module) -> float:
        seen["evaluate"].append(torch.get_num_threads())
        return 0.5

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4))
        run = Session(net).fine_tune_schedule(Schedule.iterative(0.75, 2, 1), fit, score,
                                              scope=scope)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
    assert [r.realized for r in run.rounds] == pytest.approx([0.5, 0.75], abs=1e-3)
    assert seen["prune"]
    assert set(seen["prune"]) == {expected}
    assert seen["train"] == [2, 2]
    assert set(seen["evaluate"]) == {2}
    assert after == 2


def test_the_demo_evaluate_runs_on_one_thread_as_its_train_does():
    from prune_explorer.demo import evaluate as demo_evaluate
    from prune_explorer.demo import train as demo_train

    seen: list[int] = []

    class Spy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(64, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(torch.get_num_threads())
            return self.fc(x)

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        spy = Spy()
        accuracy = demo_evaluate(spy, layout="flat")
        demo_train(spy, 1, layout="flat", batch_size=1347)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
    assert 0.0 <= accuracy <= 1.0
    assert seen == [1, 1]
    assert after == 2


def test_a_global_round_on_small_targets_builds_no_key_histogram(monkeypatch):
    import prune_explorer.session.preview.order_cache as order_cache
    from prune_explorer.prune.engine import SMALL

    built: list[str] = []

    class Counted(order_cache.KeyHistogram):
        def __init__(self, module: nn.Module, name: str, *args: object, **kwargs: object) -> None:
            built.append(name)
            super().__init__(module, name, *args, **kwargs)

    monkeypatch.setattr(order_cache, "KeyHistogram", Counted)
    net = model()
    assert all(p.numel() <= SMALL for p in net.parameters())
    s = Session(net)
    s.fine_tune_schedule(Schedule.gradual(0.9, 4), train, evaluate, scope="global")
    # the core's selection instead (nothing cached to reuse; its masks are stock torch's:
    # test_every_round_has_stock_torchs_masks_on_the_same_weights)
    assert built == []
    s.preview_global(list(WEIGHTS), "l1_unstructured", amount=0.95)  # a slider builds them
    assert sorted(built) == ["weight"] * 3
