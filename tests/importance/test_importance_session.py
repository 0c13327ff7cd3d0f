"""Criteria through a Session: calibrate, importance=, wanda_rows and sparsegpt steps."""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from prune_explorer import Session
from prune_explorer.session import Plan, Step
from prune_explorer.session.errors import InvalidStepError


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(3)
    return [(torch.randn(8, 16, generator=generator) * torch.linspace(0.1, 3, 16),
             torch.randint(0, 8, (8,), generator=generator)) for _ in range(2)]


def _loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch[0]), batch[1])


def _calibrated() -> Session:
    s = Session(_model())
    s.calibrate(_batches(), _loss)
    return s


@pytest.mark.parametrize("importance", ["wanda", "taylor", "fisher"])
def test_preview_equals_apply_and_stock_torch_with_the_same_scores(importance):
    s = _calibrated()
    preview = s.preview("0.weight", "l1_unstructured", amount=0.6, importance=importance)
    step = s.apply("0.weight", "l1_unstructured", amount=0.6, importance=importance)
    assert step.importance == importance
    assert torch.equal(preview, s.model[0].weight_mask)
    # stock torch given the criterion's scores through importance_scores= gives that mask
    from prune_explorer.importance import tensor_scores

    fresh = _model()
    scores = tensor_scores(importance, fresh[0], "weight", s.calibration["0.weight"], "0.weight")
    torch_prune.l1_unstructured(fresh[0], "weight", amount=0.6, importance_scores=scores)
    assert torch.equal(fresh[0].weight_mask, s.model[0].weight_mask)
    magnitude = _model()
    torch_prune.l1_unstructured(magnitude[0], "weight", amount=0.6)
    assert not torch.equal(magnitude[0].weight_mask, s.model[0].weight_mask)


def test_magnitude_is_the_default_and_its_step_and_json_are_unchanged():
    s, t = _calibrated(), Session(_model())
    a = s.apply("0.weight", "l1_unstructured", amount=0.5, importance="magnitude")
    b = t.apply("0.weight", "l1_unstructured", amount=0.5)
    assert a == b
    assert a.to_dict() == b.to_dict()
    assert "importance" not in a.to_dict()
    assert torch.equal(s.model[0].weight_mask, t.model[0].weight_mask)


def test_global_and_structured_steps_take_importance_and_plans_carry_it():
    s = _calibrated()
    masks = s.preview_global(["0.weight", "2.weight"], amount=0.7, importance="fisher")
    step = s.apply_global(["0.weight", "2.weight"], amount=0.7, importance="fisher")
    assert all(torch.equal(masks[n], s.mask(n)) for n in ("0.weight", "2.weight"))
    s.apply("2.weight", "ln_structured", amount=2, n=1, dim=0, importance="taylor")
    rows = s.apply("0.weight", "wanda_rows", sparsity=0.25)
    plan = s.plan
    again = Plan.from_json(plan.to_json())
    assert list(again) == list(plan)
    assert again.steps[0] == step
    assert again.steps[0].importance == "fisher"
    replay = Session(_model())
    replay.calibrate(_batches(), _loss)
    replay.apply_all(again)
    for name in ("0.weight", "2.weight"):
        assert torch.equal(replay.mask(name), s.mask(name))
    assert rows.to_dict()["sparsity"] == 0.25


def test_plans_written_before_still_load():
    old = ('{"format": "prune-explorer-plan", "version": 2, "steps": [{"method": '
           '"l1_unstructured", "target": "0.weight", "amount": {"fraction": 0.5}}]}')
    (step,) = Plan.from_json(old).steps
    assert step.importance == "magnitude"
    assert step == Step("l1_unstructured", "0.weight",
                                                           amount=0.5)


