"""Devices: ``to(device)`` moves model, masks and history; work runs on the
model's device. CUDA tests skip cleanly without a GPU."""

from __future__ import annotations

import pytest
import torch

from helpers.session import convnet, masks, torch_apply
from prune_explorer.session import Session

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_to_cpu_returns_the_session_and_emits_an_event():
    s = Session(convnet())
    s.apply("features.0.weight", "l1_unstructured", amount=0.5)
    events = []
    s.on_change(events.append)
    assert s.to("cpu") is s
    assert events[-1].kind == "to"
    assert s.history("features.0.weight")[1].mask.device == torch.device("cpu")
    assert s.model.features[0].weight.device == torch.device("cpu")


@pytest.mark.cuda
@needs_cuda
def test_to_cuda_moves_model_masks_history_and_pruned_copies():
    s = Session(convnet())
    s.apply("features.0.weight", "l1_unstructured", amount=0.5)
    expected = s.history("features.0.weight").mask(1)
    s.to("cuda")
    module = s.model.features[0]
    assert module.weight_orig.is_cuda
    assert module.weight_mask.is_cuda
    assert module.weight.is_cuda  # the pruned copy (a plain attribute) too
    assert s.history("features.0.weight")[1].mask.device.type == "cuda"
    assert torch.equal(s.history("features.0.weight").mask(1).cpu(), expected)
    s.to("cpu")
    assert not module.weight.is_cuda
    assert torch.equal(s.history("features.0.weight").mask(1), expected)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize(
    ("method", "settings"),
    [
        ("l1_unstructured", {"amount": 0.5}),
        ("ln_structured", {"amount": 2, "n": 2, "dim": 0}),
        ("random_unstructured", {"amount": 0.5}),
        ("random_structured", {"amount": 2, "dim": 0}),
    ],
)
def test_preview_and_apply_run_on_cuda_and_match_torch(method, settings):
    model = convnet().cuda()
    oracle = convnet().cuda()
    s = Session(model)
    torch_apply(oracle, s.apply("features.2.weight", "l1_unstructured", amount=0.2))
    cpu_state = torch.random.get_rng_state()
    cuda_state = torch.cuda.get_rng_state()
    mask = s.preview("features.2.weight", method, **settings)
    assert mask.is_cuda
    assert torch.equal(cpu_state, torch.random.get_rng_state())
    assert torch.equal(cuda_state, torch.cuda.get_rng_state())
    step = s.apply("features.2.weight", method, **settings)
    assert torch.equal(mask, model.features[2].weight_mask)
    torch_apply(oracle, step)
    assert torch.equal(masks(oracle)["features.2.weight"], masks(model)["features.2.weight"])
    s.undo()
    s.undo()
    assert not hasattr(model.features[2], "weight_mask")


@pytest.mark.cuda
@needs_cuda
def test_global_preview_on_cuda():
    s = Session(convnet().cuda())
    names = ["features.0.weight", "classifier.weight"]
    preview = s.preview_global(names, "random_unstructured", amount=0.5)
    s.apply_global(names, "random_unstructured", amount=0.5)
    for name in names:
        assert torch.equal(preview[name], s.mask(name).to(preview[name].dtype))
