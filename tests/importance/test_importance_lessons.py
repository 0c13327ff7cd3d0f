"""What the criteria are, shown on the demo MLP (64 -> 128 -> 64 -> 10, digits).

Three seeds are the shipped checkpoint (``load_mlp``, seed 0) and two retrainings of the same
recipe (``trained_model("mlp", seed)``, a few seconds each). Calibration: the 1,347 training
images (one batch), no fine-tuning. Accuracy is on the 450 held-out test images.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from prune_explorer import Session
from prune_explorer.demo import evaluate, load_digits_split, load_mlp, trained_model

LAYERS = ("fc1.weight", "fc2.weight", "fc3.weight")


@functools.cache
def _trained(seed: int) -> dict[str, torch.Tensor]:
    model = load_mlp() if seed == 0 else trained_model("mlp", seed)
    return {k: v.clone() for k, v in model.state_dict().items()}


def _mlp(seed: int, outliers: bool = False) -> nn.Module:
    model = load_mlp(pretrained=False)
    model.load_state_dict(_trained(seed))
    if outliers:
        _rescale(model)
    return model


def _rescale(model: nn.Module, units: int = 32, factor: float = 1000.0) -> None:
    """Hidden units 0..31 of fc1 x1000, the columns of fc2 that read them /1000: ReLU is
    positively homogeneous, so the function is unchanged (outlier features, as in LLMs)."""
    with torch.no_grad():
        model.fc1.weight[:units] *= factor
        model.fc1.bias[:units] *= factor
        model.fc2.weight[:, :units] /= factor


def _calibration() -> list[torch.Tensor]:
    return [load_digits_split().x_train]


def _pruned(model: nn.Module, method: str, **settings: object) -> Session:
    s = Session(model)
    s.calibrate(_calibration())
    for name in LAYERS:
        s.apply(name, method, **settings)
    return s


@pytest.mark.slow
def test_the_rescale_preserves_the_function():
    plain, rescaled = _mlp(0), _mlp(0, outliers=True)
    x = load_digits_split().x_test
    torch.testing.assert_close(rescaled(x), plain(x), rtol=0, atol=1e-4)


@pytest.mark.slow
def test_a_function_preserving_rescale_moves_magnitude_masks_and_not_one_wanda_row_mask():
    masks = {}
    for outliers in (False, True):
        wanda = _pruned(_mlp(0, outliers), "wanda_rows", sparsity=0.7)
        magnitude = _pruned(_mlp(0, outliers), "l1_unstructured", amount=0.7)
        masks[outliers] = ({n: wanda.mask(n) for n in LAYERS},
                           {n: magnitude.mask(n) for n in LAYERS})
    wanda_moved = sum(int((masks[False][0][n] != masks[True][0][n]).sum()) for n in LAYERS)
    magnitude_moved = sum(int((masks[False][1][n] != masks[True][1][n]).sum()) for n in LAYERS)
    assert wanda_moved == 0
    assert magnitude_moved >= 200  # hundreds (measured: see the assert's numbers on failure)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_outlier_units_wanda_at_70_percent_beats_magnitude_by_25_points(seed):
    wanda = evaluate(_pruned(_mlp(seed, outliers=True), "wanda_rows", sparsity=0.7).model)
    magnitude = evaluate(_pruned(_mlp(seed, outliers=True), "l1_unstructured",
                                 amount=0.7).model)
    assert wanda - magnitude >= 0.25, (wanda, magnitude)


@pytest.mark.slow
def test_sparsegpt_at_80_percent_beats_magnitude_and_wanda_loses_on_the_plain_model():
    results = {}
    for seed in (0, 1, 2):
        results[seed] = {
            "magnitude": evaluate(_pruned(_mlp(seed), "l1_unstructured", amount=0.8).model),
            "sparsegpt": evaluate(_pruned(_mlp(seed), "sparsegpt", sparsity=0.8).model),
            "wanda": evaluate(_pruned(_mlp(seed), "wanda_rows", sparsity=0.8).model),
        }
    mean = {k: sum(r[k] for r in results.values()) / 3 for k in results[0]}
    # SparseGPT, updating the survivors, beats magnitude on every seed and by >= 8 points on
    # average (measured: 95.3 / 95.8 / 94.2 vs 80.4 / 76.0 / 87.8)
    assert all(r["sparsegpt"] > r["magnitude"] for r in results.values()), results
    assert mean["sparsegpt"] - mean["magnitude"] >= 0.08, results
    # The honest negative: no outlier features here, and Wanda's per-row grouping loses to
    # magnitude at 80% on average (measured, this calibration: magnitude 80.4 / 76.0 / 87.8,
    # Wanda 81.8 / 76.9 / 71.3: it wins narrowly on two seeds and loses by 16 points on one;
    # means 81.4 vs 76.7)
    assert mean["magnitude"] - mean["wanda"] >= 0.03, results
    assert any(r["magnitude"] - r["wanda"] >= 0.10 for r in results.values()), results
