"""Cut a document's blocks into chunks for retrieval (RAG). Pure functions, no I/O.

The rules, in reading order (pages in order, each page's blocks in order):

- Page headers and footers (``page_header``, ``page_footer``) are never in a chunk:
  running heads repeated on every page would only add noise to retrieval.
- A title or section header closes the chunk being filled and starts a new section. It is
  not part of any chunk's ``text``; every chunk carries its section path in ``headings``
  (the titles above it, outermost first). A heading's level is its ``#`` count; a
  heading without ``#`` is level 1 for a title and 2 for a section header. A heading drops
  every heading of its level or deeper from the path before it joins it. ``text`` is left
  without the path so that it stays the document's own words (a reader can find it in
  the page); whoever embeds chunks may prefix ``" > ".join(headings)`` themselves.
- The blocks of a section are packed, a blank line apart, into chunks of at most
  ``max_tokens`` tokens; a section never shares a chunk with the next one, but a section
  runs across page breaks.
- A text block longer than ``max_tokens`` is split at sentence ends; a sentence still
  too long at line breaks, then between words, then (a word over the limit) between
  characters. Its parts keep the block's own text and box.
- A table, formula or code block is never split: it shares a chunk when it fits, else
  starts one, and when it alone holds more than ``max_tokens`` tokens it is a chunk of its
  own, over the limit. These are the only chunks over ``max_tokens``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ocrflow.types import BBox, Block, BlockLabel

#: Counts the tokens of a text (``sinks.tokens.count_tokens`` in the product).
TokenCounter = Callable[[str], int]

#: What joins the blocks of a chunk.
SEPARATOR = "\n\n"
HEADING_LABELS = frozenset({BlockLabel.TITLE, BlockLabel.SECTION_HEADER})
SKIPPED_LABELS = frozenset({BlockLabel.PAGE_HEADER, BlockLabel.PAGE_FOOTER})
#: Blocks whose meaning is lost when cut: never split, whatever their size.
WHOLE_LABELS = frozenset({BlockLabel.TABLE, BlockLabel.FORMULA, BlockLabel.CODE})

_HASHES = re.compile(r"^[ \t]{0,3}(#{1,6})(?:[ \t]+|$)")
_CLOSING_HASHES = re.compile(r"[ \t]+#+[ \t]*$")
# A sentence: up to end punctuation (and closing quotes or brackets) followed by white
# space, or up to a CJK full stop, or to the end. Abbreviations ("e.g. x") split too
# early, which costs nothing: parts of a block are packed together again when they fit.
_SENTENCE = re.compile(r"\S.*?(?:[.!?…]+[\"'”’»)\]]*(?=\s)|[。！？]+|$)", re.S)
_LINE = re.compile(r"\S[^\n]*")
_WORD = re.compile(r"\S+")
_SPLITTERS = (_SENTENCE, _LINE, _WORD)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: its text, section path, pages, the boxes of its blocks (``(page, box)``,
    one per block that has a box), the labels of its blocks (in order, each once) and its
    size in tokens."""

    text: str
    headings: tuple[str, ...]
    pages: tuple[int, ...]
    boxes: tuple[tuple[int, BBox], ...]
    labels: tuple[str, ...]
    n_tokens: int


@dataclass(frozen=True, slots=True)
class _Piece:
    """A block, or a part of one: ``block.text[start:end]``. ``key`` tells blocks apart,
    so that consecutive parts of one block rejoin with the block's own white space."""

    key: int
    page: int
    block: Block
    start: int
    end: int
    tokens: int


def chunk_blocks(
    pages: Iterable[tuple[int, Sequence[Block]]], max_tokens: int, count: TokenCounter
) -> list[Chunk]:
    """The chunks of a document given as ``(page number, blocks in reading order)`` in
    page order; ``count`` measures tokens. See the module's docstring for the rules."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")
    packer = _Packer(max_tokens, count)
    path: list[tuple[int, str]] = []
    key = 0
    for number, blocks in pages:
        for block in blocks:
            key += 1
            if block.label in SKIPPED_LABELS or not block.text.strip():
                continue
            if block.label in HEADING_LABELS:
                packer.close()
                level, title = heading(block)
                if title:
                    path = [h for h in path if h[0] < level] + [(level, title)]
                packer.headings = tuple(t for _, t in path)
                continue
            for piece in _pieces(key, number, block, max_tokens, count):
                packer.add(piece)
    packer.close()
    return packer.chunks


def heading(block: Block) -> tuple[int, str]:
    """A heading block's level and its text without ``#`` marks, on one line."""
    text = block.text.strip()
    found = _HASHES.match(text)
    if found:
        level, text = len(found.group(1)), text[found.end() :]
        text = _CLOSING_HASHES.sub("", text)
    else:
        level = 1 if block.label is BlockLabel.TITLE else 2
    return level, " ".join(text.split())


