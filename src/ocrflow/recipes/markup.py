"""HTML in model replies: tables (kept, cleaned or made Markdown) and HTML → Markdown.

Built on the standard library's ``html.parser``. Math in ``<math>`` tags becomes ``$...$``
(``$$...$$`` with ``display="block"``) with its LaTeX untouched.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

from ocrflow.recipes.html_tables import (
    TABLE,
    TAGS,
    Cell,
    cell_text,
    has_spans,
    rebuild_table,
    table_rows,
)
from ocrflow.recipes.text import normalize_whitespace

#: Keep HTML tables as the model wrote them.
TABLES_HTML = "html"
#: Turn simple HTML tables (no row or column spans) into Markdown pipe tables.
TABLES_MARKDOWN = "markdown"
TABLE_FORMATS = (TABLES_HTML, TABLES_MARKDOWN)

_MATH = re.compile(r"<math\b([^>]*)>(.*?)</math\s*>", re.S | re.I)
_MATH_TOKEN = re.compile("\ue000(\\d+)\ue001")
_BLOCK_DISPLAY = re.compile(r"""display\s*=\s*["']?block""", re.I)
_SPACES = re.compile(r"\s+")

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = frozenset(
    ("p", "div", "caption", "blockquote", "section", "header", "footer", "figure", "figcaption")
)
_INLINE_MARKS = {"b": "**", "strong": "**", "i": "*", "em": "*", "del": "~~", "s": "~~"}
_INLINE_MARKS |= {"strike": "~~", "code": "`"}
_KEPT_INLINE = frozenset(("sup", "sub"))
_CAPTURED = frozenset(("table", "pre"))
_LIST_INDENT = "    "


@dataclass(frozen=True, slots=True)
class ConvertedHtml:
    """Markdown made from an HTML fragment, plus the ``alt`` text of its images."""

    markdown: str
    image_alts: tuple[str, ...] = ()


def check_table_format(table_format: str) -> None:
    """Raise ``ValueError`` unless ``table_format`` is one of ``TABLE_FORMATS``."""
    if table_format not in TABLE_FORMATS:
        raise ValueError(f"table_format must be one of {TABLE_FORMATS}: {table_format!r}")


def convert_tables(text: str, table_format: str = TABLES_HTML) -> str:
    """Every HTML table in ``text`` in ``table_format`` (complex tables stay HTML)."""
    if table_format == TABLES_HTML:
        return text
    return TABLE.sub(lambda m: "\n\n" + table_to_markdown(m.group(0)) + "\n\n", text)


def table_to_markdown(table_html: str) -> str:
    """A pipe table for a table without spans; the HTML itself otherwise."""
    if has_spans(table_html) or table_html.lower().count("<table") > 1:
        return table_html.strip()
    rows = [[_pipe_cell(c[2]) for c in cells] for cells in table_rows(table_html)]
    rows = [row for row in rows if row]
    if not rows:
        return table_html.strip()
    width = max(len(row) for row in rows)
    lines = [_pipe_row(row + [""] * (width - len(row))) for row in rows]
    lines.insert(1, _pipe_row(["---"] * width))
    return "\n".join(lines)


def _pipe_cell(cell_html: str) -> str:
    """The text of one cell on one line, pipes escaped."""
    text = html.unescape(TAGS.sub(" ", re.sub(r"<br\s*/?>", " ", cell_html, flags=re.I)))
    return _SPACES.sub(" ", text).strip().replace("|", "\\|")


def _pipe_row(cells: list[str]) -> str:
    """One Markdown table row."""
    return "| " + " | ".join(cells) + " |"


def clean_empty_cells(table_html: str) -> str:
    """Drop rows with no text and trailing columns empty in every row.

    Cell contents are kept as written; the table is rebuilt as ``<table><tr>...``.
    Tables with spans only lose their empty rows (their columns do not line up).
    """
    rows = [cells for cells in table_rows(table_html) if any(cell_text(c[2]) for c in cells)]
    if not rows:
        return ""
    if not has_spans(table_html):
        width = max(_filled_width(cells) for cells in rows)
        rows = [cells[:width] for cells in rows]
    return rebuild_table(rows)


def _filled_width(cells: list[Cell]) -> int:
    """One past the last cell with text."""
    filled = [i for i, cell in enumerate(cells) if cell_text(cell[2])]
    return filled[-1] + 1 if filled else 0


