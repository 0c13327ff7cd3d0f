"""Reading and writing checkpoint files: ``state_dict`` files in two formats, never code.

* safetensors (``.safetensors``): read and written with the ``safetensors`` library -- a JSON
  header and raw tensor bytes, nothing that can run;
* PyTorch (``torch.save``, ``.pt``): read with ``torch.load(weights_only=True)``, which refuses
  pickled classes and functions; written with ``torch.save`` of plain tensors.

The format of a file is read from its contents, not its name: safetensors starts with the
8-byte little-endian length of a JSON header that opens with ``{``; a ``torch.save`` file is a
zip archive (``PK\\x03\\x04``) or, from old versions, a bare pickle read by the same weights-only
unpickler. An output's format comes from its suffix (``.safetensors``; ``.pt``, ``.pth``,
``.bin``, ``.ckpt``), else from the input's format.

Examples
--------
>>> import tempfile, torch
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "weights.pt"  # a safetensors file, whatever its name
>>> _ = path.write_bytes(checkpoint_bytes({"w": torch.ones(2)}, "safetensors"))
>>> read_checkpoint(path, "CHECKPOINT").format
'safetensors'
"""

from __future__ import annotations

import io
import pickle
import re
import struct
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import CLIError, check_input_file, one_line

if TYPE_CHECKING:
    import torch

__all__ = ["Checkpoint", "checkpoint_bytes", "detect_format", "output_format", "read_checkpoint"]

Format = Literal["safetensors", "torch"]
SUFFIXES: dict[str, Format] = {
    ".safetensors": "safetensors",
    ".pt": "torch",
    ".pth": "torch",
    ".bin": "torch",
    ".ckpt": "torch",
}
_ZIP = b"PK\x03\x04"


@dataclass
class Checkpoint:
    """A ``state_dict`` read from ``path`` and the format it was stored in."""

    path: Path
    state: Mapping[str, torch.Tensor]
    format: Format

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r}, {len(self.state)} tensors, {self.format})"


def detect_format(head: bytes, size: int) -> Format:
    """The format of a file from its first 9 bytes and its size.

    Examples
    --------
    >>> detect_format(b"PK\\x03\\x04rest", 100), detect_format(b"\\x02" + bytes(7) + b"{", 10)
    ('torch', 'safetensors')
    """
    if head.startswith(_ZIP):
        return "torch"
    if len(head) >= 9 and head[8:9] == b"{":
        (length,) = struct.unpack("<Q", head[:8])
        if 2 <= length <= size - 8:
            return "safetensors"
    return "torch"  # a zip archive, or a legacy pickle: both go to the weights-only loader


def output_format(path: str, source: Format) -> Format:
    """Format to write ``path`` in: from its suffix, else ``source`` (the input's format).

    Examples
    --------
    >>> output_format("out.safetensors", "torch"), output_format("-", "safetensors")
    ('safetensors', 'safetensors')
    """
    return SUFFIXES.get(Path(path).suffix.lower(), source)


def _refuse_pickled_objects(path: Path, what: str, global_name: str) -> CLIError:
    return CLIError(
        f"{what} {str(path)!r} holds pickled Python objects (found {global_name}), most "
        "likely a whole model saved with torch.save(model). prune-explorer loads checkpoints "
        "with torch.load(weights_only=True), which refuses pickled classes because unpickling "
        "them can run arbitrary code. Save the weights alone with "
        "torch.save(model.state_dict(), 'model.pt') and pass the architecture with "
        "--model package.module:factory (a function returning the nn.Module) or a demo name"
    )


def _load_torch(file: Any, path: Path, what: str) -> Any:
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
        if found:
            raise _refuse_pickled_objects(path, what, found.group(1)) from None
        raise CLIError(
            f"{what} {str(path)!r} is not a readable PyTorch checkpoint (the weights-only "
            "unpickler rejected its contents); is the file corrupt or not a torch.save file?"
        ) from None
    except Exception as exc:
        raise CLIError(
            f"{what} {str(path)!r} is not a readable PyTorch checkpoint "
            f"({one_line(exc)}); is the file truncated, corrupt or not a torch.save file?"
        ) from None


def _load_safetensors(data: bytes, path: Path, what: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load

    try:
        return load(data)
    except Exception as exc:
        raise CLIError(
            f"{what} {str(path)!r} is not a readable safetensors file ({one_line(exc)}); "
            "is the file truncated or corrupt?"
        ) from None


def _nested_state_dict_hint(obj: Mapping[Any, Any]) -> str:
    import torch

    inner = [
        key
        for key, value in obj.items()
        if isinstance(value, Mapping)
        and value
        and all(isinstance(v, torch.Tensor) for v in value.values())
    ]
    if not inner:
        return ""
    return (
        f"; it looks like a training checkpoint whose weights are under {inner[0]!r}: save "
        f"that entry alone (torch.save(checkpoint[{inner[0]!r}], 'model.pt'))"
    )


def read_checkpoint(path: Path, what: str) -> Checkpoint:
    """Read the ``state_dict`` in ``path`` (either format), with errors naming ``what``."""
    import torch

    check_input_file(path, what)
    try:
        with open(path, "rb") as file:
            head = file.read(9)
            size = file.seek(0, io.SEEK_END)
            file.seek(0)
            fmt = detect_format(head, size)
            obj = _load_torch(file, path, what) if fmt == "torch" else _load_safetensors(
                file.read(), path, what
            )
    except OSError as exc:
        raise CLIError(f"{what} {str(path)!r} cannot be read ({exc.strerror})") from None
    if not isinstance(obj, Mapping):
        raise CLIError(
            f"{what} {str(path)!r} must hold a state_dict (a dict of tensor names to "
            f"tensors); got {type(obj).__name__}"
        )
    bad = [k for k, v in obj.items() if not (isinstance(k, str) and isinstance(v, torch.Tensor))]
    if bad:
        raise CLIError(
            f"{what} {str(path)!r} must hold a state_dict mapping tensor names to tensors; "
            f"entry {bad[0]!r} is a {type(obj[bad[0]]).__name__}" + _nested_state_dict_hint(obj)
        )
    # Keep an OrderedDict's _metadata: the versions load_state_dict may use.
    return Checkpoint(path, obj, fmt)


def checkpoint_bytes(state: Mapping[str, torch.Tensor], fmt: Format) -> bytes:
    """Serialise ``state`` (moved to the CPU) in format ``fmt``."""
    import torch

    tensors: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for key, value in state.items():
        tensor = value.detach().cpu()
        if fmt == "safetensors":  # safetensors stores neither views nor shared storage
            tensor = tensor.contiguous()
            if tensor.untyped_storage().data_ptr() in seen:
                tensor = tensor.clone()
            seen.add(tensor.untyped_storage().data_ptr())
        tensors[key] = tensor
    if fmt == "safetensors":
        from safetensors.torch import save

        return save(tensors)
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    return buffer.getvalue()
