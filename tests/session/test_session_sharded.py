"""A Session on a model sharded with FSDP2, on each rank: the same masks, reports, history and
plan as one process (see ``helpers.session_sharded_worker``). Each test spawns one gloo group on
127.0.0.1 with a bounded timeout; no process outlives it."""

from __future__ import annotations

import pytest
import torch.distributed as dist

import helpers.session_sharded_worker as worker
from helpers.dist import run_group

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="needs torch.distributed with gloo")

TIMEOUT = 240.0


@pytest.mark.parametrize("world", [1, 2, 4])
def test_session_on_fsdp2_model_matches_one_process(world: int) -> None:
    run_group(world, "gloo", TIMEOUT, worker.main)