def test_a_criterion_without_calibration_is_refused_naming_the_argument():
    s = Session(_model())
    with pytest.raises(InvalidStepError, match=r"importance='wanda' needs calibration "
                                               r"statistics.*Session.calibrate\(batches\)"):
        s.apply("0.weight", "l1_unstructured", amount=0.5, importance="wanda")
    assert s.steps == ()
    assert not hasattr(s.model[0], "weight_mask")
    s.calibrate([x for x, _ in _batches()])  # no loss: no gradients
    with pytest.raises(InvalidStepError, match=r"importance='fisher' needs the calibration "
                                               r"statistic 'fisher' of tensor '0.weight'"):
        s.preview("0.weight", "l1_unstructured", amount=0.5, importance="fisher")
    with pytest.raises(InvalidStepError, match="importance='taylor' needs a method that takes "
                                               "importance_scores"):
        s.apply("0.weight", "random_unstructured", amount=0.5, importance="taylor")
    with pytest.raises(InvalidStepError, match="importance must be one of"):
        s.apply("0.weight", "l1_unstructured", amount=0.5, importance="obd")


def test_calibrate_restores_grad_mode_and_train_mode_on_an_interrupt():
    model = _model().train()
    s = Session(model)
    calls = []

    def loss(m: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        calls.append(m.training)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return _loss(m, batch)

    with torch.no_grad(), pytest.raises(KeyboardInterrupt):
        s.calibrate(_batches(), loss)
    assert calls == [False] * 3  # calibration runs in eval mode
    assert model.training
    assert s.calibration is None
    assert not model[0]._forward_hooks
    assert model[0].weight.grad is None


def test_wanda_rows_prunes_each_row_to_the_same_fraction_and_undoes():
    s = _calibrated()
    preview = s.preview("0.weight", "wanda_rows", sparsity=0.5)
    s.apply("0.weight", "wanda_rows", sparsity=0.5)
    mask = s.model[0].weight_mask
    assert torch.equal(preview, mask)
    assert (mask.sum(1) == 8).all()
    s.apply("2.weight", "wanda_rows", sparsity="2:4")
    assert (s.model[2].weight_mask.reshape(8, 8, 4).sum(-1) == 2).all()
    s.undo()
    s.undo()
    assert not hasattr(s.model[0], "weight_mask")


def test_sparsegpt_is_an_undoable_weight_edit_and_states_its_damping():
    s = _calibrated()
    before = s.model[0].weight.detach().clone()
    preview = s.preview("0.weight", "sparsegpt", sparsity=0.5)
    assert torch.equal(s.model[0].weight, before)  # the preview changed nothing
    step = s.apply("0.weight", "sparsegpt", sparsity=0.5)
    assert torch.equal(preview, s.model[0].weight_mask)
    assert step.settings["damping"] == 0.01
    assert "damping 0.01" in str(step.detail)
    kept = s.model[0].weight_mask.bool()
    assert not torch.equal(s.model[0].weight_orig[kept], before[kept])  # survivors updated
    s.undo()
    assert torch.equal(s.model[0].weight, before)
    assert not hasattr(s.model[0], "weight_mask")


def test_sparsegpt_raises_the_damping_of_a_singular_hessian_and_says_so():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 4))
    s = Session(model)
    s.calibrate([torch.randn(2, 16)])  # 2 rows: H has rank 2
    step = s.apply("0.weight", "sparsegpt", sparsity=0.5, damping=1e-12)
    assert "raised from 1e-12" in str(step.detail)


def test_the_snippet_replays_calibrated_steps_on_stock_torch_from_a_checked_file(tmp_path):
    import runpy

    s = _calibrated()
    s.apply("0.weight", "l1_unstructured", amount=0.3, importance="wanda")
    s.apply_global(["0.weight", "2.weight"], amount=0.4, importance="fisher")
    s.apply("2.weight", "ln_structured", amount=2, n=1, dim=0, importance="taylor")
    s.apply("0.weight", "wanda_rows", sparsity="1:2")
    s.apply("2.weight", "sparsegpt", sparsity=0.5)
    code, tensors = s.plan.save_snippet(tmp_path / "plan.py")
    text = code.read_text()
    assert text.count("importance_scores=") == 2  # torch's grouping: the scores themselves
    assert text.count("prune.custom_from_mask(") == 3  # ln rows (slice norms), rows, SparseGPT
    assert "torch.load" not in text
    assert tensors is not None
    fresh = _model()
    runpy.run_path(str(code), init_globals={"model": fresh})
    for index in (0, 2):
        assert torch.equal(fresh[index].weight_mask, s.model[index].weight_mask)
        assert torch.equal(fresh[index].weight, s.model[index].weight)
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 1
    tensors.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="SHA-256 differs"):
        runpy.run_path(str(code), init_globals={"model": _model()})


