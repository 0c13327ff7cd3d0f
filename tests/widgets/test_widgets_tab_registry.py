"""The explorer's tabs are one list (``widgets/tabs/registry.py``): a new tab is one new pane
class and one line there; the explorer builds it, shows it, refreshes, flushes and closes it."""

from __future__ import annotations

import ipywidgets as widgets
import pytest
import torch

from prune_explorer.widgets import TAB_TITLES, Explorer
from prune_explorer.widgets.parts.pane import Pane
from prune_explorer.widgets.tabs import registry
from prune_explorer.widgets.tabs.registry import OPTIONS, TABS, Part, Tab


class Probe(Pane):
    """A pane that records what the explorer asked of it."""

    def __init__(self, explorer, *, train=None, dpi=None) -> None:
        self.ex = explorer
        self.given = {"train": train, "dpi": dpi}
        self.calls: list[str] = []
        self.box = explorer.ui.add("probe", widgets.HTML("probe"))

    def invalidate(self) -> None:
        self.calls.append("invalidate")

    def flush(self) -> None:
        self.calls.append("flush")

    def close(self) -> None:
        self.calls.append("close")


def model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 2))


def test_the_titles_are_read_from_the_one_list():
    assert tuple(tab.title for tab in TABS) == TAB_TITLES
    ex = Explorer(model(), debounce=None)
    try:
        assert ex.ui.tabs.titles == TAB_TITLES
        for tab, child in zip(TABS, ex.ui.tabs.children, strict=True):
            assert ex.ui[f"{tab.name}_tab"] is child
            for part in tab.parts:
                assert isinstance(ex.panes[part.name], part.factory)
                assert getattr(ex, f"{part.name}_pane") is ex.panes[part.name]
        commit = ex.ui.commit_tab  # two panes, one under the other
        assert commit.children == (ex.commit_pane.box, ex.shrink_pane.box)
    finally:
        ex.close()


def test_a_new_tab_is_one_line(monkeypatch):
    probe_tab = Tab("Probe", Part("probe", Probe, needs=("train", "dpi")))
    monkeypatch.setattr(registry, "TABS", (*TABS, probe_tab))
    monkeypatch.setattr("prune_explorer.widgets.explorer.TABS", registry.TABS)
    monkeypatch.setattr("prune_explorer.widgets.explorer.TAB_TITLES",
                        tuple(tab.title for tab in registry.TABS))

    def train(model, epochs):
        return None

    ex = Explorer(model(), debounce=None, train=train, dpi=90)
    probe = ex.probe_pane
    assert ex.ui.tabs.titles[-1] == "Probe"
    assert ex.ui.probe_tab is probe.box
    assert probe.given == {"train": train, "dpi": 90}
    assert not ex.shows(probe)
    probe.calls.clear()
    ex.ui.tabs.selected_index = len(registry.TABS) - 1
    assert ex.shows(probe)
    assert not ex.shows(ex.history_pane)
    assert probe.calls == ["invalidate"]  # chosen
    ex.ui.apply.click()
    assert probe.calls[-1] == "invalidate"  # the session changed
    ex.flush()
    assert probe.calls[-1] == "flush"
    ex.close()
    assert probe.calls[-1] == "close"


def test_a_part_names_an_identifier_and_needs_known_options():
    with pytest.raises(ValueError, match=r"Part: name must be an identifier; got 'fine-tune'"):
        Part("fine-tune", Probe)
    with pytest.raises(ValueError, match=r"Part 'probe': needs must be among .*got \['colour'\]"):
        Part("probe", Probe, needs=("colour",))
    with pytest.raises(ValueError, match="Tab 'Empty': give at least one Part; got none"):
        Tab("Empty")
    assert "train" in OPTIONS
    assert repr(Tab("Probe", Part("probe", Probe, needs=("train",)))) == (
        "Tab('Probe', Part('probe', Probe, needs=('train',)))")
