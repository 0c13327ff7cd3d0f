"""CUDA: masks live on the parameter's device and random draws match torch after a seed.

Skipped cleanly without a GPU.
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers.prune import (
    MODULE_KINDS,
    assert_pruned_alike,
    global_both,
    make_input,
    make_module,
    mask_of,
    prune_both,
    twin,
)
from prune_explorer import prune as ours

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

CASES = [
    ("l1_unstructured", {"amount": 0.4}),
    ("random_unstructured", {"amount": 0.4}),
    ("random_structured", {"amount": 1, "dim": 0}),
    ("ln_structured", {"amount": 1, "n": 2, "dim": 0}),
    ("ln_structured", {"amount": 0.5, "n": math.inf, "dim": -1}),
    ("identity", {}),
]


@pytest.mark.parametrize("kind", MODULE_KINDS)
@pytest.mark.parametrize(("fn", "kw"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_cuda_masks_on_device_and_like_torch(kind, fn, kw):
    m_o, m_t = twin(make_module(kind, seed=70, device="cuda"))
    for seed in (0, 1):
        torch.manual_seed(seed)  # seeds the CUDA generators too
        prune_both(fn, m_o, m_t, "weight", seed=seed, **kw)
        assert mask_of(m_o).device == m_o.weight_orig.device
        assert mask_of(m_o).device.type == "cuda"
        assert_pruned_alike(m_o, m_t)
    x = make_input(kind).cuda()
    torch.testing.assert_close(m_o(x), m_t(x), rtol=0, atol=0)


def test_cuda_custom_from_mask_cpu_mask_is_refused_like_torch():
    m_o, m_t = twin(make_module("linear", seed=71, device="cuda"))
    before = m_o.weight
    mask = torch.rand(m_o.weight.shape) > 0.5  # given on CPU
    error = prune_both("custom_from_mask", m_o, m_t, "weight", mask=mask)
    assert isinstance(error, ours.DeviceMismatchError)
    assert str(error) == ("custom_from_mask: mask must be on the device of the pruned tensor, "
                          "cuda:0; got a tensor on cpu (move it first: mask.to(...))")
    assert m_o.weight is before
    assert not hasattr(m_o, "weight_mask")
    prune_both("custom_from_mask", m_o, m_t, "weight", mask=mask.cuda())
    assert_pruned_alike(m_o, m_t)


@pytest.mark.parametrize("method", ["L1Unstructured", "RandomUnstructured"])
def test_cuda_global(method):
    mods = [make_module("linear", 72, device="cuda"), make_module("conv2d", 73, device="cuda")]
    mods_o = [twin(m)[0] for m in mods]
    mods_t = [twin(m)[1] for m in mods]
    for seed in (0, 1):
        global_both(mods_o, mods_t, ["weight", "weight"], method, seed=seed, amount=0.3)
        for m_o, m_t in zip(mods_o, mods_t, strict=True):
            assert mask_of(m_o).device.type == "cuda"
            assert_pruned_alike(m_o, m_t)


def test_cuda_large_random_identical():
    from helpers.prune import with_param

    data = torch.randn(600, 600, device="cuda")
    m_o, m_t = with_param((600, 600), data), with_param((600, 600), data)
    prune_both("random_unstructured", m_o, m_t, "weight", seed=5, amount=0.5)
    assert_pruned_alike(m_o, m_t)
    prune_both("l1_unstructured", m_o, m_t, "weight", amount=0.3)
    assert_pruned_alike(m_o, m_t)


def test_cuda_seeded_random_methods_across_devices():
    """What the docs promise for a seed on a CPU and a GPU: ``random_structured`` draws its
    slice scores on the CPU, so the same seed gives the same mask on both; ``random_unstructured``
    draws on the tensor's device, as torch does, so each device's mask is torch's own there
    (and the two differ: torch's CPU and CUDA streams differ)."""
    cpu = make_module("linear", seed=74)
    gpu = make_module("linear", seed=74, device="cuda")
    masks = {}
    for name, module in (("cpu", cpu), ("cuda", gpu)):
        torch.manual_seed(9)
        ours.random_structured(module, "weight", amount=0.5, dim=0)
        masks[name] = mask_of(module).cpu()
    assert torch.equal(masks["cpu"], masks["cuda"])
    unstructured = {}
    for name, device in (("cpu", "cpu"), ("cuda", "cuda")):
        m_o, m_t = twin(make_module("linear", seed=75, device=device))
        prune_both("random_unstructured", m_o, m_t, "weight", seed=9, amount=0.5)
        assert_pruned_alike(m_o, m_t)
        unstructured[name] = mask_of(m_o).cpu()
    assert not torch.equal(unstructured["cpu"], unstructured["cuda"])
