"""A minimal PNG writer for rendered figures: RGB(A) pixels in, PNG bytes out.

Live previews spend most of their time encoding. A general-purpose encoder tries a row filter
per scan line; rendered plots (large flat areas, exact repeats) compress well without any
filter, so writing filter type 0 rows and one zlib stream is several times faster at the same
or smaller size.

Layout of the file: signature, ``IHDR`` (width, height, bit depth 8, colour type 2 = RGB or
6 = RGBA), one ``IDAT`` holding the zlib stream of rows each prefixed by a 0 byte, ``IEND``;
every chunk is ``length | type | data | CRC-32(type + data)``.

Examples
--------
>>> import numpy as np
>>> pixels = np.zeros((2, 3, 3), dtype=np.uint8)
>>> png = encode_png(pixels)
>>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n", int.from_bytes(png[16:20], "big")
(True, 3)
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOUR_TYPE = {3: 2, 4: 6}  # channels -> PNG colour type (RGB, RGBA)


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png(pixels: np.ndarray, *, compress_level: int = 6) -> bytes:
    """Encode an ``(height, width, 3 or 4)`` uint8 array as an 8-bit RGB or RGBA PNG.

    Parameters
    ----------
    pixels : numpy.ndarray of uint8, shape (H, W, 3) or (H, W, 4)
        Rows top to bottom.
    compress_level : int
        zlib level 0 (none) to 9 (smallest); 1 is the fastest that still compresses.

    Returns
    -------
    bytes

    Examples
    --------
    >>> import io, numpy as np, PIL.Image
    >>> pixels = np.arange(4 * 5 * 4, dtype=np.uint8).reshape(4, 5, 4)
    >>> back = np.asarray(PIL.Image.open(io.BytesIO(encode_png(pixels, compress_level=1))))
    >>> bool((back == pixels).all())
    True
    """
    array = np.asarray(pixels)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] not in _COLOUR_TYPE:
        raise ValueError(
            "encode_png: pixels must be a uint8 array of shape (height, width, 3 or 4); "
            f"got dtype {array.dtype} and shape {array.shape}"
        )
    if not 0 <= int(compress_level) <= 9:
        raise ValueError(
            f"encode_png: compress_level must be an int in [0, 9]; got {compress_level}"
        )
    height, width, channels = array.shape
    rows = np.empty((height, 1 + width * channels), dtype=np.uint8)
    rows[:, 0] = 0  # filter type 0 (None) for every scan line
    rows[:, 1:] = array.reshape(height, width * channels)
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOUR_TYPE[channels], 0, 0, 0)
    return b"".join(
        (
            _SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(rows.tobytes(), int(compress_level))),
            _chunk(b"IEND", b""),
        )
    )
