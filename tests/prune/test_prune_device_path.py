"""The device (GPU) selection path, run on CPU tensors through its switch.

Every non-CPU tensor selects through :mod:`prune_explorer.prune._select_device`; inside
``_select_device.forced()`` CPU tensors do too. These tests check, without a GPU, what that
path promises: the same masks as the CPU path bit for bit (one tie rule on every device), and a
number of aten operations and host reads that does not grow with the tensors (counted with a
``TorchDispatchMode``), with none of the ops that sync a GPU per piece.
"""

from __future__ import annotations

import collections
import copy
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from helpers.ops import SYNC_OPS, OpCounter, kernels
from prune_explorer import prune
from prune_explorer.prune import _radix, _select, _select_device, engine
from prune_explorer.session import Session

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def counted(fn: Callable[[], object]) -> tuple[collections.Counter[str], int]:
    """(aten ops, host reads) of ``fn()`` on the device path."""
    _select_device.HOST_READS.reset()
    with _select_device.forced(), OpCounter() as counter:
        fn()
    return counter.ops, _select_device.HOST_READS.count


def weights(n: int, dtype: torch.dtype, kind: str, seed: int = 0) -> torch.Tensor:
    """``n`` N(0, 0.02) weights: ``plain``, or tie-heavy (``grid``: on a grid of 1/3000, ~300
    entries per value; ``coarse``: a handful of values), or with NaN and inf (``nan``)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, generator=g) * 0.02
    if kind == "grid":
        w = (w * 3000).round() / 3000
    elif kind == "coarse":
        w = (w * 50).round() / 50
    w = w.to(dtype)
    if kind == "nan":
        w[::7] = float("nan")
        w[3::11] = float("inf")
        w[5::13] = -float("inf")
    return w


def both(fn: Callable[[], Any]) -> tuple[Any, Any]:
    """``fn()`` on the CPU path and on the device path."""
    with _select_device.forced(False):
        cpu = fn()
    with _select_device.forced():
        device = fn()
    return cpu, device


def l1(w: torch.Tensor, amount: float | int, **kw: Any) -> torch.Tensor:
    return prune.L1Unstructured(amount, **kw).compute_mask(w, torch.ones_like(w))


def _model(dtype: torch.dtype, kind: str) -> nn.Module:
    """Mixed shapes (linear, conv, a small bias), 0.35M entries in all."""
    model = nn.Sequential(nn.Linear(300, 1000), nn.Conv2d(8, 16, 3), nn.Linear(1000, 50))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(weights(p.numel(), torch.float32, kind, seed=i).view_as(p))
    return model.to(dtype)


def _pairs(model: nn.Module) -> list[tuple[nn.Module, str]]:
    return [(model[0], "weight"), (model[1], "weight"), (model[2], "weight"),
            (model[2], "bias")]


# --- one tie rule: the device path's masks are the CPU path's, bit for bit -------------------


@pytest.fixture(params=["direct", "bracket"])
def route(request, monkeypatch):
    """Single tensors on the device path: the topk route (no host read) or the bracket."""
    if request.param == "bracket":
        monkeypatch.setattr(_select_device, "DIRECT_MAX", 0)
    return request.param


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["plain", "grid", "coarse", "nan"])
def test_l1_masks_equal_the_cpu_path(dtype, kind, route):
    w = weights(400_003, dtype, kind)
    for amount in (1, 0.1, 0.5, 0.77, 0.95, 400_002, 400_003):
        cpu, device = both(lambda a=amount: l1(w, a))
        assert torch.equal(cpu, device), (amount, dtype, kind)
        assert int((device == 0).sum()) == prune._compute_nparams_toprune(amount, w.numel())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["plain", "grid", "coarse"])
def test_global_masks_equal_the_cpu_path(dtype, kind):
    model = _model(dtype, kind)
    for amount in (0.2, 0.5, 0.9):
        cpu, device = both(lambda a=amount: prune.global_masks(
            _pairs(model), prune.L1Unstructured, amount=a))
        for i, (x, y) in enumerate(zip(cpu, device, strict=True)):
            assert torch.equal(x, y), (amount, i)
    # iterative: some targets pruned already (their keys are |score| with markers)
    prune.l1_unstructured(model[0], "weight", amount=0.4)
    prune.global_unstructured(_pairs(model)[1:], prune.L1Unstructured, amount=0.3)
    for amount in (0.25, 0.6):
        cpu, device = both(lambda a=amount: prune.global_masks(
            _pairs(model), prune.L1Unstructured, amount=a))
        for i, (x, y) in enumerate(zip(cpu, device, strict=True)):
            assert torch.equal(x, y), (amount, i)


def test_global_unstructured_installs_the_cpu_paths_masks():
    base = _model(torch.float32, "grid")
    cpu, device = copy.deepcopy(base), copy.deepcopy(base)
    with _select_device.forced(False):
        prune.global_unstructured(_pairs(cpu), prune.L1Unstructured, amount=0.6)
    with _select_device.forced():
        prune.global_unstructured(_pairs(device), prune.L1Unstructured, amount=0.6)
    for (a, name), (b, _) in zip(_pairs(cpu), _pairs(device), strict=True):
        assert torch.equal(getattr(a, name + "_mask"), getattr(b, name + "_mask"))
        assert torch.equal(getattr(a, name), getattr(b, name))


@pytest.mark.parametrize("dtype", DTYPES)
def test_seeded_random_methods_equal_the_cpu_path(dtype, route):
    """Given the same draws (same seed, same device), the device path picks the same entries."""
    w = weights(300_000, dtype, "plain")
    model = _model(dtype, "plain")

    def draw_all():
        torch.manual_seed(7)
        local = prune.RandomUnstructured(0.45).compute_mask(w, torch.ones_like(w))
        slices = prune.RandomStructured(3, dim=0).compute_mask(w.view(600, 500),
                                                               torch.ones(600, 500))
        glob = prune.global_masks(_pairs(model), prune.RandomUnstructured, amount=0.3)
        return [local, slices, *glob]

    cpu, device = both(draw_all)
    for x, y in zip(cpu, device, strict=True):
        assert torch.equal(x, y)


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_tie_rule_on_the_device_path(dtype):
    w = weights(300_000, dtype, "coarse")
    for amount in (0.3, 0.7):
        cpu, device = both(lambda a=amount: l1(w, a, ties="torch"))
        assert torch.equal(cpu, device)


def test_structured_and_pattern_methods_equal_the_cpu_path():
    w = weights(640 * 512, torch.bfloat16, "grid").view(640, 512)
    ones = torch.ones_like(w)
    methods = [prune.LnStructured(0.3, n=2, dim=0), prune.LnStructured(100, n=1, dim=1),
               prune.BlockStructured(0.5, block=(4, 4)), prune.SemiStructured("2:4")]
    for method in methods:
        cpu, device = both(lambda m=method: m.compute_mask(w, ones))
        assert torch.equal(cpu, device), method


def test_sortable_keys_order_as_the_stable_sort():
    x = torch.tensor([0.5, -0.0, 0.0, float("nan"), -float("nan"), float("inf"), -float("inf"),
                      -0.5, 1e-40, -1e-40, 0.5, -2.0, 3.0, float("nan")])
    for dtype in DTYPES:
        v = x.to(dtype)
        for magnitude in (False, True):
            ranked = v.abs() if magnitude else v
            expected = torch.sort(ranked.float(), stable=True).indices
            keys = _select_device.sortable(v, magnitude, largest=False)
            assert torch.equal(torch.sort(keys, stable=True).indices, expected), (dtype,
                                                                                 magnitude)
            down = _select_device.sortable(v[~torch.isnan(v)], magnitude, largest=True)
            kept = ranked[~torch.isnan(v)].float()
            assert torch.equal(torch.sort(down, stable=True).indices,
                               torch.sort(kept, descending=True, stable=True).indices)


def test_nth_true_finds_every_position():
    g = torch.Generator().manual_seed(3)
    for size in (5, 4096, 4096 * 3 + 17, 50_000):
        flags = torch.rand(size, generator=g) < 0.3
        where = torch.nonzero(flags).view(-1)
        for n in {1, 2, where.numel() // 2, where.numel()}:
            assert _select_device._nth_true(flags, n) == int(where[n - 1]), (size, n)


def test_a_bracket_the_sample_misses_is_still_exact(monkeypatch):
    """Every strided-sample entry equal, the rest spread: the bracket misses, is widened and
    at last covers everything -- same masks, a bounded number of host reads."""
    monkeypatch.setattr(_select_device, "DIRECT_MAX", 0)  # a single tensor: the bracket
    n = 1 << 20
    stride = n // _select_device._SAMPLE
    w = torch.linspace(0.001, 1.0, n)
    w[::stride] = 0.5
    (ops, reads), cpu = counted(lambda: l1(w, 0.2)), l1(w, 0.2)
    assert 4 <= reads <= 6  # brackets widened (at most 4), then the cut
    with _select_device.forced():
        assert torch.equal(l1(w, 0.2), cpu)
    assert not SYNC_OPS & set(ops)


# --- fixed work: op counts and host reads do not grow with the tensor ------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["plain", "grid", "coarse"])
def test_l1_op_count_does_not_grow_with_the_tensor(dtype, kind, route):
    small, large = weights(200_000, dtype, kind), weights(2_000_000, dtype, kind)
    ops_small, reads_small = counted(lambda: l1(small, 0.5))
    ops_large, reads_large = counted(lambda: l1(large, 0.5))
    assert ops_small == ops_large
    assert reads_small == reads_large <= (0 if route == "direct" else 3)
    assert not SYNC_OPS & set(ops_large), SYNC_OPS & set(ops_large)


@pytest.mark.parametrize("method", ["l1", "random"])
def test_fresh_tensors_below_direct_max_make_no_host_read(method):
    """A fresh tensor up to DIRECT_MAX entries: its mask in a fixed, small number of aten
    ops, none of them a sync, no host read -- and the route is the one taken (one stable
    sort; the bracket reads twice)."""
    w = weights(1_000_000, torch.float32, "grid")

    def run():
        if method == "l1":
            return l1(w, 0.4)
        return prune.RandomUnstructured(0.4).compute_mask(w, torch.ones_like(w))

    ops, reads = counted(run)
    assert reads == 0
    assert not SYNC_OPS & set(ops)
    assert ops["sort"] == 1
    assert "topk" not in ops
    assert sum(ops.values()) <= 40, ops
    assert w.numel() <= _select_device.DIRECT_MAX


PUBLIC_CALLS = {
    "l1_unstructured": lambda m: prune.l1_unstructured(m, "weight", amount=0.4),
    "random_unstructured": lambda m: prune.random_unstructured(m, "weight", amount=0.4),
    "ln_structured": lambda m: prune.ln_structured(m, "weight", amount=0.4, n=2, dim=0),
    "random_structured": lambda m: prune.random_structured(m, "weight", amount=0.4, dim=1),
    "custom_from_mask": lambda m: prune.custom_from_mask(
        m, "weight", (m.weight.detach() > 0).float()),
    "identity": lambda m: prune.identity(m, "weight"),
}


@pytest.mark.parametrize("call", sorted(PUBLIC_CALLS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_public_calls_on_a_fresh_tensor_never_wait_for_the_device(call, dtype):
    """The whole public call on a fresh tensor below DIRECT_MAX -- mask, orig, hook -- queues
    its work without one read of a device value: on a GPU a read waits for every kernel before
    it, so the Python around the next call could not overlap the device's work."""
    layer = nn.Linear(500, 400).to(dtype)
    with torch.no_grad():
        layer.weight.copy_(weights(layer.weight.numel(), dtype, "grid").view_as(layer.weight))
    ops, reads = counted(lambda: PUBLIC_CALLS[call](layer))
    assert reads == 0
    assert not SYNC_OPS & set(ops), SYNC_OPS & set(ops)
    assert layer.weight_mask.is_contiguous()
    assert hasattr(layer, "weight_orig")


