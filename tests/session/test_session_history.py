"""Per-tensor history, stored as bits, with masks/diffs/counts at every step."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from helpers.session import convnet, mlp
from prune_explorer import prune
from prune_explorer.session import HistoryEntry, PackedMask, Session, Step, TensorHistory

TARGET = "features.2.weight"


def _run_and_record(s, actions):
    """Apply actions; after each, clone the real mask buffer of TARGET (the expected history)."""
    recorded = [torch.ones(s.info(TARGET).shape, dtype=torch.bool)]
    steps = []
    module = s.model.get_submodule("features.2")
    for kind, args, kwargs in actions:
        step = getattr(s, kind)(*args, **kwargs)
        steps.append(step)
        recorded.append(module.weight_mask.detach().clone() != 0)
    return steps, recorded


ACTIONS = [
    ("apply", (TARGET, "ln_structured"), {"amount": 1, "n": 2, "dim": 0}),
    ("apply", (TARGET, "random_unstructured"), {"amount": 0.25}),
    ("apply_global", (["features.0.weight", TARGET],), {"amount": 0.3}),
    ("apply", (TARGET, "identity"), {}),
    ("apply", (TARGET, "l1_unstructured"), {"amount": 5}),
]


def test_history_records_steps_settings_seeds_and_masks():
    s = Session(convnet(), seed=1)
    steps, recorded = _run_and_record(s, ACTIONS)
    history = s.history(TARGET)
    assert isinstance(history, TensorHistory)
    assert len(history) == len(ACTIONS) + 1
    assert history[0].step is None
    assert history[0].method == "initial"
    assert history.steps == tuple(steps)
    assert [e.method for e in history] == [
        "initial", "ln_structured", "random_unstructured", "global_unstructured", "identity",
        "l1_unstructured",
    ]
    assert history[2].step.seed is not None  # random step records its seed
    assert history[1].step.seed is None
    assert dict(history[1].step.settings) == {"amount": 1, "n": 2, "dim": 0}
    for k, expected in enumerate(recorded):
        assert torch.equal(history.mask(k), expected), k
        assert torch.equal(history[k].mask.unpack(), expected), k


def test_newly_pruned_counts_and_fractions_match_the_recorded_masks():
    s = Session(convnet(), seed=2)
    _, recorded = _run_and_record(s, ACTIONS)
    history = s.history(TARGET)
    numel = recorded[0].numel()
    for k in range(1, len(recorded)):
        expected = recorded[k - 1] & ~recorded[k]
        assert torch.equal(history.newly_pruned(k), expected), k
    assert torch.equal(history.newly_pruned(-1), recorded[-2] & ~recorded[-1])
    assert not history.newly_pruned(0).any()  # nothing was pruned when the session found it
    counts = [int((~m).sum()) for m in recorded]
    assert history.pruned_counts() == counts
    assert history.fractions() == pytest.approx([c / numel for c in counts])
    with pytest.raises(IndexError):
        history.newly_pruned(len(recorded))


def test_history_frame_matches_an_independently_built_frame():
    s = Session(convnet(), seed=3)
    steps, recorded = _run_and_record(s, ACTIONS)
    numel = recorded[0].numel()
    rows = [{"step": 0, "method": "initial", "settings": {}, "seed": None, "pruned": 0,
             "sparsity": 0.0, "newly_pruned": 0}]
    for k, step in enumerate(steps, start=1):
        pruned = int((~recorded[k]).sum())
        rows.append({
            "step": k,
            "method": step.method,
            "settings": dict(step.settings),
            "seed": step.seed,
            "pruned": pruned,
            "sparsity": pruned / numel,
            "newly_pruned": int((recorded[k - 1] & ~recorded[k]).sum()),
        })
    expected = pd.DataFrame(rows, columns=["step", "method", "settings", "seed", "pruned",
                                           "sparsity", "newly_pruned"])
    expected["seed"] = pd.Series([row["seed"] for row in rows], dtype=object)  # exact ints
    pd.testing.assert_frame_equal(s.history(TARGET).to_frame(), expected)


def test_history_frame_keeps_large_seeds_exact():
    s = Session(nn.Sequential(nn.Linear(4, 4)))
    seed = 2**63 - 3  # a float64 column would round it to 2**63
    s.apply("0.weight", "random_unstructured", amount=0.5, seed=seed)
    frame = s.history("0.weight").to_frame()
    assert frame["seed"].tolist() == [None, seed]
    assert "9223372036854775805" in repr(frame[["seed"]])


def test_history_is_bit_packed_not_float():
    model = torch.nn.Sequential(torch.nn.Linear(1000, 999))
    s = Session(model)
    for amount in (0.1, 0.2, 0.3):
        s.apply("0.weight", "l1_unstructured", amount=amount)
    numel = 1000 * 999
    for entry in s.history("0.weight")[1:]:
        assert isinstance(entry.mask, PackedMask)
        assert entry.mask.nbytes == math.ceil(numel / 8)
        assert entry.mask._data.dtype == torch.uint8
    # the initial all-ones mask stores no bits at all
    assert s.history("0.weight")[0].mask.nbytes == 0


def test_global_step_appears_in_every_target_history():
    s = Session(convnet())
    step = s.apply_global(["features.0.weight", "classifier.weight"], amount=0.5)
    assert s.history("features.0.weight").steps == (step,)
    assert s.history("classifier.weight").steps == (step,)
    assert s.history(TARGET).steps == ()


def test_history_starts_from_a_mask_found_on_the_model():
    model = mlp()
    prune.l1_unstructured(model[0], "weight", amount=4)
    found = model[0].weight_mask.clone() != 0
    s = Session(model)
    s.apply("0.weight", "l1_unstructured", amount=3)
    history = s.history("0.weight")
    assert torch.equal(history.mask(0), found)
    assert history.pruned_counts() == [4, 7]
    assert torch.equal(history.newly_pruned(0), ~found)


def test_history_is_a_snapshot_and_undo_drops_the_entry():
    s = Session(mlp())
    s.apply("0.weight", "l1_unstructured", amount=3)
    before = s.history("0.weight")
    s.apply("0.weight", "l1_unstructured", amount=3)
    assert len(before) == 2
    assert len(s.history("0.weight")) == 3
    s.undo()
    assert s.history("0.weight").pruned_counts() == [0, 3]


def test_history_repr_and_entry_properties():
    s = Session(mlp())
    s.apply("0.weight", "ln_structured", amount=1, n=1, dim=0)  # 1 of 5 rows of 6
    h = s.history("0.weight")
    assert repr(h) == (
        "TensorHistory('0.weight', shape=(5, 6), 2 entries: initial 0%, ln_structured 20%)"
    )
    entry = h[1]
    assert isinstance(entry, HistoryEntry)
    assert (entry.index, entry.pruned, entry.sparsity) == (1, 6, pytest.approx(0.2))


def test_history_of_unknown_tensor_names_the_problem():
    s = Session(mlp())
    with pytest.raises(ValueError, match=r"Session.history: name '0.wieght' is not a prunable "
                                         r"tensor of this model; did you mean '0.weight'"):
        s.history("0.wieght")


# -- PackedMask -------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (8,), (9,), (3, 5), (2, 3, 4, 5)])
def test_packed_mask_round_trip_and_numpy_oracle(shape):
    generator = torch.Generator().manual_seed(sum(shape) + len(shape))
    dense = torch.rand(shape, generator=generator) > 0.4
    packed = PackedMask.from_tensor(dense.float())
    assert packed.shape == shape
    assert torch.equal(packed.unpack(), dense)
    assert packed.kept == int(dense.sum())
    assert packed.pruned == dense.numel() - int(dense.sum())
    assert packed.to_bytes() == np.packbits(dense.numpy().reshape(-1)).tobytes()
    assert PackedMask.from_bytes(shape, packed.to_bytes()) == packed
    assert hash(PackedMask.from_bytes(shape, packed.to_bytes())) == hash(packed)


def test_packed_mask_ones_equals_an_all_true_mask():
    ones = PackedMask.ones((3, 3))
    assert ones == PackedMask.from_tensor(torch.ones(3, 3))
    assert ones.to_bytes() == np.packbits(np.ones(9, dtype=bool)).tobytes()
    assert torch.equal(ones.unpack(torch.float16), torch.ones(3, 3, dtype=torch.float16))
    assert ones != PackedMask.from_tensor(torch.eye(3))


def test_packed_mask_from_bytes_rejects_bad_input():
    with pytest.raises(ValueError, match=r"a mask of shape \(3, 3\) needs 2 bytes of bits; got 1"):
        PackedMask.from_bytes((3, 3), b"\xff")
    with pytest.raises(ValueError, match="the 7 padding bits after the last entry must be 0"):
        PackedMask.from_bytes((3, 3), b"\xff\xc0")


def test_step_with_packed_mask_is_hashable_and_compares_by_value():
    a = Step("custom_from_mask", "w", mask=torch.tensor([1.0, 0.0, 1.0]))
    b = Step("custom_from_mask", "w", mask=torch.tensor([True, False, True]))
    c = Step("custom_from_mask", "w", mask=torch.tensor([True, True, True]))
    assert a == b
    assert hash(a) == hash(b)
    assert a != c
