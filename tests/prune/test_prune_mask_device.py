"""A mask given on another device is refused, as torch refuses it, with our own message.

``custom_from_mask`` (and ``CustomFromMask.compute_mask``) do not copy a mask between devices
behind the caller's back: torch raises ``RuntimeError`` there, ours a ``DeviceMismatchError``
(a ``RuntimeError`` and a ``ValueError``) naming the argument, the rule and both devices, and the
module is left as it was. Checked here with a ``meta`` mask on a CPU module; the CUDA case (a CPU
mask on a CUDA module) is in ``test_prune_cuda.py``. Also: every example input of the helpers'
modules runs through its module (the rank-3 and rank-5 ones included).
"""

from __future__ import annotations

import pytest
import torch

from helpers.prune import (
    MODULE_KINDS,
    assert_pruned_alike,
    make_input,
    make_module,
    prune_both,
    twin,
)
from prune_explorer import prune as ours

MESSAGE = ("custom_from_mask: mask must be on the device of the pruned tensor, cpu; got a tensor "
           "on meta (move it first: mask.to(...))")


def test_a_mask_on_another_device_is_refused_like_torch():
    m_o, m_t = twin(make_module("linear", seed=3))
    weight = m_o.weight
    mask = torch.ones(m_o.weight.shape, device="meta")
    error = prune_both("custom_from_mask", m_o, m_t, "weight", mask=mask)
    assert isinstance(error, ours.DeviceMismatchError)
    assert isinstance(error, RuntimeError)
    assert isinstance(error, ValueError)
    assert str(error) == MESSAGE
    assert m_o.weight is weight
    assert not hasattr(m_o, "weight_mask")
    assert dict(m_o.named_buffers()) == {}
    assert not m_o._forward_pre_hooks


def test_compute_mask_refuses_it_too():
    method = ours.CustomFromMask(torch.ones(2, 3, device="meta"))
    with pytest.raises(ours.DeviceMismatchError, match="on meta"):
        method.compute_mask(torch.ones(2, 3), torch.ones(2, 3))


def test_a_mask_on_the_same_device_of_another_dtype_is_still_taken():
    m_o, m_t = twin(make_module("linear", seed=4))
    mask = torch.rand(m_o.weight.shape, generator=torch.Generator().manual_seed(0)) > 0.5
    prune_both("custom_from_mask", m_o, m_t, "weight", mask=mask)  # bool mask, float weight
    assert_pruned_alike(m_o, m_t)


@pytest.mark.parametrize("kind", MODULE_KINDS)
def test_every_example_input_runs_through_its_module(kind):
    out = make_module(kind)(make_input(kind))
    assert out.shape[0] == 2
    assert out.dim() >= 2