#: The public calls whose launches per call are at most torch's (issue 33, must-hold 3), with
#: the same call on ``torch.nn.utils.prune``.
AT_MOST_TORCHS = {
    "ln_structured": lambda p, m: p.ln_structured(m, "weight", amount=0.4, n=2, dim=0),
    "random_structured": lambda p, m: p.random_structured(m, "weight", amount=0.4, dim=1),
    "custom_from_mask": lambda p, m: p.custom_from_mask(m, "weight",
                                                        (m.weight.detach() > 0).float()),
}


AT_MOST_TORCHS["l1_unstructured"] = lambda p, m: p.l1_unstructured(m, "weight", amount=0.4)
AT_MOST_TORCHS["random_unstructured"] = lambda p, m: p.random_unstructured(m, "weight",
                                                                          amount=0.4)


def _warm(impl: Any, call: str, dtype: torch.dtype) -> None:
    """One call on a throwaway tensor: what a process makes once per dtype and device (our
    all-ones base) is not counted as the call's own."""
    layer = nn.Module()
    layer.weight = nn.Parameter(torch.ones(4, 4, dtype=dtype))
    with _select_device.forced():
        AT_MOST_TORCHS[call](impl, layer)


@pytest.mark.parametrize("call", sorted(AT_MOST_TORCHS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(768, 768), (16, 8, 3, 3), (1024, 400)])
def test_launches_per_call_are_at_most_torchs(call, dtype, shape):
    """The kernels a public call on a fresh tensor launches on the device path, counted
    against torch's own call on the same weights in this test: never more (l1 and random:
    the shapes above SMALL entries take the direct route, below DIRECT_MAX)."""
    weight = weights(math.prod(shape), torch.float32, "grid").view(shape).to(dtype)
    counts = {}
    for name, impl in (("torch", torch.nn.utils.prune), ("ours", prune)):
        _warm(impl, call, dtype)
        layer = nn.Module()
        layer.weight = nn.Parameter(weight.clone())
        torch.manual_seed(0)
        ops, _ = counted(lambda impl=impl, layer=layer: AT_MOST_TORCHS[call](impl, layer))
        counts[name] = kernels(ops)
    assert 0 < counts["ours"] <= counts["torch"], counts
    if math.prod(shape) > _select.SMALL:
        assert math.prod(shape) <= _select_device.DIRECT_MAX


