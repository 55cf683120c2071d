"""Embedded engine (RapidOCR, PP-OCR) against Tesseract on the corpus scans with ground truth.

Run: ``.venv/bin/python bench/bench_engines.py [--sets corpus,300dpi] [--dims 1288]
[--repeat 3] [--batch-repeat 3] [--threads N] [--parallel N] [--backend auto]
[--det-text-px 0]`` (``make bench-engines``; ``--parallel 4 --threads 1`` etc. on bigger machines).

Two page sets: ``corpus``, the corpus scans with ground truth at each ``--dims`` (longest
side); ``300dpi``, the corpus's full-page scans rendered at 300 dpi (2480-3508 px, the
size a scanner gives). Each page is rendered exactly as the product does (PDFs through
``render_pdf_page``, images through ``fit_longest_side``), then both engines read
the same pixels, alternately, so background load hits both alike. CER and word F1 come
from ``ocrflow.evaluation.metrics`` (what ``ocrflow eval --truth`` reports), with one
normalisation for both. Single-page seconds are the median of ``--repeat`` runs (wall, and
CPU: this process plus Tesseract's); the embedded engine's one-time model load is not
counted (Tesseract pays its start-up on every page, by design). The batch line
(``engine_batch.py``) reads the set ``--parallel`` pages at a time, the engines alternately,
``--batch-repeat`` times: on a shared, noisy machine its verdict is the median of the
per-round ratios, beside each engine's best round.

Rows marked ``*`` are Fraktur (19th-century German blackletter): neither engine is trained
for it; they are shown but left out of the verdict. The kraken line image (Syriac) and the
handwritten kraken page are left out: neither engine reads those scripts at all.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
from engine_batch import BatchSettings, print_batch
from PIL import Image

from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.tesseract import TesseractEngine
from ocrflow.evaluation.metrics import score_text
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
    #: Rendered at this many dpi instead of a target dimension (the ``300dpi`` set).
    dpi: int | None = None


@dataclass(frozen=True, slots=True)
class Score:
    """One engine on one page."""

    cer: float
    f1: float
    seconds: float
    cpu_seconds: float
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

#: Full-page scans (A4/letter) with ground truth, rendered at 300 dpi.
SCANS_300DPI = tuple(
    Sample(path, truth, dpi=300)
    for path, truth in (
        ("pdfs/ocrmypdf__linn.pdf", read_truth("ocrmypdf__linn.txt")),
        ("pdfs/ocrmypdf__skew.pdf", read_truth("ocrmypdf__linn.txt")),
        ("pdfs/olmocr__edgar_image.pdf", markdown_truth("olmocr__edgar.md")),
        ("pdfs/docling__ocr_test.pdf", lambda: DOCLING_TEXT),
        ("pdfs/docling__ocr_test_rotated_90.pdf", lambda: DOCLING_TEXT),
    )
)


def render_at(sample: Sample, target_dim: int) -> Image.Image:
    """``sample`` at its own dpi when it has one, else at ``target_dim``."""
    path = CORPUS / sample.path
    if sample.dpi is None:
        return render_sample(path, target_dim)
    document = pdfium.PdfDocument(str(path))
    try:
        points = max(document[0].get_size())
    finally:
        document.close()
    return render_sample(path, round(points / 72 * sample.dpi))


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


def timed(read: Callable[[Image.Image], str], image: Image.Image) -> tuple[str, float, float]:
    """Text, wall seconds and CPU seconds (this process's threads plus child processes,
    so Tesseract's subprocess counts) of one call."""
    children = _children_cpu()
    cpu = time.process_time()
    started = time.perf_counter()
    text = read(image)
    wall = time.perf_counter() - started
    return text, wall, time.process_time() - cpu + _children_cpu() - children


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_page(
    engines: dict[str, Callable[[Image.Image], str]], image: Image.Image, truth: str, repeat: int
) -> dict[str, Score]:
    """Every engine on one page, alternating order each round; median seconds."""
    runs: dict[str, list[tuple[str, float, float]]] = {name: [] for name in engines}
    names = list(engines)
    for round_ in range(repeat):
        for name in names if round_ % 2 == 0 else reversed(names):
            runs[name].append(timed(engines[name], image))
    scores = {}
    for name, results in runs.items():
        text = results[0][0]
        seconds = statistics.median(wall for _, wall, _ in results)
        cpu = statistics.median(cpu for _, _, cpu in results)
        scored = score_text(truth, text)
        scores[name] = Score(scored.cer, scored.word_f1, seconds, cpu, text)
    return scores


COLUMNS = (("cer", "CER", ".3f"), ("f1", "F1", ".3f"), ("seconds", "s/p", ".2f"))
COLUMNS += (("cpu_seconds", "cpu s/p", ".2f"),)
ENGINES = ("embedded", "tesseract")


def print_table(label: str, rows: list[tuple[Sample, dict[str, Score]]]) -> None:
    """One line a page, means over groups of pages, and the verdict line."""
    print(f"\n## {label}; s/p = median wall seconds a page, single page\n")
    heads = [f"{head} {engine[:3]}" for _, head, _ in COLUMNS for engine in ENGINES]
    print(f"{'page':44}" + "".join(f"{h:>13}" for h in heads))
    for sample, scores in rows:
        name = ("*" if sample.fraktur else " ") + Path(sample.path).name[:43]
        print(f"{name:44}" + _cells(scores))
    upright = [s for sample, s in rows if not sample.fraktur and "rotated" not in sample.path]
    groups = {
        "mean (all but Fraktur)": [s for sample, s in rows if not sample.fraktur],
        "mean (upright, not Fraktur)": upright,
        "mean (Fraktur)": [s for sample, s in rows if sample.fraktur],
    }
    for group_name, group in groups.items():
        if not group:
            continue
        print(f"{group_name:44}" + _cells(_means(group)))
    means = _means(groups["mean (all but Fraktur)"])
    emb, tess = means["embedded"], means["tesseract"]
    print(
        f"verdict @ {label}: CER embedded/tesseract = {_ratio(emb.cer, tess.cer)}, "
        f"upright-only {_ratio(*(_means(upright)[e].cer for e in ENGINES))}; "
        f"s/page = {_ratio(emb.seconds, tess.seconds)}, "
        f"CPU s/page = {_ratio(emb.cpu_seconds, tess.cpu_seconds)}"
    )


def _cells(scores: dict[str, Score]) -> str:
    cells = (f"{getattr(scores[e], key):>13{spec}}" for key, _, spec in COLUMNS for e in ENGINES)
    return "".join(cells)


def _means(group: list[dict[str, Score]]) -> dict[str, Score]:
    return {
        engine: Score(
            *(statistics.mean(getattr(s[engine], key) for s in group) for key, _, _ in COLUMNS),
            text="",
        )
        for engine in ENGINES
    }


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "inf"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="corpus,300dpi", help="page sets: corpus, 300dpi")
    parser.add_argument("--dims", default="1288", help="corpus set: target dims, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="timing runs per page")
    parser.add_argument("--threads", type=int, default=None, help="embedded threads a page")
    parser.add_argument("--parallel", type=int, default=None, help="batch: pages at once")
    parser.add_argument("--backend", default=None, help="embedded runtime (runtime.py)")
    parser.add_argument("--det-side", type=int, default=None, help="embedded detector side")
    parser.add_argument(
        "--det-text-px", type=float, default=None, help="embedded text height to detect at (0: off)"
    )
    parser.add_argument("--rec-batch", type=int, default=None, help="embedded lines a call")
    parser.add_argument("--tesseract-psm", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write every score here")
    parser.add_argument("--batch-rounds", type=int, default=2, help="pages repeated in a batch")
    parser.add_argument("--batch-repeat", type=int, default=3, help="batches per engine")
    parser.add_argument("--no-single", action="store_true", help="batch lines only")
    parser.add_argument("--show", help="print both engines' text for pages containing this")
    return parser.parse_args(argv)


def embedded_options(args: argparse.Namespace) -> dict[str, Any]:
    """The embedded engine's options the flags set (the defaults otherwise)."""
    flags = {
        "backend": args.backend,
        "det_side": args.det_side,
        "det_text_px": args.det_text_px,
        "rec_batch": args.rec_batch,
    }
    return {name: value for name, value in flags.items() if value is not None}


def build_engines(args: argparse.Namespace) -> dict[str, Callable[[Image.Image], str]]:
    """The two engines at their defaults (one page at a time), unless the flags say
    otherwise."""
    embedded = EmbeddedEngine(threads=args.threads, **embedded_options(args))
    tesseract = TesseractEngine(psm=args.tesseract_psm)
    embedded.recognize(Image.new("RGB", (64, 64), "white"))  # load models outside the clock
    return {"embedded": lambda im: embedded.recognize(im).text, "tesseract": tesseract.recognize}


def page_sets(args: argparse.Namespace) -> list[tuple[str, int, tuple[Sample, ...]]]:
    """(label, target dim, samples) of every set ``--sets`` names."""
    sets = []
    for name in args.sets.split(","):
        if name == "corpus":
            for dim in (int(d) for d in args.dims.split(",")):
                sets.append((f"corpus scans at {dim} px", dim, SAMPLES))
        elif name == "300dpi":
            sets.append(("full-page scans at 300 dpi", 0, SCANS_300DPI))
        else:
            raise SystemExit(f"unknown page set {name!r}: corpus, 300dpi")
    return sets


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS.resolve()}", file=sys.stderr)
        return 2
    engines = None if args.no_single else build_engines(args)
    report = {}
    for label, dim, samples in page_sets(args):
        images = [render_at(sample, dim) for sample in samples]
        if engines is not None:
            rows = []
            for sample, image in zip(samples, images, strict=True):
                scores = bench_page(engines, image, sample.truth(), args.repeat)
                rows.append((sample, scores))
                if args.show and args.show in sample.path:
                    for name, score in scores.items():
                        print(f"--- {name} on {sample.path}\n{score.text}\n")
            print_table(label, rows)
            report[label] = {s.path: {n: asdict(v) for n, v in sc.items()} for s, sc in rows}
        batch = BatchSettings(
            args.parallel, args.threads, embedded_options(args), args.tesseract_psm
        )
        print_batch(label, images * args.batch_rounds, batch, args.batch_repeat)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
