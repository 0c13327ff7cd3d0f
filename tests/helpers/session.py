"""Shared fixtures for the session and plan tests (not a conftest: import it explicitly).

Models come from ``helpers.session_models`` (deterministic, tie-free weights). ``torch_apply`` runs
a
Step with stock ``torch.nn.utils.prune``: it is the oracle the session is compared with.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from helpers.session_models import FACTORIES, Scaler, convnet, fill_tie_free, mlp, root_linear, zoo
from prune_explorer.session import Plan, Step

__all__ = [
    "FACTORIES",
    "Scaler",
    "assert_exact_state",
    "assert_same_pruning",
    "convnet",
    "exact_state",
    "fill_tie_free",
    "fresh_copy",
    "hook_chains",
    "locate",
    "masks",
    "mlp",
    "root_linear",
    "torch_apply",
    "zoo",
]

TORCH_CLASSES = {
    "l1_unstructured": torch_prune.L1Unstructured,
    "random_unstructured": torch_prune.RandomUnstructured,
}

def locate(model: nn.Module, address: str) -> tuple[nn.Module, str]:
    module_name, _, tensor_name = address.rpartition(".")
    return model.get_submodule(module_name), tensor_name


def torch_apply(model: nn.Module, step: Step) -> None:
    """Run ``step`` on ``model`` with stock torch.nn.utils.prune (the oracle).

    A step whose keys tie at the cut (``step.ties``) is run as the session's exported snippet
    for that step: stock torch given the stable-rank importance scores the snippet passes, since
    plain torch may split such a tie otherwise (its choice is not the session's rule).
    """
    with torch.random.fork_rng(devices=[]):
        if step.ties is not None:
            code = Plan([step]).to_snippet()
            exec(compile(code, "<snippet>", "exec"), {"model": model})
            return
        if step.seed is not None:
            torch.manual_seed(step.seed)
        if step.is_global:
            pairs = [locate(model, t) for t in step.targets]
            torch_prune.global_unstructured(
                pairs,
                pruning_method=TORCH_CLASSES[step.settings["pruning_method"]],
                amount=step.settings["amount"],
            )
            return
        module, name = locate(model, step.target)
        settings = dict(step.settings)
        if step.method == "custom_from_mask":
            settings["mask"] = settings["mask"].unpack(dtype=torch.float32)
        getattr(torch_prune, step.method)(module, name, **settings)


def masks(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every ``*_mask`` buffer of ``model`` by address (``"0.weight"``), cloned."""
    out = {}
    for name, buffer in model.named_buffers():
        if name.endswith("_mask"):
            out[name[: -len("_mask")]] = buffer.detach().clone()
    return out


def hook_chains(model: nn.Module) -> dict[str, tuple[str, ...]]:
    """Class names of the pruning methods hooked on each tensor, by address."""
    out = {}
    for module_name, module in model.named_modules():
        for hook in module._forward_pre_hooks.values():
            if hasattr(hook, "_tensor_name") and hasattr(hook, "compute_mask"):
                children = tuple(hook) if hasattr(hook, "__iter__") else (hook,)
                address = f"{module_name}.{hook._tensor_name}" if module_name else hook._tensor_name
                out[address] = tuple(type(m).__name__ for m in children)
    return out


def exact_state(model: nn.Module) -> dict[str, Any]:
    """Everything "exact earlier state" means: state_dict (keys in order, values), Parameter
    objects, hook objects and their order, container contents, pruned-copy values."""
    state = {
        "state_dict": [(k, v.detach().clone()) for k, v in model.state_dict().items()],
        "params": [(n, id(p)) for n, p in model.named_parameters()],
        "hooks": [],
        "pruned_copies": [],
    }
    for module_name, module in model.named_modules():
        for key, hook in module._forward_pre_hooks.items():
            contents = tuple(id(m) for m in hook) if hasattr(hook, "__iter__") else None
            state["hooks"].append((module_name, key, id(hook), contents))
            name = getattr(hook, "_tensor_name", None)
            if name is not None:
                state["pruned_copies"].append(
                    (module_name, name, getattr(module, name).detach().clone())
                )
    return state


def assert_exact_state(before: dict[str, Any], after: dict[str, Any]) -> None:
    keys_before = [k for k, _ in before["state_dict"]]
    keys_after = [k for k, _ in after["state_dict"]]
    assert keys_after == keys_before
    for (key, a), (_, b) in zip(before["state_dict"], after["state_dict"], strict=True):
        assert a.dtype == b.dtype, key
        assert torch.equal(a, b), key
    assert after["params"] == before["params"]
    assert after["hooks"] == before["hooks"]
    assert len(after["pruned_copies"]) == len(before["pruned_copies"])
    for (m1, n1, a), (m2, n2, b) in zip(
        before["pruned_copies"], after["pruned_copies"], strict=True
    ):
        assert (m1, n1) == (m2, n2)
        assert torch.equal(a, b), f"{m1}.{n1}"


def assert_same_pruning(model: nn.Module, oracle: nn.Module) -> None:
    """Two models pruned the same way: same state_dict keys/values, masks, hook chains."""
    sd, so = model.state_dict(), oracle.state_dict()
    assert list(sd) == list(so)
    for key in sd:
        assert sd[key].dtype == so[key].dtype, key
        assert torch.equal(sd[key], so[key]), key
    assert hook_chains(model) == hook_chains(oracle)
    for module_name, module in model.named_modules():
        other = oracle.get_submodule(module_name)
        for hook in module._forward_pre_hooks.values():
            name = hook._tensor_name
            assert torch.equal(getattr(module, name), getattr(other, name))


def fresh_copy(model: nn.Module) -> nn.Module:
    return copy.deepcopy(model)
