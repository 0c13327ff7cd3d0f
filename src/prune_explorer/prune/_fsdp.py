"""Pruned DTensor parameters on their modules, and FSDP2.

The core calls :func:`attached` once a parameter is pruned and :func:`detached` once it is a
plain parameter again, and the pruning hook passes its mask through :func:`unshard_like`.

Under FSDP2 the parameter's new name ``name_orig`` is reported to FSDP, whose forward then
unshards ``name_orig``; the pruning hook gathers the mask for that forward (one all-gather of
the mask per forward), and after the forward only this rank's shard of the pruned tensor
``name`` is kept (:class:`_KeepShard`).
"""

from __future__ import annotations

from typing import Any

import torch

from ._sharded import Layout, gathered, is_sharded

__all__ = ["attached", "detached", "restored", "unshard_like"]


def unshard_like(mask: torch.Tensor, orig: torch.Tensor) -> torch.Tensor:
    """``mask`` in the form ``orig`` has now: gathered when FSDP has unsharded ``orig``."""
    return gathered(mask) if not is_sharded(orig) else mask


def attached(module: torch.nn.Module, name: str) -> None:
    """Called by the core once ``name`` of ``module`` is pruned for the first time."""
    _follow_rename(module, name, name + "_orig")
    if is_sharded(module._buffers.get(name + "_mask")) and not any(
            isinstance(h, _KeepShard) and h.name == name for h in module._forward_hooks.values()):
        module.register_forward_hook(_KeepShard(name))


def detached(module: torch.nn.Module, name: str) -> None:
    """Called by the core once ``name`` of ``module`` is a plain parameter again."""
    _follow_rename(module, name + "_orig", name)
    for key, hook in list(module._forward_hooks.items()):
        if isinstance(hook, _KeepShard) and hook.name == name:
            del module._forward_hooks[key]


def restored(module: torch.nn.Module, name: str) -> None:
    """Called once a snapshot has put ``name`` of ``module`` back as it was (undo, rollback):
    FSDP2's record of the parameter's name and the shard-keeping hook follow that state."""
    if name + "_orig" in module._parameters:
        attached(module, name)
    elif name in module._parameters:
        detached(module, name)


class _KeepShard:
    """Forward hook: after a forward in which FSDP2 unsharded ``name_orig``, the pruned tensor
    ``name`` that the pruning hook computed is the full tensor; keep only this rank's shard of
    it (a detached DTensor laid out like the mask), so no rank holds full weights between
    forwards. The autograd graph keeps what backward needs."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        value = module.__dict__.get(self.name)
        mask = module._buffers.get(self.name + "_mask")
        if isinstance(value, torch.Tensor) and is_sharded(mask) and not is_sharded(value):
            layout = Layout(mask, "forward")
            module.__dict__[self.name] = layout.wrap(layout.local(value.detach()).clone())

    def __repr__(self) -> str:
        return f"_KeepShard(tensor={self.name!r})"


def _follow_rename(module: torch.nn.Module, old: str, new: str) -> None:
    """Tell FSDP2 that the parameter it manages as ``module.old`` is now ``module.new``.

    FSDP2 swaps the unsharded parameter in and out by name around each forward; pruning moves
    the parameter to ``name_orig`` (and ``remove`` moves it back), so FSDP must use the new
    name. FSDP2 has no public API for this: we update its record of the parameter's name
    (``FSDPParam._module_info``). Does nothing for modules FSDP2 does not manage.
    """
    try:
        from torch.distributed._composable_state import _module_state_mapping
    except ImportError:  # pragma: no cover - torch without distributed
        return
    for ref in list(_module_state_mapping.values()):
        state = ref()
        for group in getattr(state, "_fsdp_param_groups", None) or ():
            for fsdp_param in group.fsdp_params:
                info = fsdp_param._module_info
                if info.module is module and info.param_name == old:
                    info.param_name = new
