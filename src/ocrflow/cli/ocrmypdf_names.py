"""``ocrflow run``'s flags under the names OCRmyPDF's users type, in a help panel of their
own: what they ask of the pages (``--skip-text``, ``--force-ocr``, ``--redo-ocr``: the
``--text-layer`` modes) and of the searchable PDF (``--sidecar``, ``--pdfa``,
``--rotate-pages``, ``--deskew``)."""

from __future__ import annotations

from typing import Annotated

import typer

PANEL = "OCRmyPDF's names"

SkipText = Annotated[
    bool, typer.Option(help="OCRmyPDF's name for --text-layer auto.", rich_help_panel=PANEL)
]
ForceOcr = Annotated[
    bool, typer.Option(help="OCRmyPDF's name for --text-layer off.", rich_help_panel=PANEL)
]
RedoOcr = Annotated[
    bool, typer.Option(help="OCRmyPDF's name for --text-layer redo.", rich_help_panel=PANEL)
]
Sidecar = Annotated[
    bool,
    typer.Option(
        help="Add the txt format: plain text, pages apart by form feeds.", rich_help_panel=PANEL
    ),
]
Pdfa = Annotated[
    bool,
    typer.Option(
        help="Write --format pdf as PDF/A-2b (not an encrypted input).", rich_help_panel=PANEL
    ),
]
RotatePages = Annotated[
    bool,
    typer.Option(
        help="--format pdf: show pages the engine found turned upright.", rich_help_panel=PANEL
    ),
]
Deskew = Annotated[
    bool,
    typer.Option(
        help="--format pdf: show pages the engine found askew straightened (the scan's bytes "
        "kept).",
        rich_help_panel=PANEL,
    ),
]
