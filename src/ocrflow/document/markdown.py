"""Blocks from the structure of Markdown, for engines that give Markdown and no boxes.

The Markdown is cut where its structure says a block ends: blank lines, headings (``#`` a
title, ``##`` and deeper a section header), list items (each a block), pipe and HTML
tables, fenced code, display math (``$$ … $$``, ``\\[ … \\]``), footnote definitions and
figures (a figure placeholder or an image link on its own line). Blocks come in the order
of the text and have no box. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ocrflow.types import Block, BlockLabel

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+\S")
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FOOTNOTE = re.compile(r"^ {0,3}\[\^[^\]]+\]:")
_FIGURE = re.compile(r"^\s*(?:<!--figure:\d+-->|!\[[^\]]*\]\([^)]*\))\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_HTML_TABLE = re.compile(r"^\s*<table\b", re.I)


@dataclass(slots=True)
class _Builder:
    """The blocks found so far and the paragraph being gathered."""

    blocks: list[Block] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    label: BlockLabel = BlockLabel.TEXT

    def start(self, label: BlockLabel, line: str) -> None:
        self.flush()
        self.label, self.lines = label, [line]

    def add(self, line: str) -> None:
        if not self.lines:
            self.label = BlockLabel.TEXT
        self.lines.append(line)

    def emit(self, label: BlockLabel, lines: list[str]) -> None:
        self.flush()
        text = "\n".join(lines).strip()
        if text:
            self.blocks.append(Block(label, text))

    def flush(self) -> None:
        if self.lines:
            label = self.label
            if label is BlockLabel.TABLE and not _is_pipe_table(self.lines):
                label = BlockLabel.TEXT
            lines, self.lines = self.lines, []
            self.emit(label, lines)


def blocks_from_markdown(markdown: str) -> tuple[Block, ...]:
    """The blocks of ``markdown`` in text order, labelled by their Markdown structure."""
    lines = markdown.replace("\r\n", "\n").split("\n")
    builder = _Builder()
    i = 0
    while i < len(lines):
        i = _step(builder, lines, i)
    builder.flush()
    return tuple(builder.blocks)


def _step(builder: _Builder, lines: list[str], i: int) -> int:
    """Take the line at ``i`` (and the lines of a fence, table or formula it opens);
    return the index of the next line to look at."""
    line = lines[i]
    stripped = line.strip()
    if not stripped:
        builder.flush()
    elif fence := _FENCE.match(line):
        end = _until(lines, i, lambda s: s.startswith(fence.group(1)))
        builder.emit(BlockLabel.CODE, lines[i : end + 1])
        return end + 1
    elif stripped.startswith(("$$", "\\[")):
        closing = "$$" if stripped.startswith("$$") else "\\]"
        one_line = len(stripped) > 2 and stripped.endswith(closing)
        end = i if one_line else _until(lines, i, lambda s: s.endswith(closing))
        builder.emit(BlockLabel.FORMULA, lines[i : end + 1])
        return end + 1
    elif _HTML_TABLE.match(line):
        end = _until(lines, i, lambda s: "</table" in s.lower(), first=True)
        builder.emit(BlockLabel.TABLE, lines[i : end + 1])
        return end + 1
    else:
        _text_line(builder, line, stripped)
    return i + 1


def _text_line(builder: _Builder, line: str, stripped: str) -> None:
    """A line of running text: it starts a block (heading, item, table row, footnote,
    figure) or continues the open one."""
    heading = _HEADING.match(line)
    in_table = builder.label is BlockLabel.TABLE and bool(builder.lines)
    if heading:
        level = len(heading.group(1))
        builder.emit(BlockLabel.TITLE if level == 1 else BlockLabel.SECTION_HEADER, [line])
    elif _FIGURE.match(line):
        builder.emit(BlockLabel.FIGURE, [line])
    elif _LIST_ITEM.match(line):
        builder.start(BlockLabel.LIST_ITEM, line)
    elif _FOOTNOTE.match(line):
        builder.start(BlockLabel.FOOTNOTE, line)
    elif stripped.startswith("|"):
        if in_table:
            builder.add(line)
        else:
            builder.start(BlockLabel.TABLE, line)
    elif in_table:
        builder.start(BlockLabel.TEXT, line)
    else:
        builder.add(line)


def _until(
    lines: list[str], start: int, closes: Callable[[str], bool], *, first: bool = False
) -> int:
    """The index of the first line after ``start`` (or from ``start`` with ``first``) whose
    stripped text ``closes`` accepts; the last line when none does (a cut-off reply)."""
    for j in range(start if first else start + 1, len(lines)):
        if closes(lines[j].strip()):
            return j
    return len(lines) - 1


def _is_pipe_table(lines: list[str]) -> bool:
    """Whether pipe rows have the separator row a Markdown table needs."""
    # A rule without a pipe is one cell: a thematic break or a list item, not a table's.
    return len(lines) >= 2 and "|" in lines[1] and bool(_TABLE_RULE.match(lines[1]))
