"""Pruning an FSDP2 model: the same ``prune`` calls as on one process, on every rank.

Run on the CPU with two processes (gloo)::

    torchrun --nproc-per-node 2 examples/fsdp2_prune.py

Every rank runs the same calls, as for any collective. The masks are DTensors sharded like their
parameters; gathered, they equal the masks one process computes on the full weights.

The second part does the same through a ``Session`` on every rank: apply, global pruning, undo,
a report that every rank gets whole, and a plan written by rank 0 and replayed on one process.
"""

from __future__ import annotations

import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard

from prune_explorer import Session, prune
from prune_explorer.session import Plan


def build(mesh: DeviceMesh | None) -> nn.Sequential:
    """The model, with the same weights on every rank; sharded over ``mesh`` unless None."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 10))
    if mesh is not None:
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = build(mesh)
    linears = [m for m in model if isinstance(m, nn.Linear)]

    # Global magnitude pruning: the threshold comes from all-reduced histograms, no weights
    # are gathered.
    prune.global_unstructured([(m, "weight") for m in linears],
                              pruning_method=prune.L1Unstructured, amount=0.5)
    prune.l1_unstructured(linears[0], "bias", amount=0.25)            # local pruning
    torch.manual_seed(1)  # random methods: the same generator state on every rank
    prune.random_unstructured(linears[-1], "weight", amount=0.2)     # a second step (container)
    prune.ln_structured(linears[1], "weight", amount=8, n=2, dim=0)   # 8 whole output units

    # Train as usual: FSDP2 unshards weight_orig, the pruning hook applies the mask.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    mask = linears[0].weight_mask
    full = mask.full_tensor()  # a collective: every rank calls it
    if rank == 0:
        print(f"{type(mask).__name__} mask, placements {mask.placements}, local "
              f"{tuple(mask.to_local().shape)} of {tuple(mask.shape)}; "
              f"{(full == 0).float().mean():.0%} pruned; loss {loss.item():.4f}")

    # Distributed checkpoint: weight_orig and weight_mask are saved sharded.
    path = [tempfile.mkdtemp() if rank == 0 else None]
    dist.broadcast_object_list(path)
    dcp.save(model.state_dict(), checkpoint_id=path[0])
    if rank == 0:
        print("saved", sorted(k for k in model.state_dict() if k.startswith("0.")))

    prune.remove_all(model)  # make it permanent: plain (sharded) weights again
    if rank == 0:
        print("after remove_all:", sorted(model.state_dict()))

    with_session(mesh, path[0])
    dist.barrier()  # leave together
    dist.destroy_process_group()


def with_session(mesh: DeviceMesh, folder: str) -> None:
    """A Session on every rank: the same calls everywhere, in the same order."""
    rank = dist.get_rank()
    model = build(mesh)
    s = Session(model, seed=0)  # the same seed everywhere: random steps draw the same seeds
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    s.apply("2.weight", "ln_structured", amount=8, n=2, dim=0)
    s.apply_global(["0.weight", "2.weight", "4.weight"], "l1_unstructured", amount=0.5)
    s.apply("4.weight", "random_unstructured", amount=0.2)
    s.undo()                                 # every rank undoes its shard
    report = s.report(totals=True)           # collective: all-reduced counts, the same table
    masks = {name: s.mask(name).full_tensor() for name in ("0.weight", "2.weight", "4.weight")}
    plan_path = f"{folder}/plan.json"
    s.plan.save(plan_path)                   # every rank holds the plan; rank 0 writes it
    dist.barrier()
    if rank == 0:
        print(report[["name", "numel", "zeros", "sparsity"]].to_string(index=False))
        print("plan:", [step.method for step in s.plan])
        # The plan replayed on one process, on the same (unsharded) weights: the same masks.
        replay = Session(build(None))
        replay.apply_all(Plan.load(plan_path))
        same = all(torch.equal(replay.mask(n), m) for n, m in masks.items())
        print("plan replayed on one process gives the same masks:", same)


if __name__ == "__main__":
    main()
