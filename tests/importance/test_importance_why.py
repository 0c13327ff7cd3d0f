"""``Session.why`` and ``Session.compare_criteria``: the numbers behind a score equal a direct
computation from the calibration batches, each compared mask is the session's own preview (what
Apply installs), and the statistics follow the model across ``Session.to``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from prune_explorer import Session
from prune_explorer.session.errors import InvalidStepError

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 6))


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(5)
    scale = torch.linspace(0.05, 4.0, 12)  # features of very different sizes
    return [(torch.randn(10, 12, generator=generator) * scale,
             torch.randint(0, 6, (10,), generator=generator)) for _ in range(3)]


def _inputs() -> list[torch.Tensor]:
    return [x for x, _ in _batches()]


def _loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch[0]), batch[1])


def test_why_is_w_the_root_of_the_summed_squares_and_their_product():
    s = Session(_model())
    s.calibrate(_inputs())
    s.apply("0.weight", "l1_unstructured", amount=0.3)  # |W| as the model sees it: zeros
    why = s.why("0.weight", "wanda")
    x = torch.cat([b[0] for b in _batches()]).double()
    direct_norms = x.square().sum(dim=0).sqrt()
    weight = s.model[0].weight.detach()
    assert torch.equal(why.weight, weight.abs())
    assert int((why.weight == 0).sum()) == int(0.3 * weight.numel() + 0.5)
    torch.testing.assert_close(why.input_norms, direct_norms, rtol=1e-12, atol=0)
    assert why.norms.shape == weight.shape
    assert why.input_dim == 1
    assert torch.equal(why.norms[5], why.input_norms)  # every row reads the same features
    direct_score = (weight.double().abs() * direct_norms).float()
    torch.testing.assert_close(why.score, direct_score, rtol=1e-6, atol=0)
    assert torch.equal(why.kept, s.mask("0.weight"))
    assert why.rows == 30
    assert why.module_type == "Linear"


def test_why_of_magnitude_is_w_and_of_taylor_is_the_steps_own_scores():
    s = Session(_model())
    s.calibrate(_batches(), _loss)
    assert torch.equal(s.why("2.weight", "magnitude").score, s.model[2].weight.detach().abs())
    taylor = s.why("2.weight", "taylor").score
    from prune_explorer.importance import tensor_scores

    expected = tensor_scores("taylor", s.model[2], "weight", s.calibration["2.weight"],
                             "2.weight")
    assert torch.equal(taylor, expected)


def test_why_without_calibration_says_what_to_call():
    s = Session(_model())
    with pytest.raises(InvalidStepError, match=r"calibrate\(batches\)") as err:
        s.why("0.weight")
    assert err.value.field == "calibration"
    s.calibrate(_inputs())
    with pytest.raises(InvalidStepError, match="importance must be one of"):
        s.why("0.weight", "nonsense")
    with pytest.raises(InvalidStepError, match="'gradients'"):
        s.why("0.weight", "taylor")  # no loss given: no gradients
    bias = s.why("0.bias", "magnitude")  # no input features: no norms
    assert bias.input_norms is None
    assert bias.norms is None


def test_why_of_a_conv1d_lays_the_norms_along_its_input_rows():
    transformers = pytest.importorskip("transformers")
    layer = transformers.pytorch_utils.Conv1D(5, 4)  # stores (in=4, out=5)
    model = nn.Sequential(layer)
    s = Session(model)
    x = torch.randn(6, 4) * torch.tensor([1.0, 2.0, 0.0, 5.0])
    s.calibrate([x])
    why = s.why("0.weight")
    assert why.input_dim == 0
    assert torch.equal(why.norms[:, 3], why.input_norms)
    assert why.dead_inputs == 1
    assert torch.equal(why.score[2], torch.zeros(5))


@pytest.mark.parametrize(("method", "settings"), [
    ("l1_unstructured", {"amount": 0.6}),
    ("ln_structured", {"amount": 4, "n": 1, "dim": 0}),
])
def test_compare_criteria_masks_are_two_separate_previews_and_what_apply_installs(method,
                                                                                  settings):
    s = Session(_model())
    s.calibrate(_batches(), _loss)
    c = s.compare_criteria("0.weight", method, importance="wanda", against="fisher", **settings)
    a = s.preview("0.weight", method, importance="wanda", **settings) != 0
    b = s.preview("0.weight", method, importance="fisher", **settings) != 0
    assert torch.equal(c.first_mask, a)
    assert torch.equal(c.second_mask, b)
    assert torch.equal(c.only_first, a & ~b)
    assert torch.equal(c.only_second, b & ~a)
    counts = c.counts()
    assert counts["kept_by_first_only"] == int((a & ~b).sum())
    assert counts["kept_by_second_only"] == int((b & ~a).sum())
    assert counts["disagree"] > 0  # the two criteria really differ here
    assert sum(counts[k] for k in ("kept_by_first_only", "kept_by_second_only", "kept_by_both",
                                   "pruned_by_both")) == a.numel()
    assert s.steps == ()  # nothing changed
    s.apply("0.weight", method, importance="fisher", **settings)
    assert torch.equal(s.mask("0.weight"), c.second_mask)


def test_compare_criteria_on_a_global_step_and_its_refusals():
    s = Session(_model())
    s.calibrate(_inputs())
    targets = ["0.weight", "2.weight"]
    c = s.compare_criteria("2.weight", "global_unstructured", targets=targets,
                           pruning_method="l1_unstructured", amount=0.5, against="wanda")
    expected = s.preview_global(targets, amount=0.5, importance="wanda")["2.weight"] != 0
    assert torch.equal(c.second_mask, expected)
    assert torch.equal(c.first_mask, s.preview_global(targets, amount=0.5)["2.weight"] != 0)
    assert "magnitude and wanda disagree on" in c.sentence()
    with pytest.raises(InvalidStepError, match="method must rank entries") as err:
        s.compare_criteria("0.weight", "random_unstructured", amount=0.5, against="wanda")
    assert err.value.field == "method"
    with pytest.raises(InvalidStepError, match="against must be one of") as err:
        s.compare_criteria("0.weight", amount=0.5, against="wandaa")
    assert err.value.field == "against"
    with pytest.raises(InvalidStepError, match="not among the global targets"):
        s.compare_criteria("0.bias", "global_unstructured", targets=targets,
                           pruning_method="l1_unstructured", amount=0.5, against="wanda")


def test_calibrate_tells_the_listeners_and_to_moves_the_statistics_with_the_model():
    s = Session(_model())
    events = []
    s.on_change(events.append)
    s.calibrate(_batches(), _loss)
    assert events[-1].kind == "calibrate"
    assert "0.weight" in events[-1].names
    before = s.calibration
    s.to("meta")  # a device move every machine can make
    moved = s.calibration
    assert moved is not before
    for stats in moved.stats.values():
        for t in (stats.inputs, stats.gradients, stats.fisher):
            assert t is None or t.device.type == "meta"
    assert moved["0.weight"].inputs.device == s.model[0].weight.device
    assert before["0.weight"].inputs.device.type == "cpu"  # the old record is left as it was


def test_a_failed_move_puts_the_statistics_back(monkeypatch):
    s = Session(_model())
    s.calibrate(_inputs())
    before = s.calibration

    def fail(*args, **kwargs):
        raise RuntimeError("injected failure after the move")

    monkeypatch.setattr(s._stepping, "resee", fail)  # after the statistics moved
    with pytest.raises(RuntimeError, match="injected"):
        s.to("meta")
    assert s.calibration is before
    assert s.model[0].weight.device.type == "cpu"


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize(("method", "settings"), [
    ("l1_unstructured", {"amount": 0.6, "importance": "wanda"}),
    ("l1_unstructured", {"amount": 0.6, "importance": "fisher"}),
    ("l1_unstructured", {"amount": 0.6, "importance": "taylor"}),
    ("wanda_rows", {"sparsity": 0.5}),
])
def test_the_same_weights_and_batches_give_the_same_masks_on_cpu_and_cuda(method, settings):
    cpu = Session(_model())
    cpu.calibrate(_batches(), _loss)
    cuda = Session(_model().cuda())
    cuda.calibrate([(x.cuda(), y.cuda()) for x, y in _batches()], _loss)
    for s in (cpu, cuda):
        s.apply("0.weight", method, **settings)
    assert torch.equal(cpu.mask("0.weight"), cuda.mask("0.weight").cpu())


@pytest.mark.cuda
@needs_cuda
def test_statistics_moved_to_cuda_give_the_masks_of_a_cuda_calibration():
    s = Session(_model())
    s.calibrate(_batches(), _loss)
    s.to("cuda")
    assert s.calibration["0.weight"].inputs.is_cuda
    moved = s.preview("0.weight", "l1_unstructured", amount=0.5, importance="wanda")
    there = Session(_model().cuda())
    there.calibrate([(x.cuda(), y.cuda()) for x, y in _batches()], _loss)
    assert torch.equal(moved, there.preview("0.weight", "l1_unstructured", amount=0.5,
                                            importance="wanda"))


def test_batches_recorded_before_a_move_run_on_the_models_device():
    from prune_explorer.session.steps.calibrated import Calibrated

    s = Session(_model())
    statistics = s.calibrate(_batches(), _loss)
    record = Calibrated(statistics, tuple(_batches()), _loss)
    s.to("meta")
    out = record.run(s.model, _batches()[0])  # a CPU batch through the moved model
    assert out.device.type == "meta"


@pytest.mark.cuda
@needs_cuda
def test_sparsegpt_runs_after_the_session_moved_to_cuda():
    s = Session(_model())
    s.calibrate(_inputs())
    s.to("cuda")
    s.apply("0.weight", "sparsegpt", sparsity=0.5)
    assert s.mask("0.weight").is_cuda