def _pieces(
    key: int, page: int, block: Block, max_tokens: int, count: TokenCounter
) -> list[_Piece]:
    """The block as one piece, or as parts of at most ``max_tokens`` tokens where it is
    longer and may be split."""
    text = block.text
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    tokens = count(text[start:end])
    if tokens <= max_tokens or block.label in WHOLE_LABELS:
        spans = [(start, end, tokens)]
    else:
        spans = _split(text, start, end, tokens, max_tokens, count, 0)
    return [_Piece(key, page, block, s, e, n) for s, e, n in spans]


def _split(
    text: str, start: int, end: int, tokens: int, limit: int, count: TokenCounter, level: int
) -> list[tuple[int, int, int]]:
    """``text[start:end]`` (``tokens`` long) as ``(start, end, tokens)`` spans of at most
    ``limit`` tokens, cut at the coarsest boundaries that do it (``_SPLITTERS`` from
    ``level`` on, then characters)."""
    if tokens <= limit:
        return [(start, end, tokens)]
    if level == len(_SPLITTERS):
        return _cut(text, start, end, tokens, limit, count)
    spans = [
        (m.start(), m.start() + len(m.group().rstrip())) for m in _spans(text, start, end, level)
    ]
    if len(spans) <= 1:
        return _split(text, start, end, tokens, limit, count, level + 1)
    out: list[tuple[int, int, int]] = []
    for s, e in spans:
        out.extend(_split(text, s, e, count(text[s:e]), limit, count, level + 1))
    return out


def _spans(text: str, start: int, end: int, level: int) -> list[re.Match[str]]:
    return [m for m in _SPLITTERS[level].finditer(text, start, end) if m.group().strip()]


def _cut(
    text: str, start: int, end: int, tokens: int, limit: int, count: TokenCounter
) -> list[tuple[int, int, int]]:
    """Cut between characters (a "word" over the limit: a URL, a run of OCR noise): parts
    sized by the span's characters per token, shrunk until they fit (one character at
    least), so that a long span is counted a few times, not once per character."""
    per_token = (end - start) / max(tokens, 1)
    out = []
    while start < end:
        stop = min(end, start + max(1, int(limit * per_token)))
        n = count(text[start:stop])
        while n > limit and stop - start > 1:
            stop = start + max(1, (stop - start) * limit // (n + 1))
            n = count(text[start:stop])
        out.append((start, stop, n))
        start = stop
    return out


@dataclass(slots=True)
class _Packer:
    """Fills chunks with pieces in order, a section at a time."""

    max_tokens: int
    count: TokenCounter
    headings: tuple[str, ...] = ()
    chunks: list[Chunk] = field(default_factory=list)
    pieces: list[_Piece] = field(default_factory=list)
    tokens: int = 0

    def add(self, piece: _Piece) -> None:
        """Add a piece, closing the chunk first when the piece would not fit."""
        # An estimate (a separator is one token): ``close`` checks the exact count.
        cost = piece.tokens + (1 if self.pieces else 0)
        if self.pieces and self.tokens + cost > self.max_tokens:
            self.close()
            cost = piece.tokens
        self.pieces.append(piece)
        self.tokens += cost
        if self.tokens >= self.max_tokens:
            self.close()

    def close(self) -> None:
        """Turn the pieces gathered into chunks."""
        pending, self.pieces, self.tokens = self.pieces, [], 0
        while pending:
            take = len(pending)
            text = _join(pending)
            # A lone piece was counted whole already.
            n_tokens = pending[0].tokens if take == 1 else self.count(text)
            # Tokens can merge or part where pieces meet, so the estimate may fall short:
            # then the last pieces wait for a chunk of their own.
            while n_tokens > self.max_tokens and take > 1:
                take -= 1
                text = _join(pending[:take])
                n_tokens = self.count(text)
            self.chunks.append(_chunk(pending[:take], text, n_tokens, self.headings))
            pending = pending[take:]


def _groups(pieces: Sequence[_Piece]) -> list[list[_Piece]]:
    """Consecutive pieces of one block together."""
    groups: list[list[_Piece]] = []
    for piece in pieces:
        if groups and groups[-1][-1].key == piece.key:
            groups[-1].append(piece)
        else:
            groups.append([piece])
    return groups


def _join(pieces: Sequence[_Piece]) -> str:
    return SEPARATOR.join(
        group[0].block.text[group[0].start : group[-1].end] for group in _groups(pieces)
    )


def _chunk(pieces: Sequence[_Piece], text: str, n_tokens: int, headings: tuple[str, ...]) -> Chunk:
    groups = _groups(pieces)
    boxes = tuple((g[0].page, box) for g in groups if (box := g[0].block.bbox) is not None)
    return Chunk(
        text=text,
        headings=headings,
        pages=tuple(sorted({p.page for p in pieces})),
        boxes=boxes,
        labels=tuple(dict.fromkeys(str(p.block.label) for p in pieces)),
        n_tokens=n_tokens,
    )
