"""Output names end to end: real files whose names are Unicode twins, case twins, long
multi-byte names and long names sharing their start each get their own Markdown file, with
their own content, through ``ocrflow run``; a second run recognises all of them as done."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from .cli_helpers import ocrflow, results

pytestmark = pytest.mark.slow

NAMES = (
    unicodedata.normalize("NFC", "café.pdf"),
    unicodedata.normalize("NFD", "café.pdf"),  # the same name to a Mac, a different file here
    "Report.pdf",
    "report.pdf",  # one file on a case-insensitive disk or a bucket synced to one
    "報告" * 41 + "文.pdf",  # 253 bytes: a legal name, but name + ".md" is not
    "文" * 80 + "-first.pdf",  # these two share their first 240 bytes
    "文" * 80 + "-second.pdf",
    "😀" * 62 + ".pdf",  # 4-byte characters
    "plain.pdf",
)


def _documents(folder: Path) -> dict[str, str]:
    """One PDF per name, each with its own title; returns title by file name."""
    from make_examples import text_pdf

    folder.mkdir()
    titles = {}
    for i, name in enumerate(NAMES):
        titles[name] = f"Document number {i}"
        body = [titles[name], "", f"The body text of document {i} in plain words."]
        (folder / name).write_bytes(text_pdf([body]))
    assert len(list(folder.iterdir())) == len(NAMES)  # the twins really are two files each
    return titles


def test_every_source_gets_its_own_markdown(tmp_path: Path) -> None:
    titles = _documents(tmp_path / "in")
    out = tmp_path / "out"
    args = ("run", str(tmp_path / "in"), "-o", str(out), "--text-layer", "only", "--workers", "1")
    done = ocrflow(*args, "-q")
    assert done.returncode == 0, done.stderr

    markdown = sorted((out / "markdown").iterdir())
    assert len(markdown) == len(NAMES)
    assert len({p.name.casefold() for p in markdown}) == len(NAMES)  # case-insensitive too
    assert all(len(p.name.encode()) <= 255 and p.name.endswith(".pdf.md") for p in markdown)
    records = results(out)
    assert len(records) == len(NAMES)
    for record in records:
        source = Path(record["metadata"]["Source-File"]).name
        own = (out / "markdown" / f"{record['metadata']['source_path']}.md").read_text()
        assert own.startswith(titles[source]), (source, own[:40])
    assert (out / "markdown" / "plain.pdf.md").is_file()  # no clash: the name stays as it is

    again = ocrflow(*args, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["documents_skipped"] == len(NAMES)
    assert sorted((out / "markdown").iterdir()) == markdown
