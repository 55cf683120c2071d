"""What a describe answer becomes in the document: prompts per task, and the Markdown that
assemble places after a figure's link (a table when a ``parse`` answer is tabular)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

TASKS = ("caption", "parse", "classify")
#: Every default prompt starts by saying what the image is: models answer better, and the
#: test server recognises figure requests by it.
_LEAD = "This image is a figure cropped from a document page. "
PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        "caption": _LEAD
        + "Describe it in one or two sentences for search: what it shows, its kind, and "
        "any title, axis names or key numbers you can read.",
        "parse": _LEAD
        + "If it is a chart or a table, give its data as a Markdown table with a header "
        "row and nothing else; otherwise describe it in one sentence.",
        "classify": _LEAD
        + "Classify it: answer with exactly one word from photo, chart, diagram, table, "
        "logo, other.",
    }
)
_FENCE = re.compile(r"^```[a-zA-Z]*\n(.*?)\n?```\s*$", re.S)
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")


def prompt_for(task: str, prompt: str | None = None) -> str:
    """The prompt of a task, or the user's own."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: use {', '.join(TASKS)}")
    return prompt or PROMPTS[task]


def answer_markdown(task: str, text: str) -> str:
    """The Markdown of an answer: a class as one word, a tabular ``parse`` answer as a
    Markdown table (JSON records or columns included), anything else as a paragraph."""
    text = _unfenced(text.strip())
    if task == "classify":
        words = re.findall(r"[\w-]+", text.lower())
        return words[0] if words else ""
    if task == "parse":
        table = _markdown_table(text) or _json_table(text)
        if table:
            return table
    return " ".join(text.split())


def _unfenced(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def _markdown_table(text: str) -> str | None:
    """The Markdown table in ``text`` (its rows only), if it has one with a header row."""
    rows = [line.strip() for line in text.splitlines() if _TABLE_ROW.match(line)]
    if len(rows) < 2 or not set(rows[1].replace("|", "").strip()) <= set("-: "):
        return None
    return "\n".join(rows)


def _json_table(text: str) -> str | None:
    """A table from JSON records (a list of objects), columns (an object of lists), or
    pairs (an object of scalars)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        header = list(dict.fromkeys(k for r in data for k in r))
        return _table(header, [[r.get(k, "") for k in header] for r in data])
    if isinstance(data, dict) and data and all(isinstance(v, list) for v in data.values()):
        header = list(data)
        length = max(len(v) for v in data.values())
        rows = [[v[i] if i < len(v) else "" for v in data.values()] for i in range(length)]
        return _table(header, rows)
    if isinstance(data, dict) and data:
        return _table(["key", "value"], [[k, v] for k, v in data.items()])
    return None


def _table(header: list[Any], rows: list[list[Any]]) -> str:
    lines = [_row(header), "|" + "---|" * len(header)]
    lines.extend(_row(r) for r in rows)
    return "\n".join(lines)


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(text.split()).replace("|", "\\|")
