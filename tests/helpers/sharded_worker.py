"""Checks run inside every process of a spawned gloo (or NCCL) group for test_prune_sharded.

Every rank builds the same full tensors from the same seed, shards them (DTensors, or FSDP2's
``fully_shard``), prunes through ``prune_explorer.prune``, gathers the masks with
``full_tensor()`` and compares them with one-process pruning of the full tensors in the same
process: ``prune_explorer.prune`` itself, ``torch.nn.utils.prune`` on tie-free data, and, where
entries tie at the cut, the documented rule (stable sort: lowest flat index first).
"""

from __future__ import annotations

import copy
import io
import pickle
import tempfile
import time
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.nn.utils.prune as theirs
from torch import nn

from helpers.dist import Allocations, full, setup
from prune_explorer import prune as ours
from prune_explorer.prune import _radix


# ------------------------------------------------------------------------------- helpers
def _setup(rank: int, world: int, port: int, backend: str) -> Any:
    global DEVICE
    mesh, DEVICE = setup(rank, world, port, backend)
    return mesh


#: Where this process computes: "cpu" (gloo) or "cuda" (NCCL); set by ``_setup``.
DEVICE = "cpu"


class Holder(nn.Module):
    """A module holding one parameter ``weight`` (any shape), on this process's device."""

    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(w.clone().to(DEVICE))


def sharded(w: torch.Tensor, mesh: Any, dim: int) -> Holder:
    from torch.distributed.tensor import Shard, distribute_tensor

    m = Holder(w)
    m.weight = nn.Parameter(distribute_tensor(w.clone().to(mesh.device_type), mesh, [Shard(dim)]))
    return m


def index_rule(keys: list[torch.Tensor], k: int, largest: bool = False) -> list[torch.Tensor]:
    """The documented tie rule, from its definition: prune the first k of a stable sort of the
    concatenated keys (descending for ``largest``); NaN (already pruned) last."""
    flat = torch.cat([x.reshape(-1) for x in keys]).double()
    order = torch.sort(flat, descending=largest, stable=True).indices[:k]
    keep = torch.ones_like(flat)
    keep[order] = 0
    return [piece.view(x.shape).float() for piece, x in
            zip(keep.split([x.numel() for x in keys]), keys, strict=True)]


def equal(a: Any, b: Any, what: str) -> None:
    a, b = full(a), full(b)
    if not torch.equal(a, b.to(a.dtype)):
        diff = int((a != b.to(a.dtype)).sum())
        raise AssertionError(f"rank {dist.get_rank()}: {what}: {diff} entries differ")


