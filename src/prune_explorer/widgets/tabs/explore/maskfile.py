"""Custom masks given to the explorer: the first file of a ``FileUpload``, a mask file read as
data only, and the explorer's own check of a mask given for a tensor.

A mask file is untrusted input, so it is read without running anything it holds: ``.pt`` with
``torch.load(..., weights_only=True)`` (plain tensors and containers, no pickled classes),
``.npy`` with ``numpy.load(..., allow_pickle=False)``. What it holds must be one tensor or array;
whether it suits the tensor (0/1 values, shape) is the session's check.

Examples
--------
>>> import io, numpy as np
>>> buffer = io.BytesIO()
>>> np.save(buffer, np.array([[1, 0], [0, 1]], dtype=np.uint8))
>>> read_mask_file("mask.npy", buffer.getvalue())
tensor([[1, 0],
        [0, 1]], dtype=torch.uint8)
>>> try:
...     read_mask_file("mask.txt", b"1 0")
... except ValueError as err:
...     print(err)
custom mask upload: file 'mask.txt' must end in .pt or .npy; got '.txt'
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from prune_explorer.session.model.tensor_kinds import unplain_kind

from ...errors import WidgetInputError

if TYPE_CHECKING:
    from ...context import ExploreSession

__all__ = ["MASK_SUFFIXES", "check_custom", "plain_mask", "read_mask_file", "uploaded_file"]

#: The mask files the upload accepts.
MASK_SUFFIXES = (".pt", ".npy")


def uploaded_file(value: Any) -> tuple[str, bytes] | None:
    """``(file name, bytes)`` of the first file of a ``FileUpload`` value, or None if none."""
    files = list(value.values()) if isinstance(value, dict) else list(value or ())
    if not files:
        return None
    first = files[0]
    content = first["content"]
    raw = content.tobytes() if hasattr(content, "tobytes") else bytes(content)
    return str(first.get("name", "upload")), raw


def read_mask_file(name: str, data: bytes, where: str = "custom mask upload") -> torch.Tensor:
    """The tensor held by a ``.pt`` or ``.npy`` file's bytes, read as data only.

    Raises
    ------
    WidgetInputError
        Another suffix, a file that cannot be read as data (pickled objects included), or one
        that holds something other than a single tensor or numeric array.
    """
    suffix = PurePath(name).suffix.lower()
    if suffix not in MASK_SUFFIXES:
        raise WidgetInputError(
            f"{where}: file {name!r} must end in {' or '.join(MASK_SUFFIXES)}; got {suffix!r}")
    try:
        if suffix == ".pt":
            loaded: Any = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        else:
            loaded = np.load(io.BytesIO(data), allow_pickle=False)
    except (pickle.UnpicklingError, zipfile.BadZipFile, ValueError, RuntimeError, EOFError,
            OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise WidgetInputError(
            f"{where}: file {name!r} must be a {suffix} file holding one tensor of 0/1 values, "
            f"readable as data only; reading it failed: {first}") from None
    if isinstance(loaded, np.ndarray):
        if loaded.dtype.kind not in "biuf":
            raise WidgetInputError(
                f"{where}: file {name!r} must hold numbers (0/1 or bools); got an array of "
                f"dtype {loaded.dtype}")
        native = loaded.astype(loaded.dtype.newbyteorder("="), copy=False)  # torch: native only
        return plain_mask(torch.from_numpy(np.ascontiguousarray(native)), where,
                          f"file {name!r} must hold")
    if isinstance(loaded, torch.Tensor):
        return plain_mask(loaded.detach(), where, f"file {name!r} must hold")
    raise WidgetInputError(
        f"{where}: file {name!r} must hold one tensor (torch.save(mask, file)); got "
        f"{type(loaded).__name__}")


#: Dtypes that hold 0/1 exactly but that few torch operations support: read as int64 (a
#: bijection for the unsigned ones, so a value is 0 or 1 after exactly when it was before).
_WIDEN = {torch.uint16: torch.int64, torch.uint32: torch.int64, torch.uint64: torch.int64}


def plain_mask(mask: torch.Tensor, where: str, subject: str = "mask must be") -> torch.Tensor:
    """``mask`` as a dense tensor of a dtype every operation supports (same values), or a
    :class:`WidgetInputError` for a sparse, nested, quantized, meta or complex one.

    Examples
    --------
    >>> plain_mask(torch.tensor([1, 0], dtype=torch.uint16), "demo")
    tensor([1, 0])
    """
    kind = unplain_kind(mask)
    if kind is not None:
        raise WidgetInputError(
            f"{where}: {subject} a dense tensor of 0/1 values (bool, int or float); got a "
            f"{kind} tensor of dtype {mask.dtype}")
    if mask.dtype in _WIDEN:
        return mask.to(_WIDEN[mask.dtype])
    if mask.is_floating_point() and mask.element_size() == 1:  # float8: exact in float32
        return mask.float()
    return mask


def check_custom(session: ExploreSession, name: Any, mask: Any, where: str) -> torch.Tensor:
    """Refuse a custom mask for an unknown tensor or that is not a dense tensor (the session
    checks shape and values when it previews or applies it); return it as :func:`plain_mask`
    does."""
    if name not in session.names:
        raise WidgetInputError(
            f"{where}: name {name!r} is not a prunable tensor of this model; choose one of "
            f"{list(session.names)}"
        )
    if not isinstance(mask, torch.Tensor):
        raise WidgetInputError(
            f"{where}: mask must be a torch.Tensor of 0/1 values; got {type(mask).__name__}"
        )
    return plain_mask(mask.detach(), where)
