"""The canonical Markdown pass: the same tidy-up for every recipe's output.

Each rule is a small function from text to text; ``clean_markdown`` runs them in order and
says which changed something. Rules leave fenced code alone, and the hyphen rule leaves
tables alone too (a cell may hold "e-\\nmail" on purpose). ``clean_page`` applies the pass
to a page an engine read and keeps the text as the model gave it in ``PageResult.raw_text``.
See docs/markdown-clean.md for what each rule does and does not do.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ocrflow.recipes.html_tables import TABLE, cell_text, has_spans, rebuild_table, table_rows
from ocrflow.types import Block, PageResult, Route

#: Cell contents that stand for "nothing here": model serialisation artefacts and dashes.
PLACEHOLDERS = frozenset(
    {"", "none", "null", "nan", "n/a", "n.a.", "-", "--", "---", "\u2013", "\u2014", "\u2212"}
)
#: A citation marker lists at most this many numbers once ranges are spelled out.
MAX_CITED = 20

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
_PIPE_TABLE = re.compile(r"(?:^[ \t]*\|.*\|[ \t]*(?:\n|\Z))+", re.M)
_SEPARATOR_CELL = re.compile(r"^\s*:?-{1,}:?\s*$")
_BLANK_RUN = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_HYPHEN_BREAK = re.compile(r"(?<![\w-])([^\W\d_]+)-[ \t]*\n[ \t]*([^\W\d_]+)")
_WORD = re.compile(r"[^\W\d_]+")
_SUP = re.compile(r"<sup>\s*(\d{1,4}(?:\s*[,\u2013-]\s*\d{1,4})*)\s*</sup>", re.I)
_SUP_LINE_START = re.compile(r"^([ \t]*)<sup>\s*(\d{1,4})\s*</sup>[ \t]*", re.M)
_CITING_PUNCT = frozenset(".,;:!?)]\"'\u201d\u2019\u3002\uff0c\uff09")
_META_TOKEN = re.compile(r"<\|/?[A-Za-z0-9_\u2581.\-]{1,40}\|>")


@dataclass(frozen=True, slots=True)
class CleanResult:
    """The cleaned text and the names of the rules that changed it, in order."""

    text: str
    applied: tuple[str, ...] = ()


def clean_markdown(text: str, prompts: Iterable[str] = ()) -> CleanResult:
    """Run every rule on ``text``; ``prompts`` are the texts whose echo is stripped."""
    rules: list[tuple[str, Callable[[str], str]]] = [
        ("prompt_echo", lambda t: strip_prompt_echo(t, prompts)),
        ("tables", drop_placeholder_tables),
        ("footnotes", sup_to_footnotes),
        ("hyphens", join_hyphenated),
        ("blank_lines", collapse_blank_lines),
    ]
    applied = []
    for name, rule in rules:
        cleaned = rule(text)
        if cleaned != text:
            applied.append(name)
            text = cleaned
    return CleanResult(text, tuple(applied))


def clean_page(page: PageResult, prompts: Iterable[str] = ()) -> PageResult:
    """``page`` with its Markdown cleaned, when an engine read it; the model's own text goes
    to ``raw_text`` (left ``None`` when no rule changed anything)."""
    if page.route is not Route.ENGINE or not page.text:
        return page
    result = clean_markdown(page.text, prompts)
    if not result.applied:
        return page
    attributes = {**page.attributes, "cleaned": list(result.applied)}
    blocks = _clean_blocks(page.blocks, prompts)
    return dataclasses.replace(
        page, text=result.text, raw_text=page.text, attributes=attributes, blocks=blocks
    )


def _clean_blocks(blocks: tuple[Block, ...], prompts: Iterable[str]) -> tuple[Block, ...]:
    """Each block's text cleaned as the page's was (blocks left empty go)."""
    cleaned = []
    for block in blocks:
        text = clean_markdown(block.text, prompts).text if block.text else block.text
        if text == block.text:
            cleaned.append(block)
        elif text.strip():
            cleaned.append(dataclasses.replace(block, text=text))
    return tuple(cleaned)


def recipe_prompts(recipe: object | None) -> tuple[str, ...]:
    """The prompt a recipe sends (``prompt`` attribute), for the echo rule."""
    prompt = getattr(recipe, "prompt", None)
    return (prompt,) if isinstance(prompt, str) and prompt.strip() else ()


# -- outside code ----------------------------------------------------------------------------
def _outside(pattern: re.Pattern[str], text: str, rule: Callable[[str], str]) -> str:
    """Apply ``rule`` to the parts of ``text`` that ``pattern`` does not match."""
    parts, last = [], 0
    for match in pattern.finditer(text):
        parts += [rule(text[last : match.start()]), match.group(0)]
        last = match.end()
    parts.append(rule(text[last:]))
    return "".join(parts)


def _outside_code(text: str, rule: Callable[[str], str]) -> str:
    return _outside(_FENCE, text, rule)


# -- blank lines -----------------------------------------------------------------------------
def collapse_blank_lines(text: str) -> str:
    """Runs of blank lines become one blank line; the text ends without blank lines."""
    collapsed = _outside_code(text, lambda part: _BLANK_RUN.sub("\n\n", part))
    return collapsed.strip("\n")


# -- hyphenation -----------------------------------------------------------------------------
def join_hyphenated(text: str) -> str:
    """``exam-\\nple`` becomes ``example`` when "example" is written whole elsewhere on the
    page; otherwise the hyphen and the line break stay (``well-\\nknown`` is a compound)."""
    words = {w.lower() for w in _WORD.findall(_HYPHEN_BREAK.sub(" ", text))}

    def join(match: re.Match[str]) -> str:
        head, tail = match.group(1), match.group(2)
        if tail[0].islower() and (head + tail).lower() in words:
            return head + tail
        return match.group(0)

    def rule(part: str) -> str:
        return _outside(_PIPE_TABLE, part, lambda p: _HYPHEN_BREAK.sub(join, p))

    return _outside_code(text, lambda part: _outside(TABLE, part, rule))


# -- citation markers --------------------------------------------------------------------------
def sup_to_footnotes(text: str) -> str:
    """``word<sup>71</sup>`` becomes ``word[^71]``; a line opening with ``<sup>71</sup>``
    becomes the footnote ``[^71]: ...``. Exponents stay: ``10<sup>6</sup>``, ``cm<sup>3</sup>``
    (a marker after a digit or a word of under three letters is read as a power)."""
    return _outside_code(text, _sup_rule)


def _sup_rule(text: str) -> str:
    text = _SUP_LINE_START.sub(lambda m: f"{m.group(1)}[^{m.group(2)}]: ", text)

    def cite(match: re.Match[str]) -> str:
        numbers = _cited_numbers(match.group(1))
        if not numbers or not _cites(text, match.start()):
            return match.group(0)
        return "".join(f"[^{n}]" for n in numbers)

    return _SUP.sub(cite, text)


def _cites(text: str, start: int) -> bool:
    """Whether a marker at ``start`` follows what a citation follows (not a number)."""
    before = text[:start]
    if not before or before[-1] in _CITING_PUNCT:
        return bool(before)
    if not before[-1].isalpha():
        return False
    if "\u4e00" <= before[-1] <= "\u9fff":  # CJK text has no word spaces to count
        return True
    word = re.search(r"[^\W\d_]+$", before)
    return word is not None and len(word.group(0)) >= 3


def _cited_numbers(spec: str) -> list[int]:
    """``"1, 3-5"`` as ``[1, 3, 4, 5]``; empty when a range is backwards or too long."""
    numbers: list[int] = []
    for item in re.split(r"\s*,\s*", spec):
        ends = [int(n) for n in re.split(r"\s*[\u2013-]\s*", item)]
        low, high = ends[0], ends[-1]
        if high < low or high - low >= MAX_CITED:
            return []
        numbers += range(low, high + 1)
    return numbers if len(numbers) <= MAX_CITED else []


# -- prompt echoes -----------------------------------------------------------------------------
def strip_prompt_echo(text: str, prompts: Iterable[str]) -> str:
    """Drop the recipe's prompt when the reply opens by repeating it (whitespace and case
    aside, meta tokens such as ``<|grounding|>`` optional); also its first line alone when
    that is 30+ characters long (an echo cut short)."""
    for prompt in prompts:
        for variant in _echo_variants(prompt):
            match = _echo_pattern(variant).match(text)
            if match:
                return text[match.end() :].lstrip()
    return text


def _echo_variants(prompt: str) -> list[str]:
    variants = [prompt, _META_TOKEN.sub("", prompt)]
    first_line = prompt.strip().split("\n", 1)[0]
    if len(first_line) >= 30:
        variants.append(first_line)
    return [v for v in dict.fromkeys(v.strip() for v in variants) if v]


def _echo_pattern(variant: str) -> re.Pattern[str]:
    words = variant.split()
    body = r"\s+".join(re.escape(w) for w in words)
    return re.compile(r"\s*" + body + r"[ \t]*(?:\n|\Z)", re.I)


# -- tables ------------------------------------------------------------------------------------
def is_placeholder(cell: str) -> bool:
    """Whether a cell's text (tags and entities decoded) is empty or a placeholder."""
    plain = cell_text(cell).strip("*_ ")
    return plain.lower() in PLACEHOLDERS


