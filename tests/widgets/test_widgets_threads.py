"""The explorer's background previews share the session with code in notebook cells.

The session's own lock makes each public call atomic, so a notebook cell calling ``apply`` or
``undo`` waits for a preview that is half-way through reading the model (and vice versa). A pause
is injected inside the preview, at the point where it has located the tensor but not yet read it,
so that the interleaving that used to fail happens every time.
"""

from __future__ import annotations

import threading

import torch

from helpers.widgets import mlp
from prune_explorer.session import Session
from prune_explorer.session.parts import previewing as session_module
from prune_explorer.widgets.parts.status import StatusBar


def test_apply_from_the_main_thread_waits_for_a_preview_running_on_another_thread(monkeypatch):
    # The preview checks "60 entries are still unpruned" (96 are), pauses, then computes the
    # mask. Without the session's lock the main thread's apply (which leaves 48) lands in the
    # pause and the preview fails half-way; with it, the apply waits for the preview.
    s = Session(mlp())
    real = session_module.local_masks
    entered, resumed = threading.Event(), threading.Event()

    def paused(module, tensor_name, step, *rest):
        if threading.current_thread().name == "preview-worker":
            entered.set()
            resumed.wait(timeout=0.3)  # the main thread gets every chance to interfere here
        return real(module, tensor_name, step, *rest)

    monkeypatch.setattr(session_module, "local_masks", paused)
    expected = s.preview("0.weight", "l1_unstructured", amount=60)
    for _ in range(3):
        entered.clear()
        resumed.clear()
        got: list[object] = []

        def preview(got: list[object] = got) -> None:
            try:
                got.append(s.preview("0.weight", "l1_unstructured", amount=60))
            except Exception as err:  # what the explorer's worker would show
                got.append(err)

        worker = threading.Thread(target=preview, name="preview-worker")
        worker.start()
        assert entered.wait(timeout=10)
        s.apply("0.weight", "l1_unstructured", amount=0.5)  # a notebook cell, meanwhile
        resumed.set()
        worker.join(timeout=10)
        assert isinstance(got[0], torch.Tensor), got[0]
        assert torch.equal(got[0], expected)
        s.undo()


class _SlowSourceBar(StatusBar):
    """A status bar whose ``clear`` pauses between reading who wrote the message and writing."""

    checked = threading.Event()
    main_wrote = threading.Event()

    @property
    def source(self) -> str:
        value = self._source
        if threading.current_thread() is not threading.main_thread() and self._armed:
            self.checked.set()
            self.main_wrote.wait(timeout=0.3)  # the worker has read; now it would write
        return value

    @source.setter
    def source(self, value: str) -> None:
        self._source = value


def test_status_clear_from_a_worker_never_wipes_a_message_the_main_thread_just_wrote():
    bar = _SlowSourceBar()
    bar._armed = False
    bar.show("error", "Preview failed: old", source="preview")
    bar._armed = True
    worker = threading.Thread(target=lambda: bar.clear(source="preview"))
    worker.start()
    assert bar.checked.wait(timeout=10)
    bar.show("error", "Apply failed: the real error")  # main thread, after the worker's check
    bar.main_wrote.set()
    worker.join(timeout=10)
    assert (bar.kind, bar.text) == ("error", "Apply failed: the real error")
