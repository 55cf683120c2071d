"""Output quality of the embedded engine against Tesseract, on every ground-truth scan.

Run: ``.venv/bin/python bench/bench_quality.py [--dim 1288] [--backend auto] [--json FILE]
[--show NAME]``
(``make bench-quality``).

Each page is rendered as the product renders it (longest side ``--dim``), then read once by
each engine. Per page and per group of pages it prints, side by side:

- **CER**: order-sensitive character error rate, the Levenshtein distance over the whole
  normalised page text divided by the truth's length (``ocrflow.evaluation.metrics``:
  Markdown markup, table pipes included, is stripped from both sides first). A footer read
  in the middle of the body, or two columns read across, costs here and not in word F1;
- **F1**: bag-of-words F1, blind to order;
- **tests**: olmOCR-bench-format tests passed (``tests/data/bench_tests.jsonl`` and
  ``bench/quality_tests.jsonl``, matched to a page by file name and page number; three
  pages of ``docling__redp5110_sampled.pdf`` have tests (tables) but no page-level truth);
- **s/p**: wall seconds for the page (the embedded engine's model load not counted;
  Tesseract pays its start-up on every page, by design).

``emb-old`` is the embedded engine's text laid out with the former reading order (blocks
ordered by Breuel's rules, no tables) from the very same recognised lines, so the column
isolates the layout step; its seconds are ``emb``'s with the layout step's time swapped
(both layout steps are also timed alone, printed last). Rows marked ``*`` are Fraktur:
neither engine reads blackletter well; shown, left out of the means.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pypdfium2 as pdfium
from bench_engines import DOCLING_TEXT, page_xml_truth, read_truth
from PIL import Image

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.layout import layout_text
from ocrflow.engines.tesseract import TesseractEngine
from ocrflow.evaluation.bench import BenchTest, load_tests, run_tests
from ocrflow.evaluation.metrics import score_text
from ocrflow.render.pdf import render_pdf_page
from ocrflow.render.raster import fit_longest_side

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / ".." / "shared" / "corpus"
TEST_FILES = (ROOT / "tests" / "data" / "bench_tests.jsonl", ROOT / "bench" / "quality_tests.jsonl")
ENGINES = ("emb-old", "emb", "tess")
MULTI, TABLE, FRAKTUR = "multi-column", "table", "fraktur"


@dataclass(frozen=True, slots=True)
class Sample:
    """One page with its ground truth; ``path`` is relative to the corpus (or absolute)."""

    path: str
    #: None: no plain-text truth for this page, only bench tests.
    truth: Callable[[], str] | None
    tags: frozenset[str] = frozenset()
    page: int = 1

    @property
    def file(self) -> Path:
        return CORPUS / self.path

    @property
    def name(self) -> str:
        suffix = f" p{self.page}" if self.page > 1 else ""
        return Path(self.path).name + suffix


@dataclass(slots=True)
class Score:
    """One engine on one page."""

    cer: float
    f1: float
    passed: int
    tests: int
    seconds: float
    text: str = field(repr=False, default="")


def markdown_truth(name: str) -> Callable[[], str]:
    """A Markdown ground truth without its front matter; the metrics strip its markup
    (image comments, table pipes, headings) the same way as they strip the engines'."""

    def load() -> str:
        text = (CORPUS / "groundtruth" / name).read_text(encoding="utf-8")
        return re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)

    return load


