"""Embedded engine (RapidOCR, PP-OCR) against Tesseract on the corpus scans with ground truth.

Run: ``.venv/bin/python bench/bench_engines.py [--dims 1288,1600,2000] [--repeat 3]``

Each page is rendered exactly as the product does (PDFs through ``render_pdf_page``, images
through ``fit_longest_side``, longest side = the target dimension), then both engines read
the same pixels, alternately, so background load hits both alike. CER and word F1 come
from ``bench/textmetrics.py`` with one normalisation for both. Seconds per page are the
median of ``--repeat`` runs; the embedded engine's one-time model load is not counted
(Tesseract pays its start-up on every page, by design).

Rows marked ``*`` are Fraktur (19th-century German blackletter): neither engine is trained
for it; they are shown but left out of the verdict. The kraken line image (Syriac) and the
handwritten kraken page are left out: neither engine reads those scripts at all.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pypdfium2 as pdfium
import textmetrics
from PIL import Image

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.tesseract import TesseractEngine
from ocrflow.render.pdf import render_pdf_page
from ocrflow.render.raster import fit_longest_side

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
DOCLING_TEXT = (
    "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"
)


@dataclass(frozen=True, slots=True)
class Sample:
    """One page with its ground truth; ``fraktur`` pages are shown but not in the verdict."""

    path: str
    truth: Callable[[], str]
    fraktur: bool = False


@dataclass(frozen=True, slots=True)
class Score:
    """One engine on one page."""

    cer: float
    f1: float
    seconds: float
    text: str


def read_truth(name: str) -> Callable[[], str]:
    """Ground truth read from ``groundtruth/name``, as-is."""
    return lambda: (CORPUS / "groundtruth" / name).read_text(encoding="utf-8")


def markdown_truth(name: str) -> Callable[[], str]:
    """Ground truth from a Markdown file: front matter, links' brackets and markup dropped."""

    def load() -> str:
        text = (CORPUS / "groundtruth" / name).read_text(encoding="utf-8")
        text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
        return re.sub(r"[*_`#>|]", "", text)

    return load


def page_xml_truth(name: str) -> Callable[[], str]:
    """Ground truth from a PAGE XML file: the text of each ``TextLine``, in file order."""

    def load() -> str:
        root = ET.parse(CORPUS / "groundtruth" / name).getroot()
        namespace = root.tag.split("}")[0] + "}"
        lines = []
        for line in root.iter(f"{namespace}TextLine"):
            unicode = line.find(f"{namespace}TextEquiv/{namespace}Unicode")
            if unicode is not None and unicode.text:
                lines.append(unicode.text)
        return "\n".join(lines)

    return load


PHOTOTEST = read_truth("tesseract__phototest.gold.txt")
SAMPLES = (
    Sample("images/tesseract__phototest.tif", PHOTOTEST),
    Sample("images/tesseract__phototest-rotated-L.png", PHOTOTEST),
    Sample("images/tesseract__phototest-rotated-180.png", PHOTOTEST),
    Sample("images/tesseract__eurotext.tif", read_truth("tesseract__eurotext.txt")),
    Sample("images/ocrmypdf__linn.png", read_truth("ocrmypdf__linn.txt")),
    Sample("pdfs/docling__ocr_test.pdf", lambda: DOCLING_TEXT),
    Sample("pdfs/docling__ocr_test_rotated_90.pdf", lambda: DOCLING_TEXT),
    Sample("pdfs/docling__ocr_test_rotated_180.pdf", lambda: DOCLING_TEXT),
    Sample("pdfs/olmocr__edgar_image.pdf", markdown_truth("olmocr__edgar.md")),
    Sample(
        "images/ocrd-linegt__alexis_ruhe01_1852_0018_022.tif",
        read_truth("ocrd-linegt__alexis_ruhe01_1852_0018_022.gt.txt"),
        fraktur=True,
    ),
    Sample(
        "images/ocrd-linegt__alexis_ruhe01_1852_0035_019.tif",
        read_truth("ocrd-linegt__alexis_ruhe01_1852_0035_019.gt.txt"),
        fraktur=True,
    ),
    Sample(
        "images/ocrd__kant_aufklaerung_1784_0017.tif",
        page_xml_truth("ocrd__kant_aufklaerung_1784_0017.page.xml"),
        fraktur=True,
    ),
)


def render_sample(path: Path, target_dim: int) -> Image.Image:
    """The page as the product renders it: first page, longest side ``target_dim``."""
    if path.suffix == ".pdf":
        document = pdfium.PdfDocument(str(path))
        try:
            return render_pdf_page(
                document[0], target_dim=target_dim, max_page_points=200_000, max_pixels=10**9
            )
        finally:
            document.close()
    with Image.open(path) as image:
        return fit_longest_side(image.convert("RGB"), target_dim)


