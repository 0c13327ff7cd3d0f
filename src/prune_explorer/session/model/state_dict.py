"""Loading a ``state_dict`` saved from a pruned model back into a fresh model.

A tensor saved while pruned appears as a pair ``<name>_orig`` (the original values) +
``<name>_mask`` (the mask). :func:`check_masks` validates every such pair (dtype, shape, values
0/1) and :func:`load_pruned_state_dict` re-creates the pruning on the fresh model with
``custom_from_mask`` so the keys line up, loads the tensors strictly, and recomputes the pruned
copies. Which method made a mask is not in the file, so a session lists it as
``custom_from_mask``.

A tied parameter (GPT-2's ``lm_head.weight`` *is* ``transformer.wte.weight``) saved pruned under
several names is pruned once, under the first, and shared with the others
(:func:`~prune_explorer.session.model.aliases.share_pruning`): the tie holds after loading, as it
did in the session that saved it. Their saved masks and values must then agree.

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> saved = prune.l1_unstructured(torch.nn.Linear(4, 2), "weight", amount=0.5).state_dict()
>>> fresh = torch.nn.Linear(4, 2)
>>> load_pruned_state_dict(fresh, saved)
>>> int((fresh.weight == 0).sum()), sorted(fresh.state_dict())
(4, ['bias', 'weight_mask', 'weight_orig'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.prune.validation import excerpt

from ..errors import InvalidMaskError, InvalidTensorError, StateDictMismatchError, one_line
from .aliases import share_pruning
from .hooks import refresh_pruned
from .library_keys import model_keys
from .tensor_kinds import PRUNABLE_DTYPES, unplain_kind

__all__ = [
    "InvalidMaskError",
    "InvalidTensorError",
    "StateDictMismatchError",
    "check_masks",
    "load_pruned_state_dict",
    "pruned_pairs",
]

MAX_LISTED = 6  # keys shown per kind of mismatch


def pruned_pairs(state: Mapping[str, torch.Tensor]) -> list[str]:
    """Names ``x`` saved as a pruned pair ``x_orig`` + ``x_mask``, in file order.

    Examples
    --------
    >>> pruned_pairs({"w_orig": torch.ones(1), "w_mask": torch.ones(1), "b": torch.ones(1)})
    ['w']
    """
    return [
        key[: -len("_orig")]
        for key in state
        if key.endswith("_orig") and key[: -len("_orig")] + "_mask" in state
    ]


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(s) for s in t.shape) + (",)" if t.dim() == 1 else ")")


def check_masks(state: Mapping[str, torch.Tensor]) -> None:
    """Check every tensor holds plain data, and every pruned pair: the mask is floating-point or
    bool, has the shape of its ``_orig``, and holds only 0 and 1.

    Raises
    ------
    InvalidTensorError
        A sparse, nested, quantized, meta or complex tensor, naming its key.
    InvalidMaskError
        Naming the mask's key, the rule and the value found.

    Examples
    --------
    >>> check_masks({"w_orig": torch.ones(2), "w_mask": torch.tensor([1.0, 0.5])})
    Traceback (most recent call last):
    ...
    prune_explorer.session.errors.InvalidMaskError: w_mask must hold only 0 and 1 (a \
pruning mask); got 0.5 at index (1,), 1 of 2 entries are neither 0 nor 1
    """
    for key, tensor in state.items():
        kind = unplain_kind(tensor)
        if kind is not None:
            error = InvalidMaskError if key.endswith("_mask") else InvalidTensorError
            raise error(f"{key} must be a dense tensor holding its values; got a {kind} tensor "
                        f"of dtype {tensor.dtype}", key)
    for base in pruned_pairs(state):
        key, orig = base + "_mask", state[base + "_orig"]
        mask = state[key]
        if not (mask.dtype == torch.bool or mask.dtype in PRUNABLE_DTYPES):
            raise InvalidMaskError(
                f"{key} must be a floating-point or bool tensor (a pruning mask); "
                f"got dtype {mask.dtype}", key
            )
        if mask.shape != orig.shape:
            raise InvalidMaskError(
                f"{key} must have the shape of {base}_orig, {_shape(orig)}; got {_shape(mask)}",
                key,
            )
        if mask.dtype == torch.bool:
            continue
        bad = ~((mask == 0) | (mask == 1))
        count = int(bad.sum())
        if count:
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise InvalidMaskError(
                f"{key} must hold only 0 and 1 (a pruning mask); got {mask[where].item()!r} at "
                f"index {where}, {count} of {mask.numel()} entries are neither 0 nor 1", key
            )


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(excerpt(item) for item in items[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def load_pruned_state_dict(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Load ``state`` strictly into the fresh (unpruned) ``model``, pruned pairs included.

    A file written by Hugging Face ``save_pretrained`` (tied parameters saved once, keys
    renamed to the library's checkpoint names) is read under the model's own keys first
    (:func:`~prune_explorer.session.model.library_keys.model_keys`).

    Each valid pair ``x_orig`` + ``x_mask`` of a parameter ``x`` is pruned again with
    ``custom_from_mask`` first, so the keys line up; after loading, every pruned copy
    ``x = x_orig * x_mask`` is recomputed. Meant for a model built for the purpose: on an error
    the model may be left half-loaded.

    Raises
    ------
    InvalidMaskError
        A mask is not binary, has the wrong shape or dtype (see :func:`check_masks`).
    StateDictMismatchError
        Missing or unexpected keys or shapes that differ, all listed at once.
    """
    check_masks(state)
    state = model_keys(model, state)  # as Hugging Face saves it: ties once, renamed keys
    params = dict(model.named_parameters(remove_duplicate=False))  # every name of a tied one
    problems = []
    pairs = [base for base in pruned_pairs(state) if base in params and base not in state]
    first: dict[int, str] = {}  # id of a tied parameter -> the name it is pruned under
    shared: list[tuple[str, str]] = []  # (alias, the name pruned) for share_pruning
    for base in pairs:
        mask = state[base + "_mask"]
        if mask.shape != params[base].shape:
            continue  # reported as a shape mismatch below
        module_name, _, tensor_name = base.rpartition(".")
        if id(params[base]) in first:
            problem = _tie_problem(state, first[id(params[base])], base)
            if problem:
                problems.append(problem)
            else:
                shared.append((base, first[id(params[base])]))
            continue
        first[id(params[base])] = base
        try:
            # a state dict loaded onto another device (map_location) keeps its masks there
            prune.custom_from_mask(model.get_submodule(module_name), tensor_name,
                                   mask=mask.to(params[base].device))
        except Exception as exc:
            problems.append(f"the mask {base}_mask cannot be re-applied ({one_line(exc)})")
    _share(model, shared)
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing:
        problems.append(f"missing keys {_listed(missing)}")
    if unexpected:
        problems.append(f"unexpected keys {_listed(unexpected)}")
    problems += [
        f"{k} is {tuple(state[k].shape)} in the file but {tuple(expected[k].shape)} in the model"
        for k in expected
        if k in state and state[k].shape != expected[k].shape
    ][:MAX_LISTED]
    floats = "/".join(str(d).removeprefix("torch.") for d in PRUNABLE_DTYPES)
    problems += [  # load_state_dict would cast them; the pruning API prunes floats only
        f"{k} is {state[k].dtype} in the file but {expected[k].dtype} in the model (the "
        f"pruning API prunes {floats} weights; others are refused, not cast)"
        for k in expected
        if k in state and expected[k].is_floating_point()
        and state[k].dtype not in PRUNABLE_DTYPES
        and k.removesuffix("_mask") not in pairs  # masks: check_masks' rule
    ][:MAX_LISTED]
    if problems:
        raise StateDictMismatchError(problems)
    try:
        model.load_state_dict(state)
    except Exception as exc:
        raise StateDictMismatchError([one_line(exc)]) from exc
    with torch.no_grad():
        for base in pairs:
            module_name, _, tensor_name = base.rpartition(".")
            refresh_pruned(model.get_submodule(module_name), tensor_name)
    _share(model, shared)  # the aliases take the refreshed pruned copies too


def _tie_problem(state: Mapping[str, torch.Tensor], pruned: str, alias: str) -> str | None:
    # A tied parameter saved under two names must hold one mask and one set of values there.
    for suffix in ("_mask", "_orig"):
        if not torch.equal(state[alias + suffix], state[pruned + suffix]):
            return (f"{alias}{suffix} differs from {pruned}{suffix}, but {alias} and {pruned} "
                    "are one tied parameter of the model")
    return None


def _share(model: nn.Module, shared: Sequence[tuple[str, str]]) -> None:
    for alias, pruned in shared:
        module_name, _, tensor_name = pruned.rpartition(".")
        alias_module, _, alias_name = alias.rpartition(".")
        share_pruning(model.get_submodule(module_name), tensor_name,
                      [(model.get_submodule(alias_module), alias_name)])