def test_a_calibrated_step_read_from_json_cannot_be_exported_without_its_session():
    s = _calibrated()
    s.apply("0.weight", "wanda_rows", sparsity=0.5)
    with pytest.raises(ValueError, match=r"use Plan\.save_snippet"):
        s.plan.to_snippet()
    with pytest.raises(ValueError, match=r"step 1 \(wanda_rows.*Session.plan.save_snippet"):
        Plan.from_json(s.plan.to_json()).save_snippet("unused.py")


def test_scores_tied_at_the_cut_are_replayed_as_the_mask_the_session_chose(tmp_path):
    import runpy

    s = Session(_model())
    x = torch.randn(8, 16)
    x[:, :10] = 0  # ten dead input features: 320 Wanda scores of exactly 0
    s.calibrate([x])
    s.apply("0.weight", "l1_unstructured", amount=100, importance="wanda")  # cut inside the 0s
    code, _ = s.plan.save_snippet(tmp_path / "plan.py")
    assert "importance_scores=" not in code.read_text()
    fresh = _model()
    runpy.run_path(str(code), init_globals={"model": fresh})
    assert torch.equal(fresh[0].weight_mask, s.model[0].weight_mask)


def test_convolutions_take_channel_norms_and_sparsegpt_refuses_them_clearly():
    from prune_explorer.demo import load_cnn, load_digits_split

    model = load_cnn()
    s = Session(model)
    s.calibrate([load_digits_split("image").x_train[:64]])
    name = "features.3.weight"
    weight = s.tensor(name)
    mask = s.preview(name, "l1_unstructured", amount=0.5, importance="wanda")
    assert torch.equal(mask, s.preview(name, "l1_unstructured", amount=0.5, importance="wanda"))
    s.apply(name, "wanda_rows", sparsity=0.5)
    per_unit = s.mask(name).reshape(weight.shape[0], -1).sum(1)
    assert (per_unit == weight[0].numel() // 2).all()  # each output channel: half its entries
    with pytest.raises(InvalidStepError, match=r"sparsegpt prunes 2-D weights \(Linear, Conv1D\)"):
        s.apply(name, "sparsegpt", sparsity=0.5)
    with pytest.raises(InvalidStepError, match="sparsegpt prunes the weight of a layer with input "
                                               "features"):
        s.apply("features.3.bias", "sparsegpt", sparsity=0.5)
    assert len(s.steps) == 1


def test_an_interrupted_sparsegpt_step_leaves_the_weights_exactly_as_they_were(monkeypatch):
    from prune_explorer import prune
    from prune_explorer.session.steps import execute

    s = _calibrated()
    s.apply("0.weight", "l1_unstructured", amount=0.2)  # pruned already: weight_orig is edited
    before = {k: v.clone() for k, v in s.model.state_dict().items()}

    def interrupted(*args, **kwargs):  # after SparseGPT wrote its values, before the mask
        raise KeyboardInterrupt

    monkeypatch.setattr(execute.prune, "custom_from_mask", interrupted)
    with pytest.raises(KeyboardInterrupt):
        s.apply("0.weight", "sparsegpt", sparsity=0.5)
    monkeypatch.setattr(execute.prune, "custom_from_mask", prune.custom_from_mask)
    after = s.model.state_dict()
    assert sorted(after) == sorted(before)
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert len(s.steps) == 1
