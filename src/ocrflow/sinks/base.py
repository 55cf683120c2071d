"""What every sink shares: the finished document it is handed, the protocol, figure names.

A page's text holds one placeholder per figure (``Figure.placeholder``, left by the reader);
each sink turns placeholders into links of its own while rendering, from the page's typed
``figures`` — never by rewriting links in text afterwards. Figure files are named by the pure
function ``figure_key``, so every sink knows where a figure lives without asking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ocrflow.document import Document, document_from_result
from ocrflow.types import DocStatus, DocumentResult, Figure, PageResult

if TYPE_CHECKING:
    from ocrflow.storage.local import Store

FIGURES_DIR = "figures"
#: Longest alt text made from a description.
ALT_TEXT_CHARS = 300
_ALT_UNSAFE = str.maketrans({"[": "(", "]": ")"})


@dataclass(frozen=True, slots=True)
class DocumentMeta:
    """What the sinks need to know about a document besides its pages."""

    rel: str
    content_sha256: str
    created: float | None
    engine: str
    fingerprint: str
    #: What outputs call the source (``Source-File``); ``None``: its URI. A job service
    #: names inputs relative to the job, never by the server's paths.
    source_name: str | None = None


@dataclass(frozen=True, slots=True)
class OriginalFile:
    """The converted file itself, for sinks that rebuild it (the searchable PDF): a local
    path holding its bytes, its kind (``pdf`` or ``image``) and the password that opened
    it. Kept apart from ``DocumentMeta``, which outputs record: a server's paths and a
    document's password are nobody's business."""

    path: str
    kind: str
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class FinishedDocument:
    """One document ready for the sinks: its result and what is known about its source.

    ``original`` is ``None`` where the file is no longer at hand (a later stage rewriting
    outputs from the workspace)."""

    result: DocumentResult
    meta: DocumentMeta
    original: OriginalFile | None = None

    @property
    def doc_id(self) -> str:
        return self.result.doc_id

    @property
    def has_output(self) -> bool:
        """Whether the document produced text (ok or partial with pages): failed ones only
        get a done marker."""
        return self.result.status is not DocStatus.FAILED and bool(self.result.pages)


class Sink(Protocol):
    """Writes one output format. ``write`` may be called from a worker thread; a sink that
    buffers (Parquet) makes its rows durable by ``close`` at the latest."""

    def write(self, document: FinishedDocument) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class BufferedSink(Sink, Protocol):
    """A sink whose writes become durable later, in batches: it reports the ids of documents
    whose outputs are on disk through ``on_commit`` and can be asked to ``flush``."""

    def flush(self) -> None: ...


def figure_key(doc_id: str, page: int, index: int) -> str:
    """Where figure ``index`` of ``page`` of a document lives, relative to OUT."""
    return f"{FIGURES_DIR}/{doc_id}/p{page}-{index}.png"


def figure_link(doc_id: str, figure: Figure, prefix: str = "") -> str:
    """A Markdown image link to the figure's file; ``prefix`` leads from the file holding
    the link to OUT (``""`` for OUT itself, ``"../"`` one folder down). The alt text is the
    figure's description when it has one, else its label."""
    alt = alt_text(figure.description) if figure.description else figure.label
    return f"![{alt}]({prefix}{figure_key(doc_id, figure.page, figure.index)})"


def alt_text(description: str, limit: int = ALT_TEXT_CHARS) -> str:
    """A description fit for alt text: one line, no brackets, at most ``limit`` characters
    (a table becomes its cells separated by ``;``)."""
    text = description
    if "|" in text:  # a Markdown table: its cells, without the separator row
        cells = [c.strip() for c in text.replace("\n", "|").split("|")]
        text = "; ".join(c for c in cells if c and set(c) - set("-: "))
    words = " ".join(text.split()).translate(_ALT_UNSAFE)
    return words if len(words) <= limit else words[: limit - 1].rstrip() + "…"


def figure_markdown(doc_id: str, figure: Figure, prefix: str = "") -> str:
    """The figure's link, followed by its description as a paragraph (or a table) when it
    has one."""
    link = figure_link(doc_id, figure, prefix)
    return f"{link}\n\n{figure.description.strip()}" if figure.description else link


def page_text(doc_id: str, page: PageResult, prefix: str = "") -> str:
    """The page's text with each figure placeholder replaced by its link (and description);
    stripped."""
    text = page.text
    for figure in page.figures:
        text = text.replace(figure.placeholder, figure_markdown(doc_id, figure, prefix))
    return text.strip()


class DocumentFileSink:
    """One file a document, rendered whole from the document model and written atomically:
    what the layout formats (ALTO, hOCR) share; each names its file and its renderer."""

    def __init__(
        self, store: Store, key: Callable[[str], str], render: Callable[[Document], bytes]
    ) -> None:
        self.store = store
        self._key = key
        self._render = render

    def write(self, document: FinishedDocument) -> None:
        """Write the file of a document that produced text (ok or partial)."""
        if not document.has_output:
            return
        model = document_from_result(document.result, document.meta)
        self.store.write_bytes(self._key(document.meta.rel), self._render(model))

    def close(self) -> None:
        """Nothing buffered."""
