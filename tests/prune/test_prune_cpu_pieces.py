"""The CPU path's passes shared out over threads a group of small pieces at a time.

torch's parallel operations wait at a barrier for all their threads, so on a busy machine one
descheduled thread stalls every operation. The CPU selection cuts its passes into pieces under
torch's parallel grain (each operation on a piece runs on one thread, no barrier) and hands
groups of them to threads as they free up. Timings live in benchmarks/; here: the mechanism.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import torch

from prune_explorer import prune
from prune_explorer.prune import _select_cpu


def test_pieces_are_under_the_parallel_grain():
    # at::internal::GRAIN_SIZE: up to it an elementwise operation runs on the calling thread,
    # below it a reduction does
    assert _select_cpu.PIECE < 32768


def test_map_groups_keeps_order_and_the_callers_grad_mode():
    seen = []

    def work(i):
        seen.append((threading.current_thread().name, torch.is_grad_enabled()))
        return i * i

    with torch.no_grad():
        out = _select_cpu.map_groups(work, list(range(40)))
    assert out == [i * i for i in range(40)]
    assert all(not grad for _, grad in seen)
    if torch.get_num_threads() > 1:
        assert any(name.startswith("prune-explorer-pieces") for name, _ in seen)


def test_selection_in_inference_mode():
    w = torch.randn(600, 700)
    with torch.inference_mode():
        mask = prune.L1Unstructured(0.5).compute_mask(w, torch.ones_like(w))
    assert int((mask == 0).sum()) == 210_000


def test_map_groups_inside_a_worker_runs_in_place():
    def inner(i):
        return threading.current_thread().name

    def outer(i):
        return _select_cpu.map_groups(inner, [0, 1, 2])

    names = _select_cpu.map_groups(outer, [0, 1])
    for group in names:
        assert len(set(group)) == 1  # no second hop: never waits on its own pool


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_workers():
    _select_cpu.map_groups(lambda i: i, [0, 1, 2])  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: the parent's workers are gone; this must not wait on them
        code = 0 if _select_cpu.map_groups(lambda i: i + 1, [0, 1, 2]) == [1, 2, 3] else 1
        os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("map_groups in a forked child hung on the parent's workers")


def test_masks_do_not_depend_on_the_thread_count():
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(700, 900, generator=g) * 0.02 * 3000).round() / 3000
    threads = torch.get_num_threads()
    masks = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            masks.append([prune.L1Unstructured(0.4).compute_mask(x, torch.ones_like(x))
                          for x in (w, w.bfloat16(), w.half())])
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*masks, strict=True):
        assert torch.equal(a, b)
        assert int((a == 0).sum()) == 252_000
