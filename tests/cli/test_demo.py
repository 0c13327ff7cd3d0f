"""Tests for prune_explorer.demo: data split, models, training, evaluation, checkpoints."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as torch_prune
from sklearn.datasets import load_digits
from torch import nn

from prune_explorer import demo
from prune_explorer.demo import (
    DigitsCNN,
    DigitsMLP,
    evaluate,
    load_cnn,
    load_digits_split,
    load_mlp,
    train,
)
from prune_explorer.demo import checkpoints as ckpt

SHIPPED = Path(demo.__file__).resolve().parent / "checkpoints"
MODELS = {"mlp": (DigitsMLP, load_mlp, (64,)), "cnn": (DigitsCNN, load_cnn, (1, 8, 8))}


@pytest.fixture(scope="module")
def digits():
    """The raw bundled data set, independent of prune_explorer."""
    bunch = load_digits()
    return bunch.data, bunch.target


def hand_accuracy(model: nn.Module, digits, indices: np.ndarray, shape: tuple[int, ...]) -> float:
    """Accuracy computed from scikit-learn's raw arrays: argmax of logits vs labels."""
    pixels, target = digits
    x = torch.from_numpy(pixels[indices] / 16.0).float().reshape(len(indices), *shape)
    with torch.no_grad():
        predicted = model.eval()(x).argmax(dim=1).numpy()
    return float(np.mean(predicted == target[indices]))


def same_state(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# --------------------------------------------------------------------------- data split


def test_split_is_disjoint_complete_and_stratified(digits):
    _, target = digits
    data = load_digits_split()
    train_idx, test_idx = data.train_indices, data.test_indices
    assert set(train_idx).isdisjoint(test_idx)
    assert sorted(np.concatenate([train_idx, test_idx])) == list(range(len(target)))
    assert len(test_idx) == math.ceil(0.25 * len(target))  # 25 % held out
    overall = np.bincount(target, minlength=10) / len(target)
    for idx in (train_idx, test_idx):
        counts = np.bincount(target[idx], minlength=10)
        # stratified: every class count within one sample of its proportional share
        assert np.all(np.abs(counts - overall * len(idx)) <= 1.0), counts


def test_split_tensors_match_raw_data(digits):
    pixels, target = digits
    flat, image = load_digits_split("flat"), load_digits_split("image")
    for data, shape in ((flat, (64,)), (image, (1, 8, 8))):
        for x, y, idx in (
            (data.x_train, data.y_train, data.train_indices),
            (data.x_test, data.y_test, data.test_indices),
        ):
            assert x.dtype == torch.float32
            assert y.dtype == torch.int64
            assert tuple(x.shape) == (len(idx), *shape)
            expected = torch.from_numpy(pixels[idx] / 16.0).float().reshape(x.shape)
            assert torch.equal(x, expected)
            assert torch.equal(y, torch.from_numpy(target[idx]))
    assert float(flat.x_train.min()) == 0.0
    assert float(flat.x_train.max()) == 1.0
    np.testing.assert_array_equal(flat.test_indices, image.test_indices)


def test_split_is_fixed_and_returns_fresh_tensors():
    first = load_digits_split()
    first.x_test.fill_(7.0)
    first.test_indices[:] = 0
    second = load_digits_split()
    assert float(second.x_test.max()) == 1.0
    assert len(set(second.test_indices.tolist())) == len(second.test_indices)


def test_split_repr_and_errors():
    data = load_digits_split("image")
    assert repr(data) == (
        "DigitsSplit(layout='image', train=1347, test=450, "
        "x=(N, 1, 8, 8) float32 in [0, 1], classes=10)"
    )
    with pytest.raises(
        ValueError,
        match=r"^load_digits_split: layout must be one of "
        r"\['flat', 'image'\]; got 'rgb'$",
    ):
        load_digits_split("rgb")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError,
        match=r"^DigitsSplit.split: name must be 'train' or 'test'; "
        r"got 'val'$",
    ):
        data.split("val")


# --------------------------------------------------------------------------- models


def test_model_names_and_shapes():
    mlp, cnn = DigitsMLP(), DigitsCNN()
    assert {n: tuple(p.shape) for n, p in mlp.named_parameters()} == {
        "fc1.weight": (128, 64), "fc1.bias": (128,),
        "fc2.weight": (64, 128), "fc2.bias": (64,),
        "fc3.weight": (10, 64), "fc3.bias": (10,),
    }  # fmt: skip
    assert {n: tuple(p.shape) for n, p in cnn.named_parameters()} == {
        "features.0.weight": (16, 1, 3, 3), "features.0.bias": (16,),
        "features.3.weight": (32, 16, 3, 3), "features.3.bias": (32,),
        "classifier.weight": (10, 128), "classifier.bias": (10,),
    }  # fmt: skip
    assert mlp(torch.rand(4, 64)).shape == (4, 10)
    assert cnn(torch.rand(4, 1, 8, 8)).shape == (4, 10)


