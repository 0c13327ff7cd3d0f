"""A ``state_dict`` as a library saved it, put back under the model's own keys.

Hugging Face ``save_pretrained`` does not write a model's ``state_dict`` as it is:

* **tied parameters are written once**: GPT-2's ``lm_head.weight`` (it *is*
  ``transformer.wte.weight``), OPT's ``lm_head``, BERT's ``cls.predictions.decoder`` weight and
  bias, T5's ``encoder``/``decoder`` ``embed_tokens`` and ``lm_head`` are left out, pruned
  (``<name>_orig`` + ``<name>_mask``) or not;
* **keys are renamed** to the library's older checkpoint names where it has a conversion
  mapping (ViT's ``vit.layers.0.attention.q_proj`` is saved as
  ``vit.encoder.layer.0.attention.attention.query``), which ``from_pretrained`` renames back.

:func:`model_keys` undoes both, so that
:func:`~prune_explorer.session.model.state_dict.load_pruned_state_dict` (and the CLI's
``report`` / ``apply``) read such a file strictly: a key left out for a tie is filled with the
tensor saved under another name of the same parameter (the model ties them anyway), and keys
are renamed with the library's own renaming rules (``transformers``' conversion mapping, when
the model is a ``transformers`` model and the renaming makes more keys fit). Renamings only:
a conversion that splits or merges tensors is not applied, and its keys are then reported as
mismatched. Nothing here executes anything from the file.

Examples
--------
>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
>>> model[1].weight = model[0].weight  # a tied head, saved once
>>> sorted(model_keys(model, {"0.weight": torch.zeros(5, 3)}))
['0.weight', '1.weight']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

__all__ = ["model_keys"]

_SUFFIXES = ("", "_orig", "_mask")


def _plain(key: str, state: Mapping[str, Any]) -> str:
    # The parameter a key is saved for: `x_orig` / `x_mask` of a pruned pair are `x`.
    for suffix in ("_orig", "_mask"):
        base = key[: -len(suffix)]
        if key.endswith(suffix) and base + ("_mask" if suffix == "_orig" else "_orig") in state:
            return base
    return key


def _fitting(model_names: set[str], state: Mapping[str, Any]) -> int:
    return sum(_plain(key, state) in model_names for key in state)


def _renamed(model: nn.Module, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
    """``state`` under the names ``transformers`` would load it by, or None (not a
    ``transformers`` model, no renaming rule, or the library's API is not there)."""
    config = getattr(model, "config", None)
    if config is None or not type(model).__module__.startswith("transformers."):
        return None
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming, rename_source_key

        renamings = [rule for rule in get_model_conversion_mapping(model)  # type: ignore[arg-type]
                     if isinstance(rule, WeightRenaming)]
        if not renamings:
            return None
        renamed = {rename_source_key(key, renamings, [])[0]: value
                   for key, value in state.items()}
    except Exception:  # another release of the library: read the keys as they are
        return None
    return renamed if len(renamed) == len(state) else None


def model_keys(model: nn.Module, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` under ``model``'s keys: renamed as the model's library loads it, and each
    tied parameter's left-out names filled from the name it was saved under (see the module
    docstring). A ``state`` that already fits is returned as it is (a new dict)."""
    groups: dict[int, list[str]] = {}  # every name of each parameter, tied ones together
    for name, param in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(name)
    names = {name for group in groups.values() for name in group}
    names.update(name for name, _ in model.named_buffers())
    out = dict(state)
    if _fitting(names, out) < len(out):
        renamed = _renamed(model, out)
        if renamed is not None and _fitting(names, renamed) > _fitting(names, out):
            out = renamed
    for group in groups.values():
        if len(group) < 2:
            continue
        for suffix in _SUFFIXES:
            saved = next((name for name in group if name + suffix in out), None)
            if saved is None:
                continue
            for name in group:
                if name + suffix not in out and not (suffix == "" and name + "_orig" in out):
                    out[name + suffix] = out[saved + suffix]
    return out
