"""Two columns a narrow gutter apart, end to end: ``ocrflow run --format pdf,markdown`` with
the embedded engine, then poppler's ``pdftotext`` of the searchable PDF. Both must read the
left column, then the right (the issue asks the text layer's CER to be within 1.02 times
the Markdown's)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from two_columns import DPI, FONT_FILE, two_column_page

from ocrflow.evaluation.metrics import score_text
from tests.integration.cli_helpers import ocrflow


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="[needs poppler] pdftotext")
def test_a_12_pt_gutter_is_read_column_by_column_in_the_markdown_and_the_text_layer(
    tmp_path: Path,
) -> None:
    """The detector's boxes run a quarter of a line past the ink: drawn as they were, a
    12-pt gutter was a 6.4-pt gap in the layer, and poppler read the columns across, line by
    line (CER 0.67). The model's lines now end at their ink."""
    if not Path(FONT_FILE).exists():
        pytest.skip("Liberation fonts not installed (scripts/system-deps.sh installs them)")
    page, truth = two_column_page(12, seed=1)
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    page.save(inputs / "columns.pdf", "PDF", resolution=DPI)
    done = ocrflow("run", str(inputs), "-o", str(out), "--format", "pdf,markdown", "-q")
    assert done.returncode == 0, done.stderr
    markdown = (out / "markdown" / "columns.pdf.md").read_text(encoding="utf-8")
    layer = subprocess.run(
        ["pdftotext", str(out / "pdf" / "columns.pdf.pdf"), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert score_text(truth, markdown).cer < 0.01, markdown
    assert score_text(truth, layer).cer < 0.01, layer
