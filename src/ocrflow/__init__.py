"""ocrflow: documents to Markdown and JSONL with vision-language OCR models or a CPU engine.

The Python API, loaded on first use (so ``import ocrflow`` stays cheap):

* ``ocrflow.convert(source, **options) -> Document``: one document, no workspace;
* ``ocrflow.run(inputs, output, **options) -> RunSummary``: a resumable batch, as
  ``ocrflow run`` does it;
* ``ocrflow.results(OUT)``: the finished ``Document``s of an OUT, local or an fsspec URL.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_LAZY = {
    "convert": "ocrflow.api",
    "run": "ocrflow.api",
    "RunSummary": "ocrflow.api",
    "results": "ocrflow.sinks.results",
    "Document": "ocrflow.document",
    "Page": "ocrflow.document",
    "Block": "ocrflow.document",
    "BlockLabel": "ocrflow.document",
    "Line": "ocrflow.document",
    "Word": "ocrflow.document",
}

__all__ = [
    "Block",
    "BlockLabel",
    "Document",
    "Line",
    "Page",
    "RunSummary",
    "Word",
    "__version__",
    "convert",
    "results",
    "run",
]

if TYPE_CHECKING:
    from ocrflow.api import RunSummary, convert, run
    from ocrflow.document import Block, BlockLabel, Document, Line, Page, Word
    from ocrflow.sinks.results import results


def __getattr__(name: str) -> Any:
    """Load the API's names on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ocrflow' has no attribute {name!r}")
    return getattr(import_module(module), name)
