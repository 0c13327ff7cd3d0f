"""Snippet lines for the pattern methods, which stock ``torch.nn.utils.prune`` does not have.

A ``semi_structured`` or ``block_structured`` step is written as a few readable lines of plain
torch that build the mask the way :mod:`prune_explorer.prune.patterns` does -- the same
operations in the same order, so the masks are identical -- and then install it with
``prune.custom_from_mask``. As in torch, the importance of a tensor that is already pruned is its
current value (``module.<name>``, i.e. ``orig * mask``); entries pruned already count as pruned.

Every tensor name goes through :func:`~prune_explorer.session.codegen.pysource.py_str` (or
:func:`~prune_explorer.session.codegen.pysource.py_attribute`); settings are validated numbers and
``"N:M"`` strings, written as literals.

Examples
--------
>>> from prune_explorer.session import Step
>>> from prune_explorer.session.codegen.pattern_lines import pattern_lines
>>> print("\\n".join(pattern_lines(Step("semi_structured", "fc.weight", pattern="2:4", dim=-1))))
module = model.get_submodule("fc")
# 2:4 along dim -1: in every group of 4 neighbours keep the 2 largest |w| (ties: the lower
# index is pruned first); entries pruned already count as pruned
keys = module.weight.detach().abs()
if hasattr(module, "weight_mask"):
    keys = keys.masked_fill(module.weight_mask == 0, float("-inf"))
groups = keys.movedim(-1, -1)
groups = groups.reshape(*groups.shape[:-1], -1, 4)
drop = groups.argsort(dim=-1, stable=True)[..., :2]
keep = torch.ones_like(groups, dtype=torch.bool).scatter_(-1, drop, False)
mask = keep.reshape(keys.movedim(-1, -1).shape).movedim(-1, -1)
prune.custom_from_mask(module, "weight", mask=mask.to(module.weight.device))
"""

from __future__ import annotations

import math

from prune_explorer.prune.validation import pattern_counts

from ..steps.step import Step, split_address
from .pysource import py_attribute, py_str

__all__ = ["PATTERN_METHODS", "pattern_lines"]

#: Methods whose snippet lines come from here.
PATTERN_METHODS = ("semi_structured", "block_structured")


def _module_line(module_name: str) -> str:
    expr = "model" if not module_name else f"model.get_submodule({py_str(module_name)})"
    return f"module = {expr}"


def _number(value: float | int) -> str:
    if isinstance(value, float) and math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    return repr(value)


def _prelude(tensor_name: str) -> tuple[str, str, list[str]]:
    weight = py_attribute("module", tensor_name)
    mask_attr = py_attribute("module", tensor_name + "_mask")
    lines = [
        f"keys = {weight}.detach().abs()",
        f"if hasattr(module, {py_str(tensor_name + '_mask')}):",
        f"    keys = keys.masked_fill({mask_attr} == 0, float(\"-inf\"))",
    ]
    return weight, mask_attr, lines


def _semi_lines(step: Step, tensor_name: str) -> list[str]:
    keep_n, m = pattern_counts(step.settings["pattern"])
    dim = int(step.settings["dim"])
    weight, _, prelude = _prelude(tensor_name)
    return [
        f"# {keep_n}:{m} along dim {dim}: in every group of {m} neighbours keep the {keep_n} "
        "largest |w| (ties: the lower",
        "# index is pruned first); entries pruned already count as pruned",
        *prelude,
        f"groups = keys.movedim({dim}, -1)",
        f"groups = groups.reshape(*groups.shape[:-1], -1, {m})",
        f"drop = groups.argsort(dim=-1, stable=True)[..., :{m - keep_n}]",
        "keep = torch.ones_like(groups, dtype=torch.bool).scatter_(-1, drop, False)",
        f"mask = keep.reshape(keys.movedim({dim}, -1).shape).movedim(-1, {dim})",
        f"prune.custom_from_mask(module, {py_str(tensor_name)}, mask=mask.to({weight}.device))",
    ]


def _block_lines(step: Step, tensor_name: str) -> list[str]:
    block = tuple(int(b) for b in step.settings["block"])
    amount = step.settings["amount"]
    n = step.settings["n"]
    order = 2.0 if n == "fro" else float(n)
    weight, mask_attr, prelude = _prelude(tensor_name)
    prelude[0] = f"scores = {weight}.detach().abs()"
    count = (f"{amount}" if isinstance(amount, int)
             else f"round({amount!r} * int(live.sum()))")
    how_many = f"{amount}" if isinstance(amount, int) else f"a fraction {amount!r} of the"
    return [
        f"# blocks of {block} (dims past {len(block)} taken whole): prune {how_many} live",
        f"# blocks of lowest {_number(n)}-norm (ties: the lower block index, row-major, first);",
        "# fully pruned blocks are not counted",
        prelude[0],
        "alive = torch.ones_like(scores, dtype=torch.bool)",
        f"if hasattr(module, {py_str(tensor_name + '_mask')}):",
        f"    alive = {mask_attr} != 0",
        f"block = {block!r} + tuple(scores.shape[{len(block)}:])",
        "grid = [size // b for size, b in zip(scores.shape, block)]",
        "split = [x for g, b in zip(grid, block) for x in (g, b)]",
        "order = [*range(0, 2 * len(block), 2), *range(1, 2 * len(block), 2)]",
        "norms = torch.linalg.vector_norm(",
        f"    scores.reshape(split).permute(order).reshape(*grid, -1), ord={_number(order)}, "
        "dim=-1)",
        "live = alive.reshape(split).permute(order).reshape(*grid, -1).any(dim=-1).reshape(-1)",
        f"k = {count}",
        "ranked = norms.reshape(-1).masked_fill(~live, float(\"-inf\")).argsort(stable=True)",
        "keep = torch.ones(live.shape, dtype=torch.bool)",
        "keep[ranked[:k + int((~live).sum())].cpu()] = False",
        "mask = keep.reshape(grid)",
        "for d, b in enumerate(block):",
        "    mask = mask.repeat_interleave(b, dim=d)",
        f"prune.custom_from_mask(module, {py_str(tensor_name)}, mask=mask.to({weight}.device))",
    ]


def pattern_lines(step: Step) -> list[str]:
    """Snippet lines that prune ``step.target`` as ``step`` (a pattern step) does."""
    module_name, tensor_name = split_address(step.targets[0])  # a single-tensor step
    lines = [_module_line(module_name)]
    if step.method == "semi_structured":
        return lines + _semi_lines(step, tensor_name)
    return lines + _block_lines(step, tensor_name)