def html_to_markdown(fragment: str, table_format: str = TABLES_HTML) -> ConvertedHtml:
    """Markdown for an HTML fragment (headings, lists, emphasis, math, tables, code)."""
    maths: list[tuple[str, bool]] = []

    def hide(match: re.Match[str]) -> str:
        maths.append((html.unescape(match.group(2)).strip(), _is_block(match.group(1))))
        return f"\ue000{len(maths) - 1}\ue001"

    writer = _MarkdownWriter(_MATH.sub(hide, fragment), table_format)
    writer.run()
    markdown = _restore_math(normalize_whitespace(writer.text()), maths, block_breaks=True)
    return ConvertedHtml(normalize_whitespace(markdown), tuple(writer.image_alts))


def _is_block(attrs: str) -> bool:
    """Whether ``<math ...>`` attributes ask for display math."""
    return bool(_BLOCK_DISPLAY.search(attrs))


def _restore_math(text: str, maths: list[tuple[str, bool]], *, block_breaks: bool) -> str:
    """Put hidden math back as ``$...$`` or ``$$...$$``."""

    def show(match: re.Match[str]) -> str:
        latex, block = maths[int(match.group(1))]
        if not block:
            return f"${latex}$"
        return f"\n\n$$\n{latex}\n$$\n\n" if block_breaks else f"$${latex}$$"

    return _MATH_TOKEN.sub(show, text)


