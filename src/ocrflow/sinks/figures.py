"""Figure crops as files: ``figures/<doc id>/p<page>-<n>.png`` (see ``figure_key``), and
each document's figures as a workspace record for the describe and assemble stages."""

from __future__ import annotations

from ocrflow.errors import WorkspaceError
from ocrflow.sinks.base import FinishedDocument, figure_key
from ocrflow.sinks.figure_records import save_figure_document
from ocrflow.storage.local import Store


class FigureSink:
    """Writes each figure crop a reader returned, once, under its ``figure_key``.

    Runs before the text sinks (``build_sinks`` orders it first), so a link in a Markdown
    file or record never points at a file that is not there yet. Then it records the
    document's figures and pages in the workspace (``stages.figure_items``), still before
    the done marker, so every done document with figures has its record.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, document: FinishedDocument) -> None:
        """Write the document's figure files (documents without figures write nothing)."""
        if not document.has_output:
            return
        for page in document.result.pages:
            for figure in page.figures:
                if figure.png is None:
                    raise WorkspaceError(
                        f"figure {figure.index} of page {page.page} of {document.doc_id} "
                        "lost its image (a checkpoint without its crop)"
                    )
                key = figure_key(document.doc_id, figure.page, figure.index)
                self.store.write_bytes(key, figure.png)
        save_figure_document(self.store, document)

    def close(self) -> None:
        """Nothing buffered."""
