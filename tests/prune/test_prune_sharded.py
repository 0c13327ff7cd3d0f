"""Pruning parameters sharded over processes (DTensor, FSDP2): the same masks as one process.

Each test spawns one group of processes on 127.0.0.1 (gloo on the CPU, NCCL on GPUs) and runs
every check of ``helpers.sharded_worker`` in it, so the group is started once per world size. A
failure
in any rank fails the test with that rank's traceback; a hung group is killed after the timeout.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import helpers.sharded_worker as worker
from helpers import REPO
from helpers.dist import run_group

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="needs torch.distributed with gloo")

TIMEOUT = 300.0


@pytest.mark.parametrize("world", [1, 2, 4])
def test_sharded_masks_match_one_process_gloo(world: int) -> None:
    run_group(world, "gloo", TIMEOUT, worker.main)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2
                    or not dist.is_nccl_available(), reason="needs 2 CUDA devices and NCCL")
def test_sharded_masks_match_one_process_nccl() -> None:
    run_group(2, "nccl", TIMEOUT, worker.main)


def test_group_timeout_leaves_no_process() -> None:
    with pytest.raises(TimeoutError):
        run_group(2, "gloo", 3.0, worker.hang)


def test_fsdp2_example_runs_under_torchrun() -> None:
    """examples/fsdp2_prune.py, as docs/fsdp2.md says to run it (2 CPU processes)."""
    import os
    import signal
    import subprocess
    import sys

    root = REPO
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"),
                                                      os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", str(root / "examples" / "fsdp2_prune.py")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # torchrun and its workers
            proc.communicate()
    assert proc.returncode == 0, out
    assert "DTensor mask, placements (Shard(dim=0),)" in out, out
    assert "'0.weight_mask', '0.weight_orig'" in out, out
    assert "after remove_all: ['0.bias', '0.weight'," in out, out
    assert "plan: ['l1_unstructured', 'ln_structured', 'global_unstructured']" in out, out
    assert "plan replayed on one process gives the same masks: True" in out, out
