"""Reading and writing checkpoint files: ``state_dict`` files in two formats, never code.

* safetensors (``.safetensors``): read and written with the ``safetensors`` library -- a JSON
  header and raw tensor bytes, nothing that can run;
* PyTorch (``torch.save``, ``.pt``): read with ``torch.load(weights_only=True)``, which refuses
  pickled classes and functions; written with ``torch.save`` of plain tensors.

Memory: a checkpoint costs at most a small multiple of its size. Before anything is loaded,
the sizes the file declares are checked against the file's own size (a ``torch.save`` zip must
store its entries uncompressed, as ``torch.save`` does: a deflated entry of 1 MB could unpack to
1 GB; a legacy ``torch.save`` file declares each storage's size before its bytes, and torch
allocates that size first). After loading, the tensors together may span at most
:data:`MAX_EXPANSION` times the file's size (a view repeating one stored value, saved with a
large shape, would otherwise cost its full size in every later operation).

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
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import CLIError, check_input_file, one_line

if TYPE_CHECKING:
    import torch

__all__ = [
    "MAX_EXPANSION",
    "Checkpoint",
    "checkpoint_bytes",
    "detect_format",
    "output_format",
    "read_checkpoint",
]

#: The tensors of a checkpoint may span at most this many times the file's size (plus 1 MiB):
#: weights shared by several names (tied embeddings) count once per name.
MAX_EXPANSION = 4

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


def _too_big(path: Path, what: str, declared: int, size: int, how: str) -> CLIError:
    return CLIError(
        f"{what} {str(path)!r} declares {declared:,} bytes of tensor data {how}, more than the "
        f"file holds ({size:,} bytes); is it corrupt or crafted?"
    )


def _check_zip(file: Any, path: Path, what: str, size: int) -> None:
    """A ``torch.save`` zip: entries stored, not compressed, and no bigger than the file."""
    try:
        # closed here, never left to ZipFile.__del__: a finaliser turns a Ctrl-C that lands in
        # it into "Exception ignored" on stderr, and the command would run on
        with zipfile.ZipFile(file) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CLIError(
            f"{what} {str(path)!r} is not a readable PyTorch checkpoint ({one_line(exc)}); "
            "is the file truncated, corrupt or not a torch.save file?"
        ) from None
    finally:
        file.seek(0)
    for entry in entries:
        if entry.compress_type != zipfile.ZIP_STORED:
            raise CLIError(
                f"{what} {str(path)!r} has a compressed entry {entry.filename!r}; torch.save "
                "stores its entries uncompressed, and a compressed one could unpack to far "
                "more memory than the file's size"
            )
    declared = sum(entry.file_size for entry in entries)
    if declared > size:
        raise _too_big(path, what, declared, size, "in its zip entries")


class _Stub:
    """What every global and call becomes while :func:`_legacy_bytes` reads a pickle: nothing
    is imported, constructed or run."""

    def __init__(self, name: str = "") -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> _Stub:
        return _Stub()

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass


_ELEMENT_BYTES = {"Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4,
                  "Short": 2, "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8,
                  "ComplexDouble": 16, "Untyped": 1}


class _SizeReader(pickle.Unpickler):
    """Reads a legacy ``torch.save`` pickle for the storage sizes it declares, and nothing
    else: ``find_class`` imports nothing."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self.storages: dict[Any, int] = {}

    def find_class(self, module: str, name: str) -> Any:
        return _Stub(name)

    def persistent_load(self, pid: Any) -> Any:
        # ("storage", storage type, root key, location, numel, view metadata)
        if isinstance(pid, tuple) and len(pid) == 6 and isinstance(pid[4], int):
            kind = getattr(pid[1], "name", "").removesuffix("Storage")
            self.storages[str(pid[2])] = pid[4] * _ELEMENT_BYTES.get(kind, 8)
        return _Stub()


def _legacy_bytes(data: bytes) -> int:
    """Bytes of storage a legacy (non-zip) ``torch.save`` file declares: torch allocates them
    before reading them. Unreadable: 0 (torch's own loader then says why)."""
    stream = io.BytesIO(data)
    try:
        for _ in range(3):  # magic number, protocol version, system info
            _SizeReader(stream).load()
        reader = _SizeReader(stream)
        reader.load()
    except Exception:
        return 0
    return sum(reader.storages.values())


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
            if fmt == "safetensors":  # its loader checks the header against the bytes
                obj = _load_safetensors(file.read(), path, what)
            elif head.startswith(_ZIP):
                _check_zip(file, path, what, size)
                obj = _load_torch(file, path, what)
            else:  # a legacy file, read from memory: no read can ask for more than it holds
                data = file.read()
                declared = _legacy_bytes(data)
                if declared > size:
                    raise _too_big(path, what, declared, size, "in its storages")
                obj = _load_torch(io.BytesIO(data), path, what)
    except OSError as exc:
        raise CLIError(f"{what} {str(path)!r} cannot be read ({exc.strerror})") from None
    if not isinstance(obj, Mapping):
        raise CLIError(
            f"{what} {str(path)!r} must hold a state_dict (a dict of tensor names to "
            f"tensors); got {type(obj).__name__}"
        )
    from prune_explorer.prune.validation import show_value

    bad = [k for k, v in obj.items() if not (isinstance(k, str) and isinstance(v, torch.Tensor))]
    if bad:
        raise CLIError(
            f"{what} {str(path)!r} must hold a state_dict mapping tensor names to tensors; "
            f"entry {show_value(bad[0])} is a {type(obj[bad[0]]).__name__}"
            + _nested_state_dict_hint(obj)
        )
    spanned = sum(v.numel() * v.element_size() for v in obj.values() if not v.is_nested)
    if spanned > MAX_EXPANSION * size + 2**20:
        raise CLIError(
            f"{what} {str(path)!r} holds tensors spanning {spanned:,} bytes, more than "
            f"{MAX_EXPANSION} times the file's size ({size:,} bytes): views that repeat stored "
            "values (an expanded tensor saved with its large shape); save plain tensors "
            "(.contiguous()) instead"
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
