"""The model a checkpoint is loaded into: ``--model`` (a demo name or an importable
``package.module:factory``), or the demo model whose keys match the checkpoint.

:func:`load_checkpoint` reads the file, checks its masks, builds the model and loads the
weights with :func:`prune_explorer.session.model.state_dict.load_pruned_state_dict`, so
pruning saved as ``<name>_orig`` + ``<name>_mask`` pairs comes back.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .checkpoints import Format, read_checkpoint
from .errors import CLIError, one_line

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["Loaded", "build_model", "load_checkpoint"]


@contextmanager
def _cwd_importable() -> Iterator[None]:
    # `--model mypkg.models:build` should find modules in the current folder, as `python -m` does.
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added:
            with suppress(ValueError):
                sys.path.remove(cwd)


_FACTORY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def _model_from_factory(spec: str) -> nn.Module:
    from torch import nn

    module_name, _, attr_path = spec.partition(":")
    with _cwd_importable():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise CLIError(
                f"--model {spec!r}: cannot import module {module_name!r} ({one_line(exc)}); "
                "is it installed or in the current folder?"
            ) from None
        except Exception as exc:
            raise CLIError(
                f"--model {spec!r}: importing {module_name!r} failed ({one_line(exc)})"
            ) from None
    factory: Any = module
    for part in attr_path.split("."):
        if not hasattr(factory, part):
            raise CLIError(f"--model {spec!r}: {module_name!r} has no attribute {attr_path!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise CLIError(
            f"--model {spec!r}: {attr_path} must be callable (a class or a function taking no "
            f"arguments); got {type(factory).__name__}"
        )
    try:
        model = factory()
    except Exception as exc:
        raise CLIError(f"--model {spec!r}: calling {attr_path}() failed ({one_line(exc)})") \
            from None
    if not isinstance(model, nn.Module):
        raise CLIError(
            f"--model {spec!r}: {attr_path}() must return a torch.nn.Module; "
            f"got {type(model).__name__}"
        )
    return model


def _plain_keys(state: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    # Key -> shape, with each pruned pair `x_orig` + `x_mask` folded back into `x`.
    from prune_explorer.session.model.state_dict import pruned_pairs

    folded = {f"{base}{suffix}": base for base in pruned_pairs(state)
              for suffix in ("_orig", "_mask")}
    return {folded.get(key, key): tuple(value.shape) for key, value in state.items()}


def _infer_demo(state: Mapping[str, torch.Tensor]) -> str | None:
    from prune_explorer.demo import DEMO_MODELS, untrained_model

    wanted = _plain_keys(state)
    for name in DEMO_MODELS:
        reference = {k: tuple(v.shape) for k, v in untrained_model(name).state_dict().items()}
        if reference == wanted:
            return name
    return None


def build_model(spec: str | None, state: Mapping[str, torch.Tensor]) -> tuple[nn.Module, str]:
    """The module ``--model`` names, with fresh weights, and a description for messages."""
    from prune_explorer.demo import DEMO_MODELS, untrained_model

    if spec is None:
        spec = _infer_demo(state)
        if spec is None:
            raise CLIError(
                "--model is needed: the checkpoint's keys match no demo model; pass --model "
                f"{' or --model '.join(DEMO_MODELS)} or --model package.module:factory "
                "(an importable function or class returning the nn.Module the state_dict "
                "was saved from)"
            )
        model = untrained_model(spec)
        return model, f"demo model {spec!r} ({type(model).__name__}; matched by its keys)"
    if spec in DEMO_MODELS:
        model = untrained_model(spec)
        return model, f"demo model {spec!r} ({type(model).__name__})"
    if not _FACTORY.match(spec):
        raise CLIError(
            f"--model must be {', '.join(repr(n) for n in DEMO_MODELS)} or "
            f"'package.module:factory'; got {spec!r}"
        )
    model = _model_from_factory(spec)
    return model, f"{spec} ({type(model).__name__})"


@dataclass
class Loaded:
    """A model with a checkpoint's weights, how it was chosen, and the file's format."""

    model: nn.Module
    described: str
    format: Format

    def __repr__(self) -> str:
        return f"Loaded({self.described}, {self.format})"


def load_checkpoint(path: Path, spec: str | None) -> Loaded:
    """Read CHECKPOINT ``path`` and load it into the model ``spec`` names (see module doc)."""
    from prune_explorer.session.model.state_dict import (
        InvalidTensorError,
        StateDictMismatchError,
        check_masks,
        load_pruned_state_dict,
    )

    checkpoint = read_checkpoint(path, "CHECKPOINT")
    try:  # before guessing the model: a bad mask must be named, not taken for another model
        check_masks(checkpoint.state)
    except InvalidTensorError as exc:
        raise CLIError(f"CHECKPOINT {str(path)!r}: {exc}") from None
    model, described = build_model(spec, checkpoint.state)
    try:
        load_pruned_state_dict(model, checkpoint.state)
    except StateDictMismatchError as exc:
        raise CLIError(
            f"CHECKPOINT {str(path)!r} does not fit {described}: {exc}. Does --model name the "
            "architecture the state_dict was saved from?"
        ) from None
    return Loaded(model.eval(), described, checkpoint.format)
