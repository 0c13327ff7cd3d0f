"""Ctrl-C just as a button's action returns: the action is done, so the status line says it is
done (and the interrupt is raised after it), never "<action> failed: interrupted".

The interrupt is pressed at each line event from the last line of ``Explorer._atomically`` (the
action and its redraw are complete) to the end of the click, with the test helper that delivers
it as CPython delivers a real SIGINT.
"""

from __future__ import annotations

from types import FrameType
from typing import Any

import torch
from torch import nn

from helpers.interrupts import Interrupter
from prune_explorer.widgets import Explorer


class _Recorder(Interrupter):
    """Never fires; remembers the line count at the last line ``Explorer._atomically`` ran."""

    last_atomic_line = 0

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        out = super()._local(frame, event, arg)
        if event == "line" and frame.f_code is Explorer._atomically.__code__:
            self.last_atomic_line = self.count
        return out


def _explorer() -> Explorer:
    torch.manual_seed(0)
    ex = Explorer(nn.Sequential(nn.Linear(6, 4)), debounce=None)
    ex.ui.amount.value = 0.5
    ex.apply()
    return ex


def _undo(ex: Explorer, interrupter: Interrupter) -> bool:
    with interrupter:
        try:
            ex.undo()
        except KeyboardInterrupt:
            return True
    return False


def test_an_interrupt_after_the_action_returned_reports_it_done():
    ex = _explorer()
    recorder = _Recorder(0)
    _undo(ex, recorder)
    done_text = ex.status.text
    ex.close()
    assert done_text.startswith("Undid")
    first, last = recorder.last_atomic_line, recorder.count
    assert 0 < first <= last
    fired = 0
    for n in range(first, min(last, first + 12) + 1):
        ex = _explorer()
        try:
            interrupter = Interrupter(n)
            raised = _undo(ex, interrupter)
            assert raised == interrupter.fired
            fired += interrupter.fired
            assert ex.session.steps == ()  # undone: the interrupt came after the action
            assert (ex.status.kind, ex.status.text) == ("ok", done_text), n
        finally:
            ex.close()
    assert fired  # the points checked did interrupt
