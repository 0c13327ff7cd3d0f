"""Pruned DTensor parameters on their modules, and FSDP2.

The core calls :func:`attached` once a parameter is pruned and :func:`detached` once it is a
plain parameter again, and the pruning hook passes its mask through :func:`unshard_like`.

Under FSDP2 the parameter's new name ``name_orig`` is reported to FSDP, whose forward then
unshards ``name_orig``; the pruning hook gathers the mask for that forward (one all-gather of
the mask per forward). The pruned tensor ``name`` of a sharded parameter is not kept between
forwards but computed on demand (:mod:`._on_demand`): per rank, pruning adds only the mask's
shard.
"""

from __future__ import annotations

import sys

import torch

from ._dtensor import gathered, is_sharded, stand_in
from ._on_demand import _ON_DEMAND, kept_attribute, start, stop

__all__ = ["attached", "detached", "kept_attribute", "pruned_stand_in", "restored",
           "unshard_like"]


#: The module where FSDP2 registers the states of the modules it manages.
_FSDP_STATES = "torch.distributed._composable_state"


def unshard_like(mask: torch.Tensor, orig: torch.Tensor) -> torch.Tensor:
    """``mask`` in the form ``orig`` has now: gathered when FSDP has unsharded ``orig``."""
    return gathered(mask) if not is_sharded(orig) else mask


def attached(module: torch.nn.Module, name: str, *, kept: bool | None = None) -> None:
    """Called by the core once ``name`` of ``module`` is pruned (idempotent); ``kept``: what
    :func:`kept_attribute` says, when the caller knows it already."""
    if _FSDP_STATES in sys.modules:  # else no module is managed by FSDP2
        _follow_rename(module, name, name + "_orig")
    if not (kept_attribute(module, name) if kept is None else kept):
        start(module, name)


def detached(module: torch.nn.Module, name: str) -> None:
    """Called by the core once ``name`` of ``module`` is a plain parameter again."""
    _follow_rename(module, name + "_orig", name)
    stop(module, name)


def restored(module: torch.nn.Module, name: str) -> None:
    """Called once a snapshot has put ``name`` of ``module`` back as it was (undo, rollback):
    FSDP2's record of the parameter's name and the on-demand pruned tensor follow that state."""
    if name + "_orig" in module._parameters:
        attached(module, name)
    elif name in module._parameters:
        detached(module, name)


def pruned_stand_in(module: torch.nn.Module, name: str) -> torch.Tensor | None:
    """For a pruned tensor ``name`` computed on demand, what the core prunes it as without
    computing it (:func:`._sharded.stand_in` of ``name_orig``) when ``name_orig`` is sharded;
    None for any other tensor (an unsharded one is read as ``module.name``, computed)."""
    if (name not in module.__dict__.get(_ON_DEMAND, ())
            or not is_sharded(module._parameters.get(name + "_orig"))):
        return None
    stand: torch.Tensor = stand_in(module._parameters[name + "_orig"])
    return stand


def _follow_rename(module: torch.nn.Module, old: str, new: str) -> None:
    """Tell FSDP2 that the parameter it manages as ``module.old`` is now ``module.new``.

    FSDP2 swaps the unsharded parameter in and out by name around each forward; pruning moves
    the parameter to ``name_orig`` (and ``remove`` moves it back), so FSDP must use the new
    name. FSDP2 has no public API for this: we update its record of the parameter's name
    (``FSDPParam._module_info``). Does nothing for modules FSDP2 does not manage.
    """
    # FSDP2 registers its states in this module; not imported yet: no module is managed
    states = sys.modules.get(_FSDP_STATES)
    mapping = getattr(states, "_module_state_mapping", None)
    if not mapping:
        return
    for ref in list(mapping.values()):
        state = ref()
        for group in getattr(state, "_fsdp_param_groups", None) or ():
            for fsdp_param in group.fsdp_params:
                info = fsdp_param._module_info
                if info.module is module and info.param_name == old:
                    info.param_name = new