@pytest.mark.parametrize("case", ["global_unstructured", "Session.apply_global"])
def test_global_launches_are_torchs_plus_a_fixed_number(case):
    """global_unstructured and a fresh session's apply_global on the device path: at most
    torch's global_unstructured count plus a number that does not grow with the tensors
    (counted over 4 and 8 tensors of a few shapes, against torch's in this test)."""
    def excess(n: int) -> int:
        shapes = [(300, 200), (200, 400), (50, 300), (400, 100)] * (n // 4)
        mods = []
        for i, shape in enumerate(shapes):
            m = nn.Module()
            m.weight = nn.Parameter(weights(math.prod(shape), torch.float32, "plain",
                                            seed=i).view(shape))  # no tie: torch's masks
            mods.append(m)
        theirs = copy.deepcopy(mods)
        ops_torch, _ = counted(lambda: torch.nn.utils.prune.global_unstructured(
            [(m, "weight") for m in theirs], torch.nn.utils.prune.L1Unstructured, amount=0.5))
        if case == "Session.apply_global":
            with _select_device.forced():
                s = Session(nn.ModuleList(mods))
            ops, _ = counted(lambda: s.apply_global([f"{i}.weight" for i in range(n)],
                                                    amount=0.5))
        else:
            ops, _ = counted(lambda: prune.global_unstructured(
                [(m, "weight") for m in mods], prune.L1Unstructured, amount=0.5))
        for m, t in zip(mods, theirs, strict=True):  # the same masks
            assert torch.equal(m.weight_mask, t.weight_mask)
        return kernels(ops) - kernels(ops_torch)

    four, eight = excess(4), excess(8)
    assert eight <= four, (four, eight)
    assert four <= 40, four


def test_the_cpu_path_does_grow_with_the_tensor():
    """The check above can fail: the CPU path works piece by piece and syncs per piece."""
    small, large = weights(200_000, torch.float32, "plain"), weights(2_000_000, torch.float32,
                                                                     "plain")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # its pieces all on this thread, where the mode sees them
    try:
        with OpCounter() as a:
            l1(small, 0.5)
        with OpCounter() as b:
            l1(large, 0.5)
    finally:
        torch.set_num_threads(threads)
    assert sum(b.ops.values()) > sum(a.ops.values())
    assert SYNC_OPS & set(b.ops)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_global_op_count_does_not_grow_with_the_tensors(dtype):
    def shapes(scale):
        model = nn.Sequential(nn.Linear(30 * scale, 100), nn.Linear(100, 50 * scale),
                              nn.Conv2d(4 * scale, 16, 3))
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(weights(p.numel(), torch.float32, "grid", seed=i).view_as(p))
        return model.to(dtype)

    small, large = shapes(20), shapes(200)
    ops_small, reads_small = counted(
        lambda: prune.global_masks([*_pairs(small)[:2], (small[2], "weight")],
                                   prune.L1Unstructured, amount=0.5))
    ops_large, reads_large = counted(
        lambda: prune.global_masks([*_pairs(large)[:2], (large[2], "weight")],
                                   prune.L1Unstructured, amount=0.5))
    assert ops_small == ops_large
    assert reads_small == reads_large <= 3
    assert not SYNC_OPS & set(ops_large), SYNC_OPS & set(ops_large)


def test_random_unstructured_op_count_does_not_grow():
    small, large = torch.ones(200_000), torch.ones(2_000_000)
    ops_small, _ = counted(lambda: prune.RandomUnstructured(0.3).compute_mask(
        small, torch.ones_like(small)))
    ops_large, _ = counted(lambda: prune.RandomUnstructured(0.3).compute_mask(
        large, torch.ones_like(large)))
    assert ops_small == ops_large
    assert not SYNC_OPS & set(ops_large)


# --- the switch -----------------------------------------------------------------------------


def test_cpu_tensors_take_the_cpu_path_unless_forced(monkeypatch):
    monkeypatch.setattr(_select_device, "DIRECT_MAX", 0)
    w = weights(300_000, torch.float32, "plain")
    calls = []
    real = _select_device.locate_cut
    monkeypatch.setattr(_select_device, "locate_cut",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    l1(w, 0.5)
    assert not calls
    with _select_device.forced():
        assert _select_device.wanted(w)
        l1(w, 0.5)
    assert calls == [1]
    assert not _select_device.wanted(w)


def test_small_selections_on_the_device_path_sort_without_syncs():
    model = nn.Sequential(nn.Linear(30, 20), nn.Linear(20, 10))
    ops, reads = counted(lambda: prune.global_masks(
        [(model[0], "weight"), (model[1], "weight")], prune.L1Unstructured, amount=0.5))
    assert not SYNC_OPS & set(ops)
    assert reads == 0
    cpu, device = both(lambda: prune.global_masks(
        [(model[0], "weight"), (model[1], "weight")], prune.L1Unstructured, amount=0.5))
    assert all(torch.equal(a, b) for a, b in zip(cpu, device, strict=True))
    assert _select.SMALL >= 20 * 30 + 10 * 20


# --- the session on the device path ---------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_session_preview_equals_apply_on_the_device_path(dtype):
    model = _model(dtype, "grid")
    reference = Session(copy.deepcopy(model))
    targets = ["0.weight", "1.weight", "2.weight"]
    with _select_device.forced():
        s = Session(model)
        s.apply("0.weight", "l1_unstructured", amount=0.3)
        reference.apply("0.weight", "l1_unstructured", amount=0.3)
        for amount in (0.25, 0.6):
            preview = s.preview_global(targets, amount=amount)
            masks = {t: preview[t].clone() for t in targets}
            local = s.preview("2.weight", "l1_unstructured", amount=amount).clone()
            s.apply_global(targets, amount=amount)
            for t in targets:
                assert torch.equal(masks[t], s.mask(t).to(masks[t].dtype)), (amount, t)
            s.undo()
            s.apply("2.weight", "l1_unstructured", amount=amount)
            assert torch.equal(local, s.mask("2.weight").to(local.dtype))
            s.undo()
        s.apply_global(targets, amount=0.6)
    with _select_device.forced(False):
        reference.apply_global(targets, amount=0.6)
    for t in targets:
        assert torch.equal(s.mask(t), reference.mask(t)), t


def _fresh_session_apply_global(dtype: torch.dtype, sizes: list[tuple[int, int]],
                                kind: str = "grid"):
    """(aten ops, host reads, session) of a fresh session's apply_global over linear layers
    of ``sizes`` (in, out) with weights of ``kind`` (see :func:`weights`), on the device
    path."""
    model = nn.Sequential(*[nn.Linear(i, o) for i, o in sizes])
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(weights(p.numel(), torch.float32, kind, seed=i).view_as(p))
    model = model.to(dtype)
    with _select_device.forced():
        s = Session(model)
    targets = [f"{i}.weight" for i in range(len(sizes))]
    ops, reads = counted(lambda: s.apply_global(targets, amount=0.5))
    return ops, reads, s


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_session_apply_global_host_reads_do_not_grow_with_targets(dtype):
    """A fresh session's apply_global on the device path: no per-target sync (no histogram of
    small targets, the history's kept counts and the tie check's extremes each read once for
    all targets) -- the same host reads for 6 targets as for 12, and no syncing aten op."""
    def run(n):
        return _fresh_session_apply_global(dtype, [(200, 300)] * n, kind="plain")

    ops6, reads6, _ = run(6)
    ops12, reads12, s = run(12)
    assert not SYNC_OPS & (set(ops6) | set(ops12)), SYNC_OPS & (set(ops6) | set(ops12))
    # the core's cut (2), the history's kept counts (1), the tie check's extremes (1) and,
    # where a tie straddles the cut (bf16 here), where the tied entries were split (1)
    assert reads6 == reads12 <= 5
    pruned = sum(int((s.mask(f"{i}.weight") == 0).sum()) for i in range(12))
    assert pruned == 12 * 300 * 200 // 2


def test_split_flags_is_the_gathered_split():
    """The tie split read off first/last positions equals the split of the gathered flags."""
    from prune_explorer.session.codegen import tie_split

    g = torch.Generator().manual_seed(5)
    seen = set()
    for trial in range(300):
        sizes = [int(x) for x in torch.randint(0, 6, (3,), generator=g)]
        tied = [torch.rand(n, generator=g) < 0.6 for n in sizes]
        pruned = [torch.rand(n, generator=g) < 0.5 for n in sizes]
        if trial % 3 == 0:  # a prefix / suffix of the tied entries pruned
            flat = torch.cat(tied)
            order = torch.cumsum(flat.int(), 0)
            cut = int(flat.sum()) // 2
            prefix = (order <= cut) if trial % 2 else (order > cut)
            pruned = list(prefix.split(sizes))
        gathered = torch.cat([p[t] for t, p in zip(tied, pruned, strict=True)])
        if not gathered.numel():
            continue
        expected = tie_split._split(gathered)
        seen.add(expected)
        assert tie_split._split_flags(tied, pruned) == expected, (tied, pruned)
    assert seen == {"lowest", "highest", "other"}


@pytest.mark.parametrize("n", [1, 2, 3, float("inf"), "fro"])
def test_slice_norms_on_a_device_are_the_cpu_norms(monkeypatch, n):
    """On a non-CPU device bf16 slice norms are accumulated in float64 and rounded once; that
    is what torch's CPU bf16 norm gives (the CPU path keeps it), so CPU and CUDA agree. Checked
    here by sending a CPU tensor down the device branch."""
    from prune_explorer.prune import methods

    g = torch.Generator().manual_seed(11)
    w = (torch.randn(640, 700, generator=g) * 0.02).to(torch.bfloat16)
    cpu = [methods.slice_norms(w, n, d) for d in (0, 1)]
    monkeypatch.setattr(methods, "_exact_norms_wanted", lambda t: True)
    device = [methods.slice_norms(w, n, d) for d in (0, 1)]
    for a, b, d in zip(cpu, device, (0, 1), strict=True):
        assert a.dtype == b.dtype == torch.bfloat16
        assert torch.equal(a, b), (n, d)
        assert torch.equal(b, torch.linalg.vector_norm(w.double(), ord=2 if n == "fro" else n,
                                                       dim=1 - d).to(torch.bfloat16))



@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_session_apply_global_op_count_does_not_grow_with_the_tensors(monkeypatch, dtype):
    """A fresh session's apply_global on the device path: the same aten ops for tensors 10x
    larger (the history packs each mask at once, not a chunk at a time: chunks made small
    here), and the tie note read off the core's selection."""
    monkeypatch.setattr(engine, "CHUNK", 1 << 12)
    monkeypatch.setattr(_radix, "CHUNK", 1 << 12)
    small, _, _ = _fresh_session_apply_global(dtype, [(600, 300), (300, 1200), (1200, 300)])
    large, reads, s = _fresh_session_apply_global(
        dtype, [(6000, 300), (300, 12000), (12000, 300)])
    assert small == large
    assert reads <= 3
    assert s.steps[-1].ties == "lowest"  # grid weights: a tie straddles the cut


def test_session_apply_global_kernels_per_target():
    """Each further target costs apply_global at most 5 kernel-launching ops on the device
    path (the core's mask and pruned copy; the history's bits): the core's keys, bracket and
    gather run once over the targets' concatenated scores, so on a GPU the launches grow by
    torch's own per-tensor count at most, whatever the tensors' sizes."""
    three, _, _ = _fresh_session_apply_global(torch.float32, [(600, 300)] * 3)
    six, _, _ = _fresh_session_apply_global(torch.float32, [(600, 300)] * 6)
    per_target = (kernels(six) - kernels(three)) / 3
    assert per_target <= 5, (per_target, six)
    assert kernels(three) - 3 * per_target <= 45, three


def test_the_global_slider_makes_fixed_work_on_the_device_path(monkeypatch):
    """The Global tab on a GPU: its first preview (key histograms), a slider step and an
    apply that takes the preview's masks make the same aten ops and host reads for tensors
    10x larger -- each tensor is one piece there, whatever the chunk (made small here, so a
    loop over chunks would show)."""
    monkeypatch.setattr(engine, "CHUNK", 1 << 12)
    monkeypatch.setattr(_radix, "CHUNK", 1 << 12)

    def run(scale):
        model = nn.Sequential(nn.Linear(20 * scale, 300), nn.Linear(300, 40 * scale))
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(weights(p.numel(), torch.float32, "plain", seed=i).view_as(p))
        targets = ["0.weight", "1.weight"]
        with _select_device.forced():
            s = Session(model)
        first = counted(lambda: s.preview_global(targets, amount=0.5))
        step = counted(lambda: s.preview_global(targets, amount=0.55))
        applied = counted(lambda: s.apply_global(targets, amount=0.55))
        return first, step, applied

    small, large = run(30), run(300)  # every tensor above SMALL (the cached facts' route)
    for (ops_a, reads_a), (ops_b, reads_b) in zip(small, large, strict=True):
        assert ops_a == ops_b
        assert reads_a == reads_b
