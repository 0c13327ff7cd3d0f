"""Small demo models trained in seconds on scikit-learn's bundled digits (no download).

Two classifiers for the 1,797 8x8 grey-scale digit images of
:func:`sklearn.datasets.load_digits`, with trained weights shipped in the package so the
explorer opens instantly:

:func:`load_mlp`
    :class:`DigitsMLP`, 64 -> 128 -> 64 -> 10 (``fc1``, ``fc2``, ``fc3``).
:func:`load_cnn`
    :class:`DigitsCNN`, two 3x3 convolutions (``features.0``, ``features.3``) and a linear
    ``classifier``.
:func:`evaluate`
    Accuracy on the held-out test split (450 images), pruned or not.
:func:`train`
    Deterministic Adam training on the 1,347 training images (about a second on a CPU).
:func:`load_digits_split`
    The fixed, stratified train/test split as tensors scaled to [0, 1].

Examples
--------
>>> from prune_explorer import prune
>>> from prune_explorer.demo import evaluate, load_mlp
>>> model = load_mlp()
>>> evaluate(model) > 0.95
True
>>> _ = prune.l1_unstructured(model.fc1, "weight", amount=0.5)
>>> evaluate(model) > 0.9
True
"""

from prune_explorer.demo.checkpoints import (
    CHECKPOINT_DIR,
    DEMO_MODELS,
    build_checkpoints,
    cache_dir,
    load_cnn,
    load_mlp,
    load_model,
    trained_model,
    untrained_model,
)
from prune_explorer.demo.data import DigitsSplit, load_digits_split
from prune_explorer.demo.models import DigitsCNN, DigitsMLP, infer_layout
from prune_explorer.demo.training import evaluate, train

__all__ = [
    "CHECKPOINT_DIR",
    "DEMO_MODELS",
    "DigitsCNN",
    "DigitsMLP",
    "DigitsSplit",
    "build_checkpoints",
    "cache_dir",
    "evaluate",
    "infer_layout",
    "load_cnn",
    "load_digits_split",
    "load_mlp",
    "load_model",
    "train",
    "trained_model",
    "untrained_model",
]