def invoice_truth() -> str:
    """The invoice the example generator typesets (``scripts/make_examples.py``)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_examples

    return "\n".join(make_examples.INVOICE)


def _samples() -> tuple[Sample, ...]:
    photo = read_truth("tesseract__phototest.gold.txt")
    linn = read_truth("ocrmypdf__linn.txt")
    multi, table = frozenset({MULTI}), frozenset({TABLE})
    fraktur = frozenset({FRAKTUR})
    return (
        Sample("images/tesseract__phototest.tif", photo),
        Sample("images/tesseract__phototest-rotated-L.png", photo),
        Sample("images/tesseract__phototest-rotated-180.png", photo),
        Sample("images/tesseract__eurotext.tif", read_truth("tesseract__eurotext.txt")),
        Sample("images/ocrmypdf__linn.png", linn, multi),
        Sample("pdfs/ocrmypdf__linn.pdf", linn, multi),
        Sample("pdfs/ocrmypdf__skew.pdf", linn, multi),
        Sample("pdfs/ocrmypdf__ccitt.pdf", linn, multi),
        Sample(
            "pdfs/docling__amt_handbook_sample.pdf",
            markdown_truth("docling__amt_handbook_sample.md"),
            multi,
        ),
        Sample("pdfs/olmocr__edgar_image.pdf", markdown_truth("olmocr__edgar.md")),
        Sample("pdfs/docling__ocr_test.pdf", lambda: DOCLING_TEXT),
        Sample("pdfs/docling__ocr_test_rotated_90.pdf", lambda: DOCLING_TEXT),
        Sample("pdfs/docling__ocr_test_rotated_180.pdf", lambda: DOCLING_TEXT),
        Sample(
            "pdfs/docling__2305.03393v1-pg9.pdf",
            markdown_truth("docling__2305.03393v1-pg9.md"),
            table,
        ),
        Sample(
            "pdfs/docling__table_mislabeled_as_picture.pdf",
            markdown_truth("docling__table_mislabeled_as_picture.md"),
            table,
        ),
        *(Sample("pdfs/docling__redp5110_sampled.pdf", None, table, page=p) for p in (8, 11, 12)),
        Sample(str(ROOT / "examples" / "invoice-photo.jpg"), invoice_truth, table),
        Sample(str(ROOT / "examples" / "scanned.pdf"), invoice_truth, table, page=2),
        Sample(
            "images/ocrd-linegt__alexis_ruhe01_1852_0018_022.tif",
            read_truth("ocrd-linegt__alexis_ruhe01_1852_0018_022.gt.txt"),
            fraktur,
        ),
        Sample(
            "images/ocrd-linegt__alexis_ruhe01_1852_0035_019.tif",
            read_truth("ocrd-linegt__alexis_ruhe01_1852_0035_019.gt.txt"),
            fraktur,
        ),
        Sample(
            "images/ocrd__kant_aufklaerung_1784_0017.tif",
            page_xml_truth("ocrd__kant_aufklaerung_1784_0017.page.xml"),
            fraktur,
        ),
    )


def render(sample: Sample, target_dim: int) -> Image.Image:
    """The page as the product renders it, longest side ``target_dim``."""
    if sample.file.suffix == ".pdf":
        document = pdfium.PdfDocument(str(sample.file))
        try:
            return render_pdf_page(
                document[sample.page - 1],
                target_dim=target_dim,
                max_page_points=200_000,
                max_pixels=10**9,
            )
        finally:
            document.close()
    with Image.open(sample.file) as image:
        return fit_longest_side(image.convert("RGB"), target_dim)


def load_bench_tests() -> list[BenchTest]:
    """Every test of the bench test files that exist."""
    return [test for path in TEST_FILES if path.is_file() for test in load_tests(path)]


def tests_for(sample: Sample, tests: list[BenchTest]) -> list[BenchTest]:
    """The tests of ``sample``'s page (matched by file stem, so ``linn.png`` and
    ``linn.pdf`` keep their own tests)."""
    name = Path(sample.path).name
    return [t for t in tests if Path(t.pdf).name == name and t.page == sample.page]


def read_page(
    embedded: EmbeddedEngine, tesseract: TesseractEngine, image: Image.Image
) -> tuple[dict[str, tuple[str, float]], dict[str, float]]:
    """Text and wall seconds of every engine variant on one page, and the seconds of the
    layout step alone, old and new, on the page's recognised lines."""
    started = time.perf_counter()
    result = embedded.recognize(image)
    emb_seconds = time.perf_counter() - started
    layout, laid_out = {}, {}
    for order in ("blocks", "columns"):
        started = time.perf_counter()
        laid_out[order] = layout_text(result.boxes, reading_order=order)
        layout[order] = time.perf_counter() - started
    old, text = laid_out["blocks"], laid_out["columns"]
    old_seconds = emb_seconds - layout["columns"] + layout["blocks"]
    started = time.perf_counter()
    tess = tesseract.recognize(image)
    tess_seconds = time.perf_counter() - started
    texts = {
        "emb-old": (old, old_seconds),
        "emb": (text, emb_seconds),
        "tess": (tess, tess_seconds),
    }
    return texts, layout


def score_page(
    sample: Sample, texts: dict[str, tuple[str, float]], tests: list[BenchTest]
) -> dict[str, Score]:
    """Every variant's scores on one page."""
    truth = sample.truth() if sample.truth else None
    scores = {}
    for engine, (text, seconds) in texts.items():
        metrics = score_text(truth, text) if truth is not None else None
        cer, f1 = (metrics.cer, metrics.word_f1) if metrics else (math.nan, math.nan)
        results = run_tests(tests, {(t.pdf, t.page): text for t in tests})
        passed = sum(r.passed for r in results)
        scores[engine] = Score(cer, f1, passed, len(tests), seconds, text)
    return scores


