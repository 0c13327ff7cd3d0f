"""A step's tie note is what the core's own selection found on the way.

While a session step runs, :func:`prune_explorer.prune.engine.cuts_found` collects, from every
selection the core makes, whether a tie straddled its cut (:class:`engine.Straddle`); the note
(``Step.ties``) is read off that instead of a second look at the model's tensors. These tests
run steps on tie-heavy weights, on the CPU path and on the device path, and check that the
core said something for every step and that what it said is what the look at the tensors
finds (the note without the core's word).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from prune_explorer.prune import _select, _select_device, engine
from prune_explorer.session import Session
from prune_explorer.session.parts import stepping as journal


def _weights(shape: tuple[int, ...], kind: str, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=g) * 0.02
    if kind == "grid":  # ~300 entries per value: ties at almost every cut
        w = (w * 3000).round() / 3000
    elif kind == "coarse":  # a handful of values
        w = (w * 50).round() / 50
    return w.to(dtype)


def _model(rows: int, kind: str, dtype: torch.dtype) -> nn.Module:
    model = nn.Sequential(nn.Linear(rows, 300), nn.Linear(300, 200), nn.Linear(200, 50))
    with torch.no_grad():
        for i, layer in enumerate(model):
            layer.weight.copy_(_weights(tuple(layer.weight.shape), kind, torch.float32, i))
    return model.to(dtype)


@pytest.fixture
def notes(monkeypatch):
    """Every (method, note from the core, note looked up, straddles the core recorded)."""
    seen = []
    real = journal.note_ties

    def both(model, step, before, found, cuts):
        fast = real(model, step, before, found, cuts)
        slow = real(model, step, before, found,
                    [c for c in cuts if not isinstance(c, engine.Straddle)])
        said = [c for c in cuts if isinstance(c, engine.Straddle)]
        seen.append((step.method, fast, slow, len(said)))
        return fast

    monkeypatch.setattr(journal, "note_ties", both)
    return seen


STEPS = [
    ("0.weight", "l1_unstructured", {"amount": 0.3}),
    ("0.weight", "l1_unstructured", {"amount": 0.5}),  # on top: the survivors
    ("1.weight", "random_unstructured", {"amount": 0.4, "seed": 3}),
    ("2.weight", "l1_unstructured", {"amount": 0.77}),
    (None, "global l1", {"amount": 0.45}),
    (None, "global l1", {"amount": 0.6}),
    (None, "global random", {"amount": 0.5, "seed": 1}),
]


def _run(s: Session, targets: list[str]) -> None:
    for target, method, kw in STEPS:
        if target is None:
            inner = "l1_unstructured" if method == "global l1" else "random_unstructured"
            s.apply_global(targets, inner, **kw)
        else:
            s.apply(target, method, **kw)


@pytest.mark.parametrize("device_path", [False, True], ids=["cpu-path", "device-path"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("kind", "rows"), [("grid", 100), ("coarse", 100), ("plain", 100),
                                            ("grid", 600)])
def test_the_cores_word_is_the_looked_up_note(notes, device_path, dtype, kind, rows):
    model = _model(rows, kind, dtype)
    targets = ["0.weight", "1.weight", "2.weight"]
    with _select_device.forced(device_path):
        s = Session(model)
        _run(s, targets)
    assert len(notes) >= 4  # global L1 on the CPU path may come from the cached key histograms
    for method, fast, slow, said in notes:
        assert said == 1, method  # the core said, once per step
        assert fast == slow, (method, fast, slow)


def test_both_answers_occur(notes):
    """The comparison above sees ties split and not split (bf16 grid ties almost always
    straddle; plain fp32 weights almost never)."""
    for dtype, kind in ((torch.bfloat16, "grid"), (torch.float32, "plain")):
        with _select_device.forced():
            _run(Session(_model(100, kind, dtype)), ["0.weight", "1.weight", "2.weight"])
    found = {fast for _, fast, _, _ in notes}
    assert found == {"lowest", None}


def test_above_small_the_selection_brackets(notes):
    """The 600-row model's first layer is above SMALL entries: on the device path its
    selection is the direct route (``topk``), not the sort, and it still reports."""
    assert _select.SMALL < 600 * 300
    with _select_device.forced():
        s = Session(_model(600, "grid", torch.bfloat16))
        s.apply("0.weight", "l1_unstructured", amount=0.4)
    assert notes == [("l1_unstructured", "lowest", "lowest", 1)]