def test_infer_layout():
    assert demo.infer_layout(DigitsMLP()) == "flat"
    assert demo.infer_layout(DigitsCNN()) == "image"
    assert demo.infer_layout(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten())) == "image"
    assert demo.infer_layout(nn.Sequential(nn.Linear(64, 10))) == "flat"
    with pytest.raises(
        ValueError,
        match=r"^infer_layout: cannot tell the input layout of a "
        r"ReLU .*pass layout='flat' or layout='image'$",
    ):
        demo.infer_layout(nn.ReLU())


# --------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("name", sorted(MODELS))
def test_shipped_checkpoint_loads_weights_only_and_is_accurate(name, digits):
    cls, loader, shape = MODELS[name]
    path = SHIPPED / f"{name}.pt"
    assert path.stat().st_size < 300 * 1024
    state = torch.load(path, map_location="cpu", weights_only=True)
    independent = cls()
    independent.load_state_dict(state)  # strict: exactly the model's keys
    indices = load_digits_split().test_indices
    assert hand_accuracy(independent, digits, indices, shape) >= 0.95
    loaded = loader()
    assert isinstance(loaded, cls)
    assert not loaded.training
    assert same_state(loaded, independent)
    assert loader() is not loaded


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("split", ["test", "train"])
def test_evaluate_matches_hand_computed_accuracy(name, split, digits):
    _, loader, shape = MODELS[name]
    data = load_digits_split()
    indices = data.test_indices if split == "test" else data.train_indices
    model = loader()
    assert evaluate(model, split) == pytest.approx(hand_accuracy(model, digits, indices, shape))


def test_evaluate_on_an_untrained_model_matches_hand_computed(digits):
    model = load_mlp(pretrained=False)
    indices = load_digits_split().test_indices
    accuracy = evaluate(model)
    assert accuracy == pytest.approx(hand_accuracy(model, digits, indices, (64,)))
    assert accuracy < 0.5


def test_evaluate_restores_mode_and_accepts_explicit_layout(digits):
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    model.train()
    indices = load_digits_split().test_indices
    expected = hand_accuracy(model, digits, indices, (1, 8, 8))
    model.train()
    assert evaluate(model, layout="image") == pytest.approx(expected)
    assert model.training


@pytest.mark.parametrize("name", sorted(MODELS))
def test_evaluate_sees_pruning_hooks(name, digits):
    _, loader, shape = MODELS[name]
    model = loader()
    before = evaluate(model)
    targets = [(m, "weight") for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    for module, param in targets:
        torch_prune.l1_unstructured(module, param, amount=0.9)
    after = evaluate(model)
    indices = load_digits_split().test_indices
    assert after == pytest.approx(hand_accuracy(model, digits, indices, shape))
    assert after < before
    for module, _ in targets:  # evaluate left the pruning in place
        assert torch_prune.is_pruned(module)
        assert float((module.weight == 0).float().mean()) == pytest.approx(0.9, abs=0.01)


def test_evaluate_rejects_unknown_split():
    with pytest.raises(
        ValueError,
        match=r"^evaluate: split must be 'train' or 'test'; "
        r"got 'validation'$",
    ):
        evaluate(DigitsMLP(), "validation")


def test_pretrained_false_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a = load_mlp(pretrained=False)
    assert torch.equal(torch.rand(3), expected_next)
    b = load_mlp(pretrained=False)
    assert same_state(a, b)
    assert not same_state(a, load_mlp())
    assert not same_state(demo.untrained_model("cnn", seed=0), demo.untrained_model("cnn", seed=1))


def test_load_model_errors():
    with pytest.raises(
        ValueError,
        match=r"^load_model: name must be one of \['cnn', 'mlp'\]; "
        r"got 'resnet'$",
    ):
        demo.load_model("resnet")
    with pytest.raises(TypeError, match=r"^load_model: pretrained must be a bool; got 'yes'$"):
        load_mlp(pretrained="yes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- training


def test_training_is_deterministic_and_seed_matters():
    runs = [train(demo.untrained_model("mlp", seed=3), epochs=2, seed=5) for _ in range(2)]
    assert same_state(*runs)
    other = train(demo.untrained_model("mlp", seed=3), epochs=2, seed=6)
    assert not same_state(runs[0], other)
    assert not same_state(runs[0], demo.untrained_model("mlp", seed=3))
    assert not runs[0].training


def test_training_learns_and_returns_same_object():
    model = demo.untrained_model("cnn", seed=0)
    before = evaluate(model)
    threads = torch.get_num_threads()
    assert train(model, epochs=3) is model
    assert torch.get_num_threads() == threads  # train runs single-threaded, then restores
    assert evaluate(model) > max(before, 0.8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epochs": -1}, "train: epochs must be an int >= 0; got -1"),
        ({"epochs": 2.5}, "train: epochs must be an int >= 0; got 2.5"),
        ({"batch_size": 0}, "train: batch_size must be an int >= 1; got 0"),
        ({"seed": -3}, "train: seed must be an int >= 0; got -3"),
        ({"lr": 0.0}, "train: lr must be a float > 0; got 0.0"),
    ],
)
def test_train_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match="^" + message.replace(".", r"\.") + "$"):
        train(DigitsMLP(), **kwargs)