class _SourceParser(HTMLParser):
    """An ``HTMLParser`` that knows the absolute offset of the tag being handled."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.source = source
        self._line_starts = [0] + [i + 1 for i, ch in enumerate(source) if ch == "\n"]

    def run(self) -> None:
        """Parse the whole source."""
        self.feed(self.source)
        self.close()

    def tag_offset(self) -> int:
        """Offset in ``source`` where the current tag starts."""
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def end_of_start_tag(self) -> int:
        """Offset just past the start tag being handled."""
        return self.tag_offset() + len(self.get_starttag_text() or "")

    def end_of_end_tag(self) -> int:
        """Offset just past the end tag being handled."""
        end = self.source.find(">", self.tag_offset())
        return len(self.source) if end < 0 else end + 1


class _MarkdownWriter(_SourceParser):
    """Writes Markdown while parsing; tables and ``<pre>`` are copied from the source."""

    def __init__(self, source: str, table_format: str) -> None:
        super().__init__(source)
        self.table_format = table_format
        self.parts: list[str] = []
        self.image_alts: list[str] = []
        self._lists: list[tuple[str, int]] = []
        self._hrefs: list[str | None] = []
        self._capture: tuple[str, int] | None = None
        self._capture_depth = 0

    def text(self) -> str:
        """The Markdown written so far (an unclosed table or pre is flushed)."""
        if self._capture is not None:
            self._flush_capture(len(self.source))
        return "".join(self.parts)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._capture is not None:
            self._capture_depth += tag == self._capture[0]
        elif tag in _CAPTURED:
            self._capture, self._capture_depth = (tag, self.tag_offset()), 1
        else:
            self._open(tag, dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if self._capture is None:
            self._close(tag)
        elif tag == self._capture[0]:
            self._capture_depth -= 1
            if self._capture_depth == 0:
                self._flush_capture(self.end_of_end_tag())

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._capture is None:
            self._open(tag, dict(attrs))

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            return
        text = _SPACES.sub(" ", data)
        if self._after_space():
            text = text.lstrip()
        self.parts.append(text)

    def _open(self, tag: str, attrs: dict[str, str | None]) -> None:
        """Markdown for an opening tag."""
        if tag in _HEADINGS:
            self._block("#" * _HEADINGS[tag] + " ")
        elif tag in _BLOCKS:
            self._paragraph()
        elif tag == "br":
            self._newline()
        elif tag in ("ul", "ol"):
            self._open_list(tag)
        elif tag == "li":
            self._open_item()
        else:
            self._open_inline(tag, attrs)

    def _open_inline(self, tag: str, attrs: dict[str, str | None]) -> None:
        """Markdown for an opening inline tag."""
        if tag in _INLINE_MARKS:
            self.parts.append(_INLINE_MARKS[tag])
        elif tag in _KEPT_INLINE:
            self.parts.append(f"<{tag}>")
        elif tag == "a":
            self._hrefs.append(attrs.get("href") or None)
            self.parts.append("[" if self._hrefs[-1] else "")
        elif tag == "img":
            self.image_alts.append((attrs.get("alt") or "").strip())
        elif tag == "input" and attrs.get("type") in ("checkbox", "radio"):
            self.parts.append("☑ " if "checked" in attrs else "☐ ")
        elif tag == "hr":
            self._block("---")
            self._block("")

    def _close(self, tag: str) -> None:
        """Markdown for a closing tag."""
        if tag in _HEADINGS or tag in _BLOCKS:
            self._paragraph()
        elif tag in ("ul", "ol") and self._lists:
            self._lists.pop()
            self._paragraph()
        elif tag in _INLINE_MARKS:
            self.parts.append(_INLINE_MARKS[tag])
        elif tag in _KEPT_INLINE:
            self.parts.append(f"</{tag}>")
        elif tag == "a" and self._hrefs:
            href = self._hrefs.pop()
            self.parts.append(f"]({href})" if href else "")

    def _open_list(self, tag: str) -> None:
        """Start a (possibly nested) list."""
        if not self._lists:
            self._paragraph()
        self._lists.append((tag, 0))

    def _open_item(self) -> None:
        """Start a list item with its marker."""
        if not self._lists:
            self._lists.append(("ul", 0))
        kind, count = self._lists[-1]
        self._lists[-1] = (kind, count + 1)
        marker = f"{count + 1}. " if kind == "ol" else "- "
        self.parts.append("\n" + _LIST_INDENT * (len(self._lists) - 1) + marker)

    def _paragraph(self) -> None:
        """A paragraph break (a line break inside lists)."""
        if self._lists:
            self._newline()
        else:
            self.parts.append("\n\n")

    def _newline(self) -> None:
        """A line break, indented to the current list item."""
        self.parts.append("\n" + _LIST_INDENT * len(self._lists))

    def _block(self, prefix: str) -> None:
        """A new paragraph starting with ``prefix``."""
        self.parts.append("\n\n" + prefix)

    def _after_space(self) -> bool:
        """Whether the text written so far ends in white space (or nothing was written)."""
        last = next((part for part in reversed(self.parts) if part), "")
        return not last or last[-1].isspace()

    def _flush_capture(self, end: int) -> None:
        """Write the captured table or ``<pre>`` block."""
        assert self._capture is not None
        tag, start = self._capture
        raw = self.source[start:end]
        self._capture = None
        if tag == "table":
            self.parts.append("\n\n" + convert_tables(raw.strip(), self.table_format) + "\n\n")
        else:
            code = html.unescape(TAGS.sub("", raw)).strip("\n")
            self.parts.append("\n\n```\n" + code + "\n```\n\n")


def split_blocks(source: str) -> list[HtmlBlock]:
    """The top-level ``<div>`` blocks of a layout reply, in order.

    Text outside any top-level div becomes a block with no label. A div left open at
    the end (a cut-off reply) runs to the end of the source.
    """
    splitter = _BlockSplitter(source)
    splitter.run()
    return splitter.finish()


@dataclass(frozen=True, slots=True)
class HtmlBlock:
    """One top-level block: its attributes and its inner HTML."""

    attrs: dict[str, str]
    inner_html: str


class _BlockSplitter(_SourceParser):
    """Finds top-level divs by offsets, so inner HTML is copied exactly."""

    def __init__(self, source: str) -> None:
        super().__init__(source)
        self.blocks: list[HtmlBlock] = []
        self._depth = 0
        self._loose_from = 0
        self._inner_from = 0
        self._attrs: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "div":
            return
        if self._depth == 0:
            self._add_loose(self.tag_offset())
            self._attrs = {k: v or "" for k, v in attrs}
            self._inner_from = self.end_of_start_tag()
        self._depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag != "div" or self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            inner = self.source[self._inner_from : self.tag_offset()]
            self.blocks.append(HtmlBlock(self._attrs, inner))
            self._loose_from = self.end_of_end_tag()

    def finish(self) -> list[HtmlBlock]:
        """The blocks, with an unclosed last div or trailing loose text added."""
        if self._depth > 0:
            self.blocks.append(HtmlBlock(self._attrs, self.source[self._inner_from :]))
        else:
            self._add_loose(len(self.source))
        return self.blocks

    def _add_loose(self, end: int) -> None:
        """Keep text found between top-level divs as an unlabelled block."""
        loose = self.source[self._loose_from : end]
        if loose.strip():
            self.blocks.append(HtmlBlock({}, loose))
