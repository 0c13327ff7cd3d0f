"""Checks run inside every process of a spawned group for test_session_sharded.

Every rank builds the same model from the same seed, shards it with FSDP2's ``fully_shard`` and
drives a ``Session`` on it with the same calls; a one-process ``Session`` on an unsharded copy of
the same weights (in the same process) is the reference: masks gathered with ``full_tensor()``,
reports, histories and plans must equal it, and the plan saved by rank 0 replayed on one process
must give the same masks.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

from helpers.dist import Allocations, full, setup
from prune_explorer import Session
from prune_explorer.prune import _radix, engine
from prune_explorer.session import Plan, Step
from prune_explorer.session.tensors.packed import ShardedMask
from prune_explorer.session.tensors.sharded import is_sharded

TARGETS = ["0.weight", "2.weight"]


def make(tied: bool) -> nn.Sequential:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 12), nn.ReLU(), nn.Linear(12, 6))
    if tied:  # entries tie at every cut: the tie rule and the tie notes are exercised
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randint(-3, 4, p.shape).float() / 4)
    return model


def shard(model: nn.Sequential, mesh: Any) -> nn.Sequential:
    from torch.distributed.fsdp import fully_shard

    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def same_everywhere(value: Any, what: str) -> None:
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, value)
    assert all(v == everyone[0] for v in everyone), f"{what} differs across ranks: {everyone}"


def masks_equal(s: Session, ref: Session, what: str) -> None:
    for name in s.names:
        mine, theirs = full(s.mask(name)), ref.mask(name)
        assert torch.equal(mine, theirs), f"rank {dist.get_rank()}: {what}: mask of {name}"


def report_rows(s: Session) -> list[dict[str, Any]]:
    frame = s.report(totals=True).drop(columns="module_type")
    return frame.to_dict("records")


def steps(s: Session) -> None:
    """The same calls on the sharded and the one-process session."""
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    s.apply("2.weight", "random_unstructured", amount=0.25)  # seed drawn by the session
    s.apply("0.weight", "ln_structured", amount=2, n=2, dim=1)  # across the sharded dim
    s.apply("2.weight", "ln_structured", amount=1, n=1, dim=0)  # along it
    s.apply("0.bias", "l1_unstructured", amount=4)
    s.apply_global(TARGETS, "l1_unstructured", amount=0.4)
    s.apply_global(TARGETS, "random_unstructured", amount=0.1)


def check_session(mesh: Any, device: str, tied: bool) -> None:
    model = shard(make(tied).to(device), mesh)
    ref_model = make(tied)
    s, ref = Session(model), Session(ref_model)
    assert is_sharded(model)
    assert not is_sharded(ref_model)
    x = torch.randn(5, 10)

    # previews: the core's sharded path, equal to one process's, nothing changes
    preview = s.preview("0.weight", "l1_unstructured", amount=0.5)
    assert torch.equal(full(preview), ref.preview("0.weight", "l1_unstructured", amount=0.5))
    assert s.steps == ()
    assert not hasattr(model[0], "weight_mask")

    steps(s)
    steps(ref)
    masks_equal(s, ref, "after the steps")
    # the plan: the same on every rank, and the one-process session's (tie notes included)
    same_everywhere(s.plan.to_json(), "plan")
    assert s.plan.to_json() == ref.plan.to_json(), (s.plan.to_json(), ref.plan.to_json())
    if tied:
        assert any(step.ties == "lowest" for step in s.steps), s.steps
    assert [step.ties for step in s.steps] == [step.ties for step in ref.steps]
    assert s.plan.to_snippet() == ref.plan.to_snippet()
    # reports: collective, every rank the same table, equal to one process's
    rows = report_rows(s)
    same_everywhere(rows, "report")
    assert rows == report_rows(ref), (rows, report_rows(ref))
    compare = s.compare_global_local(TARGETS, amount=0.5).to_dict("records")
    same_everywhere(compare, "compare_global_local")
    assert compare == ref.compare_global_local(TARGETS, amount=0.5).to_dict("records")
    for name in s.names:
        assert s.history(name).pruned_counts() == ref.history(name).pruned_counts(), name
        frame = s.history(name).to_frame()[["pruned", "newly_pruned"]].to_dict("records")
        assert frame == ref.history(name).to_frame()[["pruned", "newly_pruned"]].to_dict(
            "records"), name
    same_everywhere(repr(s), "repr")
    assert repr(s).split(":", 1)[1] == repr(ref).split(":", 1)[1], (repr(s), repr(ref))
    # history and undo snapshots hold this rank's shard only, as bits
    entry = s.history("0.weight")[-1].mask
    assert isinstance(entry, ShardedMask)
    assert entry.shape == (12, 10)
    local = model[0].weight_mask.to_local()
    assert entry.local.shape == tuple(local.shape)
    assert entry.nbytes <= (local.numel() + 7) // 8
    assert torch.allclose(full(model(x)), ref_model(x), atol=1e-6)

    # what builds one-process models refuses, on every rank, naming the call
    for call, where in ((lambda: s.shrink(x), "Session.shrink"),
                        (lambda: s.sensitivity(lambda m: 0.0), "Session.sensitivity")):
        with pytest.raises(NotImplementedError,
                           match=re.escape(f"{where}: the model is sharded over processes")):
            call()

    # Session.to: where the model is, nothing moves; elsewhere a clear refusal, nothing changed
    before_move = report_rows(s)
    assert s.to(device) is s
    masks_equal(s, ref, "after Session.to its own device")
    with pytest.raises(NotImplementedError, match=re.escape(
            "Session.to: the model is sharded over processes") + ".*got device='meta'"):
        s.to("meta")
    assert report_rows(s) == before_move
    assert all(p.device.type == device for p in model.parameters())
    assert torch.allclose(full(model(x)), ref_model(x), atol=1e-6)

    # the plan, written by rank 0 only, replayed on one process: the same masks
    with tempfile.TemporaryDirectory() as tmp:
        where = [tmp]
        dist.broadcast_object_list(where)  # rank 0's directory for everyone
        mine = os.path.join(where[0], f"plan-{dist.get_rank()}.json")
        s.plan.save(mine)
        dist.barrier()
        written = sorted(os.listdir(where[0]))
        assert written == ["plan-0.json"], written
        replay = Session(make(tied))
        replay.apply_all(Plan.load(os.path.join(where[0], "plan-0.json")))
        masks_equal(s, replay, "plan replayed on one process")
        dist.barrier()  # rank 0 removes the directory only once everyone has read it

    # undo: exact, step by step, the same as one process; the FSDP2 model still runs
    for _ in range(3):
        assert s.undo() == ref.undo()
        masks_equal(s, ref, "after undo")
    assert report_rows(s) == report_rows(ref)
    assert torch.allclose(full(model(x)), ref_model(x), atol=1e-6)
    # a failing action leaves everything as it was (rollback of sharded snapshots)
    before = report_rows(s)
    with pytest.raises(ValueError, match="amount"):
        s.apply_all([Step("l1_unstructured", "2.bias", amount=1),
                     Step("l1_unstructured", "2.bias", amount=99)])  # too many: every rank fails
    assert report_rows(s) == before
    assert "2.bias_orig" not in dict(model.named_parameters())
    s.reset()
    ref.reset()
    masks_equal(s, ref, "after reset")
    assert sorted(model.state_dict()) == sorted(ref_model.state_dict())
    assert torch.allclose(full(model(x)), ref_model(x), atol=1e-6)  # FSDP2 after undo
    s.apply_global(TARGETS, "l1_unstructured", amount=0.5)  # and prunes again
    ref.apply_global(TARGETS, "l1_unstructured", amount=0.5)
    masks_equal(s, ref, "after reset and a new step")
    assert torch.allclose(full(model(x)), ref_model(x), atol=1e-6)
    # commit: prune.remove on every rank; the same report, plain (sharded) parameters again
    s.commit()
    ref.commit()
    assert report_rows(s) == report_rows(ref)
    assert sorted(model.state_dict()) == sorted(ref_model.state_dict())
    assert torch.allclose(full(model(x)), ref_model(x), atol=1e-6)


def check_random_tie_notes(mesh: Any, device: str) -> None:
    """Random steps whose draws tie at the cut (bfloat16 draws: few distinct values): the
    sharded session notes the split as one process does, so the plans and their snippets are
    the same (each rank draws again from the step's seed; nothing gathered)."""
    def make_bf16() -> nn.Sequential:
        torch.manual_seed(1)
        return nn.Sequential(nn.Linear(40, 24), nn.ReLU(), nn.Linear(24, 8)).to(torch.bfloat16)

    s, ref = Session(shard(make_bf16().to(device), mesh), seed=5), Session(make_bf16(), seed=5)
    for session in (s, ref):
        session.apply("0.weight", "l1_unstructured", amount=0.2)
        session.apply("0.weight", "random_unstructured", amount=0.5)
        session.apply_global(TARGETS, "random_unstructured", amount=0.3)
    masks_equal(s, ref, "bfloat16 random steps")
    notes = [step.ties for step in ref.steps]
    assert notes[1:] == ["lowest", "lowest"], notes  # the draws do tie at both cuts
    assert [step.ties for step in s.steps] == notes, ([step.ties for step in s.steps], notes)
    assert s.plan.to_json() == ref.plan.to_json()
    assert s.plan.to_snippet() == ref.plan.to_snippet()


def check_structured_tie_notes(mesh: Any, device: str) -> None:
    """ln_structured steps whose slice norms tie at the cut (rows and columns permuted from one
    row): the sharded session keeps the tied slices lowest index first and notes the split as
    one process does (read off the core's slice cut), so the snippets are the same."""
    from helpers.structured_ties import tied_slices

    def make_tied() -> nn.Sequential:
        model = nn.Sequential(nn.Linear(16, 40), nn.ReLU(), nn.Linear(40, 24))
        with torch.no_grad():
            model[0].weight.copy_(tied_slices(40, 16, 0, torch.float32, seed=1))
            model[2].weight.copy_(tied_slices(40, 24, 1, torch.float32, seed=2))
            for layer in (model[0], model[2]):
                layer.bias.zero_()
        return model

    s, ref = Session(shard(make_tied().to(device), mesh)), Session(make_tied())
    for session in (s, ref):
        session.apply("0.weight", "ln_structured", amount=11, n=2, dim=0)  # along the shards
        session.apply("2.weight", "ln_structured", amount=9, n=1, dim=1)  # across them
        session.apply("2.weight", "ln_structured", amount=0.3, n=0, dim=1)  # every norm ties
    masks_equal(s, ref, "tied ln_structured steps")
    notes = [step.ties for step in ref.steps]
    assert notes == ["highest"] * 3, notes
    assert [step.ties for step in s.steps] == notes, ([step.ties for step in s.steps], notes)
    assert s.plan.to_snippet() == ref.plan.to_snippet()


def check_memory(mesh: Any, device: str) -> None:
    """What Session calls allocate on a sharded model beyond the masks: nothing shard-sized.

    Neither the pruned tensor (``orig * mask``) nor a copy of the keys, norms' terms, per-slice
    counts' terms or per-entry flags of a whole shard: the session and the core read the
    core's stand-in, the masks and the session's bits a chunk (or a slab of rows) at a time.
    With small chunks every shard-sized buffer stands out: per call, the large tensors
    allocated are the masks it installs (or returns, or puts back) and the history's bits.
    """
    def make_big() -> nn.Sequential:
        torch.manual_seed(2)
        return nn.Sequential(nn.Linear(600, 1000), nn.ReLU(), nn.Linear(1000, 800))

    model = shard(make_big().to(device), mesh)
    s, ref = Session(model), Session(make_big())
    both, first, second = TARGETS, TARGETS[:1], TARGETS[1:]
    calls = [  # (what, the targets whose masks it makes, the call)
        ("apply_global, fresh", both,
         lambda x: x.apply_global(TARGETS, "l1_unstructured", amount=0.4)),
        ("apply_global, pruned", both,
         lambda x: x.apply_global(TARGETS, "l1_unstructured", amount=0.3)),
        ("apply, pruned", second, lambda x: x.apply("2.weight", "l1_unstructured", amount=0.2)),
        ("apply_global random, pruned", both,
         lambda x: x.apply_global(TARGETS, "random_unstructured", amount=0.1)),
        ("preview_global, pruned", both,
         lambda x: dict(x.preview_global(TARGETS, amount=0.2))),
        ("ln_structured dim 0, pruned", first,
         lambda x: x.apply("0.weight", "ln_structured", amount=100, n=2, dim=0)),  # count
    ]
    if dist.get_world_size() > 1:  # slices split across ranks: partial sums, a slab at a time
        calls.append(("ln_structured dim 1, pruned", second,
                      lambda x: x.apply("2.weight", "ln_structured", amount=0.1, n=1, dim=1)))
    calls.append(("undo", calls[-1][1], lambda x: x.undo()))  # puts the last masks back
    chunk = _radix.CHUNK
    _radix.CHUNK = engine.CHUNK = 1 << 14  # the core's chunks and the session's
    try:
        for what, targets, call in calls:
            local = sum(model[int(n[0])].weight.to_local().numel() for n in targets)
            seen = Allocations(limit=16 * _radix.CHUNK)
            with seen.mode:
                call(s)
            call(ref)
            # float32 masks (installed, returned or put back) + history and undo bits (1/8 B
            # per entry each); nothing else shard-sized
            assert seen.bytes <= 4 * local + local // 4, (what, local, seen.bytes)
    finally:
        _radix.CHUNK = engine.CHUNK = chunk
    masks_equal(s, ref, "after the calls")
    assert s.plan.to_json() == ref.plan.to_json()


def main(rank: int, world: int, port: int, backend: str) -> None:
    mesh, device = setup(rank, world, port, backend)
    try:
        for tied in (False, True):
            check_session(mesh, device, tied)
        check_random_tie_notes(mesh, device)
        check_structured_tie_notes(mesh, device)
        check_memory(mesh, device)
        dist.barrier()  # tear gloo down together
    finally:
        dist.destroy_process_group()
