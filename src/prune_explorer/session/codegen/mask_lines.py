"""Large custom masks in a snippet: compressed, checksummed bits that stock Python decodes.

A mask that prunes many entries would be megabytes of Python as a list of indices (a 4096 x 4096
one was 78 MiB). Instead the snippet carries the mask's bits -- 8 entries a byte, row-major, the
first entry in the high bit, as :meth:`PackedMask.to_bytes` writes them -- zlib-compressed and
base64-encoded in ordinary string literals, with the sha256 of the bits. A small function,
``unpack_mask``, defined once at the top of the snippet with ``base64``, ``hashlib``, ``zlib`` and
``torch`` only, decodes them and refuses them (``ValueError``) unless length and sha256 match, so
an edited or damaged snippet cannot prune with a wrong mask. Decompression stops one byte past
the expected size, so a doctored payload cannot expand without bound.

Examples
--------
>>> import torch
>>> from prune_explorer.session import PackedMask
>>> from prune_explorer.session.codegen.mask_lines import MASK_DECODER, encoded_mask_lines
>>> mask = PackedMask.from_tensor(torch.arange(12).reshape(3, 4) % 3 == 0)
>>> lines = encoded_mask_lines("mask", mask)
>>> namespace = {}
>>> exec("import base64, hashlib, zlib, torch\\n" + MASK_DECODER + "\\n".join(lines), namespace)
>>> torch.equal(namespace["mask"], mask.unpack())
True
"""

from __future__ import annotations

import base64
import hashlib
import textwrap
import zlib

from ..tensors.packed import PackedMask
from .pysource import py_str

__all__ = ["MASK_DECODER", "MASK_IMPORTS", "encoded_mask_lines"]

#: Imports the decoder needs, besides ``torch``.
MASK_IMPORTS = ("import base64", "import hashlib", "import zlib")

#: The decoder, as snippet source (stdlib and torch only).
MASK_DECODER = textwrap.dedent(
    '''\
    def unpack_mask(payload, sha256, shape):
        """Decode a mask written by prune-explorer: bits (8 entries a byte, first entry in the
        high bit), zlib-compressed, base64-encoded. Refused unless they match their sha256."""
        numel = torch.Size(shape).numel()
        size = (numel + 7) // 8
        try:
            data = base64.b64decode(payload, validate=True)
            packed = zlib.decompressobj().decompress(data, size + 1)
        except (ValueError, zlib.error):
            packed = b""
        if len(packed) != size or hashlib.sha256(packed).hexdigest() != sha256:
            raise ValueError(f"the data of a mask of shape {shape} does not match its sha256; "
                             "the snippet was altered or damaged")
        bits = torch.frombuffer(bytearray(packed), dtype=torch.uint8)
        shifts = torch.arange(7, -1, -1, dtype=torch.uint8)
        return ((bits[:, None] >> shifts) & 1).reshape(-1)[:numel].bool().reshape(shape)
    '''
)

_WIDTH = 88  # characters of base64 per line


def encoded_mask_lines(name: str, mask: PackedMask) -> list[str]:
    """Snippet lines that bind ``name`` (an identifier we chose) to ``mask`` as a bool tensor."""
    packed = mask.to_bytes()
    payload = base64.b64encode(zlib.compress(packed)).decode("ascii")
    chunks = [payload[i:i + _WIDTH] for i in range(0, len(payload), _WIDTH)] or [""]
    lines = [
        f"# {mask.numel} entries, {mask.pruned} pruned: compressed bits, checked by unpack_mask",
        f"{name} = unpack_mask(",
    ]
    lines += [f"    {py_str(chunk)}" for chunk in chunks]
    lines[-1] += ","
    lines += [f"    {py_str(hashlib.sha256(packed).hexdigest())},",
              f"    {tuple(mask.shape)!r},", ")"]
    return lines