# --------------------------------------------------------------------------- fallback and cache


@pytest.fixture
def no_shipped(tmp_path, monkeypatch):
    """Pretend the package has no checkpoints; point the user cache at a temporary folder."""
    empty = tmp_path / "shipped"
    empty.mkdir()
    cache = tmp_path / "cache"
    monkeypatch.setattr(ckpt, "CHECKPOINT_DIR", empty)
    monkeypatch.setenv(ckpt.CACHE_ENV, str(cache))
    return empty, cache


def test_missing_checkpoint_trains_then_uses_cache(no_shipped, monkeypatch):
    empty, cache = no_shipped
    trained = load_mlp()
    assert evaluate(trained) >= 0.95
    assert list(empty.iterdir()) == []
    cached = torch.load(cache / "mlp.pt", map_location="cpu", weights_only=True)
    assert all(torch.equal(cached[k], v) for k, v in trained.state_dict().items())

    def no_training(*args, **kwargs):
        raise AssertionError("should have loaded the cache instead of training")

    monkeypatch.setattr(ckpt, "train", no_training)
    assert same_state(load_mlp(), trained)


def test_damaged_cache_is_rebuilt_and_cache_false_writes_nothing(no_shipped):
    _, cache = no_shipped
    load_mlp(cache=False)
    assert not cache.exists()
    cache.mkdir()
    (cache / "mlp.pt").write_bytes(b"not a checkpoint")
    model = load_mlp()
    assert evaluate(model) >= 0.95
    torch.load(cache / "mlp.pt", weights_only=True)  # rewritten with a readable file


def test_cache_written_through_a_symlink_keeps_the_link(no_shipped, tmp_path):
    _, cache = no_shipped
    cache.mkdir()
    elsewhere = tmp_path / "elsewhere.pt"
    elsewhere.write_bytes(b"damaged")
    (cache / "mlp.pt").symlink_to(elsewhere)
    model = load_mlp()
    assert (cache / "mlp.pt").is_symlink()  # the package's one safe writer follows the link
    saved = torch.load(elsewhere, weights_only=True)
    assert all(torch.equal(saved[k], v) for k, v in model.state_dict().items())
    assert sorted(p.name for p in cache.iterdir()) == ["mlp.pt"]


def test_unwritable_cache_warns_but_returns_model(no_shipped, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv(ckpt.CACHE_ENV, str(blocker / "sub"))
    with pytest.warns(RuntimeWarning, match=r"^load_model: trained 'mlp' but could not cache"):
        model = load_mlp()
    assert isinstance(model, DigitsMLP)


def test_corrupt_shipped_checkpoint_is_reported(no_shipped):
    empty, _ = no_shipped
    (empty / "cnn.pt").write_bytes(b"garbage")
    with pytest.raises(
        RuntimeError,
        match=r"^load_model: the shipped checkpoint .*cnn\.pt is not "
        r"a readable weights-only state_dict file \(UnpicklingError\); regenerate "
        r"it with `python -m prune_explorer\.demo`",
    ):
        load_cnn()


def test_mismatched_shipped_checkpoint_is_reported(no_shipped):
    empty, _ = no_shipped
    torch.save(DigitsMLP().state_dict(), empty / "cnn.pt")
    pattern = (
        r"^load_model: the shipped checkpoint .*cnn\.pt does not fit DigitsCNN "
        r"\(Error\(s\) in loading state_dict .*features\.0\.weight"
    )
    with pytest.raises(RuntimeError, match=pattern):
        load_cnn()


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(ckpt.CACHE_ENV, str(tmp_path / "mine"))
    assert demo.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(ckpt.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert demo.cache_dir() == tmp_path / "xdg" / "prune_explorer"


# --------------------------------------------------------------------------- slow


@pytest.mark.slow
def test_build_checkpoints_is_deterministic(tmp_path):
    first = demo.build_checkpoints(tmp_path / "a")
    second = demo.build_checkpoints(tmp_path / "b")
    assert sorted(first) == ["cnn", "mlp"]
    for name in first:
        assert first[name].read_bytes() == second[name].read_bytes()
        model = MODELS[name][0]()
        model.load_state_dict(torch.load(first[name], weights_only=True))
        assert evaluate(model) >= 0.95