def timed(read: Callable[[Image.Image], str], image: Image.Image) -> tuple[str, float]:
    """Text and wall seconds of one call."""
    started = time.perf_counter()
    text = read(image)
    return text, time.perf_counter() - started


def bench_page(
    engines: dict[str, Callable[[Image.Image], str]], image: Image.Image, truth: str, repeat: int
) -> dict[str, Score]:
    """Every engine on one page, alternating order each round; median seconds."""
    runs: dict[str, list[tuple[str, float]]] = {name: [] for name in engines}
    names = list(engines)
    for round_ in range(repeat):
        for name in names if round_ % 2 == 0 else reversed(names):
            runs[name].append(timed(engines[name], image))
    scores = {}
    for name, results in runs.items():
        text = results[0][0]
        seconds = statistics.median(s for _, s in results)
        f1 = textmetrics.word_f1(text, truth)
        scores[name] = Score(textmetrics.cer(text, truth), f1, seconds, text)
    return scores


def print_table(dim: int, rows: list[tuple[Sample, dict[str, Score]]]) -> None:
    """One line a page, then means over the verdict pages and the verdict."""
    print(f"\n## target dim {dim} px (longest side)\n")
    header = f"{'page':44} {'CER emb':>8} {'CER tess':>8} {'F1 emb':>7} {'F1 tess':>7}"
    print(header + f" {'s/p emb':>8} {'s/p tess':>8}")
    for sample, score in rows:
        name = ("*" if sample.fraktur else " ") + Path(sample.path).name[:43]
        emb, tess = score["embedded"], score["tesseract"]
        print(
            f"{name:44} {emb.cer:8.3f} {tess.cer:8.3f} {emb.f1:7.3f} {tess.f1:7.3f}"
            f" {emb.seconds:8.2f} {tess.seconds:8.2f}"
        )
    main = [score for sample, score in rows if not sample.fraktur]
    means = {
        name: {
            key: statistics.mean(getattr(s[name], key) for s in main)
            for key in ("cer", "f1", "seconds")
        }
        for name in ("embedded", "tesseract")
    }
    emb, tess = means["embedded"], means["tesseract"]
    print(
        f"{'mean (non-Fraktur)':44} {emb['cer']:8.3f} {tess['cer']:8.3f} {emb['f1']:7.3f}"
        f" {tess['f1']:7.3f} {emb['seconds']:8.2f} {tess['seconds']:8.2f}"
    )
    cer_ratio = emb["cer"] / tess["cer"] if tess["cer"] else float("inf")
    print(
        f"verdict @ {dim}: CER embedded/tesseract = {cer_ratio:.2f}, "
        f"s/page embedded/tesseract = {emb['seconds'] / tess['seconds']:.2f}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="1288", help="target dims, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="timing runs per page")
    parser.add_argument("--threads", type=int, default=None, help="embedded engine threads")
    parser.add_argument("--det-side", type=int, default=None, help="embedded detector side")
    parser.add_argument("--tesseract-psm", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write every score here")
    parser.add_argument("--show", help="print both engines' text for pages containing this")
    return parser.parse_args(argv)


def build_engines(args: argparse.Namespace) -> dict[str, Callable[[Image.Image], str]]:
    """The two engines at their defaults, unless the flags say otherwise."""
    options = {"threads": args.threads}
    if args.det_side:
        options["det_side"] = args.det_side
    embedded = EmbeddedEngine(**options)
    tesseract = TesseractEngine(psm=args.tesseract_psm)
    embedded.recognize(Image.new("RGB", (64, 64), "white"))  # load models outside the clock
    return {"embedded": lambda im: embedded.recognize(im).text, "tesseract": tesseract.recognize}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS.resolve()}", file=sys.stderr)
        return 2
    engines = build_engines(args)
    report = {}
    for dim in (int(d) for d in args.dims.split(",")):
        rows = []
        for sample in SAMPLES:
            image = render_sample(CORPUS / sample.path, dim)
            scores = bench_page(engines, image, sample.truth(), args.repeat)
            rows.append((sample, scores))
            if args.show and args.show in sample.path:
                for name, score in scores.items():
                    print(f"--- {name} on {sample.path}\n{score.text}\n")
        print_table(dim, rows)
        report[dim] = {s.path: {n: asdict(v) for n, v in sc.items()} for s, sc in rows}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
