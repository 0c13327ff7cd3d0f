"""Plan export as plain Python for stock PyTorch.

The code uses only ``torch`` and ``torch.nn.utils.prune`` and acts on a variable named ``model``.
Random steps are preceded by ``torch.manual_seed(seed)`` with the seed the session recorded, which
is how the session itself ran them, so the masks come out identical. Steps whose cut split a tie
the session's way (:attr:`Step.ties`) get a stable rank as ``importance_scores`` (see
:mod:`prune_explorer.session.snippet_ties`); every other step is the plain call.

Examples
--------
>>> from prune_explorer.session import Step
>>> from prune_explorer.session.snippet import to_snippet
>>> print(to_snippet([Step("random_unstructured", "fc.weight", amount=0.3, seed=42)]))
# Pruning plan exported by prune-explorer (1 step).
# Bind `model` to a model equal to the one the plan was made on (same architecture and
# weights) before running this; it prunes `model` in place.
import torch
from torch.nn.utils import prune
<BLANKLINE>
# step 1: random_unstructured on fc.weight
torch.manual_seed(42)
prune.random_unstructured(model.get_submodule("fc"), "weight", amount=0.3)
<BLANKLINE>
"""

from __future__ import annotations

import json
import keyword
import math
import textwrap
from collections.abc import Iterable
from typing import Any

import torch

from .methods import METHODS
from .packed import PackedMask
from .snippet_ties import HELPER, global_lines, local_lines
from .step import Step, split_address

__all__ = ["to_snippet"]


def _q(text: str) -> str:
    # A double-quoted Python string literal (JSON string syntax is valid Python).
    return json.dumps(text)


def _module_expr(module_name: str) -> str:
    return "model" if not module_name else f"model.get_submodule({_q(module_name)})"


def _literal(value: Any) -> str:
    if isinstance(value, float) and math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    if isinstance(value, str):
        return _q(value)
    return repr(value)


def _attribute(expr: str, name: str) -> str:
    if name.isidentifier() and not keyword.iskeyword(name):
        return f"{expr}.{name}"
    return f"getattr({expr}, {_q(name)})"


def _global_call(step: Step) -> list[str]:
    lines = ["prune.global_unstructured(", "    ["]
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        lines.append(f"        ({_module_expr(module_name)}, {_q(tensor_name)}),")
    cls = METHODS[step.settings["pruning_method"]].cls
    lines += [
        "    ],",
        f"    pruning_method=prune.{cls},",
        f"    amount={_literal(step.settings['amount'])},",
        ")",
    ]
    return lines


def _mask_call(step: Step) -> list[str]:
    mask: PackedMask = step.settings["mask"]
    module_name, tensor_name = split_address(step.target)  # type: ignore[arg-type]
    module = _module_expr(module_name)
    pruned = torch.nonzero(~mask.unpack().reshape(-1)).reshape(-1).tolist()
    shape = repr(tuple(mask.shape))
    lines = [
        f"module = {module}",
        f"mask = torch.ones({mask.numel}, dtype=torch.bool, "
        f"device={_attribute('module', tensor_name)}.device)",
    ]
    if pruned:
        indices = textwrap.wrap(", ".join(str(i) for i in pruned), width=90)
        lines.append("mask[[")
        lines += [f"    {chunk}" for chunk in indices]
        lines.append("]] = False")
    lines.append(f"prune.custom_from_mask(module, {_q(tensor_name)}, mask=mask.view({shape}))")
    return lines


def _step_lines(step: Step) -> list[str]:
    if step.is_global:
        return global_lines(step, _module_expr) if step.ties else _global_call(step)
    if step.method == "custom_from_mask":
        return _mask_call(step)
    module_name, tensor_name = split_address(step.target)  # type: ignore[arg-type]
    if step.ties:
        return local_lines(step, _module_expr(module_name), tensor_name)
    args = [_module_expr(module_name), _q(tensor_name)]
    args += [f"{key}={_literal(value)}" for key, value in step.settings.items()]
    return [f"prune.{step.spec.function}({', '.join(args)})"]


def _title(index: int, step: Step) -> str:
    if step.is_global:
        inner = step.settings["pruning_method"]
        return (f"# step {index}: global_unstructured ({inner}) over {len(step.targets)} "
                f"tensors")
    if step.method == "remove":
        return f"# step {index}: remove (make the pruning of {step.target} permanent)"
    return f"# step {index}: {step.method} on {step.target}"


def to_snippet(steps: Iterable[Step]) -> str:
    """Python source that replays ``steps`` on ``model`` with stock ``torch.nn.utils.prune``."""
    steps = list(steps)
    plural = "step" if len(steps) == 1 else "steps"
    lines = [
        f"# Pruning plan exported by prune-explorer ({len(steps)} {plural}).",
        "# Bind `model` to a model equal to the one the plan was made on (same architecture and",
        "# weights) before running this; it prunes `model` in place.",
        "import torch",
        "from torch.nn.utils import prune",
    ]
    if any(step.ties for step in steps):
        lines += HELPER
    for index, step in enumerate(steps, start=1):
        lines += ["", _title(index, step)]
        if step.seed is not None:
            lines.append(f"torch.manual_seed({step.seed})")
        lines += _step_lines(step)
    return "\n".join(lines) + "\n"
