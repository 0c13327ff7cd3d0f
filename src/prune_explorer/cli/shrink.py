"""``prune-explorer apply ... --shrink``: save a physically smaller model and how to rebuild it.

After the plan is applied, :func:`prune_explorer.session.shrink.depgraph.shrink` removes the dead
channels (traced on zeros of ``--input-shape``; the demo models know their own). Two files are
written through the one safe writer:

* OUTPUT -- the shrunk model's plain state_dict (``.safetensors`` or ``.pt`` by its suffix, else
  the checkpoint's format; never a pickled module);
* OUTPUT + ``.shrunk.json`` -- the architecture description of
  :mod:`prune_explorer.session.shrink.description` (JSON): build the original model, call
  ``rebuild(model, json.load(f))``, then ``model.load_state_dict(state_dict)``.

The two are written as a pair: both new or both old (a state_dict loads only with its own
description).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import IO, Any

from . import files
from .checkpoints import checkpoint_bytes
from .errors import CLIError

__all__ = ["description_path", "input_shape", "write_shrunk"]

_DEMO_SHAPES = {"flat": (1, 64), "image": (1, 1, 8, 8)}


def description_path(output: Path) -> Path:
    """Where the architecture description of OUTPUT goes."""
    return output.with_name(output.name + ".shrunk.json")


def input_shape(text: str | None, model: Any) -> tuple[int, ...]:
    """``--input-shape`` ("1,3,32,32"), or the demo model's own input shape."""
    if text is None:
        layout = getattr(model, "input_layout", None)
        if layout in _DEMO_SHAPES:
            return _DEMO_SHAPES[layout]
        raise CLIError("--shrink needs --input-shape (e.g. --input-shape 1,3,32,32): the shape "
                       "of one input batch to trace the model with")
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        shape = ()
    if not shape or any(d < 1 for d in shape):
        raise CLIError(f"--input-shape must be positive ints separated by commas; got {text!r}")
    return shape


def write_shrunk(args: argparse.Namespace, model: Any, output: Path, fmt: Any,
                 inputs: files.Inputs, out: IO[str]) -> None:
    """Shrink ``model`` (pruned), write OUTPUT and its description, print the report."""
    import torch

    from prune_explorer.session.shrink.depgraph import shrink
    from prune_explorer.session.shrink.description import describe

    if files.is_stdout(output):
        raise CLIError("--shrink writes two files (the state_dict and its .shrunk.json): "
                       "-o/--output must be a file, not '-'")
    shape = input_shape(args.input_shape, model)
    arch = description_path(output)
    force = getattr(args, "force", False)
    files.check(arch, "-o/--output (.shrunk.json)", inputs, force=force)
    try:
        report = shrink(model, torch.zeros(shape), repeats=5)
    except ImportError as exc:
        raise CLIError(str(exc)) from None
    description = describe(report.model, model, args.model or "")
    files.write_pair([  # both new or both old: a state_dict loads only with its description
        (output, checkpoint_bytes(report.model.state_dict(), fmt), "-o/--output"),
        (arch, (json.dumps(description, indent=2) + "\n").encode(), "-o/--output (.shrunk.json)"),
    ], inputs, force=force)
    print(f"Shrunk:\n{report!r}", file=out)
    removed = sum(report.removed.values())
    print(f"Wrote {output} ({fmt}): the shrunk state_dict ({removed} channels removed), and "
          f"{arch}: the layers to resize before loading it (see "
          "prune_explorer.session.shrink.description.rebuild).", file=out)