def drop_placeholder_tables(text: str) -> str:
    """Tables without a real cell go; rows and columns made only of placeholders go.

    A placeholder beside real cells stays as written: in a row with data, a dash or "N/A"
    says "nil" or "not applicable", and emptying it would change what the table says.
    """

    def tables(part: str) -> str:
        part = TABLE.sub(lambda m: _clean_html_table(m.group(0)), part)
        return _PIPE_TABLE.sub(lambda m: _clean_pipe_table(m.group(0)), part)

    return _outside_code(text, tables)


def _clean_html_table(table: str) -> str:
    rows = table_rows(table)
    if not any(not is_placeholder(c[2]) for cells in rows for c in cells):
        return ""
    kept = [cells for cells in rows if any(not is_placeholder(c[2]) for c in cells)]
    if not has_spans(table):
        columns = _real_columns([[c[2] for c in cells] for cells in kept])
        kept = [[c for i, c in enumerate(cells) if i in columns] for cells in kept]
    if kept == rows:
        return table
    return rebuild_table(kept)


def _real_columns(rows: list[list[str]]) -> set[int]:
    """Indexes of columns with at least one real cell."""
    return {i for cells in rows for i, cell in enumerate(cells) if not is_placeholder(cell)}


def _clean_pipe_table(block: str) -> str:
    rows = [_pipe_cells(line) for line in block.rstrip("\n").split("\n")]
    if len(rows) < 2 or not all(_SEPARATOR_CELL.match(c) for c in rows[1]):
        return block  # not a table Markdown renders: leave it as written
    header, separator, body = rows[0], rows[1], rows[2:]
    if all(is_placeholder(c) for cells in [header, *body] for c in cells):
        return ""
    kept = [cells for cells in body if any(not is_placeholder(c) for c in cells)]
    width = max(len(cells) for cells in rows)
    keep = sorted(_real_columns([header, *kept]))
    if kept == body and len(keep) == width:
        return block
    separator = separator + ["---"] * (width - len(separator))
    lines = [
        "| " + " | ".join(cells[i] if i < len(cells) else "" for i in keep) + " |"
        for cells in [header, separator, *kept]
    ]
    return "\n".join(lines) + ("\n" if block.endswith("\n") else "")


def _pipe_cells(line: str) -> list[str]:
    """A pipe-table line's cells (escaped pipes ``\\|`` stay inside a cell)."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", inner)]
