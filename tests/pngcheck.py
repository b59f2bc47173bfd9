"""Tiny PNG decoder (zlib + struct + numpy, no Pillow) and a "is this screenshot blank?" check.

Supports what Chromium writes: 8-bit RGB or RGBA, non-interlaced (PNG spec, W3C REC-PNG 2003,
sections 9.2 "filter types" and 11.2.2 IHDR).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {2: 3, 6: 4}  # PNG colour type -> samples per pixel (RGB, RGBA)
MIN_DISTINCT_COLOURS = 50  # a rendered chart has antialiased edges: hundreds of colours; a blank page has 1-2
MIN_NON_WHITE_SHARE = 0.02  # axes, gridlines, text and markers cover a few % of the window at least
WHITE_LEVEL = 250  # a pixel with every channel >= this counts as white/background


def _chunks(data: bytes):
    """(type, body) for each chunk after the signature."""
    pos = len(PNG_SIGNATURE)
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        yield kind, data[pos + 8:pos + 8 + length]
        pos += length + 12  # length + type + body + CRC


def _paeth_row(line: np.ndarray, prev: np.ndarray, bpp: int) -> None:
    """Undo the Paeth filter in place (sequential in the left neighbour, so a plain loop)."""
    out, up = line.astype(np.int32).tolist(), prev.astype(np.int32).tolist()
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        b, c = up[i], (up[i - bpp] if i >= bpp else 0)
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        out[i] = (out[i] + pred) & 0xFF
    line[:] = out


def _avg_row(line: np.ndarray, prev: np.ndarray, bpp: int) -> None:
    """Undo the Average filter in place."""
    out, up = line.astype(np.int32).tolist(), prev.astype(np.int32).tolist()
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        out[i] = (out[i] + ((a + up[i]) >> 1)) & 0xFF
    line[:] = out


def _unfilter(raw: bytes, width: int, height: int, bpp: int) -> np.ndarray:
    """Reconstruct the (height, width*bpp) byte image from filtered scanlines."""
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, 1 + width * bpp)
    filters, img = rows[:, 0], rows[:, 1:].copy()
    prev = np.zeros(width * bpp, dtype=np.uint8)
    for y in range(height):  # scanlines depend on the previous one
        line, kind = img[y], filters[y]
        if kind == 1:  # Sub: running sum along each channel
            line[:] = np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint64).reshape(-1) & 0xFF
        elif kind == 2:  # Up
            line[:] = line + prev
        elif kind == 3:
            _avg_row(line, prev, bpp)
        elif kind == 4:
            _paeth_row(line, prev, bpp)
        prev = line
    return img


def read_png(path: str | Path) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA PNG into a (height, width, channels) uint8 array."""
    data = Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE, "not a PNG file"
    chunks = list(_chunks(data))
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", dict(chunks)[b"IHDR"])
    assert depth == 8 and colour in CHANNELS and interlace == 0, (depth, colour, interlace)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    bpp = CHANNELS[colour]
    return _unfilter(raw, width, height, bpp).reshape(height, width, bpp)


def picture_stats(img: np.ndarray) -> dict:
    """Distinct RGB colours and the share of non-white pixels."""
    rgb = img[..., :3].reshape(-1, 3).astype(np.uint32)
    packed = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]
    non_white = (rgb < WHITE_LEVEL).any(axis=1)
    return {"distinct_colours": int(np.unique(packed).size), "non_white_share": float(non_white.mean())}


def is_blank(img: np.ndarray) -> bool:
    """True unless the picture has many colours and a fair share of non-white pixels."""
    stats = picture_stats(img)
    return stats["distinct_colours"] < MIN_DISTINCT_COLOURS or stats["non_white_share"] < MIN_NON_WHITE_SHARE


def count_near(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 12) -> int:
    """Number of pixels within ``tol`` of colour ``rgb`` in every channel."""
    diff = np.abs(img[..., :3].astype(np.int32) - np.array(rgb, dtype=np.int32))
    return int((diff <= tol).all(axis=-1).sum())
