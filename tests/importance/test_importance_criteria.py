"""The criteria and statistics of ``prune_explorer.importance``, each against a direct
computation of its formula on a small model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from prune_explorer.importance import collect, row_mask, sparsegpt, tensor_scores
from prune_explorer.importance.criteria import CRITERIA, CriterionError
from prune_explorer.importance.sparsegpt import layer_hessian


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 5, generator=generator), torch.randint(0, 3, (4,), generator=generator))
            for _ in range(3)]


def _loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch[0]), batch[1])


def test_taylor_is_w_times_the_mean_batch_gradient():
    model, batches = _mlp(), _batches()
    calib = collect(model, batches, ["0.weight", "2.weight"], loss=_loss, per_sample=False)
    for index in (0, 2):
        layer = model[index]
        grads = [torch.autograd.grad(_loss(model, b), layer.weight)[0] for b in batches]
        expected = (layer.weight * torch.stack(grads).mean(0)).abs()
        got = tensor_scores("taylor", layer, "weight", calib[f"{index}.weight"], "x")
        torch.testing.assert_close(got, expected.detach(), rtol=1e-5, atol=1e-8)


def test_fisher_is_w_squared_times_the_mean_squared_per_sample_gradient():
    model, batches = _mlp(), _batches()
    calib = collect(model, batches, ["0.weight"], loss=_loss)
    layer = model[0]
    squares = []
    for x, y in batches:  # every sample alone, directly
        for i in range(len(y)):
            g = torch.autograd.grad(_loss(model, (x[i:i + 1], y[i:i + 1])), layer.weight)[0]
            squares.append(g.square())
    expected = layer.weight.detach().square() * torch.stack(squares).mean(0)
    assert calib["0.weight"].samples == 12
    torch.testing.assert_close(tensor_scores("fisher", layer, "weight", calib["0.weight"], "x"),
                               expected, rtol=1e-5, atol=1e-10)
    # per-sample, not the square of the batch gradient (which would be a different number)
    batch_sq = torch.stack([torch.autograd.grad(_loss(model, b), layer.weight)[0].square()
                            for b in batches]).mean(0)
    assert not torch.allclose(expected, layer.weight.detach().square() * batch_sq)


def test_wanda_is_w_times_the_input_feature_norm_on_linear_and_conv1d_axes():
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)
    linear, conv1d = nn.Linear(6, 4), Conv1D(4, 6)  # Conv1D(nf=out, nx=in): weight (in, out)
    model = nn.Sequential(linear, nn.ReLU(), nn.Linear(4, 6), conv1d)
    x = torch.randn(3, 2, 6)
    calib = collect(model, [x], ["0.weight", "3.weight"])
    norms = x.reshape(-1, 6).double().square().sum(0).sqrt()
    expected = (linear.weight.detach().double().abs() * norms).float()
    torch.testing.assert_close(tensor_scores("wanda", linear, "weight", calib["0.weight"], "x"),
                               expected)
    hidden = model[:3](x).reshape(-1, 6).double()
    conv_norms = hidden.square().sum(0).sqrt()  # Conv1D's inputs index dim 0 of its weight
    expected = (conv1d.weight.detach().double().abs() * conv_norms[:, None]).float()
    torch.testing.assert_close(tensor_scores("wanda", conv1d, "weight", calib["3.weight"], "x"),
                               expected.detach())


def test_wanda_on_a_conv2d_spreads_each_channel_norm_over_its_kernel():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 2, 3))
    x = torch.randn(2, 3, 5, 5)
    calib = collect(model, [x], ["0.weight"])
    norms = x.double().square().sum((0, 2, 3)).sqrt()
    expected = (model[0].weight.detach().double().abs() * norms[None, :, None, None]).float()
    torch.testing.assert_close(tensor_scores("wanda", model[0], "weight", calib["0.weight"], "x"),
                               expected)
    assert calib["0.weight"].rows == 2 * 25


def test_calibration_leaves_modes_grad_flags_and_grads_as_they_were():
    model, batches = _mlp(), _batches()
    model.train()
    model[2].weight.requires_grad_(False)
    model[0].weight.grad = torch.full_like(model[0].weight, 7.0)
    with torch.no_grad():
        collect(model, batches, ["0.weight", "2.weight"], loss=_loss)
        assert not torch.is_grad_enabled()
    assert model.training
    assert model[0].training
    assert model[2].weight.requires_grad is False
    assert torch.equal(model[0].weight.grad, torch.full_like(model[0].weight, 7.0))
    assert not model[0]._forward_hooks


def test_a_criterion_without_its_statistics_says_which_call_gives_them():
    model = _mlp()
    calib = collect(model, [torch.randn(2, 5)], ["0.weight"])
    with pytest.raises(CriterionError, match=r"importance='taylor' needs the calibration "
                                             r"statistic 'gradients' of tensor '0.weight'.*loss"):
        tensor_scores("taylor", model[0], "weight", calib["0.weight"], "0.weight")
    with pytest.raises(CriterionError, match="importance must be one of 'magnitude', 'wanda'"):
        tensor_scores("obd", model[0], "weight", calib["0.weight"], "0.weight")
    assert set(CRITERIA) == {"magnitude", "wanda", "taylor", "fisher"}


def test_row_mask_prunes_the_same_count_in_every_row_and_n_of_m_within_rows():
    torch.manual_seed(0)
    scores = torch.rand(5, 12)
    kept = row_mask(scores, 0, 1, 0.5)
    assert kept.sum(1).tolist() == [6] * 5
    for row in range(5):  # the kept entries are the row's highest scores
        assert scores[row][kept[row]].min() > scores[row][~kept[row]].max()
    pattern = row_mask(scores, 0, 1, "2:4")
    assert (pattern.reshape(5, 3, 4).sum(-1) == 2).all()
    # Conv1D-style (in, out): rows are columns of the stored tensor
    assert torch.equal(row_mask(scores.T.contiguous(), 1, 0, 0.5), kept.T)


def test_sparsegpt_on_correlated_inputs_beats_zeroing_the_same_mask():
    torch.manual_seed(0)
    x = torch.randn(512, 16) @ torch.randn(16, 16)
    w = torch.randn(6, 16)
    h = 2 / 512 * x.T @ x
    result = sparsegpt(w, h, 0.5, block=8)  # two blocks: the update crosses them
    assert int((~result.kept).sum()) == 48
    assert torch.equal(result.weight == 0, ~result.kept)
    error = ((x @ result.weight.T - x @ w.T) ** 2).sum()
    assert error < ((x @ (w * result.kept).T - x @ w.T) ** 2).sum()
    nm = sparsegpt(w, h, "2:4")
    assert (nm.kept.reshape(6, 4, 4).sum(-1) == 2).all()


def test_sparsegpt_dead_inputs_and_a_singular_hessian_raise_the_stated_damping():
    torch.manual_seed(0)
    x = torch.randn(3, 8)  # 3 rows, 8 features: H has rank 3
    x[:, 5] = 0  # a dead input
    w = torch.randn(4, 8)
    h = 2 / 3 * x.T @ x
    result = sparsegpt(w, h, 0.5, damping=1e-12)
    assert result.raised
    assert result.damping > 1e-12
    assert result.dead_inputs == 1
    assert not result.kept[:, 5].any()
    model = nn.Sequential(nn.Linear(8, 2))
    torch.testing.assert_close(layer_hessian(model, model[0], [x]), h)
