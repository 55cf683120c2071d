"""A tiny TrueType font, written byte by byte, that draws a box for every Han character.

Tests use it as "a CJK font installed on the machine": PDFium's Linux font mapper picks it
for a non-embedded Chinese font (its OS/2 table claims the GB2312 code page), so a test can
reproduce the font-dependent behaviour on any machine, without installing a font package.
"""

from __future__ import annotations

import struct

FAMILY = "Ocrflow Test Han"
#: Code points drawn as a box: CJK punctuation to the end of the unified ideographs, and
#: the fullwidth forms (fullwidth comma, parentheses, digits).
RANGES = ((0x3000, 0x9FFF), (0xFF00, 0xFFEF))
_UNITS = 1000
_GB2312_CODE_PAGE = 1 << 18


def han_box_font() -> bytes:
    """The bytes of a TrueType font with two glyphs: .notdef (empty) and a box."""
    box = _box_glyph()
    tables = {
        b"OS/2": _os2(),
        b"cmap": _cmap(),
        b"glyf": box,
        b"head": struct.pack(
            ">IIIIHHqqhhhhHHhhh",
            0x00010000, 0x00010000, 0, 0x5F0F3CF5, 0x000B, _UNITS, 0, 0,
            0, -120, _UNITS, 880, 0, 8, 2, 0, 0,
        ),
        b"hhea": struct.pack(
            ">IhhhHhhhhhhhhhhhH",
            0x00010000, 880, -120, 0, _UNITS, 0, 0, 900, 1, 0, 0, 0, 0, 0, 0, 0, 2,
        ),
        b"hmtx": struct.pack(">HhHh", _UNITS, 0, _UNITS, 100),
        b"loca": struct.pack(">HHH", 0, 0, len(box) // 2),
        b"maxp": struct.pack(">IH13H", 0x00010000, 2, 4, 1, 0, 0, 2, *([0] * 8)),
        b"name": _name(),
        b"post": struct.pack(">IihhIIIII", 0x00030000, 0, -100, 50, 0, 0, 0, 0, 0),
    }  # fmt: skip
    return _sfnt(tables)


def _box_glyph() -> bytes:
    # One contour of four on-curve points: (100,0) (900,0) (900,800) (100,800).
    header = struct.pack(">hhhhh", 1, 100, 0, 900, 800)
    points = struct.pack(">HH", 3, 0) + bytes([1, 1, 1, 1])
    deltas = struct.pack(">4h4h", 100, 800, 0, -800, 0, 0, 800, 0)
    return header + points + deltas


def _cmap() -> bytes:
    """A format 4 subtable (Windows, Unicode BMP) sending every code point in RANGES to 1."""
    segments = [*RANGES, (0xFFFF, 0xFFFF)]
    count = len(segments)
    ends = [end for _, end in segments]
    starts = [start for start, _ in segments]
    deltas = [0] * (count - 1) + [1]
    # Each real segment reads the glyph array; the offset counts from its own slot.
    offsets, glyphs = [], []
    for index, (start, end) in enumerate(RANGES):
        offsets.append(2 * (count - index + len(glyphs)))
        glyphs.extend([1] * (end - start + 1))
    offsets.append(0)
    search = 2 ** (count.bit_length() - 1)
    body = struct.pack(
        f">HHHH{count}HH{count}H{count}h{count}H{len(glyphs)}H",
        2 * count, 2 * search, search.bit_length() - 1, 2 * count - 2 * search,
        *ends, 0, *starts, *deltas, *offsets, *glyphs,
    )  # fmt: skip
    subtable = struct.pack(">HHH", 4, 6 + len(body), 0) + body
    return struct.pack(">HHHHI", 0, 1, 3, 1, 12) + subtable


def _name() -> bytes:
    names = {1: FAMILY, 2: "Regular", 4: FAMILY, 6: FAMILY.replace(" ", "")}
    records, strings = b"", b""
    for name_id, text in names.items():
        data = text.encode("utf-16-be")
        records += struct.pack(">6H", 3, 1, 0x409, name_id, len(data), len(strings))
        strings += data
    return struct.pack(">HHH", 0, len(names), 6 + len(records)) + records + strings


def _os2() -> bytes:
    return struct.pack(
        ">HhHHH10hh10s4I4sHHHhhhHHII",
        1, _UNITS, 400, 5, 0, *([0] * 10), 0, bytes(10), 0, 0, 0, 0, b"OCRF",
        0x40, RANGES[0][0], 0xFFEF, 880, -120, 0, 880, 120, _GB2312_CODE_PAGE, 0,
    )  # fmt: skip


def _sfnt(tables: dict[bytes, bytes]) -> bytes:
    count = len(tables)
    search = 2 ** (count.bit_length() - 1)
    header = struct.pack(
        ">IHHHH", 0x00010000, count, 16 * search, search.bit_length() - 1, 16 * (count - search)
    )
    offset = len(header) + 16 * count
    directory, data = b"", b""
    for tag in sorted(tables):
        table = tables[tag]
        directory += struct.pack(">4sIII", tag, _checksum(table), offset + len(data), len(table))
        data += table + bytes(-len(table) % 4)
    return header + directory + data


def _checksum(table: bytes) -> int:
    padded = table + bytes(-len(table) % 4)
    return sum(struct.unpack(f">{len(padded) // 4}I", padded)) & 0xFFFFFFFF