CELL = 10


def _cells(scores: dict[str, Score]) -> str:
    cer = "".join(f"{scores[e].cer:>{CELL}.3f}" for e in ENGINES)
    f1 = "".join(f"{scores[e].f1:>{CELL}.3f}" for e in ENGINES)
    tests = "".join(f"{f'{scores[e].passed}/{scores[e].tests}':>{CELL}}" for e in ENGINES)
    secs = "".join(f"{scores[e].seconds:>{CELL}.2f}" for e in ENGINES)
    return cer + f1 + tests + secs


def _header() -> str:
    heads = [f"CER {e}" for e in ENGINES] + [f"F1 {e}" for e in ENGINES]
    heads += [f"ok {e}" for e in ENGINES] + [f"s {e}" for e in ENGINES]
    return f"{'page':40}" + "".join(f"{h:>{CELL}}" for h in heads)


def group_means(group: list[dict[str, Score]]) -> dict[str, Score]:
    """Mean CER, F1 (of the pages with a text truth) and seconds; tests summed."""
    return {
        e: Score(
            _mean(s[e].cer for s in group),
            _mean(s[e].f1 for s in group),
            sum(s[e].passed for s in group),
            sum(s[e].tests for s in group),
            statistics.mean(s[e].seconds for s in group),
        )
        for e in ENGINES
    }


def _mean(values: Iterable[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return statistics.mean(known) if known else math.nan


def print_report(dim: int, rows: list[tuple[Sample, dict[str, Score]]]) -> None:
    """One line a page, then the group means and the verdict."""
    print(f"\n## longest side {dim} px; CER order-sensitive; ok = bench tests passed\n")
    print(_header())
    for sample, scores in rows:
        mark = "*" if FRAKTUR in sample.tags else " "
        print(f"{mark + sample.name[:39]:40}" + _cells(scores))
    groups = {
        "mean: all but Fraktur": [s for p, s in rows if FRAKTUR not in p.tags],
        "mean: multi-column": [s for p, s in rows if MULTI in p.tags],
        "mean: tables": [s for p, s in rows if TABLE in p.tags],
        "mean: Fraktur": [s for p, s in rows if FRAKTUR in p.tags],
    }
    for label, group in groups.items():
        if group:
            print(f"{label:40}" + _cells(group_means(group)))
    if not groups["mean: multi-column"] or not groups["mean: all but Fraktur"]:
        return
    multi = group_means(groups["mean: multi-column"])
    every = group_means(groups["mean: all but Fraktur"])
    print(
        f"\nverdict: multi-column CER emb {multi['emb'].cer:.3f} vs tess {multi['tess'].cer:.3f} "
        f"(emb-old {multi['emb-old'].cer:.3f}); all pages CER emb {every['emb'].cer:.3f} vs "
        f"tess {every['tess'].cer:.3f}; s/page emb {every['emb'].seconds:.2f} vs tess "
        f"{every['tess'].seconds:.2f}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=1288, help="longest side in px")
    parser.add_argument("--threads", type=int, default=1, help="embedded engine threads")
    parser.add_argument("--backend", default="auto", help="embedded runtime (runtime.py)")
    parser.add_argument("--json", type=Path, help="also write every score and text here")
    parser.add_argument("--show", help="print every variant's text for pages with this name")
    parser.add_argument("--only", help="only pages whose name contains this")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS.resolve()}", file=sys.stderr)
        return 2
    embedded = EmbeddedEngine(threads=args.threads, backend=args.backend)
    tesseract = TesseractEngine()
    embedded.recognize(Image.new("RGB", (64, 64), "white"))  # load models outside the clock
    tests = load_bench_tests()
    rows, layout_seconds = [], []
    for sample in _samples():
        if args.only and args.only not in sample.name:
            continue
        texts, layout = read_page(embedded, tesseract, render(sample, args.dim))
        layout_seconds.append(layout)
        scores = score_page(sample, texts, tests_for(sample, tests))
        rows.append((sample, scores))
        if args.show and args.show in sample.name:
            for engine, score in scores.items():
                print(f"--- {engine} on {sample.name}\n{score.text}\n")
    print_report(args.dim, rows)
    for order in ("blocks", "columns"):
        times = [t[order] * 1000 for t in layout_seconds]
        print(
            f"layout step alone, reading_order={order}: mean {statistics.mean(times):.1f} ms"
            f" a page, max {max(times):.1f} ms"
        )
    if args.json:
        report = {p.name: {e: asdict(s) for e, s in sc.items()} for p, sc in rows}
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
