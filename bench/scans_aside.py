"""Scanned PDFs that are not in the corpus's scan sets: born-digital corpus pages printed
to scans, each with its own text as the ground truth, for ``bench_ocrmypdf.py --files``.

Usage: python bench/scans_aside.py OUT  (then: python bench/bench_ocrmypdf.py
--files OUT/*.pdf --truth OUT/truth --ocrmypdf .venv-ocrmypdf/bin/ocrmypdf)

Each page is rendered at 300 dpi in grey, given scanner noise (Gaussian, sigma 12) and a
0.4° tilt, and saved as a JPEG in an image-only PDF; its truth is ``pdftotext`` of the
page it came from. The pages are two-column papers (one with a results table, one with a
page number under its gutter), a three-column register, a handbook page, a certificate
with a table of wrapped cells and a tax form: the layouts on which the text layer's
order was found wanting (``sinks/pdf_text_order.py``). Where poppler itself reads the
born-digital page out of order the truth is out of order too: compare the tools with
each other and with their own Markdown, not with zero.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
from PIL import Image

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "pdfs"
#: Corpus file -> its pages (1-based) printed.
PAGES = {
    "pdfjs__tracemonkey.pdf": (1, 2),
    "docling__2305.03393v1-pg9.pdf": (1,),
    "pypdf-samples__multicolumn.pdf": (1,),
    "pdfplumber__federal-register-2020-17221.pdf": (2,),
    "docling__amt_handbook_sample.pdf": (1,),
    "olmocr__lots_of_sci_tables.pdf": (1,),
    "pdfjs__160F-2019.pdf": (1,),
    "docling__code_and_formula.pdf": (1,),
}
DPI, NOISE, TILT = 300, 12.0, 0.4


def scanned(page: pdfium.PdfPage, rng: np.random.Generator) -> Image.Image:
    """The page as a scanner gives it back: grey, noisy, a little tilted."""
    grey = page.render(scale=DPI / 72, grayscale=True).to_pil().convert("L")
    noisy = np.asarray(grey, np.float32) + rng.normal(0.0, NOISE, (grey.height, grey.width))
    image = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
    return image.rotate(TILT, resample=Image.Resampling.BILINEAR, fillcolor=255)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the PDFs (truth/ under it)")
    args = parser.parse_args()
    (args.out / "truth").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for name, numbers in PAGES.items():
        source = CORPUS / name
        stem = name.split("__", 1)[1].removesuffix(".pdf")
        document = pdfium.PdfDocument(source)
        images = [scanned(document[n - 1], rng) for n in numbers]
        images[0].save(
            args.out / f"{stem}.pdf",
            save_all=True,
            append_images=images[1:],
            resolution=DPI,
            quality=80,
        )
        truth = [
            subprocess.run(
                ["pdftotext", "-f", str(n), "-l", str(n), str(source), "-"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for n in numbers
        ]
        (args.out / "truth" / f"{stem}.txt").write_text("\n".join(truth), encoding="utf-8")
        print(f"{stem}.pdf: {len(numbers)} page(s)")


if __name__ == "__main__":
    main()