def tie_free(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    n = torch.Size(shape).numel()
    return (torch.randperm(n, generator=g).float() + 1).div_(n).view(shape) * torch.where(
        torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)


def tied(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, shape, generator=g).float() / 4


# ------------------------------------------------------------------------------- checks
def check_local(mesh: Any) -> None:
    """Local unstructured methods, importance scores, iterative chains: masks as one process."""
    for dim in (0, 1):
        for amount in (0.3, 17, 1.0):
            w = tie_free(9, 7, seed=1)
            m, ref, torch_ref = sharded(w, mesh, dim), Holder(w), Holder(w)
            ours.l1_unstructured(m, "weight", amount=amount)
            ours.l1_unstructured(ref, "weight", amount=amount)
            theirs.l1_unstructured(torch_ref, "weight", amount=amount)
            equal(m.weight_mask, ref.weight_mask, f"l1 dim={dim} amount={amount}")
            equal(m.weight_mask, torch_ref.weight_mask, f"l1 vs torch dim={dim}")
            assert type(m.weight_mask) is type(m.weight_orig)
            assert m.weight_mask.placements == m.weight_orig.placements
        # ties: the documented rule, also after an earlier step (pruned entries excluded)
        w = tied(11, 6, seed=2)
        m = sharded(w, mesh, dim)
        ours.l1_unstructured(m, "weight", amount=0.45)
        (expect,) = index_rule([w.abs()], round(0.45 * w.numel()))
        equal(m.weight_mask, expect, f"l1 ties dim={dim}")
        ours.l1_unstructured(m, "weight", amount=0.5)
        keys = w.abs().masked_fill(expect == 0, float("nan"))
        (second,) = index_rule([keys], round(0.5 * int(expect.sum())))
        equal(m.weight_mask, second * expect, f"l1 ties, second step dim={dim}")
        # importance scores: a DTensor and a plain full tensor
        w, s = tie_free(8, 5, seed=3), tie_free(8, 5, seed=4)
        for scores in (s, sharded(s, mesh, dim).weight.detach()):
            m, ref = sharded(w, mesh, dim), Holder(w)
            ours.l1_unstructured(m, "weight", amount=0.6, importance_scores=scores)
            theirs.l1_unstructured(ref, "weight", amount=0.6, importance_scores=s)
            equal(m.weight_mask, ref.weight_mask, f"importance_scores dim={dim}")
        # other dtypes: bfloat16 weights (16-bit keys, many ties), float64 scores of a float32
        # weight (keys apart from the mask)
        wb = tied(9, 10, seed=14).mul_(tie_free(9, 10, seed=15)).bfloat16()
        m = sharded(wb, mesh, dim)
        ours.l1_unstructured(m, "weight", amount=0.35)
        (expect,) = index_rule([wb.abs()], round(0.35 * wb.numel()))
        equal(m.weight_mask, expect, f"bfloat16 l1 ties dim={dim}")
        m, ref = sharded(w, mesh, dim), Holder(w)
        ours.l1_unstructured(m, "weight", amount=0.6, importance_scores=s.double())
        theirs.l1_unstructured(ref, "weight", amount=0.6, importance_scores=s.double())
        equal(m.weight_mask, ref.weight_mask, f"float64 importance_scores dim={dim}")
        # random: the one-process draws after the same seed; the generator ends where it would
        w = tie_free(10, 6, seed=5)
        m, ref, torch_ref = sharded(w, mesh, dim), Holder(w), Holder(w)
        for mod, fn in ((m, ours), (ref, ours), (torch_ref, theirs)):
            torch.manual_seed(7)
            fn.random_unstructured(mod, "weight", amount=0.4)
            mod.after = torch.rand(3, device=DEVICE)
        equal(m.weight_mask, torch_ref.weight_mask, f"random vs torch dim={dim}")
        equal(m.after, torch_ref.after, f"generator state after random dim={dim}")
        gen = [torch.Generator(DEVICE).manual_seed(11) for _ in range(2)]
        ours.random_unstructured(m, "weight", amount=0.3, generator=gen[0])
        ours.random_unstructured(ref, "weight", amount=0.3, generator=gen[1])
        equal(m.weight_mask, ref.weight_mask, f"random chained with generator dim={dim}")
        # a chain on one sharded parameter, each step against one process (and torch)
        w = tie_free(12, 8, seed=6)
        m, ref = sharded(w, mesh, dim), Holder(w)
        steps = [("l1_unstructured", {"amount": 0.2}), ("ln_structured", {"amount": 2, "n": 2,
                 "dim": 0}), ("random_unstructured", {"amount": 0.25}),
                 ("ln_structured", {"amount": 0.25, "n": 1, "dim": 1}),
                 ("random_structured", {"amount": 1, "dim": 0}),
                 ("l1_unstructured", {"amount": 5})]
        for fn, kw in steps:
            for mod in (m, ref):
                torch.manual_seed(13)
                getattr(ours, fn)(mod, "weight", **kw)
            equal(m.weight_mask, ref.weight_mask, f"chain {fn} {kw} dim={dim}")
        hook = next(iter(m._forward_pre_hooks.values()))
        assert len(hook) == len(steps)
        equal(m.weight, ref.weight, "pruned weight")
        ours.remove(m, "weight")
        ours.remove(ref, "weight")
        equal(m.weight, ref.weight, f"remove dim={dim}")
        assert sorted(m.state_dict()) == ["weight"]


def check_errors(mesh: Any) -> None:
    """Bad arguments fail on every rank alike (no rank left waiting) and change nothing."""
    w = tie_free(6, 4, seed=12)
    m = sharded(w, mesh, 0)
    for call, kind in ((lambda: ours.l1_unstructured(m, "weight", amount=25), ValueError),
                       (lambda: ours.ln_structured(m, "weight", amount=7, n=2, dim=0),
                        ValueError),
                       (lambda: ours.global_unstructured([(m, "weight"), (Holder(w), "weight")],
                                                         ours.L1Unstructured, amount=0.5),
                        NotImplementedError)):
        with pytest.raises(kind, match=r"amount|DTensors"):
            call()
        assert not ours.is_pruned(m)
        assert sorted(m.state_dict()) == ["weight"]
    dist.barrier()


def check_structured(mesh: Any) -> None:
    """ln_structured along and across the sharded dim, every norm; random_structured."""
    w = tie_free(10, 6, 3, seed=8)
    for shard in (0, 1, 2):
        for dim in (0, 1, 2):
            for n in (1, 2, float("inf"), float("-inf"), "fro", 0, "nuc"):
                m, ref = sharded(w, mesh, shard), Holder(w)
                ours.ln_structured(m, "weight", amount=0.4, n=n, dim=dim)
                # n=0 counts nonzeros: every slice ties, and the tie rule decides, not topk
                (ours if n == 0 else theirs).ln_structured(ref, "weight", amount=0.4, n=n,
                                                           dim=dim)
                equal(m.weight_mask, ref.weight_mask, f"ln n={n} dim={dim} shard={shard}")
            m, ref = sharded(w, mesh, shard), Holder(w)
            for mod, fn in ((m, ours), (ref, theirs)):
                torch.manual_seed(3)
                fn.random_structured(mod, "weight", amount=2, dim=dim)
            equal(m.weight_mask, ref.weight_mask, f"random_structured dim={dim} shard={shard}")
    # norms that tie (sums of quarters' powers are exact in any order, split or not): the tied
    # slices kept lowest index first, as one process keeps them, also after an earlier step
    t = tied(12, 8, seed=9)
    for shard in (0, 1):
        for dim in (0, 1):
            for n in (1, 2, float("inf"), 0):
                m, ref = sharded(t, mesh, shard), Holder(t)
                for mod in (m, ref):
                    ours.ln_structured(mod, "weight", amount=3, n=n, dim=dim)
                    ours.ln_structured(mod, "weight", amount=0.5, n=n, dim=dim)
                equal(m.weight_mask, ref.weight_mask, f"tied ln n={n} dim={dim} shard={shard}")
                first = _lowest_index_kept(t, None, n, dim, 3)
                expect = _lowest_index_kept(t, first, n, dim, round(0.5 * int(first.sum())))
                view = [1, 1]
                view[dim] = -1
                equal(m.weight_mask, expect.float().view(view).expand(t.shape),
                      f"tied ln rule n={n} dim={dim} shard={shard}")


def _lowest_index_kept(w: torch.Tensor, alive: torch.Tensor | None, n: Any, dim: int,
                       k: int) -> torch.Tensor:
    """The structured tie rule from its definition: of the ``alive`` slices along ``dim`` of
    the 2-D ``w``, keep all but the ``k`` of smallest norm, equal norms lowest index first."""
    alive = torch.ones(w.shape[dim], dtype=torch.bool) if alive is None else alive
    norms = torch.norm(w, p=n, dim=1 - dim).double().tolist()
    order = sorted((i for i in range(len(norms)) if alive[i]), key=lambda i: (-norms[i], i))
    keep = torch.zeros(len(norms), dtype=torch.bool)
    keep[order[:len(order) - k]] = True
    return keep


def check_global(mesh: Any) -> None:
    """global_unstructured: L1 (tie-free, tied, importance scores, second call), random."""
    shapes = [(6, 4), (9, 3), (3, 5), (1, 7)]  # (1, 7): empty shards beyond rank 0
    for dim in (0, 1):
        ws = [tie_free(*s, seed=20 + i) for i, s in enumerate(shapes)]
        ms, refs, trefs = [sharded(w, mesh, dim) for w in ws], [Holder(w) for w in ws], \
            [Holder(w) for w in ws]
        for mods in (ms, refs):
            ours.global_unstructured([(m, "weight") for m in mods], ours.L1Unstructured,
                                     amount=0.5)
        theirs.global_unstructured([(m, "weight") for m in trefs], theirs.L1Unstructured,
                                   amount=0.5)
        for m, r, t in zip(ms, refs, trefs, strict=True):
            equal(m.weight_mask, r.weight_mask, f"global l1 vs one process dim={dim}")
            equal(m.weight_mask, t.weight_mask, f"global l1 vs torch dim={dim}")
        # a second global call on already-pruned parameters, with importance scores
        scores = [tie_free(*s, seed=40 + i) for i, s in enumerate(shapes)]
        imp = {(m, "weight"): s for m, s in zip(ms, scores, strict=True)}
        imp_t = {(m, "weight"): s for m, s in zip(trefs, scores, strict=True)}
        ours.global_unstructured(list(imp), ours.L1Unstructured, importance_scores=imp,
                                 amount=0.3)
        theirs.global_unstructured(list(imp_t), theirs.L1Unstructured,
                                   importance_scores=imp_t, amount=0.3)
        for m, t in zip(ms, trefs, strict=True):
            equal(m.weight_mask, t.weight_mask, f"global l1 second call dim={dim}")
        # random: one draw over every surviving entry, as one process draws it
        for mods, fn in ((ms, ours), (trefs, theirs)):
            torch.manual_seed(17)
            fn.global_unstructured([(m, "weight") for m in mods], fn.RandomUnstructured,
                                   amount=0.25)
        for m, t in zip(ms, trefs, strict=True):
            equal(m.weight_mask, t.weight_mask, f"global random vs torch dim={dim}")
        # ties across tensors: the lowest index in the concatenation goes first
        ws = [tied(*s, seed=30 + i) for i, s in enumerate(shapes)]
        ms = [sharded(w, mesh, dim) for w in ws]
        ours.global_unstructured([(m, "weight") for m in ms], ours.L1Unstructured, amount=0.55)
        total = sum(w.numel() for w in ws)
        for m, e in zip(ms, index_rule([w.abs() for w in ws], round(0.55 * total)), strict=True):
            equal(m.weight_mask, e, f"global l1 ties dim={dim}")


def check_hsdp_and_preview(mesh: Any) -> None:
    """preview_mask on a sharded weight changes nothing and equals what apply installs; on a
    2-D mesh (HSDP: replicated x sharded) the replicas count once."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    w = tie_free(9, 5, seed=80)
    m = sharded(w, mesh, 1)
    preview = ours.preview_mask(m, "weight", ours.L1Unstructured(amount=0.4))
    assert not ours.is_pruned(m)
    ours.l1_unstructured(m, "weight", amount=0.4)
    equal(preview, m.weight_mask, "preview_mask equals apply")
    world = dist.get_world_size()
    if world % 2:
        return
    mesh2 = init_device_mesh(mesh.device_type, (2, world // 2), mesh_dim_names=("rep", "shard"))
    ws = [tie_free(7, 4, seed=81), tie_free(5, 6, seed=82)]
    ms, trefs = [], [Holder(x) for x in ws]
    for x in ws:
        h = Holder(x)
        h.weight = nn.Parameter(distribute_tensor(x.clone().to(mesh.device_type), mesh2,
                                                  [Replicate(), Shard(0)]))
        ms.append(h)
    ours.global_unstructured([(h, "weight") for h in ms], ours.L1Unstructured, amount=0.5)
    theirs.global_unstructured([(h, "weight") for h in trefs], theirs.L1Unstructured,
                               amount=0.5)
    for h, t in zip(ms, trefs, strict=True):
        equal(h.weight_mask, t.weight_mask, "HSDP global l1 vs torch")


def check_large(mesh: Any) -> None:
    """Tensors past the core's small-tensor size, tied: the same masks as one process."""
    ws = [tied(400, 350, seed=50), tied(64, 300, seed=51)]
    ms, refs = [sharded(w, mesh, 0) for w in ws], [Holder(w) for w in ws]
    for mods in (ms, refs):
        ours.global_unstructured([(m, "weight") for m in mods], ours.L1Unstructured,
                                 amount=0.5)
    for m, r in zip(ms, refs, strict=True):
        equal(m.weight_mask, r.weight_mask, "large global l1 ties vs one process")
    for mods in (ms, refs):
        ours.l1_unstructured(mods[0], "weight", amount=0.3)
    equal(ms[0].weight_mask, refs[0].weight_mask, "large chained l1 ties vs one process")


def check_fallbacks(mesh: Any) -> None:
    """Methods with no sharded algorithm gather, and still give the one-process mask."""

    class KeepPositive(ours.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
            return default_mask * (t > 0).to(default_mask.dtype)

    w = tied(7, 6, seed=9)
    m, ref = sharded(w, mesh, 0), Holder(w)
    for mod in (m, ref):
        KeepPositive.apply(mod, "weight")
        with ours.tie_break("torch"):
            ours.l1_unstructured(mod, "weight", amount=0.3)
        ours.custom_from_mask(mod, "weight", (w > -0.5).float())
    equal(m.weight_mask, ref.weight_mask, "fallback chain")
    # what reads every value of a pruned tensor reads the pruned values (orig * mask), as one
    # process does: structured norms and the gathered fallback. Row 0 keeps one tiny entry:
    # smallest by its pruned values, largest by its original ones.

    class AboveMean(ours.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
            return default_mask * (t.abs() >= t.abs().mean()).to(default_mask.dtype)

    w = tie_free(8, 6, seed=16)
    w[0, 0], w[0, 1:] = 1e-6, w[0, 1:] * 100
    first = torch.ones_like(w)
    first[0, 1:] = 0
    for shard in (0, 1):
        m, ref = sharded(w, mesh, shard), Holder(w)
        for mod in (m, ref):
            ours.custom_from_mask(mod, "weight", first)
            ours.ln_structured(mod, "weight", amount=1, n=1, dim=0)
        equal(m.weight_mask, ref.weight_mask, f"ln_structured on pruned values shard={shard}")
        assert float(full(m.weight_mask)[0].sum()) == 0  # row 0 went
        for mod in (m, ref):
            AboveMean.apply(mod, "weight")
        equal(m.weight_mask, ref.weight_mask, f"gathered fallback on pruned values shard={shard}")
    # global, gathered (tie rule "torch"), on pruned parameters: scores are the pruned values
    ws = [tied(6, 5, seed=10), tied(4, 7, seed=11)]
    ms, refs = [sharded(x, mesh, 0) for x in ws], [Holder(x) for x in ws]
    for mods in (ms, refs):
        ours.l1_unstructured(mods[0], "weight", amount=0.5)
        with ours.tie_break("torch"):
            ours.global_unstructured([(h, "weight") for h in mods], ours.L1Unstructured,
                                     amount=0.3)
    for a, b in zip(ms, refs, strict=True):
        equal(a.weight_mask, b.weight_mask, "global fallback on pruned parameters")


def check_traffic(mesh: Any) -> None:
    """Bytes sent by a global L1 call do not depend on the model size."""
    sent = []
    for n in (1_000, 200_000):
        ms = [sharded(tie_free(n // 50, 50, seed=60 + i), mesh, 0) for i in range(3)]
        _radix.STATS.reset()
        ours.global_unstructured([(m, "weight") for m in ms], ours.L1Unstructured, amount=0.5)
        sent.append(_radix.STATS.bytes)
    assert sent[0] == sent[1], sent
    assert sent[0] <= 4 * (1 << _radix.BITS) * 8, sent


def check_memory(mesh: Any) -> None:
    """Big allocations of a global L1 call: the masks only, on fresh and on pruned parameters
    (the pruned tensor is not computed, the mask so far is read a chunk at a time).

    Temporaries are bounded by the chunk size; with small chunks every shard-sized buffer
    stands out.
    """
    ws = [tie_free(1500, 1000, seed=70), tied(1000, 1200, seed=71)]
    ms = [sharded(w, mesh, 0) for w in ws]
    local = sum(m.weight.to_local().numel() for m in ms)
    chunk, _radix.CHUNK = _radix.CHUNK, 1 << 14
    try:
        for again in (False, True):  # a fresh call, then one on pruned parameters
            seen = Allocations(limit=16 * _radix.CHUNK)
            with seen.mode:
                masks = ours.global_masks([(m, "weight") for m in ms], ours.L1Unstructured,
                                          amount=0.4)
            if local * 4 > 2 * seen.limit:
                assert local * 4 <= seen.bytes < local * 4.5, (again, local, seen.bytes)
            ours.global_unstructured([(m, "weight") for m in ms], ours.L1Unstructured,
                                     amount=0.4)
            if not again:
                for m, mask in zip(ms, masks, strict=True):
                    equal(m.weight_mask, mask, "global_masks equals what is installed")
    finally:
        _radix.CHUNK = chunk


def check_pruned_on_demand(mesh: Any) -> None:
    """A sharded parameter's pruned tensor ``weight`` is not kept between forwards: pruning
    allocates the mask's shard and chunk-sized temporaries only; ``m.weight`` still reads
    ``orig * mask`` (computed on demand); undo and ``remove`` give the module its class back."""
    from prune_explorer.prune._module import snapshot

    w = tie_free(1200, 900, seed=80)
    m, ref = sharded(w, mesh, 0), Holder(w)
    local = m.weight.to_local().numel()
    chunk, _radix.CHUNK = _radix.CHUNK, 1 << 14
    try:
        snaps = snapshot([(m, "weight")])
        seen = Allocations(limit=16 * _radix.CHUNK)
        with seen.mode:
            ours.l1_unstructured(m, "weight", amount=0.3)
        if local * 4 > 2 * seen.limit:  # the mask (4 B/entry), no pruned copy
            assert local * 4 <= seen.bytes < local * 5, (local, seen.bytes)
    finally:
        _radix.CHUNK = chunk
    ours.l1_unstructured(ref, "weight", amount=0.3)
    assert "weight" not in m.__dict__
    assert type(m).__name__ == "Holder"
    assert isinstance(m, Holder)
    equal(m.weight, ref.weight, "pruned tensor computed on demand")
    assert "weight" not in m.__dict__  # reading it keeps nothing
    # copies: deepcopy and torch.save/torch.load give the same class, the tensor still computed
    # on demand, independent of the original
    saved = io.BytesIO()
    torch.save(m, saved)
    saved.seek(0)
    for copied in (copy.deepcopy(m), torch.load(saved, weights_only=False)):
        assert type(copied) is type(m)
        assert "weight" not in copied.__dict__
        equal(copied.weight, ref.weight, "pruned tensor of a copy")
        equal(copied.weight_mask, m.weight_mask, "mask of a copy")
        ours.l1_unstructured(copied, "weight", amount=0.5)
        ours.remove(copied, "weight")
        assert type(copied) is Holder
    equal(m.weight, ref.weight, "the original, after its copies were pruned")
    for snap in reversed(snaps):  # undo: the plain parameter and the class come back
        snap.restore()
    assert type(m) is Holder
    assert sorted(m.state_dict()) == ["weight"]
    ours.l1_unstructured(m, "weight", amount=0.3)
    ours.remove(m, "weight")
    assert type(m) is Holder
    equal(m.weight, ref.weight, "after remove")


def check_fsdp(mesh: Any) -> None:
    """Under FSDP2: forward/backward, state_dict, distributed checkpoint, remove."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    def make() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 4))

    def shard(model: nn.Module) -> nn.Module:
        fully_shard(model[0], mesh=mesh)
        fully_shard(model[2], mesh=mesh)
        return fully_shard(model, mesh=mesh)

    model, ref = shard(make()), make()
    for net in (model, ref):
        torch.manual_seed(21)
        ours.global_unstructured([(net[0], "weight"), (net[2], "weight")], ours.L1Unstructured,
                                 amount=0.5)
        ours.l1_unstructured(net[0], "bias", amount=0.3)
    x = torch.randn(3, 6, device=mesh.device_type)
    for _ in range(2):
        y, y_ref = model(x), ref(x.cpu())
        assert torch.allclose(y.cpu(), y_ref, atol=1e-6)
    for layer, twin in ((model[0], ref[0]), (model[2], ref[2])):  # between forwards: shards
        assert "weight" not in layer.__dict__  # not kept: computed on demand
        assert layer.weight.placements == layer.weight_orig.placements, layer.weight
        equal(layer.weight, twin.weight, "pruned weight after forward")
    y.sum().backward()
    y_ref.sum().backward()
    assert torch.allclose(full(model[0].weight_orig.grad), ref[0].weight_orig.grad, atol=1e-6)
    # after a training step (parameters resharded): a second step, global, then one more forward
    for net in (model, ref):
        torch.manual_seed(21)
        ours.global_unstructured([(net[0], "weight"), (net[2], "weight")],
                                 ours.RandomUnstructured, amount=0.2)
        ours.l1_unstructured(net[2], "bias", amount=1)
    for a, b in ((model[0], ref[0]), (model[2], ref[2])):
        equal(a.weight_mask, b.weight_mask, "second step after a training step")
    assert torch.allclose(model(x).cpu(), ref(x.cpu()), atol=1e-6)
    keys = sorted(model.state_dict())
    assert keys == sorted(ref.state_dict()), keys
    # FSDP2 modules cannot be copied (torch's rule), pruned or not: a clear refusal
    with pytest.raises(pickle.PicklingError, match=r"class FSDPLinear is made at run time.*"
                       r"FSDP2 modules cannot be pickled or deep-copied.*state_dict"):
        torch.save(model[0], io.BytesIO())
    with pytest.raises(AssertionError, match="FSDP does not support deepcopy"):
        copy.deepcopy(model[0])
    with tempfile.TemporaryDirectory() as tmp:
        path = [tmp]
        dist.broadcast_object_list(path)  # one directory for every rank
        dcp.save(model.state_dict(), checkpoint_id=path[0])
        other = shard(make())
        for mod, name in ((other[0], "weight"), (other[2], "weight"), (other[0], "bias"),
                          (other[2], "bias")):
            ours.identity(mod, name)
        state = other.state_dict()
        dcp.load(state, checkpoint_id=path[0])
        other.load_state_dict(state)
        dist.barrier()
    for a, b in ((other[0], ref[0]), (other[2], ref[2])):
        equal(a.weight_mask, b.weight_mask, "mask after checkpoint load")
    assert torch.allclose(other(x).cpu(), ref(x.cpu()), atol=1e-6)
    ours.remove_all(model)
    ours.remove_all(ref)
    assert sorted(model.state_dict()) == sorted(ref.state_dict())
    assert torch.allclose(model(x).cpu(), ref(x.cpu()), atol=1e-6)


def main(rank: int, world: int, port: int, backend: str) -> None:
    mesh = _setup(rank, world, port, backend)
    try:
        for check in (check_local, check_errors, check_structured, check_global,
                      check_hsdp_and_preview, check_large, check_fallbacks, check_traffic,
                      check_memory, check_pruned_on_demand, check_fsdp):
            check(mesh)
        dist.barrier()  # tear gloo down together: a rank leaving early can abort its peers
    finally:
        dist.destroy_process_group()


def hang(rank: int, world: int, port: int, backend: str) -> None:
    """A worker that never finishes (tests the timeout)."""
    time.sleep(3600)
