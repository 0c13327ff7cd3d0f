"""``Session.preview_picture``: one call, under the lock, gives everything a picture of a
previewed step is drawn from -- and it is exactly what the separate session calls give (the
masks of ``preview``/``preview_global`` bit for bit, ``preview_cells``, ``kept_count``,
``alive``), while building no mask on the slider path. No widgets involved.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from prune_explorer.session import InvalidStepError, Session
from prune_explorer.session.analysis.frames import collapsed_layers
from prune_explorer.session.preview.masks import LocalPreview
from prune_explorer.session.preview.picture import (
    MaskSummaries,
    MaskSummary,
    PreviewPicture,
    StepCounts,
    StepRequest,
)

ROWS = np.array([0, 90, 250, 400])
COLS = np.array([0, 7, 333, 600])
ZEROS_AT = range(5, 240000, 9001)  # flat indices of 0.weight set exactly to 0

CASES = [
    ("l1_unstructured", {"amount": 0.3}),
    ("random_unstructured", {"amount": 0.4}),
    ("ln_structured", {"amount": 0.25, "n": 2, "dim": 0}),
    ("ln_structured", {"amount": 0.5, "n": 1, "dim": 1}),
    ("random_structured", {"amount": 0.3, "dim": 1}),
    ("global_unstructured", {"pruning_method": "l1_unstructured", "amount": 0.45}),
    ("identity", {}),
]
IDS = [m + "".join(f"-{k}{v}" for k, v in s.items() if k != "amount") for m, s in CASES]


def _session(zeros: bool = False) -> Session:
    # Above the size the session caches orders for; a few exact zeros on request.
    g = torch.Generator().manual_seed(3)
    model = nn.Sequential(nn.Linear(600, 400), nn.Linear(400, 300, bias=False))
    with torch.no_grad():
        for layer in model:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=g))
        if zeros:
            model[0].weight.view(-1)[list(ZEROS_AT)] = 0.0
    return Session(model)


def _request(method: str, settings: dict) -> StepRequest:
    targets = ("0.weight", "1.weight") if method == "global_unstructured" else ()
    return StepRequest("0.weight", method, dict(settings), targets)


def _edges(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    assert shape == (400, 600)
    return ROWS, COLS


def _per_cell(mask: torch.Tensor) -> np.ndarray:
    m = mask.reshape(mask.shape[0], -1).to(torch.int64)
    return np.array([[int(m[r0:r1, c0:c1].sum()) for c0, c1 in itertools.pairwise(COLS)]
                     for r0, r1 in itertools.pairwise(ROWS)])


def _separate_calls(s: Session, request: StepRequest) -> dict[str, torch.Tensor]:
    # What the Explore pane asked the session for, call by call, before preview_picture.
    if request.is_global:
        masks = s.preview_global(list(request.targets), request.settings["pruning_method"],
                                 amount=request.settings["amount"])
        return {n: masks[n] for n in request.targets}
    return {request.target: s.preview(request.target, request.method, **request.settings)}


@pytest.mark.parametrize("zeros", [False, True], ids=["no-zeros", "few-zeros"])
@pytest.mark.parametrize(("method", "settings"), CASES, ids=IDS)
def test_the_picture_is_what_the_separate_calls_give(method, settings, zeros):
    s = _session(zeros)
    request = _request(method, settings)
    target = request.target
    picture = s.preview_picture(request, cell_edges=_edges)
    expected = _separate_calls(s, request)
    assert set(picture.masks) == set(expected)
    for name, mask in expected.items():  # bit for bit, dtype included
        got = picture.masks[name]
        assert got.dtype == mask.dtype
        assert torch.equal(got, mask)
    mask = expected[target]
    assert picture.previewed
    assert torch.equal(picture.mask(), mask)
    alive_after = s.alive(target, mask)
    assert torch.equal(picture.shown().to(torch.bool), alive_after)
    # the counts now are the session's
    assert picture.before.kept_count == s.kept_count(target)
    assert picture.now.kept_count == s.kept_count(target, alive=True)
    assert torch.equal(picture.before.kept, s.mask(target))
    assert torch.equal(picture.now.kept, s.alive(target))
    assert picture.unmasked_zeros == (len(ZEROS_AT) if zeros else 0)
    assert picture.zeros_free is not zeros
    # cells, where the session has them, are preview_cells' and the shown mask's per cell
    cells = s.preview_cells(target, method, row_edges=ROWS, col_edges=COLS,
                            targets=list(request.targets) or None, alive=zeros, **settings)
    if cells is None:
        assert picture.cells is None
        assert picture.mask_kept is None
    else:
        np.testing.assert_array_equal(picture.cells, cells)
        np.testing.assert_array_equal(picture.cells, _per_cell(alive_after))
        assert picture.mask_kept == int(mask.count_nonzero())
    if picture.now_cells is not None:
        np.testing.assert_array_equal(picture.now_cells, _per_cell(s.alive(target)))
    # the step's counts: as measured from the masks themselves
    shown_kept = int(alive_after.sum())
    counts = picture.counts(shown_kept)
    others = {n: (MaskSummary.of(s.mask(n)), int(m.count_nonzero()))
              for n, m in expected.items() if n != target}
    stats = StepCounts.measure(MaskSummary.of(s.mask(target)), mask, request, others=others,
                               module_type="Linear")
    numel = mask.numel()
    assert counts.stats == replace(stats, pruned_before=numel - s.kept_count(target, alive=True),
                                   pruned_after=numel - shown_kept)
    kept_after = {n: int(m.count_nonzero()) for n, m in expected.items()}
    assert dict(counts.kept_after) == kept_after
    sizes = {n: s.info(n).numel for n in expected}
    assert counts.collapsed == tuple(collapsed_layers(kept_after, sizes))
    assert s.steps == ()  # nothing changed


@pytest.mark.parametrize(("method", "settings"),
                         [c for c in CASES if c[0] not in ("identity",)],
                         ids=[i for i in IDS if i != "identity"])
def test_a_slider_picture_builds_no_mask(method, settings, monkeypatch):
    from prune_explorer.session.preview import global_cut, order_cache, slice_scores

    s = _session()
    summaries = MaskSummaries(s)
    s.preview_picture(_request(method, settings), cell_edges=_edges, summaries=summaries)
    built = []
    for owner in (order_cache.TensorOrder, slice_scores.SliceScores, global_cut.GlobalCut):
        real = owner.mask
        monkeypatch.setattr(owner, "mask", lambda self, *a, real=real, **k:
                            built.append(type(self).__name__) or real(self, *a, **k))
    moved = _request(method, {**settings, "amount": 0.6})
    picture = s.preview_picture(moved, cell_edges=_edges, summaries=summaries)
    assert picture.cells is not None
    counts = picture.counts(int(picture.cells.sum()))
    assert built == []  # picture, counts and collapse warning from counts alone
    assert "mask not built" in repr(picture)
    assert counts.stats is not None
    assert counts.stats.amount == 0.6
    assert picture.before is summaries.kept("0.weight")  # read once per state
    mask = picture.mask()
    assert len(built) == 1  # built on reading, once
    assert torch.equal(mask, moved.preview(s))  # the preview's, bit for bit


def test_without_cell_edges_the_shown_mask_is_read_for_pooling():
    s = _session()
    picture = s.preview_picture(_request("l1_unstructured", {"amount": 0.3}))
    assert picture.cells is None
    assert picture.now_cells is None
    assert picture.mask_kept is None
    assert picture.shown.computed  # read under the lock: the picture pools it
    assert isinstance(picture.masks, LocalPreview)
    assert picture.reader is not None  # the zoom reads windows from the order alone
    window = picture.reader(slice(3, 9), slice(100, 140))
    assert window is not None
    assert torch.equal(window, picture.mask()[3:9, 100:140])


def test_a_tensor_outside_the_global_targets_shows_its_current_mask():
    s = _session()
    s.apply("0.weight", "l1_unstructured", amount=0.2)
    request = StepRequest("0.weight", "global_unstructured",
                          {"pruning_method": "l1_unstructured", "amount": 0.999},
                          ("1.weight",))
    picture = s.preview_picture(request, cell_edges=_edges)
    assert not picture.previewed
    assert picture.mask is None
    assert picture.cells is None
    assert torch.equal(picture.shown(), s.alive("0.weight"))
    counts = picture.counts(int(picture.shown().sum()))
    assert counts.stats is None
    kept = int(s.preview_global(["1.weight"], amount=0.999)["1.weight"].count_nonzero())
    assert dict(counts.kept_after) == {"1.weight": kept}
    assert counts.collapsed == ("1.weight",)  # the step empties the other layer
    assert repr(picture) == ("PreviewPicture('0.weight', global_unstructured, "
                             "shape=(400, 600), pooled mask, not a target)")


def test_a_refused_step_raises_the_sessions_error_and_changes_nothing():
    s = _session()
    with pytest.raises(InvalidStepError, match="amount"):
        s.preview_picture(_request("l1_unstructured", {"amount": 1.5}), cell_edges=_edges)
    assert s.steps == ()


def test_summaries_start_again_when_the_stamp_changes():
    s = _session()
    changes = [0]
    summaries = MaskSummaries(s, stamp=lambda: changes[0])
    first = summaries.kept("0.weight")
    assert first.kept_count == 240000
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    assert summaries.kept("0.weight") is first  # same stamp: the caller said nothing changed
    changes[0] += 1
    assert summaries.kept("0.weight").kept_count == 120000
    summaries.clear()
    assert repr(summaries) == "MaskSummaries(0 kept, 0 alive)"


def test_the_session_method_is_the_module_function():
    s = _session()
    picture = s.preview_picture(_request("l1_unstructured", {"amount": 0.3}), cell_edges=_edges)
    assert isinstance(picture, PreviewPicture)
    assert repr(picture) == ("PreviewPicture('0.weight', l1_unstructured, shape=(400, 600), "
                             "3x3 cell counts, mask not built)")
