"""Issue 11: History scrub costs what is on screen.

Each step's newly pruned count is read off the packed bits (no mask unpacked per table row), and
a position of the slider already visited in this session state shows its picture again without
unpacking, pooling or rendering; any session change (apply, undo, commit, reset) draws afresh.
"""

from __future__ import annotations

import pytest
import torch

import prune_explorer.widgets.tabs.history as history_module
from helpers.widgets import mlp
from prune_explorer.session import PackedMask, Session
from prune_explorer.widgets import Explorer

HISTORY = 1


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_pruned_since_counts_what_unpacking_counts(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    g = torch.Generator().manual_seed(0)
    masks = [torch.ones(37, 29, dtype=torch.bool)]
    for _ in range(4):  # shrinking, plus one mask that revives entries
        masks.append(masks[-1] & (torch.rand(37, 29, generator=g) > 0.3))
    masks.append(torch.rand(37, 29, generator=g) > 0.5)
    packed = [PackedMask.from_tensor(m.to(device)) for m in masks]
    for before, b in zip(masks, packed, strict=True):
        for after, a in zip(masks, packed, strict=True):
            assert a.pruned_since(b) == int((before & ~after).sum())
    with pytest.raises(ValueError, match="before must have shape"):
        packed[0].pruned_since(PackedMask.ones((3,)))


def test_history_frame_counts_match_the_unpacked_masks():
    s = Session(mlp())
    for amount in (0.2, 0.3, 0.1):
        s.apply("0.weight", "l1_unstructured", amount=amount)
    s.apply("0.weight", "ln_structured", amount=1, n=2, dim=0)
    s.commit(["0.weight"])
    h = s.history("0.weight")
    frame = h.to_frame()
    assert [int(h.newly_pruned(k).sum()) for k in range(len(h))] == list(frame["newly_pruned"])
    assert [h.newly_pruned_count(k) for k in range(len(h))] == list(frame["newly_pruned"])


def test_visited_positions_come_back_without_drawing_until_the_session_changes(monkeypatch):
    ex = Explorer(mlp(), debounce=None)
    for _ in range(3):
        ex.ui.apply.click()
    ex.ui.tabs.selected_index = HISTORY
    shown = {}
    for k in (3, 2, 1, 0):
        ex.ui.history.value = k
        shown[k] = (ex.ui.history_image.value, ex.ui.history_label.value)
    drawn = []
    real = history_module.HistoryPane._draw
    monkeypatch.setattr(history_module.HistoryPane, "_draw",
                        lambda *a, **kw: drawn.append(1) or real(*a, **kw))
    history = ex.session.history("0.weight")
    for k in (1, 2, 3, 2, 0):
        ex.ui.history.value = k
        assert (ex.ui.history_image.value, ex.ui.history_label.value) == shown[k]
        assert ex.history_pane.shown == k
        assert torch.equal(ex.history_pane.newly_pruned, history.newly_pruned(k))
        assert f'data-row="{k}"' in ex.ui.history_steps.value
    assert drawn == []  # every picture came from the positions already visited
    ex.ui.undo.click()  # a session change: the pictures of the old state are not reused
    assert ex.ui.history.value == 2
    assert drawn == [1]
    ex.ui.history.value = 1
    assert len(drawn) == 2
    history = ex.session.history("0.weight")
    assert torch.equal(ex.history_pane.newly_pruned, history.newly_pruned(1))
    ex.ui.method.value = "ln_structured"
    ex.ui.apply.click()  # the same number of entries again, but a different step 3
    ex.ui.history.value = 3
    assert "Ln-norm structured" in ex.ui.history_label.value  # the new step 3, not the old
    assert ex.ui.history_image.value != shown[3][0]
    ex.close()


# -- the picture of a first visit ---------------------------------------------------------------

def _cells(ex):
    plot = ex.history_pane.plot
    before = plot.pooled_before
    return plot.pooled, (None if before is None else before.kept - plot.pooled.kept)


def test_a_first_visit_draws_on_the_one_history_figure_with_the_exact_counts(monkeypatch):
    ex = Explorer(mlp(), debounce=None)
    ex.ui.amount.value = 0.3
    ex.ui.apply.click()
    ex.ui.method.value = "ln_structured"
    ex.ui.apply.click()
    monkeypatch.setattr(history_module, "make_figure",
                        lambda *a, **kw: pytest.fail("a new figure"))
    ex.ui.tabs.selected_index = HISTORY  # draws the last entry, 2
    history = ex.session.history("0.weight")
    figure = ex.history_pane.plot.figure
    for k in (2, 1, 0):  # each a first visit
        ex.ui.history.value = k
        after, newly = _cells(ex)
        assert ex.history_pane.plot.figure is figure  # one figure, reused
        assert int(after.kept.sum()) == history[k].mask.kept
        if k:  # the vermillion cells count exactly the entries step k pruned
            assert int(newly.sum()) == history.newly_pruned_count(k)
        else:  # found unpruned: the state alone, no step
            assert newly is None
            assert ex.history_pane.title.endswith("as the session found it\nsparsity 0.0%")
    ex.close()


def test_entries_pruned_when_found_are_highlighted_at_entry_0():
    from prune_explorer import prune

    model = mlp()
    prune.l1_unstructured(model[0], "weight", amount=0.4)
    ex = Explorer(model, debounce=None)
    ex.ui.tabs.selected_index = HISTORY
    ex.ui.history.value = 0
    _, newly = _cells(ex)
    assert int(newly.sum()) == int((model[0].weight_mask == 0).sum()) > 0
    ex.close()


def test_a_step_that_keeps_committed_zeros_is_drawn_with_its_revived_entries():
    ex = Explorer(mlp(), debounce=None)
    s = ex.session
    s.apply("0.weight", "l1_unstructured", amount=0.5)
    s.commit(["0.weight"])
    s.apply("0.weight", "random_unstructured", amount=0.2, seed=3)  # keeps some zeros
    ex.ui.tabs.selected_index = HISTORY
    history = s.history("0.weight")
    k = len(history) - 1
    ex.ui.history.value = k
    revived = int((~history.mask(k - 1) & history.mask(k)).sum())
    assert revived > 0
    assert [history.revived_count(j) for j in range(len(history))] == \
        [0] * k + [revived]  # counted on the packed bits
    plot = ex.history_pane.plot
    assert plot.revived_total == revived  # the diff picture, revived entries tinted
    assert ex.history_pane.title.startswith(f"0.weight · state after step {k}: random")
    ex.close()


def test_scrubbing_pools_each_entry_once_per_session_state(monkeypatch):
    ex = Explorer(mlp(), debounce=None)
    for _ in range(3):
        ex.ui.apply.click()
    pooled = []
    real = history_module.block_sums
    monkeypatch.setattr(history_module, "block_sums",
                        lambda a, *edges: pooled.append(int(a.sum())) or real(a, *edges))
    ex.ui.tabs.selected_index = HISTORY  # entry 3 and, as its "before", entry 2
    history = ex.session.history("0.weight")
    assert pooled == [history[2].mask.kept, history[3].mask.kept]
    ex.ui.history.value = 2  # entry 2 is pooled already: only entry 1
    ex.ui.history.value = 1  # only entry 0
    assert pooled[2:] == [history[1].mask.kept, history[0].mask.kept]
    ex.ui.undo.click()  # a new session state: pooled afresh
    assert len(pooled) == 6
    ex.close()
