"""Shared text helpers: the repetition detector and output clean-up."""

from __future__ import annotations

import pytest

from ocrflow.recipes.text import (
    detect_repetition,
    ensure_heading,
    normalize_whitespace,
    strip_code_fence,
    strip_meta_tokens,
)

from .helpers import sample

PARAGRAPH = (
    "Edgar mainly followed the political policies of his predecessors, but there were major "
    "changes in the religious sphere. The English Benedictine Reform, which he strongly "
    "supported, became a dominant religious and social force."
)


def markdown_table(rows: int, columns: int) -> str:
    """A Markdown table with distinct cells and one separator row."""
    header = "| " + " | ".join(f"Col {c}" for c in range(columns)) + " |"
    separator = "| " + " | ".join("---" for _ in range(columns)) + " |"
    body = [
        "| " + " | ".join(f"{r * 7 + c * 3}.{c}" for c in range(columns)) + " |"
        for r in range(rows)
    ]
    return "\n".join([header, separator, *body])


LOOPS = {
    "word loop": "The results are " + "the " * 200,
    "phrase loop": "# Page 1\n\n" + "the table of the " * 120,
    "repeated line": "Intro.\n" + "\n".join(["Total amount due upon receipt of invoice"] * 12),
    "alternating lines": "\n".join(["Name of applicant", "Signature of applicant"] * 12),
    "repeated paragraph": "\n\n".join([PARAGRAPH] * 5),
    "cjk loop": "前言" + "本报告介绍了水质监测结果。" * 40,
    "digit loop": "Reference number " + "1234567890" * 60,
}

NOT_LOOPS = {
    "wide markdown table": markdown_table(rows=40, columns=12),
    "separator of 60 columns": "| " + " | ".join(["---"] * 60) + " |",
    "empty html table": "<table>" + ("<tr>" + "<td></td>" * 12 + "</tr>\n") * 10 + "</table>",
    "sparse html table": "<table>"
    + "".join(f"<tr><td>Row {i}</td>" + "<td></td>" * 15 + "</tr>" for i in range(40))
    + "</table>",
    "table of contents": "\n".join(
        f"{i}. Chapter {i} " + "." * 70 + f" {i * 12}" for i in range(1, 30)
    ),
    "form lines": "\n".join(f"{label}: ____________________" for label in ("Name", "Date") * 4),
    "bullet list": "\n".join(f"- Item {i}: yes" for i in range(40)),
    "short stutter": "It was very very very good, ha ha ha.",
    "empty": "",
}


@pytest.mark.parametrize("text", LOOPS.values(), ids=LOOPS.keys())
def test_loops_are_detected(text: str) -> None:
    assert detect_repetition(text)


@pytest.mark.parametrize("text", NOT_LOOPS.values(), ids=NOT_LOOPS.keys())
def test_repeated_structure_is_not_a_loop(text: str) -> None:
    assert not detect_repetition(text)


def test_real_pages_are_not_loops(corpus) -> None:
    page = (corpus / "groundtruth" / "olmocr__edgar.md").read_text(encoding="utf-8")
    assert not detect_repetition(page)
    for name in ("chandra_layout.html", "deepseek_grounding.txt", "dots_layout.json"):
        assert not detect_repetition(sample(name))


def test_meta_tokens_are_stripped() -> None:
    text = "<|ref|>text<|/ref|>Hello<|im_end|> world<｜end▁of▁sentence｜>"
    assert strip_meta_tokens(text) == "textHello world"


def test_meta_token_stripping_keeps_math_and_pipes() -> None:
    text = r"| a | b |  and \(|x| < 1\)"
    assert strip_meta_tokens(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```markdown\n# Title\n\nBody\n```", "# Title\n\nBody"),
        ("```md\nText\n```\n", "Text"),
        ("```\nplain\n```", "plain"),
        ("Text with ```code``` inside", "Text with ```code``` inside"),
        ("```python\nx = 1\n```", "```python\nx = 1\n```"),
        ("```json\n[1, 2]", "[1, 2]"),
    ],
)
def test_code_fence(text: str, expected: str) -> None:
    assert strip_code_fence(text) == expected


def test_normalize_whitespace() -> None:
    text = "\n\n# Title  \r\n\n\n\nLine one\t\nLine two\n\n\n"
    assert normalize_whitespace(text) == "# Title\n\nLine one\nLine two"


@pytest.mark.parametrize(
    ("text", "level", "expected"),
    [
        ("Introduction", 2, "## Introduction"),
        ("# Already", 2, "# Already"),
        ("  Two\nlines ", 1, "# Two lines"),
        ("   ", 1, ""),
    ],
)
def test_ensure_heading(text: str, level: int, expected: str) -> None:
    assert ensure_heading(text, level) == expected
