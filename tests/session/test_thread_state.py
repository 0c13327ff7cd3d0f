"""Issue 36, item 2: an action gives the thread its state back on any exit, previews included.

A Ctrl-C is pressed (``helpers.interrupts.Interrupter``, as CPython delivers one) at every line
event of prune_explorer's code and of torch's ``grad_mode.py`` -- so also as a ``no_grad``
block's ``__exit__`` starts, which then never restores autograd -- during ``preview``,
``preview_global`` and ``sensitivity``; afterwards autograd is on, torch's thread count and the
SIGINT handler are as before. A second Ctrl-C follows at a drawn line of what comes after.
"""

from __future__ import annotations

import inspect
import random
import signal
from collections.abc import Callable
from typing import Any

import pytest
import torch

from helpers.interrupts import Interrupter
from helpers.session_models import mlp
from prune_explorer.session import Session

GRAD_MODE = inspect.getsourcefile(torch.no_grad.__exit__) or ""
SEED = 36
# points per action, drawn with SEED from all its line events (preview_global's global cut has
# some 600,000 of them: each traced run takes seconds), and as many spread over those in
# torch's grad_mode.py
POINTS = {"preview": 60, "preview_global": 6, "sensitivity": 40}

ACTIONS: dict[str, Callable[[Session], Any]] = {
    "preview": lambda s: s.preview("4.weight", "l1_unstructured", amount=0.5),
    "preview_global": lambda s: dict(s.preview_global(["0.weight", "2.weight"], amount=0.5)),
    "sensitivity": lambda s: s.sensitivity(lambda m: float(m[0].weight.sum()), amounts=[0.5],
                                           targets=["0.weight"], progress=False),
}


def _state() -> tuple[bool, int, Any]:
    return torch.is_grad_enabled(), torch.get_num_threads(), signal.getsignal(signal.SIGINT)


def _run(action: Callable[[Session], Any], n: int, then: int | None) -> Interrupter:
    session = Session(mlp())
    with Interrupter(n, then=then, also=(GRAD_MODE,)) as interrupter:
        try:
            action(session)
        except KeyboardInterrupt:
            if not interrupter.fired:
                raise
    return interrupter


@pytest.mark.parametrize("name", list(ACTIONS))
def test_ctrl_c_anywhere_gives_the_thread_its_state_back(name):
    action = ACTIONS[name]
    before = _state()
    counted = _run(action, 0, None)
    total = counted.count
    in_grad_mode = [i + 1 for i, f in enumerate(counted.files) if f == GRAD_MODE]
    rng = random.Random(SEED)
    chosen = sorted(set(rng.sample(range(1, total + 1), min(POINTS[name], total)))
                    | set(in_grad_mode[:: max(1, len(in_grad_mode) // POINTS[name])]))
    problems, landed_in_grad_mode = [], 0
    for n in chosen:
        interrupter = _run(action, n, 0)
        landed_in_grad_mode += interrupter.where.startswith(GRAD_MODE)
        if _state() != before:
            problems.append((n, interrupter.where, _state()))
            torch.set_grad_enabled(before[0])
        if interrupter.after:
            k = rng.randint(1, interrupter.after)
            again = _run(action, n, k)
            if _state() != before:
                problems.append((n, k, again.where, again.where_again, _state()))
                torch.set_grad_enabled(before[0])
    assert not problems, f"{name}: {len(problems)} of {len(chosen)} points: {problems[:6]}"
    assert landed_in_grad_mode, "no Ctrl-C landed in torch's grad mode code: the test is vacuous"
