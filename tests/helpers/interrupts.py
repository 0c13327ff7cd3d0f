"""Interrupt injection at every traced line, and the one snapshot of "the state" it is judged by.

:class:`Interrupter` is a ``sys.settrace`` tracer that counts line events in prune_explorer's own
source files and raises ``KeyboardInterrupt`` at the Nth one (CPython then unsets the tracer, so
exactly one interrupt lands). :func:`state_of` is everything "exactly as before or exactly as
after" covers: the model (named parameters with their identity and data, buffers, forward
pre-hooks with their contents, the pruned copies, the state_dict bytes), the history, the plan,
the journal (actions, commits, seed generator, open transactions, pending events), whether the
session's watch still agrees with the model, whether its lock is free, the change events a
subscriber received and the explorer's status line.

Identity is compared across separately built fixtures through labels: every Parameter and hook
object existing when a fixture is built gets the name it had then (:func:`labels_of`); objects
made later are ``"new"``.
"""

from __future__ import annotations

import dis
import inspect
import pickle
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch import nn

import prune_explorer

SOURCE = str(Path(prune_explorer.__file__).parent)


_RETURN = dis.opmap["RETURN_VALUE"]
_GENERATOR = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


_TARGETS: dict[Any, frozenset[int]] = {}


def _jumped_to(frame: FrameType) -> bool:
    """Whether the instruction a line event stopped at is a jump target: a line number that
    went down there is a loop jumping back, where CPython checks for signals (a ``with``
    block's exit, whose line is its ``with`` statement's, is not one: nothing is checked
    between the block's last instruction and its ``__exit__`` call)."""
    code = frame.f_code
    targets = _TARGETS.get(code)
    if targets is None:
        targets = _TARGETS[code] = frozenset(
            i.offset for i in dis.get_instructions(code) if i.is_jump_target)
    return frame.f_lasti in targets


class Interrupter:
    """``with Interrupter(n):`` presses Ctrl-C at the ``n``-th line event of prune_explorer code
    in the block (``n=0``: never; :attr:`count` then tells how many line events there were);
    ``Interrupter(n, then=k)`` presses it again at the ``k``-th line event after the first
    interrupt was delivered (an impatient user; ``then=0``: only count them, in :attr:`after`).
    ``also`` adds source files (or folders) whose lines count and where Ctrl-C may land too,
    e.g. torch's ``grad_mode.py``, to press it as a ``no_grad`` block's ``__exit__`` starts.

    The interrupt arrives as CPython delivers a real SIGINT: at the next point where the
    interpreter checks for signals -- a function starting (or a generator resuming), a call to
    a Python function returning to its caller, a loop jumping back -- in prune_explorer code,
    with the handler installed then called on the frame running there: Python's raises
    ``KeyboardInterrupt``; the session's (``session.interrupts``) raises it or holds it until
    its held section ends. (A line event itself is not such a point: between a ``with``
    block's last line and its ``__exit__`` call CPython never raises one.) An exception raised
    by a tracer unsets it; with ``then`` a profiler puts it back on the frames still running at
    the next call or return, so the line events of the rollback are seen.
    """

    def __init__(self, n: int, then: int | None = None, also: tuple[str, ...] = ()) -> None:
        self.n = n
        self.sources = (SOURCE, *also)  # whose line events count, where Ctrl-C lands
        self.then = then
        self.count = 0
        self.after = 0  # line events after the first interrupt (with ``then``)
        self.files: list[str] = []  # with n=0: the file of each line event
        self.functions: list[str] = []  # with n=0: the function (qualified name) of each
        self.armed = False
        self.fired = False  # the first interrupt was delivered
        self.fired_again = False
        self.where = ""
        self.where_again = ""
        self._lines: dict[int, int] = {}  # frame id -> last line (to see loops jump back)

    @property
    def _done(self) -> bool:
        return self.fired_again or (self.fired and self.then is None)

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self._done or not frame.f_code.co_filename.startswith(self.sources):
            return None
        # a function starts or a generator resumes with next() or send(): CPython checks here
        # (not when close() or throw() resume it: it goes straight to the exception)
        if self.armed and not (frame.f_code.co_flags & _GENERATOR and frame.f_lasti > 0):
            self._fire(frame, frame)
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self._done:
            return None
        if event == "line":
            last = self._lines.get(id(frame), -1)
            self._lines[id(frame)] = frame.f_lineno
            if self.armed and frame.f_lineno < last and _jumped_to(frame):  # a loop jumped back
                self._fire(frame, frame)
            elif not self.armed and not self.fired:
                self.count += 1
                self.armed = self.count == self.n
                if self.n == 0:  # a counting run: where each line event was
                    self.files.append(frame.f_code.co_filename)
                    self.functions.append(frame.f_code.co_qualname)
            elif not self.armed:
                self.after += 1
                self.armed = self.after == self.then
        elif event == "return" and self.armed and frame.f_back is not None and (
                frame.f_code.co_code[frame.f_lasti] == _RETURN):
            self._fire(frame, frame.f_back)  # checked in the caller once the call returned
        return self._local

    def _rearm(self, frame: FrameType, event: str, arg: Any) -> None:
        # the next call or return after a tracer raised: trace again, the running frames too
        sys.setprofile(None)
        if self._done:
            return
        sys.settrace(self._global)
        running: FrameType | None = frame
        while running is not None:
            if running.f_code.co_filename.startswith(self.sources):
                running.f_trace = self._local
            running = running.f_back

    def _fire(self, frame: FrameType, checked: FrameType) -> None:
        self.armed = False
        where = f"{checked.f_code.co_filename}:{checked.f_lineno}"
        if self.fired:
            self.fired_again, self.where_again = True, where
        else:
            self.fired, self.where = True, where
        if not self._done:  # if the interrupt raises here, the tracer is unset: re-arm it
            sys.setprofile(self._rearm)
        handler = signal.getsignal(signal.SIGINT)
        if handler is signal.default_int_handler or not callable(handler):
            raise KeyboardInterrupt(f"injected at {where}")
        handler(signal.SIGINT, checked)

    def __enter__(self) -> Interrupter:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            raise RuntimeError("Interrupter: SIGINT must have Python's default handler")
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(None)
        sys.setprofile(None)


