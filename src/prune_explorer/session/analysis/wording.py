"""Words and numbers for people: the one place that formats what a reader sees.

Method names a person reads, counts with thousands separators and correct singular/plural,
percentages with one decimal, a step as a sentence, and :func:`display_table`, which turns any of
the session's report frames into strings with human column headers (the frames themselves keep
their documented columns, dtypes and values). The explorer, the reports' printed forms and the
status lines all use these, so a rule changes here and nowhere else.

Examples
--------
>>> plural(1, "entry"), plural(8192, "entry"), plural(2, "output channel (dim 0)")
('1 entry', '8,192 entries', '2 output channels (dim 0)')
>>> percent(0.557739)
'55.8%'
>>> from prune_explorer.session import Step
>>> describe_step(Step("l1_unstructured", "fc1.weight", amount=0.5), pruned=8192, sparsity=0.5)
'L1 magnitude, 50% of fc1.weight: 8,192 entries pruned (now 50.0% of fc1.weight pruned)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd

from prune_explorer.prune.layers import layer_axes

from ..steps.step import Step

__all__ = ["HEADERS", "METHOD_NAMES", "ReportFrame", "amount_text", "count", "describe_change",
           "describe_rounding", "describe_settings", "describe_step", "display_table",
           "human_bytes", "method_name", "noun", "percent", "plural", "shape_text",
           "slice_unit"]

#: What a person reads for each method name (the session's and the history's "initial").
METHOD_NAMES: dict[str, str] = {
    "initial": "as found",
    "identity": "no pruning (identity)",
    "random_unstructured": "random",
    "l1_unstructured": "L1 magnitude",
    "random_structured": "random structured",
    "ln_structured": "Ln-norm structured",
    "custom_from_mask": "custom mask",
    "semi_structured": "N:M semi-structured",
    "block_structured": "blocks",
    "global_unstructured": "global",
    "wanda_rows": "Wanda per output row",
    "sparsegpt": "SparseGPT (prune and update)",
    "remove": "commit (prune.remove)",
}

#: Human column headers of the session's report frames (other columns: snake_case to words).
HEADERS: dict[str, str] = {
    "name": "Tensor",
    "module_type": "Module",
    "shape": "Shape",
    "numel": "Entries",
    "zeros": "Zeros",
    "sparsity": "Sparsity",
    "channels_pruned": "Channels pruned",
    "methods": "Methods",
    "aliases": "Also named",
    "step": "Step",
    "method": "Method",
    "settings": "Settings",
    "seed": "Seed",
    "pruned": "Pruned",
    "newly_pruned": "Pruned by this step",
    "sparsity_global": "Sparsity (global)",
    "sparsity_local": "Sparsity (local)",
    "pruned_global": "Pruned (global)",
    "pruned_local": "Pruned (local)",
    "collapsed_global": "Collapses (global)",
    "collapsed_local": "Collapses (local)",
    "orig_bytes": "Original",
    "mask_bytes": "Mask",
    "pruned_copy_bytes": "Pruned copy",
    "bytes_before": "Before",
    "bytes_after": "After",
    "freed": "Freed",
}

_BYTES = {"orig_bytes", "mask_bytes", "pruned_copy_bytes", "bytes_before", "bytes_after", "freed"}


def count(n: int) -> str:
    """An integer with thousands separators: ``8192 -> '8,192'``."""
    return f"{int(n):,}"


#: Words ending in a "ch" said as "k", which take a plain "s".
_HARD_CH = ("epoch",)


def _plural_word(word: str) -> str:
    if word in _HARD_CH:
        return word + "s"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def noun(n: int, singular: str) -> str:
    """``singular`` as the count ``n`` needs it: the word before "along"/"over" takes the
    plural, else the last word before a bracket.

    >>> noun(1, "entry"), noun(2, "entry"), noun(0, "slice along dim 1")
    ('entry', 'entries', 'slices along dim 1')
    >>> noun(2, "kernel row (dim 2)"), noun(3, "entry over 2 tensors")
    ('kernel rows (dim 2)', 'entries over 2 tensors')
    >>> noun(2, "batch"), noun(10, "epoch")
    ('batches', 'epochs')
    """
    if int(n) == 1:
        return singular
    words = singular.split(" ")
    head = len(words) - 1
    for i, word in enumerate(words):
        if word in ("along", "over") or word.startswith("("):
            head = i - 1
            break
    words[head] = _plural_word(words[head])
    return " ".join(words)


#: What a slice along each dim of a weight is, by rank (convolution weights: out, in, kernel).
_SLICE_UNITS: dict[int, tuple[str, ...]] = {
    1: ("entry",),
    2: ("output row", "input column"),
    3: ("output channel", "input channel", "kernel position"),
    4: ("output channel", "input channel", "kernel row", "kernel column"),
    5: ("output channel", "input channel", "kernel plane", "kernel row", "kernel column"),
}


_KERNEL_AXES = {"k": "kernel position", "kd": "kernel plane", "kh": "kernel row",
                "kw": "kernel column"}


def slice_unit(rank: int, dim: int, module_type: str | None = None) -> str:
    """What structured pruning along ``dim`` of a rank-``rank`` weight removes, singular, with
    its dim (the one name the explorer, the status line and the reports use).

    Where the owning layer's kind is known, its axes come from the core's one table
    (:mod:`prune_explorer.prune.layers`): output or input units as that layer stores them, so
    ``transformers``' ``Conv1D`` (stored (in, out)) and transposed convolutions ((in, out, ...))
    are named the right way round. Otherwise a weight is read as (out, in, kernel...).

    Examples
    --------
    >>> slice_unit(4, 0), slice_unit(4, 2), slice_unit(2, 1)
    ('output channel (dim 0)', 'kernel row (dim 2)', 'input column (dim 1)')
    >>> slice_unit(2, 0, "Conv1D"), slice_unit(2, 1, "Conv1D")
    ('input row (dim 0)', 'output column (dim 1)')
    >>> slice_unit(4, 0, "ConvTranspose2d"), slice_unit(7, 3)
    ('input channel (dim 0)', 'slice along dim 3')
    >>> plural(2, slice_unit(4, 2))
    '2 kernel rows (dim 2)'
    """
    rank, dim = int(rank), int(dim)
    if not 0 <= dim < max(rank, 0):
        return f"slice along dim {dim}"
    axes = layer_axes(module_type)
    if axes is not None and len(axes.dims) == rank:
        shape_word = ("row", "column")[dim] if rank == 2 else "channel"
        if dim == axes.out_dim:
            return f"output {shape_word} (dim {dim})"
        if dim == axes.in_dim:
            return f"input {shape_word} (dim {dim})"
        return f"{_KERNEL_AXES.get(axes.dims[dim], axes.dims[dim])} (dim {dim})"
    names = _SLICE_UNITS.get(rank, ())
    if dim < len(names):
        return names[dim] if rank == 1 else f"{names[dim]} (dim {dim})"
    return f"slice along dim {dim}"


def plural(n: int, singular: str) -> str:
    """``n`` with separators and ``singular`` in the form ``n`` needs (see :func:`noun`).

    >>> plural(0, "step"), plural(1, "tensor"), plural(1234, "entry over 3 tensors")
    ('0 steps', '1 tensor', '1,234 entries over 3 tensors')
    """
    return f"{count(n)} {noun(n, singular)}"


def percent(fraction: float, digits: int = 1) -> str:
    """A fraction as a percentage: ``0.25 -> '25.0%'``."""
    return f"{100.0 * float(fraction):.{digits}f}%"


def human_bytes(n: int) -> str:
    """Bytes as B, KiB, MiB or GiB with one decimal.

    >>> human_bytes(3 * 1024 * 1024)
    '3.0 MiB'
    """
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024.0:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024.0
    return f"{value:.1f} GiB"


def shape_text(shape: Sequence[int]) -> str:
    """``(64, 128) -> '64×128'`` (``'scalar'`` for ``()``)."""
    return "×".join(str(s) for s in shape) or "scalar"


def method_name(method: str) -> str:
    """The name a person reads for ``method`` (the method itself if unknown)."""
    return METHOD_NAMES.get(method, method)


def amount_text(amount: float | int, noun: str = "entry") -> str:
    """``0.5 -> '50%'``, ``0.125 -> '12.5%'``, ``3 -> '3 entries'`` (an int is a count)."""
    if isinstance(amount, int) and not isinstance(amount, bool):
        return plural(amount, noun)
    return f"{100.0 * float(amount):.4g}%"


def describe_settings(settings: Mapping[str, Any]) -> str:
    """Settings as ``key=value`` pairs; a custom mask by its shape.

    >>> describe_settings({"amount": 0.5, "n": 2, "dim": 0})
    'amount=0.5, n=2, dim=0'
    """
    parts = []
    for key, value in settings.items():
        if key == "mask":
            parts.append(f"mask {shape_text(tuple(getattr(value, 'shape', ())))}")
        elif key == "pruning_method":
            parts.append(f"ranked by {method_name(str(value))}")
        else:
            parts.append(f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}")
    return ", ".join(parts)


def describe_rounding(amount: float | int | None, left: int, unit: str, pruned: int) -> str:
    """How ``amount`` became the count ``pruned`` of ``left`` units (``unit`` singular).

    >>> describe_rounding(0.3, 96, "entry", 29)
    '30% of 96 entries left = 28.8, rounded to 29'
    >>> describe_rounding(5, 96, "entry", 5), describe_rounding(None, 96, "entry", 1)
    ('5 of 96 entries left', 'prunes 1 entry')
    """
    if amount is None:
        return f"prunes {plural(pruned, unit)}"
    if isinstance(amount, int) and not isinstance(amount, bool):
        return f"{count(amount)} of {plural(left, unit)} left"
    exact = float(amount) * left
    shown = f"{exact:,.0f}" if exact == math.floor(exact) else f"{exact:,.3f}".rstrip("0")
    return (f"{amount_text(amount)} of {plural(left, unit)} left = {shown}, rounded to "
            f"{count(pruned)}")


def _what(step: Step, target: str | None) -> str:
    if "sparsity" in step.settings:  # the methods computed from calibration
        sparsity = step.settings["sparsity"]
        share = sparsity if isinstance(sparsity, str) else amount_text(sparsity)
        return f"{method_name(step.method)}, {share} of {target or step.target}"
    text = _what_method(step, target)
    if step.importance != "magnitude":  # the criterion's scores replace |w|
        text += f", scored by {step.importance}"
    return text


def _what_method(step: Step, target: str | None) -> str:
    s = step.settings
    method = step.method
    if method in _TRAINING:
        epochs = int(s.get("epochs", 0))
        return _TRAINING[method].format(epochs=f"{count(epochs)} epoch{'s' * (epochs != 1)}")
    if method == "global_unstructured":
        ranked = "random" if s["pruning_method"] == "random_unstructured" else "L1 magnitude"
        return (f"global {ranked}, {amount_text(s['amount'])} over "
                f"{target or plural(len(step.targets), 'tensor')}")
    target = target or str(step.target)
    if method in ("ln_structured", "random_structured"):
        # the step alone does not know the rank: slices by their dim, never a wrong name
        how = f"n={s['n']}, dim={s['dim']}" if method == "ln_structured" else f"dim={s['dim']}"
        unit = f"slice along dim {s['dim']}"
        return f"{method_name(method)} ({how}), {amount_text(s['amount'], unit)} of {target}"
    if method == "semi_structured":
        return f"{s['pattern']} semi-structured on {target}"
    if method == "block_structured":
        block = "×".join(str(b) for b in s["block"])
        return f"{block} blocks, {amount_text(s['amount'], 'block')} of {target}"
    if "amount" in s:
        return f"{method_name(method)}, {amount_text(s['amount'])} of {target}"
    return f"{method_name(method)} on {target}"


#: The steps that train or rewind (``session/steps/training.py``), in words.
_TRAINING = {
    "fine_tune": "fine-tune, {epochs}",
    "keep_weights": "keep the weights (the point a rewind returns to)",
    "rewind": "rewind every weight to the kept ones (masks unchanged)",
}


def describe_step(step: Step, *, pruned: int | None = None, sparsity: float | None = None,
                  target: str | None = None, of: str | None = None) -> str:
    """``step`` as a phrase, with what it did when given: entries ``pruned`` (negative when an
    undo restored them) and the ``sparsity`` of its tensors now, named by ``of`` (default:
    the step's tensor, or "its k tensors"). ``target`` replaces the tensor's name (e.g.
    ``"each of 3 tensors"`` for one such step per tensor).

    >>> describe_step(Step("random_unstructured", "0.weight", amount=3, seed=7))
    'random, 3 entries of 0.weight (seed 7)'
    >>> describe_step(Step("l1_unstructured", "0.weight", amount=0.3), pruned=-1, sparsity=0.0)
    'L1 magnitude, 30% of 0.weight: 1 entry restored (now 0.0% of 0.weight pruned)'
    >>> from prune_explorer.session import TrainingStep
    >>> describe_step(TrainingStep.fine_tune(10))
    'fine-tune, 10 epochs'
    """
    text = _what(step, target)
    if step.method in _TRAINING:  # no masks changed: nothing pruned to count
        return text
    if step.seed is not None:
        text += f" (seed {step.seed})"
    done = []
    if pruned is not None:
        done.append(plural(abs(pruned), "entry") + (" restored" if pruned < 0 else " pruned"))
    if sparsity is not None:
        if of is None:
            targets = step.targets
            of = targets[0] if len(targets) == 1 else f"its {len(targets)} tensors"
        done.append(f"(now {percent(sparsity)} of {of} pruned)")
    if done:
        text += ": " + " ".join(done)
    return text


def describe_change(verb: str, steps: Sequence[Step], zeros_before: Mapping[str, int],
                    zeros_after: Mapping[str, int], numel: Mapping[str, int]) -> str:
    """A sentence for ``steps`` done (or undone, by ``verb``): entries pruned and the sparsity
    of their tensors now, from the exact zeros per tensor before and after. Several steps are
    one method and amount, one per tensor.

    >>> steps = [Step("l1_unstructured", n, amount=0.5) for n in ("a.weight", "b.weight")]
    >>> text = describe_change("Applied", steps, {}, {"a.weight": 5, "b.weight": 5},
    ...                        {"a.weight": 10, "b.weight": 10})
    >>> for part in text.split(": "):
    ...     print(part)
    Applied L1 magnitude, 50% of each of 2 tensors
    10 entries pruned (now 50.0% of these 2 tensors pruned).
    """
    if all(step.method in _TRAINING for step in steps):  # the weights changed, not the masks
        return f"{verb} {'; '.join(_what(step, None) for step in steps)}."
    names = list(dict.fromkeys(n for step in steps for n in step.targets))
    after = sum(zeros_after.get(n, 0) for n in names)
    total = sum(numel[n] for n in names)
    pruned = after - sum(zeros_before.get(n, 0) for n in names)
    each = f"each of {plural(len(names), 'tensor')}" if len(steps) > 1 else None
    of = names[0] if len(names) == 1 else f"these {len(names)} tensors"
    text = describe_step(steps[0], pruned=pruned, sparsity=after / total if total else 0.0,
                         target=each, of=of)
    return f"{verb} {text}."


def _header(column: str) -> str:
    if column in HEADERS:
        return HEADERS[column]
    words = str(column).replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell(column: str, value: Any, words: bool = True) -> str:
    """One value as text: fractions as percentages, counts with separators, Yes/No, integer
    seeds, blank for none; method names in words unless ``words`` is False."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()  # a numpy scalar
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if _is_missing(value):
        return ""
    if column == "seed":
        return str(int(value))
    if column in ("method", "pruning_method"):
        return method_name(str(value)) if words else str(value)
    if column == "methods" and isinstance(value, tuple):
        return " → ".join(method_name(m) if words else m for m in value)
    if column == "shape" and isinstance(value, tuple):
        return shape_text(value) if value else ""
    if column in _BYTES and isinstance(value, (int, float)):
        return human_bytes(int(value))
    if "sparsity" in column and isinstance(value, (int, float)):
        return percent(value)
    if isinstance(value, int):
        return count(value)
    if isinstance(value, float):
        return count(int(value)) if value.is_integer() and abs(value) >= 1000 else f"{value:.4g}"
    if column == "channels_pruned" and isinstance(value, Mapping):
        return ", ".join(f"dim {d}: {n:,}" for d, n in value.items() if n)
    if column == "settings" and isinstance(value, Mapping):
        return describe_settings(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_cell(str(k), v)}" for k, v in value.items())
    if isinstance(value, tuple):
        return ", ".join(_cell(column, v) for v in value)
    return str(value)


def display_table(frame: pd.DataFrame, columns: Sequence[str] | None = None, *,
                  percent_columns: Sequence[str] = (), words: bool = True) -> pd.DataFrame:
    """``frame`` (or its ``columns``) as text a person reads: every cell a string, headers and
    method names in words (``words=False`` keeps the column names and method names as code
    uses them: the printed form of the session's own frames, see :class:`ReportFrame`).

    ``percent_columns`` are shown as percentages besides every ``sparsity`` column. Yes/No for
    booleans, integer seeds, blank for none, separators in counts. The frame is not changed.

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"step": [0, 1], "seed": [None, 1655000000],
    ...                       "sparsity": [0.0, 0.557739], "collapsed_local": [False, True]})
    >>> display_table(frame).to_dict("records")[1]
    {'Step': '1', 'Seed': '1655000000', 'Sparsity': '55.8%', 'Collapses (local)': 'Yes'}
    """
    columns = list(frame.columns) if columns is None else list(columns)
    out = {}
    for column in columns:
        values = frame[column].tolist()
        if column in percent_columns:
            cells = ["" if _is_missing(v) else percent(v) for v in values]
        else:
            cells = [_cell(str(column), v, words) for v in values]
        out[_header(str(column)) if words else column] = cells
    return pd.DataFrame(out, index=frame.index, dtype=object)


class ReportFrame(pd.DataFrame):  # type: ignore[misc]  # pandas is untyped here (Any)
    """A report of the session: a plain DataFrame (documented columns, dtypes and values) that
    prints for people -- fractions as percentages, separators in counts, integer seeds, blank
    for none (:func:`display_table` with ``words=False``). Frames derived from it print so too.

    >>> frame = ReportFrame({"name": ["fc1.weight"], "numel": [65536], "sparsity": [0.557739]})
    >>> float(frame.loc[0, "sparsity"])
    0.557739
    >>> print(frame)
             name   numel sparsity
    0  fc1.weight  65,536    55.8%
    """

    _metadata: ClassVar[list[str]] = []

    @property
    def _constructor(self) -> type[ReportFrame]:
        return ReportFrame

    def describe(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        """pandas' summary statistics, as a plain DataFrame (a count is not a percentage)."""
        return pd.DataFrame(super().describe(*args, **kwargs))

    def _shown(self) -> pd.DataFrame:
        return display_table(self, words=False)

    def __repr__(self) -> str:
        return repr(self._shown())

    def _repr_html_(self) -> str | None:
        return self._shown()._repr_html_()
