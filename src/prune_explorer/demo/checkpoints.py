"""Trained demo models, ready in milliseconds.

The package ships the trained weights of both demo models as plain ``state_dict`` files in
``prune_explorer/demo/checkpoints/`` (``mlp.pt``, ``cnn.pt``), read with
``torch.load(weights_only=True)``. If a file is missing (for instance in a source tree where
it was deleted), the model is trained on the spot (about a second) and, when ``cache=True``,
saved to the user cache directory -- never into the installed package.

Regenerate the shipped files with ``python -m prune_explorer.demo`` (or
:func:`build_checkpoints`); the result is deterministic on a given machine.

Examples
--------
>>> from prune_explorer.demo import evaluate, load_cnn
>>> model = load_cnn()
>>> evaluate(model) > 0.95
True
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import cast

import torch
from torch import nn

from prune_explorer._files import write_output
from prune_explorer.demo.models import DigitsCNN, DigitsMLP
from prune_explorer.demo.training import train

CHECKPOINT_DIR = Path(__file__).resolve().parent / "checkpoints"
CACHE_ENV = "PRUNE_EXPLORER_CACHE"

DEMO_MODELS: Mapping[str, Callable[[], nn.Module]] = MappingProxyType(
    {"mlp": DigitsMLP, "cnn": DigitsCNN}
)
"""Demo model name -> class building an untrained model (read-only mapping)."""

BUILD_SEED = 0


def cache_dir() -> Path:
    """Return the directory where checkpoints trained at run time are cached.

    ``$PRUNE_EXPLORER_CACHE`` if set, else ``$XDG_CACHE_HOME/prune_explorer``, else
    ``~/.cache/prune_explorer``. The directory is not created here.

    Examples
    --------
    >>> cache_dir().name == "prune_explorer" or CACHE_ENV in os.environ
    True
    """
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "prune_explorer"


def _check_name(function: str, name: str) -> None:
    if name not in DEMO_MODELS:
        raise ValueError(f"{function}: name must be one of {sorted(DEMO_MODELS)}; got {name!r}")


def untrained_model(name: str, seed: int = BUILD_SEED) -> nn.Module:
    """Build demo model ``name`` with initial weights drawn from ``seed``.

    The global torch random state is left untouched.

    Examples
    --------
    >>> a, b = untrained_model("mlp", seed=1), untrained_model("mlp", seed=1)
    >>> bool((a.fc1.weight == b.fc1.weight).all())
    True
    """
    _check_name("untrained_model", name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DEMO_MODELS[name]()


def trained_model(name: str, seed: int = BUILD_SEED) -> nn.Module:
    """Initialise demo model ``name`` from ``seed`` and train it with the default settings.

    This is exactly how the shipped checkpoints are made.

    Examples
    --------
    >>> from prune_explorer.demo import evaluate
    >>> evaluate(trained_model("mlp")) > 0.95
    True
    """
    return train(untrained_model(name, seed), seed=seed)


def _read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)


def _save_atomically(state_dict: Mapping[str, torch.Tensor], path: Path) -> None:
    # Serialise to memory first: torch.save names the archive after a real file, so writing
    # the temporary file directly would make the bytes depend on its random name.
    buffer = io.BytesIO()
    torch.save(dict(state_dict), buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the package's one safe writer; the cache is the package's own file, not a user's output
    write_output(path, buffer.getvalue(), "checkpoint", force=True)


def _load_shipped(model: nn.Module, path: Path) -> None:
    advice = "regenerate it with `python -m prune_explorer.demo` or reinstall prune-explorer"
    try:
        state = _read_state_dict(path)
    except Exception as exc:
        raise RuntimeError(
            f"load_model: the shipped checkpoint {path} is not a readable weights-only "
            f"state_dict file ({type(exc).__name__}); {advice}"
        ) from exc
    try:
        model.load_state_dict(state)
    except Exception as exc:
        detail = " ".join(str(exc).split())[:300]
        raise RuntimeError(
            f"load_model: the shipped checkpoint {path} does not fit "
            f"{type(model).__name__} ({detail}); {advice}"
        ) from exc


def load_model(name: str, pretrained: bool = True, *, cache: bool = True) -> nn.Module:
    """Return demo model ``name`` (``"mlp"`` or ``"cnn"``), trained unless ``pretrained=False``.

    Parameters
    ----------
    name : {"mlp", "cnn"}
        Which demo model.
    pretrained : bool, default True
        ``True``: load the shipped checkpoint (or, if it is missing, a cached one, or train
        one now). ``False``: return the untrained model with seed-0 initial weights.
    cache : bool, default True
        When a model had to be trained because no checkpoint was found, save it to
        :func:`cache_dir` so the next call is instant.

    Returns
    -------
    torch.nn.Module
        A fresh model object in eval mode; each call returns a new, independent copy.

    Examples
    --------
    >>> model = load_model("mlp")
    >>> type(model).__name__, model.training
    ('DigitsMLP', False)
    """
    _check_name("load_model", name)
    if not isinstance(pretrained, bool):
        raise TypeError(f"load_model: pretrained must be a bool; got {pretrained!r}")
    model = untrained_model(name)
    if not pretrained:
        return model.eval()
    shipped = CHECKPOINT_DIR / f"{name}.pt"
    if shipped.is_file():
        _load_shipped(model, shipped)
        return model.eval()
    cached = cache_dir() / f"{name}.pt"
    if cached.is_file():
        try:
            model.load_state_dict(_read_state_dict(cached))
            return model.eval()
        except Exception:  # a damaged cache entry is rebuilt below
            model = untrained_model(name)
    model = train(model, seed=BUILD_SEED)
    if cache:
        try:
            _save_atomically(model.state_dict(), cached)
        except OSError as exc:  # a read-only home must not stop the demo
            warnings.warn(
                f"load_model: trained {name!r} but could not cache it at {cached} ({exc}); "
                f"set ${CACHE_ENV} to a writable directory or pass cache=False",
                RuntimeWarning,
                stacklevel=2,
            )
    return model


def load_mlp(pretrained: bool = True, *, cache: bool = True) -> DigitsMLP:
    """Return the demo :class:`DigitsMLP`, trained (about 97 % test accuracy) by default.

    Same as ``load_model("mlp", pretrained, cache=cache)``.

    Examples
    --------
    >>> from prune_explorer.demo import evaluate, load_mlp
    >>> model = load_mlp()
    >>> [name for name, _ in model.named_parameters()]
    ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias', 'fc3.weight', 'fc3.bias']
    >>> evaluate(model) > 0.95
    True
    """
    return cast(DigitsMLP, load_model("mlp", pretrained, cache=cache))


def load_cnn(pretrained: bool = True, *, cache: bool = True) -> DigitsCNN:
    """Return the demo :class:`DigitsCNN`, trained (about 97 % test accuracy) by default.

    Same as ``load_model("cnn", pretrained, cache=cache)``.

    Examples
    --------
    >>> from prune_explorer.demo import evaluate, load_cnn
    >>> model = load_cnn()
    >>> tuple(model.features[0].weight.shape)
    (16, 1, 3, 3)
    >>> evaluate(model) > 0.95
    True
    """
    return cast(DigitsCNN, load_model("cnn", pretrained, cache=cache))


def build_checkpoints(directory: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Train every demo model from seed 0 and save its ``state_dict`` as ``<name>.pt``.

    Parameters
    ----------
    directory : path, optional
        Where to write; defaults to the package's own ``checkpoints`` folder (use this only
        in a source checkout, to regenerate the shipped files).

    Returns
    -------
    dict of str to pathlib.Path
        Model name -> written file.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     paths = build_checkpoints(tmp)
    ...     sorted(p.name for p in paths.values())
    ['cnn.pt', 'mlp.pt']
    """
    target = Path(directory) if directory is not None else CHECKPOINT_DIR
    written = {}
    for name in DEMO_MODELS:
        path = target / f"{name}.pt"
        _save_atomically(trained_model(name).state_dict(), path)
        written[name] = path
    return written
