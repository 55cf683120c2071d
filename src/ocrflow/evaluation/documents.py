"""Read the documents of a run for evaluation: text per page, matched to tests by name.

Two layouts are read:

* an ocrflow OUT, read through ``sinks.results``: each finished document with text (a
  failed one has none) and its pages' Markdown; the document is named by its
  ``source_path`` (relative to the input root it was found under);
* an olmOCR-bench candidate folder (``<pdf stem>_pg<N>_repeat<R>.md``, as the reference
  benchmark's runners write): each file is one page of one repeat.

A test's ``pdf`` names its document relative to the test set's root, which need not be the
root of the run: :func:`resolve_name` accepts an exact path, a path that ends with the
other at a ``/`` boundary (either way round), or an unambiguous file name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ocrflow.document import Document
from ocrflow.errors import ConfigError
from ocrflow.sinks.results import stored_documents
from ocrflow.storage.local import Store
from ocrflow.storage.open import open_store

_REPEAT = re.compile(r"^(?P<stem>.+)_pg(?P<page>\d+)_repeat(?P<repeat>\d+)\.md$")


@dataclass
class RunDocuments:
    """Page texts of one run: ``pages[name][page]`` is a list of texts (one per repeat)."""

    location: str
    pages: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)

    def text(self, name: str) -> str:
        """The whole document: its pages (first repeat) joined by blank lines."""
        return "\n\n".join(texts[0] for _, texts in sorted(self.pages[name].items()))

    @property
    def repeats(self) -> int:
        """The largest number of repeats any page has (1 for an ocrflow OUT)."""
        return max((len(t) for doc in self.pages.values() for t in doc.values()), default=0)


def _document_name(document: Document) -> str:
    meta = document.metadata
    return str(meta.get("source_path") or meta.get("Source-File") or document.id)


def _read_ocrflow(store: Store, docs: RunDocuments) -> None:
    for stored in stored_documents(store):
        if stored.record is None:  # failed: no text to evaluate
            continue
        document = stored.document
        name = _document_name(document)
        docs.pages[name] = {page.number: [page.markdown] for page in document.pages}
        docs.status[name] = str(document.status)


def _read_bench_folder(store: Store, docs: RunDocuments) -> None:
    found: dict[str, dict[int, list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
    for key in store.list(""):
        path = PurePosixPath(key)
        match = _REPEAT.match(path.name)
        if not match or path.parts[0].startswith("."):
            continue
        name = str(path.parent / f"{match['stem']}.pdf").removeprefix("./")
        text = (store.read_bytes(key) or b"").decode("utf-8")
        found[name][int(match["page"])].append((int(match["repeat"]), text))
    for name, pages in found.items():
        docs.pages[name] = {p: [t for _, t in sorted(reps)] for p, reps in pages.items()}
        docs.status[name] = "ok"


def load_run(location: str) -> RunDocuments:
    """Page texts of an ocrflow OUT or of an olmOCR-bench candidate folder."""
    store = open_store(location)
    docs = RunDocuments(location)
    _read_ocrflow(store, docs)
    if not docs.pages:
        _read_bench_folder(store, docs)
    if not docs.pages:
        raise ConfigError(
            f"{location}: no documents (expected the finished documents of an ocrflow run, "
            "or <name>_pg<N>_repeat<R>.md files)"
        )
    return docs


def resolve_name(wanted: str, names: list[str]) -> str | None:
    """The document among ``names`` that ``wanted`` refers to, or ``None``."""
    wanted = wanted.strip("/")
    if wanted in names:
        return wanted
    suffix = [n for n in names if n.endswith("/" + wanted) or wanted.endswith("/" + n)]
    if len(suffix) == 1:
        return suffix[0]
    base = PurePosixPath(wanted).name
    same = [n for n in names if PurePosixPath(n).name == base]
    return same[0] if len(same) == 1 else None
