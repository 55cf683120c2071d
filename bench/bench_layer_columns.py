"""Does ``pdftotext`` read a searchable PDF's two columns as the Markdown does? Gutter by gutter.

    .venv/bin/python bench/bench_layer_columns.py [--gutters 8,10,12,14,18,24] [--engine ...]

The issue's acceptance asks that ``pdftotext`` of every PDF written gives a CER within 1.02x
of the Markdown's. Text extractors built like poppler's rebuild lines and columns from the
words' positions and font sizes, so a narrow gutter can make them read two columns across,
line by line, whatever the Markdown says. This measures where that starts.

Pages (made here, nothing downloaded, ``scripts/two_columns.py``): one 300-dpi letter page
a gutter, two columns of 10-pt serif on 12-pt leading, the columns ``--gutters`` points
apart (LaTeX's two-column default is 10 pt). Its truth is the left column, then the right. One
``ocrflow run --format pdf,markdown`` reads them all; for each page it prints the
Markdown's CER and the text layer's (``pdftotext``), and their ratio (goal: at most 1.02).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from two_columns import DPI, two_column_page

from ocrflow.evaluation.metrics import score_text


def pdftotext(pdf: Path) -> str:
    """The PDF's text as poppler reads it."""
    done = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True)
    return done.stdout.replace("\f", "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gutters", default="8,10,12,14,18,24", help="points, comma-separated")
    parser.add_argument("--engine", default="embedded", help="ocrflow run --engine")
    parser.add_argument("--ocrflow", default=str(Path(sys.executable).with_name("ocrflow")))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    gutters = [float(g) for g in args.gutters.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        inputs, out = Path(tmp) / "in", Path(tmp) / "out"
        inputs.mkdir()
        truths = {}
        for gutter in gutters:
            page, truths[f"gutter{gutter:g}.pdf"] = two_column_page(gutter, args.seed)
            page.save(inputs / f"gutter{gutter:g}.pdf", "PDF", resolution=DPI)
        run = [args.ocrflow, "run", str(inputs), "-o", str(out), "--format", "pdf,markdown"]
        subprocess.run([*run, "--engine", args.engine, "-q"], check=True)
        print(f"engine {args.engine}; 10-pt type on 12-pt leading, 300 dpi\n")
        print(f"{'gutter pt':>9} {'CER md':>8} {'CER pdftotext':>14} {'ratio':>8}")
        for gutter, (name, truth) in zip(gutters, truths.items(), strict=True):
            markdown = (out / "markdown" / f"{name}.md").read_text(encoding="utf-8")
            own = score_text(truth, markdown).cer
            layer = score_text(truth, pdftotext(out / "pdf" / f"{name}.pdf")).cer
            ratio = layer / own if own else (1.0 if layer == 0 else float("inf"))
            print(f"{gutter:>9g} {own:>8.3f} {layer:>14.3f} {ratio:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
