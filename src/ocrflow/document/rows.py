"""The compact form of blocks in checkpoints, done markers and JSONL records.

A block is a JSON list in the order of ``Block``'s fields, trailing defaults left out::

    [label, text, bbox, confidence, lines, source_label]
    line: [text, bbox, confidence, words]      word: [text, bbox, confidence]

``bbox`` is ``[x0, y0, x1, y1]`` rounded to ``BOX_DIGITS`` places, or ``null``. A block's
``text`` is ``null`` when it is its lines' texts joined by newlines (the embedded engine's
paragraphs, the text layer's): the lines already hold it. Lists cost a third of the bytes
of objects with named keys, and the cost of carrying geometry is a benchmark
(``bench/bench_geometry.py``). Readers accept shorter rows (older or leaner writers) and an
unknown label (a newer writer) as ``text``, keeping it in ``source_label``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ocrflow.types import BOX_DIGITS, BBox, Block, BlockLabel, Line, Word

_LABELS = frozenset(BlockLabel)


def blocks_to_rows(blocks: Iterable[Block]) -> list[list[Any]]:
    """``blocks`` in the compact form (JSON-ready lists)."""
    return [block_to_row(block) for block in blocks]


def blocks_from_rows(rows: Iterable[Sequence[Any]] | None) -> tuple[Block, ...]:
    """The inverse of ``blocks_to_rows``; ``None`` (a record without blocks) gives ``()``."""
    return tuple(block_from_row(row) for row in rows or ())


def block_to_row(block: Block) -> list[Any]:
    """One block as a compact list."""
    lines = [_line_row(line) for line in block.lines]
    joined = bool(block.lines) and block.text == "\n".join(line.text for line in block.lines)
    row = [
        str(block.label),
        None if joined else block.text,
        _box(block.bbox),
        _score(block.confidence),
        lines,
        block.source_label,
    ]
    return _trimmed(row)


def block_from_row(row: Sequence[Any]) -> Block:
    """One block from its compact list."""
    label, text, bbox, confidence, lines, source = _padded(row, 6)
    parsed = tuple(_line(item) for item in lines or ())
    if label not in _LABELS:
        label, source = BlockLabel.TEXT, source or str(label)
    return Block(
        BlockLabel(label),
        "\n".join(line.text for line in parsed) if text is None else str(text),
        _bbox(bbox),
        None if confidence is None else float(confidence),
        parsed,
        None if source is None else str(source),
    )


def _line_row(line: Line) -> list[Any]:
    words = [_trimmed([w.text, _box(w.bbox), _score(w.confidence)]) for w in line.words]
    return _trimmed([line.text, _box(line.bbox), _score(line.confidence), words])


def _line(row: Sequence[Any]) -> Line:
    text, bbox, confidence, words = _padded(row, 4)
    return Line(
        str(text or ""),
        _bbox(bbox),
        None if confidence is None else float(confidence),
        tuple(_word(w) for w in words or ()),
    )


def _word(row: Sequence[Any]) -> Word:
    text, bbox, confidence = _padded(row, 3)
    return Word(str(text or ""), _bbox(bbox), None if confidence is None else float(confidence))


def _box(box: BBox | None) -> list[float] | None:
    if box is None:
        return None
    return [round(box[0], BOX_DIGITS), round(box[1], BOX_DIGITS),
            round(box[2], BOX_DIGITS), round(box[3], BOX_DIGITS)]  # fmt: skip


def _bbox(value: Sequence[float] | None) -> BBox | None:
    if not value:
        return None
    x0, y0, x1, y1 = (float(v) for v in value)
    return (x0, y0, x1, y1)


def _score(value: float | None) -> float | None:
    return None if value is None else round(value, BOX_DIGITS)


def _trimmed(row: list[Any]) -> list[Any]:
    """``row`` without its trailing ``None``s and empty lists."""
    end = len(row)
    while end and (row[end - 1] is None or row[end - 1] == []):
        end -= 1
    return row[:end]


def _padded(row: Sequence[Any], size: int) -> list[Any]:
    values = list(row[:size])
    return values + [None] * (size - len(values))
