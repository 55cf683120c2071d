"""Two columns a narrow gutter apart, and a page scanned sideways, end to end: ``ocrflow run
--format pdf,markdown`` with the embedded engine, then poppler's ``pdftotext`` of the
searchable PDF. Both must read the left column, then the right (the issue asks the text
layer's CER to be within 1.02 times the Markdown's)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from two_columns import DPI, FONT_FILE, two_column_page

from ocrflow.evaluation.metrics import score_text
from tests.integration.cli_helpers import ocrflow

#: (gutter in points, seed, turn in degrees): LaTeX's default gutter; a 12-pt page whose
#: first line's box the detector ran into the next column's first letter; a page scanned
#: sideways, which the engine turns to read and whose layer was drawn word by word at each
#: word's height (pdftotext CER 0.77 against the Markdown's 0.000).
PAGES = ((10.0, 1, 0), (12.0, 4, 0), (24.0, 2, 90))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="[needs poppler] pdftotext")
def test_narrow_gutters_and_a_sideways_page_read_column_by_column_in_markdown_and_layer(
    tmp_path: Path,
) -> None:
    """The detector's boxes run a quarter of a line past the ink: drawn as they were, a
    12-pt gutter was a 6.4-pt gap in the layer, and poppler read the columns across, line by
    line (CER 0.67). The model's lines now end at their ink (``engines/ink.py``), and lines
    of blocks side by side are drawn at least 1.1 font sizes apart
    (``sinks/pdf_text_gutters.py``; at 10 pt: CER 0.67 without). On the second page the
    first line's box ran on into the right column's first letter, and the Markdown and the
    layer read that line across (``engines/gutters.py`` cuts it back: CER 0.020 and 0.708
    without)."""
    if not Path(FONT_FILE).exists():
        pytest.skip("Liberation fonts not installed (scripts/system-deps.sh installs them)")
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    truths = {}
    for gutter, seed, turn in PAGES:
        page, truths[f"columns{gutter:g}.pdf"] = two_column_page(gutter, seed)
        page.rotate(turn, expand=True).save(inputs / f"columns{gutter:g}.pdf", resolution=DPI)
    done = ocrflow("run", str(inputs), "-o", str(out), "--format", "pdf,markdown", "-q")
    assert done.returncode == 0, done.stderr
    for name, truth in truths.items():
        markdown = (out / "markdown" / f"{name}.md").read_text(encoding="utf-8")
        layer = subprocess.run(
            ["pdftotext", str(out / "pdf" / f"{name}.pdf"), "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert score_text(truth, markdown).cer < 0.01, (name, markdown)
        assert score_text(truth, layer).cer < 0.01, (name, layer)
