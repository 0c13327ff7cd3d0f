"""The digits data set that ships inside scikit-learn, split once and for all.

:func:`sklearn.datasets.load_digits` reads 1,797 grey-scale 8x8 images (pixel values 0..16)
from a file bundled with scikit-learn, so nothing is downloaded. :func:`load_digits_split`
divides them into a stratified training split (75 %) and a held-out test split (25 %) with a
fixed seed, so every call, on every machine, sees the same images in the same order.

Examples
--------
>>> from prune_explorer.demo.data import load_digits_split
>>> data = load_digits_split()
>>> data
DigitsSplit(layout='flat', train=1347, test=450, x=(N, 64) float32 in [0, 1], classes=10)
>>> tuple(load_digits_split("image").x_test.shape)
(450, 1, 8, 8)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from prune_explorer.demo.models import Layout

TEST_SIZE = 0.25
SPLIT_SEED = 0
PIXEL_MAX = 16.0
_LAYOUT_SHAPES: dict[str, tuple[int, ...]] = {"flat": (64,), "image": (1, 8, 8)}


@dataclass(frozen=True, repr=False)
class DigitsSplit:
    """Training and test tensors of the digits data set.

    Attributes
    ----------
    x_train, x_test : torch.Tensor
        float32 pixels scaled to [0, 1], shaped ``(N, 64)`` (layout ``"flat"``) or
        ``(N, 1, 8, 8)`` (layout ``"image"``).
    y_train, y_test : torch.Tensor
        int64 class labels 0..9.
    train_indices, test_indices : numpy.ndarray
        Row numbers of each sample in ``sklearn.datasets.load_digits()``.
    layout : {"flat", "image"}
        The layout of ``x_train`` and ``x_test``.

    Examples
    --------
    >>> data = load_digits_split()
    >>> data.x_train.shape, data.y_train.shape
    (torch.Size([1347, 64]), torch.Size([1347]))
    >>> data.split("test")[1].bincount().tolist()
    [45, 46, 44, 46, 45, 46, 45, 45, 43, 45]
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    train_indices: np.ndarray
    test_indices: np.ndarray
    layout: Layout

    def split(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(x, y)`` of the split called ``name`` (``"train"`` or ``"test"``)."""
        if name == "train":
            return self.x_train, self.y_train
        if name == "test":
            return self.x_test, self.y_test
        raise ValueError(f"DigitsSplit.split: name must be 'train' or 'test'; got {name!r}")

    def __repr__(self) -> str:
        shape = ", ".join(str(d) for d in self.x_train.shape[1:])
        return (
            f"DigitsSplit(layout={self.layout!r}, train={len(self.y_train)}, "
            f"test={len(self.y_test)}, x=(N, {shape}) float32 in [0, 1], "
            f"classes={int(self.y_train.max()) + 1})"
        )


@lru_cache(maxsize=1)
def _split_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    indices = np.arange(len(bunch.target))
    train_idx, test_idx = train_test_split(
        indices, test_size=TEST_SIZE, random_state=SPLIT_SEED, stratify=bunch.target
    )
    pixels = (bunch.data / PIXEL_MAX).astype(np.float32)
    for array in (pixels, train_idx, test_idx):
        array.setflags(write=False)
    return pixels, bunch.target.astype(np.int64), train_idx, test_idx


def load_digits_split(layout: Layout = "flat") -> DigitsSplit:
    """Load the fixed stratified train/test split of scikit-learn's digits.

    Parameters
    ----------
    layout : {"flat", "image"}, default "flat"
        ``"flat"`` gives inputs of shape ``(N, 64)`` (for :class:`DigitsMLP`), ``"image"``
        gives ``(N, 1, 8, 8)`` (for :class:`DigitsCNN`).

    Returns
    -------
    DigitsSplit
        Fresh tensors (changing them does not affect later calls). Pixels are divided by 16
        so they lie in [0, 1]; 1,347 training and 450 test samples, every class represented
        in both splits in the proportions of the whole data set (``stratify``, seed 0).

    Examples
    --------
    >>> data = load_digits_split("image")
    >>> tuple(data.x_train.shape), data.x_train.dtype
    ((1347, 1, 8, 8), torch.float32)
    >>> float(data.x_train.min()), float(data.x_train.max())
    (0.0, 1.0)
    """
    if layout not in _LAYOUT_SHAPES:
        raise ValueError(
            f"load_digits_split: layout must be one of {sorted(_LAYOUT_SHAPES)}; got {layout!r}"
        )
    pixels, target, train_idx, test_idx = _split_arrays()
    shape = _LAYOUT_SHAPES[layout]

    def tensors(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.tensor(pixels[idx]).reshape(len(idx), *shape)
        return x, torch.tensor(target[idx])

    x_train, y_train = tensors(train_idx)
    x_test, y_test = tensors(test_idx)
    return DigitsSplit(
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        train_indices=train_idx.copy(),
        test_indices=test_idx.copy(),
        layout=layout,
    )
