"""Shared helpers for the differential tests of ``prune_explorer.prune``.

``torch.nn.utils.prune`` is the oracle: every helper here builds a pair of
identical modules, runs the same call through both implementations and compares
what they left behind (masks, parameters, buffers, state_dict, hooks).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.utils.prune as theirs
from torch import nn

from prune_explorer import prune as ours


# --------------------------------------------------------------------------- modules
class Rank5(nn.Module):
    """A module with a rank-5 weight and a 1-D bias (no torch layer has a rank-5 weight)."""

    def __init__(self, shape: tuple[int, ...] = (3, 2, 4, 2, 3)) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(shape))
        self.bias = nn.Parameter(torch.randn(shape[0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (batch, 1, *weight.shape) -> (batch, out): one output per row of the weight
        return (self.weight * x).flatten(2).sum(2) + self.bias


class Rank3(nn.Module):
    """A module with a rank-3 weight: the only rank where ``n='nuc'`` is valid for torch."""

    def __init__(self, shape: tuple[int, ...] = (4, 3, 5)) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(shape))
        self.bias = nn.Parameter(torch.randn(shape[0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (batch, 1, *weight.shape) -> (batch, out): one output per row of the weight
        return (self.weight * x).flatten(2).sum(2) + self.bias


#: name -> (factory, example input builder)
MODULE_FACTORIES: dict[str, Callable[[], nn.Module]] = {
    "linear": lambda: nn.Linear(6, 5),
    "conv1d": lambda: nn.Conv1d(3, 4, 3),
    "conv2d": lambda: nn.Conv2d(3, 4, (3, 2)),
    "conv3d": lambda: nn.Conv3d(2, 3, (2, 2, 3)),
    "rank3": lambda: Rank3(),
    "rank5": lambda: Rank5(),
}

MODULE_INPUTS: dict[str, Callable[[], torch.Tensor]] = {
    "linear": lambda: torch.randn(2, 6),
    "conv1d": lambda: torch.randn(2, 3, 7),
    "conv2d": lambda: torch.randn(2, 3, 6, 5),
    "conv3d": lambda: torch.randn(2, 2, 4, 4, 5),
    "rank3": lambda: torch.randn(2, 1, 3, 5),
    "rank5": lambda: torch.randn(2, 1, 2, 4, 2, 3),
}

MODULE_KINDS = tuple(MODULE_FACTORIES)


def make_module(
    kind: str, seed: int = 0, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> nn.Module:
    """Build a module of ``kind`` with deterministic random weights."""
    seed_all(seed)
    return MODULE_FACTORIES[kind]().to(dtype=dtype, device=device)


def make_input(kind: str, seed: int = 123, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    seed_all(seed)
    return MODULE_INPUTS[kind]().to(dtype)


def twin(module: nn.Module) -> tuple[nn.Module, nn.Module]:
    """Return ``(for_ours, for_theirs)``: two independent deep copies of ``module``."""
    return copy.deepcopy(module), copy.deepcopy(module)


def with_param(shape: tuple[int, ...], data: torch.Tensor | None = None, name: str = "weight"):
    """A bare ``nn.Module`` holding one parameter ``name`` (random or given data)."""
    m = nn.Module()
    t = torch.randn(shape) if data is None else data.reshape(shape)
    m.register_parameter(name, nn.Parameter(t.clone()))
    return m


# --------------------------------------------------------------------------- calls
def seed_all(seed: int) -> None:
    """Same effect as ``torch.manual_seed`` for CPU and CUDA.

    ``torch.manual_seed`` also queues lazy seeding for absent backends (cuda, xpu,
    mtia), formatting a stack trace each time; that dominates these small tests.
    """
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def call_both(
    call_ours: Callable[[], Any], call_theirs: Callable[[], Any], seed: int | None = 0
) -> BaseException | None:
    """Run torch's call, then ours, seeding the global RNG identically before each.

    If torch raises, ours must raise the same exception type (returned for further
    checks); otherwise ours must not raise and ``None`` is returned.
    """
    if seed is not None:
        seed_all(seed)
    try:
        call_theirs()
    except Exception as exc:  # the oracle refused: ours must refuse the same way
        if seed is not None:
            seed_all(seed)
        try:
            call_ours()
        except type(exc) as ours_exc:
            return ours_exc
        except Exception as ours_exc:
            pytest.fail(
                f"torch raised {type(exc).__name__}({exc}); ours raised "
                f"{type(ours_exc).__name__}({ours_exc}) instead"
            )
        pytest.fail(f"torch raised {type(exc).__name__}({exc}); ours did not raise")
    if seed is not None:
        seed_all(seed)
    call_ours()
    return None


def prune_both(
    fn_name: str, m_ours: nn.Module, m_theirs: nn.Module, name: str, seed: int | None = 0, **kw
) -> BaseException | None:
    """Call ``<impl>.<fn_name>(module, name, **kw)`` on both implementations."""
    return call_both(
        lambda: getattr(ours, fn_name)(m_ours, name, **kw),
        lambda: getattr(theirs, fn_name)(m_theirs, name, **kw),
        seed=seed,
    )


def global_both(
    mods_ours: list[nn.Module],
    mods_theirs: list[nn.Module],
    names: list[str],
    method: str,
    seed: int | None = 0,
    scores: list[torch.Tensor | None] | None = None,
    **kw,
) -> BaseException | None:
    """``global_unstructured`` over ``zip(mods, names)`` on both sides.

    ``method`` is a class *name*; each side gets its own module's class.
    ``scores`` (optional, one per entry or None) become the importance_scores dict.
    """
    p_ours = [(m, n) for m, n in zip(mods_ours, names, strict=True)]
    p_theirs = [(m, n) for m, n in zip(mods_theirs, names, strict=True)]

    def scores_for(pairs):
        if scores is None:
            return None
        return {pair: s for pair, s in zip(pairs, scores, strict=True) if s is not None}

    return call_both(
        lambda: ours.global_unstructured(
            p_ours, getattr(ours, method), importance_scores=scores_for(p_ours), **kw
        ),
        lambda: theirs.global_unstructured(
            p_theirs, getattr(theirs, method), importance_scores=scores_for(p_theirs), **kw
        ),
        seed=seed,
    )


# --------------------------------------------------------------------------- comparisons
def hooks_desc(module: nn.Module) -> list[tuple]:
    """Forward-pre-hooks of ``module`` as comparable data (class names, tensor names)."""
    out = []
    for hook in module._forward_pre_hooks.values():
        cls = type(hook).__name__
        tensor_name = getattr(hook, "_tensor_name", None)
        members = None
        if cls == "PruningContainer":
            members = tuple((type(h).__name__, getattr(h, "_tensor_name", None)) for h in hook)
        out.append((cls, tensor_name, members))
    return out


def assert_same_tensor(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    """Bitwise equal values (NaN == NaN), same dtype, shape and device."""
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} != {tuple(b.shape)}"
    assert a.device == b.device, f"{what}: device {a.device} != {b.device}"
    if torch.equal(a, b):  # fast paths; the diagnostic message comes from assert_close
        return
    if a.is_floating_point():
        nan_a, nan_b = a.isnan(), b.isnan()
        if torch.equal(nan_a, nan_b) and torch.equal(a[~nan_a], b[~nan_b]):
            return
    torch.testing.assert_close(
        a.detach(), b.detach(), rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}"
    )


def assert_pruned_alike(m_ours: nn.Module, m_theirs: nn.Module) -> None:
    """Everything pruning leaves behind is the same on both modules (recursively)."""
    subs_o = dict(m_ours.named_modules())
    subs_t = dict(m_theirs.named_modules())
    assert list(subs_o) == list(subs_t)
    for qual, so in subs_o.items():
        st = subs_t[qual]
        where = qual or "<root>"
        assert list(so._parameters) == list(st._parameters), f"{where}: parameter names/order"
        for k, p in so._parameters.items():
            q = st._parameters[k]
            assert (p is None) == (q is None), f"{where}.{k}: None-ness"
            if p is not None:
                assert type(p) is type(q), f"{where}.{k}: {type(p)} vs {type(q)}"
                assert_same_tensor(p, q, f"{where}.{k}")
        assert list(so._buffers) == list(st._buffers), f"{where}: buffer names/order"
        for k, b in so._buffers.items():
            assert_same_tensor(b, st._buffers[k], f"{where}.{k} (buffer)")
        assert hooks_desc(so) == hooks_desc(st), f"{where}: forward pre-hooks"
        for hook in so._forward_pre_hooks.values():
            tname = getattr(hook, "_tensor_name", None)
            if tname is not None:
                # the recomputed pruned tensor (module.<name>) must match too
                assert_same_tensor(getattr(so, tname), getattr(st, tname), f"{where}.{tname}")
    sd_o, sd_t = m_ours.state_dict(), m_theirs.state_dict()
    assert list(sd_o) == list(sd_t), "state_dict keys/order"
    for k, v in sd_o.items():
        w = sd_t[k]
        assert (v.dtype, v.shape, v.device) == (w.dtype, w.shape, w.device), f"state_dict[{k!r}]"
        # values: compared above through _parameters/_buffers (the same tensors, detached),
        # unless ours stores something else under this key
        if not _is_param_or_buffer(m_ours, k, v):
            assert_same_tensor(v, w, f"state_dict[{k!r}]")
    assert ours.is_pruned(m_ours) == theirs.is_pruned(m_theirs)


def _is_param_or_buffer(root: nn.Module, key: str, value: torch.Tensor) -> bool:
    owner_name, _, attr = key.rpartition(".")
    owner = root.get_submodule(owner_name) if owner_name else root
    held = owner._parameters.get(attr, owner._buffers.get(attr))
    return held is not None and held.data_ptr() == value.data_ptr() and held.shape == value.shape


def mask_of(module: nn.Module, name: str = "weight") -> torch.Tensor:
    return getattr(module, name + "_mask")


def snapshot(module: nn.Module) -> dict[str, Any]:
    """Everything a failed call must leave untouched, in order, with object identities."""
    snap: dict[str, Any] = {}
    for qual, sub in module.named_modules():
        snap[qual] = {
            "params": [(k, id(p)) for k, p in sub._parameters.items()],
            "param_values": {
                k: p.detach().clone() for k, p in sub._parameters.items() if p is not None
            },
            "buffers": [(k, id(b)) for k, b in sub._buffers.items()],
            "buffer_values": {
                k: b.clone() for k, b in sub._buffers.items() if b is not None
            },
            "hooks": [(k, id(h)) for k, h in sub._forward_pre_hooks.items()],
            "hooks_desc": hooks_desc(sub),
            "plain_attrs": {
                k: v.detach().clone()
                for k, v in vars(sub).items()
                if isinstance(v, torch.Tensor) and not k.startswith("_")
            },
        }
    snap["<state_dict>"] = [(k, v.dtype, tuple(v.shape)) for k, v in module.state_dict().items()]
    return snap


def assert_unchanged(before: dict[str, Any], module: nn.Module) -> None:
    """``module`` is exactly as in ``before``, dict order included."""
    after = snapshot(module)
    assert list(after) == list(before), "submodules changed"
    for qual, b in before.items():
        a = after[qual]
        if qual == "<state_dict>":
            assert a == b, "state_dict keys/dtypes/shapes changed"
            continue
        where = qual or "<root>"
        assert a["params"] == b["params"], f"{where}: parameters changed"
        assert a["buffers"] == b["buffers"], f"{where}: buffers changed"
        assert a["hooks"] == b["hooks"], f"{where}: forward pre-hooks changed"
        assert a["hooks_desc"] == b["hooks_desc"], f"{where}: pruning container changed"
        assert list(a["plain_attrs"]) == list(b["plain_attrs"]), f"{where}: tensor attributes"
        for kind in ("param_values", "buffer_values", "plain_attrs"):
            for k, v in b[kind].items():
                assert_same_tensor(a[kind][k], v, f"{where}.{k} ({kind})")


def assert_message(exc: BaseException, funcs: tuple[str, ...], pattern: str) -> None:
    """Our message names the function/class (any of ``funcs``) and matches ``pattern``."""
    msg = str(exc)
    assert any(f in msg for f in funcs), f"message does not name any of {funcs}: {msg!r}"
    assert re.search(pattern, msg, flags=re.IGNORECASE | re.DOTALL), (
        f"message does not match {pattern!r}: {msg!r}"
    )


def valid_k_smallest(
    scores: torch.Tensor, before: torch.Tensor, after: torch.Tensor, k: int
) -> None:
    """``after`` prunes exactly ``k`` more of the entries kept by ``before``, all of them
    no larger in magnitude than any entry it keeps (a valid k-smallest choice under ties)."""
    s = scores.detach().abs().flatten().double()
    kept_before = before.flatten() != 0
    kept_after = after.flatten() != 0
    assert not bool((kept_after & ~kept_before).any()), "a previously pruned entry came back"
    newly = kept_before & ~kept_after
    assert int(newly.sum()) == k, f"pruned {int(newly.sum())} new entries, expected {k}"
    if 0 < k < int(kept_before.sum()):
        assert s[newly].max() <= s[kept_after].min(), (
            f"pruned |v|={float(s[newly].max())} while keeping |v|={float(s[kept_after].min())}"
        )
