"""``prune-explorer apply ... --shrink``: save a physically smaller model and how to rebuild it.

After the plan is applied, :func:`prune_explorer.session.shrink.depgraph.shrink` removes the dead
channels, traced on an example input batch of ``--input-shape`` (the demo models know their
own). What the batch holds is ``--input-kind``: ``float`` (zeros: images, features) or
``tokens`` (integer token ids, for language models: ``0, 1, 2...`` modulo the vocabulary, shape
``1,8`` by default); by default ``tokens`` when the model's input is an embedding table (a Hugging
Face model's ``get_input_embeddings()``, or a first layer that is an ``nn.Embedding``), else
``float``. A model whose ``forward`` takes ``input_ids`` (or ``pixel_values``) gets the batch as
that keyword, with ``decoder_input_ids`` too where it takes them (T5). Two files are written
through the one safe writer:

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
from .errors import CLIError, one_line

__all__ = ["INPUT_KINDS", "description_path", "example_inputs", "input_kind", "input_shape",
           "write_shrunk"]

_DEMO_SHAPES = {"flat": (1, 64), "image": (1, 1, 8, 8)}

#: What ``--input-kind`` accepts: float zeros, or integer token ids.
INPUT_KINDS = ("float", "tokens")

#: The token batch's shape when ``--input-shape`` is not given: one sequence of 8 tokens.
TOKEN_SHAPE = (1, 8)


def _embedding(model: Any) -> Any:
    """The model's input embedding table (an ``nn.Embedding``), or None."""
    from torch import nn

    getter = getattr(model, "get_input_embeddings", None)
    if callable(getter):
        try:
            table = getter()
        except Exception:  # a library model without one (NotImplementedError...)
            table = None
        if isinstance(table, nn.Embedding):
            return table
    first = next((m for m in model.modules() if not list(m.children())), None)
    return first if isinstance(first, nn.Embedding) else None


def input_kind(text: str | None, model: Any) -> str:
    """``--input-kind``, or ``tokens`` when the model's input is an embedding, else
    ``float``."""
    if text is not None:
        if text not in INPUT_KINDS:
            raise CLIError(f"--input-kind must be one of {', '.join(INPUT_KINDS)}; got {text!r}")
        return text
    return "tokens" if _embedding(model) is not None else "float"


def example_inputs(model: Any, kind: str, shape: tuple[int, ...]) -> Any:
    """The batch shrink traces: zeros of ``shape`` (``float``) or token ids (``tokens``),
    given as the keyword the model's ``forward`` names when it names one."""
    import inspect

    import torch

    if kind == "tokens":
        table = _embedding(model)
        vocabulary = table.num_embeddings if table is not None else 2
        batch = torch.arange(int(torch.tensor(shape).prod())).reshape(shape) % vocabulary
    else:
        batch = torch.zeros(shape)
    try:
        takes = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return batch
    keyword = "input_ids" if kind == "tokens" else "pixel_values"
    if keyword not in takes:
        return batch
    inputs = {keyword: batch}
    if kind == "tokens" and "decoder_input_ids" in takes:  # encoder-decoder (T5, BART)
        inputs["decoder_input_ids"] = batch
    return inputs


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

    from prune_explorer.session.shrink.depgraph import ShrinkError, shrink
    from prune_explorer.session.shrink.description import describe

    if files.is_stdout(output):
        raise CLIError("--shrink writes two files (the state_dict and its .shrunk.json): "
                       "-o/--output must be a file, not '-'")
    kind = input_kind(getattr(args, "input_kind", None), model)
    shape = TOKEN_SHAPE if kind == "tokens" and args.input_shape is None \
        else input_shape(args.input_shape, model)
    arch = description_path(output)
    force = getattr(args, "force", False)
    files.check(arch, "-o/--output (.shrunk.json)", inputs, force=force)
    example = example_inputs(model, kind, shape)
    batch = (f"{kind} inputs of shape {','.join(map(str, shape))} (--input-kind and "
             "--input-shape choose them)")
    try:  # the batch must suit the model before anything is traced
        with torch.no_grad():
            model(**example) if isinstance(example, dict) else model(example)
    except Exception as exc:
        raise CLIError(f"--shrink: the model cannot run on {batch}: {one_line(exc)}") from None
    try:
        report = shrink(model, example, repeats=5)
    except ImportError as exc:
        raise CLIError(str(exc)) from None
    except ShrinkError as exc:
        raise CLIError(f"{exc} (traced on {batch})") from None
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
