"""Snippet lines for steps computed from calibration, with their tensors in a file beside it.

A calibrated step (``importance=`` other than magnitude, ``wanda_rows``, ``sparsegpt``) cannot be
replayed from its settings alone: it read the session's calibration. What the replay needs was
recorded when the session ran it (:attr:`Step.replay`) and is written to a ``safetensors`` file
(no pickle) beside the snippet, whose SHA-256 the snippet checks before it reads a tensor:

* a criterion's ``scores``, given to stock torch as the documented ``importance_scores=`` where
  torch's grouping is the step's and its cut splits no tie (``l1_unstructured``,
  ``global_unstructured``);
* otherwise the ``mask`` the step left, installed with ``prune.custom_from_mask`` (Wanda's rows,
  N:M, ``ln_structured``, a tied cut);
* SparseGPT's new ``values``, copied into the weight before its mask is installed.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> _ = torch.manual_seed(0)
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 3)))
>>> _ = s.calibrate([torch.randn(8, 4)])
>>> _ = s.apply("0.weight", "wanda_rows", sparsity=0.5)
>>> tensors = replay_file_tensors(s.plan.steps)
>>> sorted(tensors)
['step1/mask/0.weight']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..steps.step import Step, split_address
from .pysource import py_str

__all__ = ["artifact_header", "calibrated_lines", "replay_file_tensors"]


def _key(index: int, kind: str, address: str) -> str:
    return f"step{index}/{kind}/{address}"


def replay_file_tensors(steps: Sequence[Step]) -> dict[str, torch.Tensor]:
    """The tensors of every calibrated step, keyed ``"step<i>/<kind>/<address>"`` (i from 1).

    Raises ``ValueError`` for a calibrated step that holds none (one read back from JSON: only
    the session that ran it knows what its calibration gave)."""
    out: dict[str, torch.Tensor] = {}
    for index, step in enumerate(steps, start=1):
        if not step.calibrated:
            continue
        if step.replay is None:
            raise ValueError(
                f"snippet: step {index} ({step.method}, importance={step.importance!r}) was "
                "computed from calibration and holds no record of it (it was read from a plan "
                "file); export it from the Session that ran it (Session.plan.save_snippet)")
        for key, tensor in step.replay.items():
            kind, _, address = key.partition("/")
            out[_key(index, kind, address)] = tensor.contiguous()
    return out


def artifact_header(filename: str, digest: str) -> list[str]:
    """Lines that read ``filename`` (beside the snippet, or in the working directory) after
    checking its SHA-256."""
    return [
        "",
        "# Tensors of the steps computed from calibration: a safetensors file (no pickle),",
        "# checked against the SHA-256 it had when the plan was exported.",
        "import hashlib",
        "import os",
        "from safetensors.torch import load as load_tensors",
        "",
        f"_replay_path = {py_str(filename)}",
        "if '__file__' in globals():",
        "    _replay_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _replay_path)",
        "with open(_replay_path, 'rb') as _file:",
        "    _replay_bytes = _file.read()",
        f"if hashlib.sha256(_replay_bytes).hexdigest() != {py_str(digest)}:",
        "    raise RuntimeError(f'{_replay_path}: SHA-256 differs from the exported file; '",
        "                       'refusing to use it')",
        "replay = load_tensors(_replay_bytes)",
    ]


def calibrated_lines(index: int, step: Step, module_expr: Callable[[str], str]) -> list[str]:
    """The lines replaying calibrated step ``index`` (its tensors in ``replay``);
    ``module_expr(name)`` is the expression of a submodule of ``model``."""
    replay = step.replay or {}
    lines: list[str] = []
    if any(key.startswith("scores/") for key in replay):  # torch's own grouping
        lines.append("pairs = [")
        for address in step.targets:
            module_name, tensor_name = split_address(address)
            lines.append(f"    ({module_expr(module_name)}, {py_str(tensor_name)}),")
        lines += ["]", "scores = [", *[
            f"    replay[{py_str(_key(index, 'scores', address))}]," for address in step.targets
        ], "]", "scores = [s.to(getattr(m, n).device) for s, (m, n) in zip(scores, pairs)]"]
        amount = repr(step.settings["amount"])
        if step.is_global:
            lines += ["prune.global_unstructured(pairs, pruning_method=prune.L1Unstructured, "
                      f"amount={amount},",
                      "                          importance_scores=dict(zip(pairs, scores)))"]
        else:
            lines.append(f"prune.l1_unstructured(*pairs[0], amount={amount}, "
                         "importance_scores=scores[0])")
        return lines
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        name = py_str(tensor_name)
        lines.append(f"module = {module_expr(module_name)}")
        values = _key(index, "values", address)
        if f"values/{address}" in replay:
            lines += [
                f"held = getattr(module, {py_str(tensor_name + '_orig')}, None)",
                "if held is None:",
                f"    held = getattr(module, {name})",
                "with torch.no_grad():  # SparseGPT updated the surviving weights",
                f"    held.copy_(replay[{py_str(values)}].to(held.device, held.dtype))",
            ]
        lines += [f"mask = replay[{py_str(_key(index, 'mask', address))}]",
                  f"prune.custom_from_mask(module, {name}, "
                  f"mask=mask.to(getattr(module, {name}).device))"]
    return lines