Labels = dict[int, tuple[str, Any]]


def labels_of(model: nn.Module) -> Labels:
    """Names of the Parameter and hook objects of ``model`` now, by ``id`` (each kept alive
    with its name, so that no later object can take its ``id``)."""
    labels: Labels = {}
    for module_name, module in model.named_modules():
        for name, param in module._parameters.items():
            if param is not None:
                labels[id(param)] = (f"{module_name}.{name}", param)
        for position, hook in enumerate(module._forward_pre_hooks.values()):
            labels[id(hook)] = (f"{module_name}.hook{position}", hook)
            for i, method in enumerate(getattr(hook, "_pruning_methods", ())):
                labels[id(method)] = (f"{module_name}.hook{position}.{i}", method)
    return labels


def _label(labels: Labels, obj: Any) -> str:
    name, known = labels.get(id(obj), ("new", None))
    return name if known is obj else "new"


def _tensor(t: Any) -> Any:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    t = t.detach()
    return (str(t.dtype), tuple(t.shape), str(t.device), t.cpu().contiguous().numpy().tobytes())


def model_state(model: nn.Module, labels: Labels) -> dict[str, Any]:
    """The model, exactly: see the module docstring."""
    out: dict[str, Any] = {"modules": []}
    for module_name, module in model.named_modules():
        params = [(n, _label(labels, p), _tensor(p)) for n, p in module._parameters.items()]
        buffers = [(n, _tensor(b)) for n, b in module._buffers.items()]
        hooks = []
        for hook in module._forward_pre_hooks.values():
            contents = tuple((type(m).__name__, _label(labels, m))
                             for m in getattr(hook, "_pruning_methods", ()))
            hooks.append((type(hook).__name__, getattr(hook, "_tensor_name", None),
                          _label(labels, hook), contents))
        copies = sorted((k, _tensor(v)) for k, v in module.__dict__.items()
                        if isinstance(v, torch.Tensor) and not isinstance(v, nn.Parameter))
        out["modules"].append((module_name, params, buffers, hooks, copies))
    state = model.state_dict()
    out["state_dict"] = [(k, _tensor(v)) for k, v in state.items()]
    out["state_dict_bytes"] = pickle.dumps([(k, _tensor(v)) for k, v in state.items()])
    return out


def lock_is_free(lock: Any) -> bool:
    """Whether another thread can take ``lock`` now."""
    free: list[bool] = []

    def probe() -> None:
        got = lock.acquire(blocking=False)
        if got:
            lock.release()
        free.append(got)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return free[0]


def state_of(session: Any, labels: Labels, events: list[Any],
             explorer: Any = None) -> dict[str, Any]:
    """Everything an interrupted action must leave exactly as before or exactly as after."""
    journal = session._journal
    try:
        session._check_in_sync(session.names, "test")
        in_sync = True
    except Exception as err:  # recorded, compared, shown on failure
        in_sync = repr(err)
    return {
        "model": model_state(session.model, labels),
        "histories": {n: [(e.index, e.step, e.mask) for e in session._histories[n]]
                      for n in session.names},
        "plan": session.plan.to_json(),
        "journal": {
            "actions": [(a.kind, a.step, a.names, a.snapshots is None) for a in journal.actions],
            "commits": list(journal.commits),
            "rng": journal._rng.getstate(),
            "open": journal.depth,
            "pending": list(journal._pending),
        },
        "in_sync": in_sync,
        "lock_free": lock_is_free(session.lock),
        # the thread's autograd mode is the user's too: an action never leaves it switched off
        "grad_enabled": torch.is_grad_enabled(),
        "threads": torch.get_num_threads(),
        "sigint": signal.getsignal(signal.SIGINT),
        "events": [(e.kind, e.names, e.steps) for e in events],
        "status": None if explorer is None else (explorer.status.kind, explorer.status.text),
        "widgets": None if explorer is None else widgets_of(explorer),
    }


def widgets_of(explorer: Any) -> dict[str, Any]:
    """What the explorer shows of the session (it must agree with it, however an action
    ended): picker, summary, device, the buttons' states and tooltips, the imported plan, and
    whether a redraw is still owed."""
    ui = explorer.ui
    imported = explorer.export_pane.imported
    return {
        "picker": list(ui.tensor.options), "tensor": ui.tensor.value,
        "summary": ui.summary.value, "device": ui.device.value,
        "buttons": [(ui[b].disabled, ui[b].tooltip) for b in ("apply", "undo", "reset")],
        "imported": None if imported is None else imported.to_json(),
        "batch": (explorer._batch_depth, explorer._batch_dirty),
        "busy": explorer.status.busy.layout.display,
        "progress": explorer.status.progress.layout.display,
    }


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The keys of two :func:`state_of` results that differ (``model`` by its parts)."""
    out = [k for k in a if k != "model" and a[k] != b[k]]
    out += [f"model.{k}" for k in a["model"] if a["model"][k] != b["model"][k]]
    return out
