"""Plan export as plain Python for stock PyTorch.

The code uses only ``torch`` and ``torch.nn.utils.prune`` and acts on a variable named ``model``.
Random steps are preceded by ``torch.manual_seed(seed)`` with the seed the session recorded, which
is how the session itself ran them, so the masks come out identical. Steps whose cut split a tie
the session's way (:attr:`Step.ties`) get a stable rank as ``importance_scores`` (of the entries,
or of the slices for ``ln_structured``; see :mod:`prune_explorer.session.codegen.tie_lines`);
every other step is the plain call.

Names come from models and plan files and may hold anything, so every name and address -- in a
string literal or shown in a comment -- is written through
:func:`~prune_explorer.session.codegen.pysource.py_str`: no name can end a comment or a string and
run
as code. A custom mask that prunes at most :data:`MAX_LISTED` entries is written as a readable
list of indices; a larger one as its compressed bits with their sha256, decoded and checked by a
small ``unpack_mask`` function the snippet defines with ``base64``, ``hashlib`` and ``zlib``
(see :mod:`~prune_explorer.session.codegen.mask_lines`): a 4096 x 4096 mask is a few MiB at most,
not
tens of MiB of indices.

Given the session's tied tensors (``tied``: address -> its aliases, as :attr:`Session.tied`),
every step on one is followed by a ``share_pruning`` call that keeps the tie on stock torch
(see :mod:`~prune_explorer.session.codegen.alias_lines`).

Examples
--------
>>> from prune_explorer.session import Step
>>> from prune_explorer.session.codegen.snippet import to_snippet
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

import textwrap
from collections.abc import Iterable, Mapping, Sequence

import torch

from ..steps.methods import METHODS
from ..steps.step import Step, split_address
from ..steps.tied import tied_step
from ..steps.training import TrainingStep
from ..tensors.packed import PackedMask
from . import alias_lines, training_lines
from .calibrated_lines import artifact_header, calibrated_lines
from .mask_lines import MASK_DECODER, MASK_IMPORTS, encoded_mask_lines
from .pattern_lines import PATTERN_METHODS, pattern_lines
from .pysource import py_attribute, py_comment, py_literal, py_str
from .tie_lines import HELPER, SLICE_HELPER, global_lines, local_lines

__all__ = ["MAX_LISTED", "to_snippet"]

#: Custom masks pruning at most this many entries are written as a readable list of indices;
#: larger ones as compressed, checksummed bits (see
# :mod:`~prune_explorer.session.codegen.mask_lines`).
MAX_LISTED = 256


def _module_expr(module_name: str) -> str:
    return "model" if not module_name else f"model.get_submodule({py_str(module_name)})"


def _global_call(step: Step) -> list[str]:
    lines = ["prune.global_unstructured(", "    ["]
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        lines.append(f"        ({_module_expr(module_name)}, {py_str(tensor_name)}),")
    cls = METHODS[step.settings["pruning_method"]].cls
    lines += [
        "    ],",
        f"    pruning_method=prune.{cls},",
        f"    amount={py_literal(step.settings['amount'])},",
        ")",
    ]
    return lines


def _mask_call(step: Step) -> list[str]:
    mask: PackedMask = step.settings["mask"]
    module_name, tensor_name = split_address(step.targets[0])  # a single-tensor step
    device = py_attribute("module", tensor_name) + ".device"
    lines = [f"module = {_module_expr(module_name)}"]
    if mask.pruned > MAX_LISTED:
        lines += encoded_mask_lines("mask", mask)
        lines.append(f"prune.custom_from_mask(module, {py_str(tensor_name)}, "
                     f"mask=mask.to({device}))")
        return lines
    pruned = torch.nonzero(~mask.unpack().reshape(-1)).reshape(-1).tolist()
    lines.append(f"mask = torch.ones({mask.numel}, dtype=torch.bool, device={device})")
    if pruned:
        indices = textwrap.wrap(", ".join(str(i) for i in pruned), width=90)
        lines.append("mask[[")
        lines += [f"    {chunk}" for chunk in indices]
        lines.append("]] = False")
    shape = repr(tuple(mask.shape))
    lines.append(f"prune.custom_from_mask(module, {py_str(tensor_name)}, "
                 f"mask=mask.view({shape}))")
    return lines


def _step_lines(step: Step) -> list[str]:
    if isinstance(step, TrainingStep):
        return training_lines.step_lines(step)
    if step.is_global:
        return global_lines(step, _module_expr) if step.ties else _global_call(step)
    if step.method == "custom_from_mask":
        return _mask_call(step)
    if step.method in PATTERN_METHODS:
        return pattern_lines(step)
    module_name, tensor_name = split_address(step.targets[0])  # a single-tensor step
    if step.ties:
        return local_lines(step, _module_expr(module_name), tensor_name)
    args = [_module_expr(module_name), py_str(tensor_name)]
    args += [f"{key}={py_literal(value)}" for key, value in step.settings.items()]
    return [f"prune.{step.spec.name}({', '.join(args)})"]


def _title(index: int, step: Step) -> str:
    if isinstance(step, TrainingStep):
        return training_lines.title(index, step)
    if step.is_global:
        inner = step.settings["pruning_method"]
        return (f"# step {index}: global_unstructured ({inner}) over {len(step.targets)} "
                f"tensors")
    target = py_comment(step.targets[0])  # a single-tensor step
    if step.method == "remove":
        return f"# step {index}: remove (make the pruning of {target} permanent)"
    return f"# step {index}: {step.method} on {target}"


def to_snippet(steps: Iterable[Step], tied: Mapping[str, Sequence[str]] | None = None,
               replay: tuple[str, str] | None = None, *, find_ties: bool = False) -> str:
    """Python source that replays ``steps`` on ``model`` with stock ``torch.nn.utils.prune``.

    Every name and address in it goes through
    :func:`~prune_explorer.session.codegen.pysource.py_str`, comments included, so no name can run
    as code. ``tied`` maps a tied tensor's address to its aliases: steps on it are followed by a
    call that gives the aliases the same pruning; a step naming an alias acts on the tensor's
    listed address, each tensor once, as a session applies it. ``find_ties=True`` (the ties are
    not known: a plan file that does not list them) makes the snippet find them on ``model``
    before the first step and keep them after every step.

    ``replay``: ``(file name, SHA-256)`` of the safetensors file that holds the tensors of the
    steps computed from calibration (:mod:`.calibrated_lines`; :meth:`Plan.save_snippet` writes
    it); without it such steps raise ``ValueError``.
    """
    tied = {name: tuple(aliases) for name, aliases in (tied or {}).items() if aliases}
    listed = {alias: name for name, aliases in tied.items() for alias in aliases}
    steps = [tied_step(step, {}, listed, "to_snippet") for step in steps]
    encoded = any(step.method == "custom_from_mask" and step.settings["mask"].pruned > MAX_LISTED
                  for step in steps)
    plural = "step" if len(steps) == 1 else "steps"
    trains = any(isinstance(step, TrainingStep) for step in steps)
    lines = [
        f"# Pruning plan exported by prune-explorer ({len(steps)} {plural}).",
        "# Bind `model` to a model equal to the one the plan was made on (same architecture and",
        "# weights) before running this; it prunes `model` in place.",
        *(training_lines.HEADER if trains else ()),
        *(MASK_IMPORTS if encoded else ()),
        "import torch",
        "from torch.nn.utils import prune",
        *(("", "", *MASK_DECODER.splitlines(), "") if encoded else ()),
    ]
    if any(step.calibrated for step in steps):
        if replay is None:
            raise ValueError("to_snippet: steps computed from calibration (importance=, "
                             "wanda_rows, sparsegpt) need their tensors in a file beside the "
                             "snippet; use Plan.save_snippet(path)")
        lines += artifact_header(*replay)
    if any(step.ties for step in steps):
        lines += HELPER
    if any(step.ties and step.method == "ln_structured" for step in steps):
        lines += SLICE_HELPER
    find_ties = find_ties and not tied and bool(steps)
    if find_ties or any(name in tied for step in steps for name in step.targets):
        lines += alias_lines.HELPER
    if find_ties:
        lines += [*alias_lines.FIND_HELPER, "", *alias_lines.FIND_CALL]
    if trains:
        lines += training_lines.HELPER
    for index, step in enumerate(steps, start=1):
        lines += ["", _title(index, step)]
        if step.seed is not None:
            lines.append(f"torch.manual_seed({step.seed})")
        lines += calibrated_lines(index, step, _module_expr) if step.calibrated \
            else _step_lines(step)
        for name in step.targets:
            if name in tied:
                lines += alias_lines.call_lines(name, tied[name])
        if find_ties:
            lines += alias_lines.found_call_lines(step.targets)
    return "\n".join(lines) + "\n"
