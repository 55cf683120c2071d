"""One JSON file a document: ``json/<input path relative to its root>.json``.

The file is ``Document.to_dict()`` of the document model (``ocrflow.document``): pages,
blocks in reading order with their boxes, lines and words, statuses and routes. Its shape
is published as a JSON Schema in ``docs/document.schema.json``; ``Document.from_dict``
reads a file back.
"""

from __future__ import annotations

import json

from ocrflow.document import Document, document_from_result
from ocrflow.sinks.base import FinishedDocument, figure_markdown
from ocrflow.storage.local import Store
from ocrflow.storage.names import safe_relpath


def json_key(rel: str) -> str:
    """Where a document's JSON goes: ``json/<rel>.json``."""
    return f"json/{safe_relpath(rel)}.json"


def json_document(document: FinishedDocument, prefix: str = "") -> Document:
    """The document model of a finished document, each figure placeholder replaced by its
    link (and description); ``prefix`` leads from the JSON file's folder to OUT."""
    doc_id = document.doc_id
    return document_from_result(
        document.result,
        document.meta,
        figure_markdown=lambda figure: figure_markdown(doc_id, figure, prefix),
    )


class JsonSink:
    """Writes each document's JSON file, atomically."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, document: FinishedDocument) -> None:
        """Write the JSON of a document that produced text (ok or partial)."""
        if not document.has_output:
            return
        key = json_key(document.meta.rel)
        data = json_document(document, prefix="../" * key.count("/")).to_dict()
        # ensure_ascii off: the file is UTF-8 and stays readable for non-Latin text.
        self.store.write_bytes(key, json.dumps(data, ensure_ascii=False).encode())

    def close(self) -> None:
        """Nothing buffered."""
