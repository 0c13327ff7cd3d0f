"""Spawning a group of processes for the tests of sharded pruning (gloo on 127.0.0.1, or NCCL).

``run_group(world, backend, timeout, target)`` runs ``target(rank, world, port, backend)`` in
``world`` spawned processes; each calls :func:`setup` first and tears the group down at the end.
A failure in any rank fails the caller with that rank's traceback; a hung group is killed after
the timeout, leaving no process behind. :class:`Allocations` counts the large tensors an action
allocates (for the memory checks of sharded pruning).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_group(world: int, backend: str, timeout: float, target: Callable[..., None]) -> None:
    """Run ``target(rank, world, port, backend)`` in ``world`` spawned processes; raise on the
    first failure or after ``timeout`` seconds, leaving no process behind."""
    import torch.multiprocessing as mp

    port = free_port()
    ctx = mp.start_processes(target, args=(world, port, backend), nprocs=world, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + timeout
    try:
        while not ctx.join(timeout=max(0.1, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{world} processes did not finish in {timeout} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
            p.join(5)


def setup(rank: int, world: int, port: int, backend: str) -> tuple[Any, str]:
    """Join the group; returns a 1-D device mesh over it and the device ("cpu" or "cuda")."""
    from torch.distributed.device_mesh import init_device_mesh

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = "cuda"
    dist.init_process_group(backend, rank=rank, world_size=world)
    return init_device_mesh(device, (world,)), device


def full(x: Any) -> torch.Tensor:
    """``x`` whole on the CPU (gathered if it is a DTensor: a collective)."""
    return x.full_tensor().cpu() if hasattr(x, "full_tensor") else x.cpu()


class Allocations:
    """Every new storage of more than ``limit`` bytes that ops create while :attr:`mode` (a
    TorchDispatchMode) is on, in :attr:`bytes`; views of tensors that existed already are not
    new. A DTensor counts by its local shard (ops inside DTensor's own dispatch are not seen:
    only what they return)."""

    def __init__(self, limit: int) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self
        self.limit, self.seen, self.bytes = limit, set(), 0

        def storage(t: torch.Tensor) -> Any:
            local = t.to_local() if hasattr(t, "full_tensor") else t
            return local.untyped_storage()

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                for t in torch.utils._pytree.tree_leaves((args, kwargs)):
                    if isinstance(t, torch.Tensor):
                        outer.seen.add(storage(t).data_ptr())  # existed before
                out = func(*args, **(kwargs or {}))
                for t in out if isinstance(out, (tuple, list)) else (out,):
                    if isinstance(t, torch.Tensor) and t.device.type != "meta":  # no memory
                        store = storage(t)
                        if store.nbytes() > outer.limit and store.data_ptr() not in outer.seen:
                            outer.seen.add(store.data_ptr())
                            outer.bytes += store.nbytes()
                return out

        self.mode = Mode()
