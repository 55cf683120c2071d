"""ocrflow against OCRmyPDF on the corpus scans with ground truth, each tool as its users run it.

Run: ``.venv/bin/python bench/bench_ocrmypdf.py --ocrmypdf .venv-ocrmypdf/bin/ocrmypdf
[--set A,B] [--files X.pdf ... --truth DIR [--skewed]] [--jobs 2] [--repeat 1]
[--tools ocrmypdf,embedded,tesseract] [--keep DIR] [--json bench/results/ocrmypdf.json]``
(``make bench-ocrmypdf``, which installs OCRmyPDF into ``.venv-ocrmypdf`` first).

Two page sets of scanned PDFs (set A upright, set B rotated or skewed; see ``page_sets``).
For each set the tools run back to back on the same machine, their order alternating from
one ``--repeat`` round to the next so that background load hits all alike:

- **ocrmypdf**: ``ocrmypdf --output-type pdf --jobs 1 --sidecar OUT.txt IN.pdf OUT.pdf``, one
  process a file, ``--jobs`` of them at a time (how a batch is run with OCRmyPDF); set B
  adds ``--rotate-pages --deskew`` (``--deskew`` re-encodes the page images);
- **embedded**: ``ocrflow run INDIR -o OUTDIR --format pdf,markdown --page-separator``, one
  process over the set (the default engine);
- **tesseract**: the same with ``--engine tesseract``.

``--page-separator`` only adds ``<!-- page N -->`` comments to the Markdown (the metrics
strip them) so that a multi-page document is scored page by page, as OCRmyPDF's sidecar is
(its pages end with a form feed).

Measured: the set's whole wall time (median of the rounds) and the CPU seconds of the
tools' processes; each file alone (``--no-single`` skips this), with each tool's default
parallelism; order-sensitive CER (``ocrflow.evaluation.metrics``, what ``ocrflow eval``
reports: Markdown markup stripped, same normalisation on both sides) of OCRmyPDF's sidecar
and of our Markdown, per page where the truth is per page; the output PDF's bytes. Every
output PDF is also checked: ``qpdf --check``; the CER of its text layer (``pdftotext``)
divided by the CER of the tool's own text (sidecar or Markdown: ours should be <= 1.02);
whether every image stream of the input is still there byte for byte (raw stream bytes,
``pikepdf``'s ``read_raw_bytes``, image XObjects and their masks, page by page).

Every figure is also shown as a ratio against OCRmyPDF measured in the same run (``x``).
ocrflow's modules are byte-compiled first (``compile_ocrflow``), as an install has them.
A tool failing on a file is recorded (exit code, last lines of its log) and the run goes
on. OCRmyPDF refuses a PDF whose pages already have text (exit 6) unless told what to do
with it; the benchmark notes it and passes no such flag.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pikepdf

from ocrflow.evaluation.metrics import TextScores, aggregate_scores, score_text

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / ".." / "shared" / "corpus"
DEFAULT_JSON = ROOT / "bench" / "results" / "ocrmypdf.json"
TOOLS = ("ocrmypdf", "embedded", "tesseract")
#: OCRmyPDF's exit codes (``ocrmypdf.ExitCode``) that a benchmark run may meet.
OCRMYPDF_EXIT = {
    0: "ok",
    1: "bad arguments",
    2: "input file",
    3: "missing dependency",
    4: "invalid output PDF",
    5: "file access",
    6: "page already has text (refused)",
    7: "child process error",
    8: "encrypted PDF",
    9: "invalid config",
    10: "PDF/A conversion failed",
    15: "other error",
}
OCRFLOW_EXIT = {0: "ok", 1: "some documents failed", 2: "usage", 3: "OUT", 4: "engine", 5: "none"}
PAGE_MARK = re.compile(r"<!-- page \d+ -->")


# --- documents and their ground truth ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Doc:
    """One input PDF; ``truth`` holds one text a page, or one text for the whole document
    (``None``: no ground truth, timed and measured only)."""

    path: Path
    truth: tuple[str, ...] | None
    note: str = ""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def per_page(self) -> bool:
        return self.truth is not None and len(self.truth) > 1


@dataclass(frozen=True, slots=True)
class PageSet:
    """Documents run together; ``skewed``: OCRmyPDF gets ``--rotate-pages --deskew``."""

    key: str
    label: str
    docs: tuple[Doc, ...]
    skewed: bool


def truth_text(path: Path) -> str:
    """A ground-truth file's text, a Markdown file's front matter dropped (the metrics strip
    the rest of the markup the same way as they strip the tools' Markdown)."""
    text = path.read_text(encoding="utf-8")
    return re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)


def corpus_truth(name: str) -> str:
    return truth_text(CORPUS / "groundtruth" / name)


def page_sets() -> dict[str, PageSet]:
    """The corpus's scanned PDFs whose ground truth matches their text (each checked against
    the page images)."""
    pdfs = CORPUS / "pdfs"
    linn = (corpus_truth("ocrmypdf__linn.txt"),)
    # docling__ocr_test.easyocr-reference.md is docling's easyocr regression output, but its
    # text is exactly the one sentence on the page (the corpus's MANIFEST gives it as the
    # true text too).
    docling = corpus_truth("docling__ocr_test.easyocr-reference.md").strip()
    upright = PageSet(
        "A",
        "upright scans",
        (
            Doc(pdfs / "ocrmypdf__linn.pdf", linn, "JBIG2, 300 dpi, 2 columns"),
            Doc(pdfs / "ocrmypdf__ccitt.pdf", linn, "linn as CCITT G4"),
            Doc(pdfs / "docling__ocr_test.pdf", (docling,), "600 dpi, one sentence"),
            # olmocr__edgar.md is the page's body text; the page also shows its title, the
            # Wikipedia banner, an infobox and the browser's header and footer, which the
            # truth lacks: every tool pays those as insertions (a floor on the CER).
            Doc(
                pdfs / "olmocr__edgar_image.pdf",
                (corpus_truth("olmocr__edgar.md"),),
                "72 dpi raster; truth = body text only",
            ),
        ),
        skewed=False,
    )
    skewed = PageSet(
        "B",
        "rotated and skewed scans",
        (
            Doc(pdfs / "ocrmypdf__skew.pdf", linn, "linn drawn skewed"),
            # Each rotated file has its own docling reference (Tesseract's output there);
            # both read exactly the sentence of the upright page, which is what the pages
            # show, so the file's own reference is as faithful as the upright one's.
            Doc(
                pdfs / "docling__ocr_test_rotated_90.pdf",
                (corpus_truth("docling__ocr_test_rotated_90.tesseract-reference.md").strip(),),
                "turned 90",
            ),
            Doc(
                pdfs / "docling__ocr_test_rotated_180.pdf",
                (corpus_truth("docling__ocr_test_rotated_180.tesseract-reference.md").strip(),),
                "upside down",
            ),
            # docling__nemotron_multipage.nemotron-reference.md is a noisy engine output
            # ("Bockktd JSON and Markdowwn ... Soriiis sundiie"), not the text: dropped. The
            # four pages each show the docling sentence, upright, 180, 90 and 270 degrees
            # (looked at), so the truth is that sentence a page, scored page by page; the
            # file sits in set B because three of its pages are turned.
            Doc(
                pdfs / "docling__nemotron_multipage.pdf",
                (docling,) * 4,
                "4 pages: 0/180/90/270",
            ),
        ),
        skewed=True,
    )
    return {"A": upright, "B": skewed}


def files_set(paths: list[Path], truth_dir: Path | None, skewed: bool) -> PageSet:
    """``--files``: the given PDFs, each with ``truth_dir/<stem>.txt`` or ``.md`` when there
    (a form feed in it separates pages)."""
    if len({p.name for p in paths}) < len(paths):
        raise SystemExit("--files: two files share a name; the outputs are named after it")
    docs = []
    for path in paths:
        truth = None
        for suffix in (".txt", ".md"):
            candidate = truth_dir / f"{path.stem}{suffix}" if truth_dir else None
            if candidate is not None and candidate.is_file():
                pages = truth_text(candidate).rstrip("\f\n").split("\f")
                truth = tuple(pages)
                break
        docs.append(Doc(path.resolve(), truth, "" if truth else "no truth"))
    return PageSet("files", "--files", tuple(docs), skewed)


# --- running the tools ------------------------------------------------------------------


@dataclass(slots=True)
class Proc:
    """One process: its exit code and wall seconds (``rc`` None: it could not start)."""

    rc: int | None
    seconds: float
    log_tail: str = ""


@dataclass(slots=True)
class SetRun:
    """One tool over one set, one round: the whole wall time, its processes' CPU seconds,
    each file's output paths and the processes (one a file for OCRmyPDF, one for ocrflow)."""

    tool: str
    seconds: float
    cpu_seconds: float
    procs: dict[str, Proc]
    outputs: dict[str, tuple[Path | None, Path | None]] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        """Files left without their text or PDF in this round."""
        return sum(text is None or pdf is None for text, pdf in self.outputs.values())


def run_proc(cmd: list[str], log: Path) -> Proc:
    """Run ``cmd`` with its output to ``log``; never raises."""
    started = time.perf_counter()
    try:
        with log.open("wb") as out:
            rc: int | None = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
    except OSError as error:
        log.write_text(f"could not start: {error}\n")
        rc = None
    seconds = time.perf_counter() - started
    return Proc(rc, seconds, _tail(log) if rc != 0 else "")


def _tail(log: Path, lines: int = 6) -> str:
    text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return "\n".join(text[-lines:])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True, slots=True)
class Runner:
    """How each tool is called."""

    ocrmypdf: str
    ocrflow: str
    jobs: int
    deskew: bool
    #: ``--ocrflow-args``: more ``ocrflow run`` flags (``--target-dim 1288`` to compare).
    ocrflow_args: tuple[str, ...] = ()

    def ocrmypdf_cmd(self, src: Path, out: Path, skewed: bool, single: bool) -> list[str]:
        """OCRmyPDF on one file: ``--jobs 1`` in a set (files in parallel), its default (all
        cores, over pages) for a file alone."""
        extra = ["--rotate-pages", *(["--deskew"] if self.deskew else [])] if skewed else []
        jobs = [] if single else ["--jobs", "1"]
        sidecar = ["--sidecar", str(out.with_suffix(".txt"))]
        return [self.ocrmypdf, "--output-type", "pdf", *jobs, *extra, *sidecar, str(src), str(out)]

    def ocrflow_cmd(self, tool: str, src: Path, out: Path, skewed: bool) -> list[str]:
        """``ocrflow run``, given on a skewed set what OCRmyPDF is given there."""
        engine = ["--engine", "tesseract"] if tool == "tesseract" else []
        fmt = ["--format", "pdf,markdown", "--page-separator"]
        extra = ["--rotate-pages", *(["--deskew"] if self.deskew else [])] if skewed else []
        return [
            self.ocrflow, "run", str(src), "-o", str(out), *fmt, *engine, *extra,
            *self.ocrflow_args,
        ]  # fmt: skip

    def run_set(self, tool: str, page_set: PageSet, work: Path) -> SetRun:
        """``tool`` over the whole set, timed from the first process's start to the last
        one's end."""
        work.mkdir(parents=True)
        cpu = _children_cpu()
        started = time.perf_counter()
        if tool == "ocrmypdf":
            procs, outputs = self._ocrmypdf_set(page_set, work)
        else:
            procs, outputs = self._ocrflow_set(tool, page_set, work)
        seconds = time.perf_counter() - started
        return SetRun(tool, seconds, _children_cpu() - cpu, procs, outputs)

    def _ocrmypdf_set(
        self, page_set: PageSet, work: Path
    ) -> tuple[dict[str, Proc], dict[str, tuple[Path | None, Path | None]]]:
        def one(doc: Doc) -> Proc:
            cmd = self.ocrmypdf_cmd(doc.path, work / doc.name, page_set.skewed, single=False)
            return run_proc(cmd, work / f"{doc.name}.log")

        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            results = list(pool.map(one, page_set.docs))
        procs = dict(zip((d.name for d in page_set.docs), results, strict=True))
        outputs = {d.name: ocrmypdf_outputs(work / d.name) for d in page_set.docs}
        return procs, outputs

    def _ocrflow_set(
        self, tool: str, page_set: PageSet, work: Path
    ) -> tuple[dict[str, Proc], dict[str, tuple[Path | None, Path | None]]]:
        indir = work / "in"
        indir.mkdir()
        for doc in page_set.docs:
            (indir / doc.name).symlink_to(doc.path)
        out = work / "out"
        cmd = self.ocrflow_cmd(tool, indir, out, page_set.skewed)
        proc = run_proc(cmd, work / "ocrflow.log")
        outputs = {d.name: ocrflow_outputs(out, d.name) for d in page_set.docs}
        return {"(set)": proc}, outputs

    def run_single(self, tool: str, doc: Doc, skewed: bool, work: Path) -> Proc:
        """``tool`` on one file alone."""
        work.mkdir(parents=True)
        if tool == "ocrmypdf":
            cmd = self.ocrmypdf_cmd(doc.path, work / doc.name, skewed, single=True)
        else:
            cmd = self.ocrflow_cmd(tool, doc.path, work / "out", skewed)
        return run_proc(cmd, work / "run.log")


def ocrmypdf_outputs(pdf: Path) -> tuple[Path | None, Path | None]:
    """(text, PDF) OCRmyPDF left, None where missing."""
    text = pdf.with_suffix(".txt")
    return (text if text.is_file() else None, pdf if pdf.is_file() else None)


def ocrflow_outputs(out: Path, name: str) -> tuple[Path | None, Path | None]:
    """(Markdown, PDF) of input ``name``: ``OUT/markdown/<name>.md``, ``OUT/pdf/<name>.pdf``
    (the stem's names also looked for)."""
    stem = Path(name).stem

    def find(folder: str, suffix: str) -> Path | None:
        for candidate in (f"{name}{suffix}", f"{stem}{suffix}"):
            if (out / folder / candidate).is_file():
                return out / folder / candidate
        return None

    return find("markdown", ".md"), find("pdf", ".pdf")


# --- measuring the outputs --------------------------------------------------------------


def split_pages(text: str, tool: str) -> list[str]:
    """A tool's text, one item a page: OCRmyPDF's sidecar (and pdftotext) end pages with a
    form feed; our Markdown marks them with ``<!-- page N -->``."""
    if tool == "ocrmypdf" or "\f" in text:
        pages = text.split("\f")
        return pages[:-1] if len(pages) > 1 and not pages[-1].strip() else pages
    parts = PAGE_MARK.split(text)
    return parts[1:] if len(parts) > 1 and not parts[0].strip() else parts


def score_doc(doc: Doc, text: str, tool: str) -> tuple[TextScores | None, list[float]]:
    """The document's scores (micro-averaged over its pages where the truth is per page) and
    the CER of each page (empty for a whole-document truth, or when the page counts differ:
    then the whole text is scored against the whole truth)."""
    if doc.truth is None:
        return None, []
    pages = split_pages(text, tool)
    if doc.per_page and len(pages) == len(doc.truth):
        scores = [score_text(t, p) for t, p in zip(doc.truth, pages, strict=True)]
        return aggregate_scores(scores), [s.cer for s in scores]
    return score_text("\n\n".join(doc.truth), "\n\n".join(pages)), []


def pdftotext(pdf: Path) -> str | None:
    """The PDF's text layer as poppler reads it (pages end with a form feed)."""
    try:
        done = subprocess.run(
            ["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, check=False
        )
    except OSError:
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def qpdf_check(pdf: Path) -> str:
    """``qpdf --check``: ok (exit 0), warnings (exit 3), or errors (2)."""
    try:
        done = subprocess.run(["qpdf", "--check", str(pdf)], capture_output=True, check=False)
    except OSError:
        return "no qpdf"
    return {0: "ok", 3: "warnings"}.get(done.returncode, f"errors (exit {done.returncode})")


def image_hashes(pdf: Path) -> list[Counter[str]]:
    """A page's image streams, raw bytes hashed (image XObjects, in forms too, and their
    soft masks and stencil masks), one counter a page."""
    pages = []
    with pikepdf.open(pdf) as document:
        for page in document.pages:
            found: Counter[str] = Counter()
            _collect_images(page.obj.get("/Resources"), found, set())
            pages.append(found)
    return pages


def _collect_images(resources: Any, found: Counter[str], seen: set[tuple[int, int]]) -> None:
    xobjects = resources.get("/XObject") if isinstance(resources, pikepdf.Dictionary) else None
    if not isinstance(xobjects, pikepdf.Dictionary):
        return
    for _, xobject in xobjects.items():
        if not isinstance(xobject, pikepdf.Stream) or xobject.objgen in seen:
            continue
        if xobject.objgen != (0, 0):
            seen.add(xobject.objgen)
        subtype = xobject.get("/Subtype")
        if subtype == "/Image":
            found[hashlib.sha256(xobject.read_raw_bytes()).hexdigest()] += 1
            for key in ("/SMask", "/Mask"):
                mask = xobject.get(key)
                if isinstance(mask, pikepdf.Stream):
                    found[hashlib.sha256(mask.read_raw_bytes()).hexdigest()] += 1
        elif subtype == "/Form":
            _collect_images(xobject.get("/Resources"), found, seen)


def images_kept(original: Path, output: Path) -> tuple[int, int] | None:
    """(streams of the input found byte for byte on the same page of the output, streams of
    the input); None when either file cannot be read."""
    try:
        before, after = image_hashes(original), image_hashes(output)
    except (pikepdf.PdfError, OSError):
        return None
    if len(before) != len(after):
        return 0, sum(c.total() for c in before)
    kept = sum((b & a).total() for b, a in zip(before, after, strict=True))
    return kept, sum(c.total() for c in before)


@dataclass(slots=True)
class FileResult:
    """One tool on one document: quality from the set run's outputs (first round), seconds
    alone (median of the rounds), the output PDF's checks."""

    rc: int | None = None
    exit: str = ""
    log_tail: str = ""
    seconds_alone: float = math.nan
    seconds_alone_runs: list[float] = field(default_factory=list)
    alone_exits: list[int | None] = field(default_factory=list)
    seconds_in_set: float = math.nan
    cer: float = math.nan
    word_f1: float = math.nan
    page_cers: list[float] = field(default_factory=list)
    pdf_bytes: int | None = None
    qpdf: str = ""
    text_layer_cer: float = math.nan
    text_layer_ratio: float = math.nan
    images_kept: tuple[int, int] | None = None
    missing: list[str] = field(default_factory=list)


def measure(doc: Doc, run: SetRun) -> FileResult:
    """Quality and size of ``run``'s outputs for ``doc``."""
    text_path, pdf_path = run.outputs.get(doc.name, (None, None))
    proc = run.procs.get(doc.name) or run.procs.get("(set)")
    result = FileResult()
    if proc is not None:
        exits = OCRMYPDF_EXIT if run.tool == "ocrmypdf" else OCRFLOW_EXIT
        result.rc, result.log_tail = proc.rc, proc.log_tail
        result.exit = "could not start" if proc.rc is None else exits.get(proc.rc, "error")
        if run.tool == "ocrmypdf":
            result.seconds_in_set = proc.seconds
    result.missing = [kind for kind, p in (("text", text_path), ("pdf", pdf_path)) if p is None]
    if text_path is not None:
        scores, result.page_cers = score_doc(doc, text_path.read_text(encoding="utf-8"), run.tool)
        if scores is not None:
            result.cer, result.word_f1 = scores.cer, scores.word_f1
    if pdf_path is not None:
        result.pdf_bytes = pdf_path.stat().st_size
        result.qpdf = qpdf_check(pdf_path)
        result.images_kept = images_kept(doc.path, pdf_path)
        layer = pdftotext(pdf_path)
        if layer is not None and doc.truth is not None:
            scores, _ = score_doc(doc, layer, "ocrmypdf")  # pdftotext ends pages with \f
            result.text_layer_cer = scores.cer if scores else math.nan
            result.text_layer_ratio = _ratio(result.text_layer_cer, result.cer)
    return result


def _ratio(ours: float, theirs: float) -> float:
    if math.isnan(ours) or math.isnan(theirs):
        return math.nan
    if theirs == 0:
        return 1.0 if ours == 0 else math.inf
    return ours / theirs


# --- one set, all rounds ----------------------------------------------------------------


@dataclass(slots=True)
class SetResult:
    page_set: PageSet
    tools: tuple[str, ...]
    runs: dict[str, list[SetRun]] = field(default_factory=dict)
    files: dict[str, dict[str, FileResult]] = field(default_factory=dict)

    def valid(self, tool: str) -> list[SetRun]:
        """The rounds in which ``tool`` wrote every file's outputs (all rounds if none did:
        then its figures are not comparable, and the report says so)."""
        return [r for r in self.runs[tool] if not r.failed] or self.runs[tool]

    def wall(self, tool: str) -> float:
        return statistics.median(r.seconds for r in self.valid(tool))

    def cpu(self, tool: str) -> float:
        return statistics.median(r.cpu_seconds for r in self.valid(tool))


def bench_set(
    page_set: PageSet, tools: tuple[str, ...], runner: Runner, work: Path, args: argparse.Namespace
) -> SetResult:
    """Every round: each tool over the whole set, then (unless ``--no-single``) each file
    alone with each tool; the tools' order alternates between rounds."""
    result = SetResult(page_set, tools, {t: [] for t in tools})
    alone: dict[tuple[str, str], list[Proc]] = {}
    for round_ in range(args.repeat):
        order = tools if round_ % 2 == 0 else tuple(reversed(tools))
        for tool in order:
            print(f"  round {round_ + 1}: {tool} over set {page_set.key} ...", flush=True)
            run = runner.run_set(tool, page_set, work / f"r{round_ + 1}" / "set" / tool)
            result.runs[tool].append(run)
        if args.no_single:
            continue
        for doc in page_set.docs:
            for tool in order:
                folder = work / f"r{round_ + 1}" / "alone" / tool / doc.name
                proc = runner.run_single(tool, doc, page_set.skewed, folder)
                alone.setdefault((doc.name, tool), []).append(proc)
    for doc in page_set.docs:
        result.files[doc.name] = {}
        for tool in tools:
            measured = measure(doc, result.valid(tool)[0])
            procs = alone.get((doc.name, tool), [])
            measured.seconds_alone_runs = [p.seconds for p in procs]
            measured.alone_exits = [p.rc for p in procs]
            # A file alone counts only where its run succeeded (exit 0: for ocrflow, exit 1
            # with one document means that document failed).
            if ok := [p.seconds for p in procs if p.rc == 0]:
                measured.seconds_alone = statistics.median(ok)
            result.files[doc.name][tool] = measured
    return result


# --- the report ---------------------------------------------------------------------------

SHORT = {"ocrmypdf": "omp", "embedded": "emb", "tesseract": "tess"}


def _num(value: float | None, spec: str, width: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return f"{'-':>{width}}"
    if math.isinf(value):
        return f"{'inf':>{width}}"
    return f"{value:>{width}{spec}}"


def _with_ratio(
    values: dict[str, float | None], spec: str, width: int, tools: Iterable[str]
) -> str:
    """Each tool's value, and for ours its ratio to OCRmyPDF's (``x``)."""
    base = values.get("ocrmypdf")
    cells = []
    for tool in tools:
        value = values.get(tool)
        cells.append(_num(value, spec, width))
        if tool != "ocrmypdf" and "ocrmypdf" in values:
            ratio = _ratio(value, base) if value is not None and base is not None else math.nan
            cells.append(f"{'-':>7}" if math.isnan(ratio) else _num(ratio, ".2f", 6) + "x")
    return "".join(cells)


def _heads(label: str, width: int, tools: Iterable[str], base: bool) -> str:
    heads = []
    for tool in tools:
        heads.append(f"{label + ' ' + SHORT[tool]:>{width}}")
        if tool != "ocrmypdf" and base:
            heads.append(f"{'x':>7}")
    return "".join(heads)


def print_set(result: SetResult, args: argparse.Namespace) -> None:
    """The per-file table, the checks of the output PDFs, then the set's totals."""
    page_set, tools = result.page_set, result.tools
    base = "ocrmypdf" in tools
    files = result.files
    pages = {d.name: _page_count(d.path) for d in page_set.docs}
    print(
        f"\n## set {page_set.key}: {page_set.label}, {len(page_set.docs)} files, "
        f"{sum(pages.values())} pages; x = ratio to OCRmyPDF, same run; s = wall seconds of "
        f"the file alone, median of {args.repeat}; CER order-sensitive; KB = output PDF\n"
    )
    print(
        f"{'file':38}{'p':>3}"
        + _heads("s", 9, tools, base)
        + _heads("CER", 10, tools, base)
        + _heads("KB", 9, tools, base)
    )
    for doc in page_set.docs:
        row = files[doc.name]
        print(
            f"{doc.name[:37]:38}{pages[doc.name]:>3}"
            + _with_ratio({t: row[t].seconds_alone for t in tools}, ".2f", 9, tools)
            + _with_ratio({t: row[t].cer for t in tools}, ".3f", 10, tools)
            + _with_ratio({t: _kb(row[t].pdf_bytes) for t in tools}, ".0f", 9, tools)
        )
    means = {t: _mean(files[d.name][t].cer for d in page_set.docs) for t in tools}
    total_kb = {t: _kb(_sum(files[d.name][t].pdf_bytes for d in page_set.docs)) for t in tools}
    alone = {t: sum(files[d.name][t].seconds_alone for d in page_set.docs) for t in tools}
    print(
        f"{'sum / mean of the files':41}"
        + _with_ratio(alone, ".2f", 9, tools)
        + _with_ratio(means, ".3f", 10, tools)
        + _with_ratio(total_kb, ".0f", 9, tools)
    )
    _print_checks(result)
    _print_failures(result)
    _print_set_line(result, args)


def _print_checks(result: SetResult) -> None:
    tools = result.tools
    print(
        "\noutput PDFs: qpdf --check; txt/own = CER of the text layer (pdftotext) / CER of the "
        "tool's own text (ours: <= 1.02), the text layer's CER in brackets; img = input image "
        "streams kept byte for byte\n"
    )
    heads = "".join(f"{'qpdf ' + SHORT[t]:>10}" for t in tools)
    heads += "".join(f"{'txt/own ' + SHORT[t]:>20}" for t in tools)
    heads += "".join(f"{'img ' + SHORT[t]:>9}" for t in tools)
    print(f"{'file':38}{heads}")
    for name, row in result.files.items():
        qpdf = "".join(f"{row[t].qpdf or '-':>10}" for t in tools)
        ratio = "".join(_layer_cell(row[t], t) for t in tools)
        kept = "".join(f"{_kept(row[t].images_kept):>9}" for t in tools)
        print(f"{name[:37]:38}{qpdf}{ratio}{kept}")


def _layer_cell(row: FileResult, tool: str) -> str:
    ratio = row.text_layer_ratio
    cell = _num(ratio, ".2f", 1).strip() + f" ({_num(row.text_layer_cer, '.3f', 1).strip()})"
    if tool != "ocrmypdf" and not math.isnan(ratio):
        cell += " ok" if ratio <= 1.02 else " !!"
    return f"{cell:>20}"


def _kept(kept: tuple[int, int] | None) -> str:
    return "-" if kept is None else f"{kept[0]}/{kept[1]}"


def _print_failures(result: SetResult) -> None:
    lines = []
    for tool in result.tools:
        for i, run in enumerate(result.runs[tool]):
            for name, proc in run.procs.items():
                if proc.rc != 0:
                    exits = OCRMYPDF_EXIT if tool == "ocrmypdf" else OCRFLOW_EXIT
                    why = "could not start" if proc.rc is None else exits.get(proc.rc, "error")
                    lines.append(f"  round {i + 1} {tool} {name}: exit {proc.rc} ({why})")
    for name, row in result.files.items():
        for tool in result.tools:
            if row[tool].missing:
                lines.append(f"  {tool} {name}: no {' and no '.join(row[tool].missing)} output")
            if failed := [rc for rc in row[tool].alone_exits if rc != 0]:
                lines.append(f"  {tool} {name} alone: exit {failed} (its seconds left out)")
    if lines:
        print("\nexit codes other than 0, missing outputs:")
        print("\n".join(lines))


def _print_set_line(result: SetResult, args: argparse.Namespace) -> None:
    tools = result.tools
    walls = {t: result.wall(t) for t in tools}
    cpus = {t: result.cpu(t) for t in tools}
    rounds = {
        t: ", ".join(f"{r.seconds:.1f}" + ("!" if r.failed else "") for r in result.runs[t])
        for t in tools
    }
    print(
        f"\nset {result.page_set.key}, whole set back to back (OCRmyPDF {args.jobs} files at a "
        f"time, ocrflow one run over the set), median of the rounds in which every file got "
        f"its outputs (! = a round with failed files, left out):"
    )
    for tool in tools:
        x_wall = _ratio(walls[tool], walls.get("ocrmypdf", math.nan))
        x_cpu = _ratio(cpus[tool], cpus.get("ocrmypdf", math.nan))
        failed = _failed(result, tool)
        print(
            f"  {tool:10} wall {walls[tool]:7.1f} s ({_num(x_wall, '.2f', 5).strip()}x)   "
            f"CPU {cpus[tool]:7.1f} s ({_num(x_cpu, '.2f', 5).strip()}x)   rounds: {rounds[tool]}"
            + (f"   ({failed} file(s) without output)" if failed else "")
        )


def _failed(result: SetResult, tool: str) -> int:
    """Files of the set that ``tool`` left without an output in its measured rounds."""
    return result.valid(tool)[0].failed


def _kb(value: int | None) -> float | None:
    return None if value is None else value / 1024


def _sum(values: Iterable[int | None]) -> int | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _mean(values: Iterable[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return statistics.mean(known) if known else math.nan


def _page_count(path: Path) -> int:
    try:
        with pikepdf.open(path) as document:
            return len(document.pages)
    except (pikepdf.PdfError, OSError):
        return 0


def print_verdict(results: list[SetResult]) -> None:
    """One line a set: wall, mean CER and bytes of ours against OCRmyPDF's."""
    if not results or "ocrmypdf" not in results[0].tools:
        return
    print("\nverdict (ours / OCRmyPDF, same run):")
    for result in results:
        parts = []
        docs = result.page_set.docs
        omp_cer = _mean(result.files[d.name]["ocrmypdf"].cer for d in docs)
        omp_kb = _sum(result.files[d.name]["ocrmypdf"].pdf_bytes for d in docs)
        for tool in result.tools:
            if tool == "ocrmypdf":
                continue
            cer = _mean(result.files[d.name][tool].cer for d in docs)
            size = _sum(result.files[d.name][tool].pdf_bytes for d in docs)
            wall = _ratio(result.wall(tool), result.wall("ocrmypdf"))
            size_x = _ratio(size, omp_kb) if size is not None and omp_kb else math.nan
            failed = _failed(result, tool) + _failed(result, "ocrmypdf")
            parts.append(
                f"{tool}: wall {_num(wall, '.2f', 1)}x, CER {_num(cer, '.3f', 1)} vs "
                f"{_num(omp_cer, '.3f', 1)}, PDF bytes {_num(size_x, '.2f', 1)}x"
                + (f" (NOT comparable: {failed} file(s) failed)" if failed else "")
            )
        print(f"  set {result.page_set.key}: " + "; ".join(parts))


# --- the machine ------------------------------------------------------------------------


def _first_line(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unavailable ({error})"
    text = (done.stdout or done.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else f"unavailable (exit {done.returncode})"


def machine() -> dict[str, Any]:
    """CPU model, cores, memory, load."""
    model = platform.processor() or "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), flags=re.M)
        model = found.group(1).strip() if found else model
    meminfo = Path("/proc/meminfo")
    mem = re.search(r"MemTotal:\s*(\d+)", meminfo.read_text()) if meminfo.is_file() else None
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": round(int(mem.group(1)) / 2**20, 1) if mem else None,
        "system": platform.platform(),
        "python": platform.python_version(),
        "load_before": os.getloadavg(),
    }


def versions(runner: Runner) -> dict[str, str]:
    return {
        "ocrmypdf": _first_line([runner.ocrmypdf, "--version"]),
        "tesseract": _first_line(["tesseract", "--version"]),
        "ghostscript": _first_line(["gs", "--version"]),
        "ocrflow": _first_line([runner.ocrflow, "--version"]),
        "qpdf": _first_line(["qpdf", "--version"]),
        "pdftotext": _first_line(["pdftotext", "-v"]),
    }


# --- main -------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ocrmypdf", default=shutil.which("ocrmypdf") or "ocrmypdf")
    parser.add_argument("--ocrflow", default=str(Path(sys.executable).parent / "ocrflow"))
    parser.add_argument("--set", help="page sets: A (upright), B (rotated, skewed); default A,B")
    parser.add_argument("--files", type=Path, nargs="+", help="your own PDFs, as one more set")
    parser.add_argument("--truth", type=Path, help="--files: ground truth <stem>.txt or .md")
    parser.add_argument(
        "--skewed", action="store_true", help="--files: give OCRmyPDF --rotate-pages --deskew"
    )
    parser.add_argument("--no-deskew", action="store_true", help="no --deskew on skewed sets")
    parser.add_argument(
        "--ocrflow-args", default="", help="more `ocrflow run` flags, e.g. '--target-dim 1288'"
    )
    parser.add_argument("--jobs", type=int, default=2, help="OCRmyPDF processes at a time")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; wall = their median")
    parser.add_argument("--no-single", action="store_true", help="skip each file alone")
    parser.add_argument("--tools", default=",".join(TOOLS), help="ocrmypdf,embedded,tesseract")
    parser.add_argument("--keep", type=Path, help="keep every output under this folder")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="results written here")
    args = parser.parse_args(argv)
    args.tools = tuple(t for t in args.tools.split(",") if t)
    if unknown := set(args.tools) - set(TOOLS):
        parser.error(f"unknown tools {sorted(unknown)}: {', '.join(TOOLS)}")
    if args.set is None:
        args.set = "" if args.files else "A,B"
    return args


def chosen_sets(args: argparse.Namespace) -> list[PageSet]:
    sets = []
    known = page_sets() if args.set else {}
    for key in (k for k in args.set.split(",") if k):
        if key not in known:
            raise SystemExit(f"unknown page set {key!r}: A, B")
        sets.append(known[key])
    if args.files:
        sets.append(files_set(args.files, args.truth, args.skewed))
    missing = [str(d.path) for s in sets for d in s.docs if not d.path.is_file()]
    if missing:
        raise SystemExit(f"missing input files: {', '.join(missing)}")
    return sets


def report(results: list[SetResult], info: dict[str, Any]) -> dict[str, Any]:
    """Everything measured, for the JSON file."""
    sets = {}
    for result in results:
        sets[result.page_set.key] = {
            "label": result.page_set.label,
            "skewed": result.page_set.skewed,
            "docs": {d.name: {"path": str(d.path), "note": d.note} for d in result.page_set.docs},
            "wall_s": {t: result.wall(t) for t in result.tools},
            "cpu_s": {t: result.cpu(t) for t in result.tools},
            "rounds": {
                t: [
                    {
                        "wall_s": r.seconds,
                        "cpu_s": r.cpu_seconds,
                        "files_failed": r.failed,
                        "procs": {n: asdict(p) for n, p in r.procs.items()},
                    }
                    for r in result.runs[t]
                ]
                for t in result.tools
            },
            "files": {
                name: {t: asdict(f) for t, f in row.items()} for name, row in result.files.items()
            },
        }
    return {**info, "sets": sets}


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def compile_ocrflow() -> None:
    """Byte-compile ocrflow's modules, as ``pip install`` does for an installed package. An
    editable install run with ``PYTHONDONTWRITEBYTECODE`` set (as some CI images and
    containers do) would otherwise compile every changed module again in every run."""
    import compileall

    import ocrflow

    compileall.compile_dir(Path(ocrflow.__file__).parent, quiet=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.files and not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS.resolve()}", file=sys.stderr)
        return 2
    sets = chosen_sets(args)
    compile_ocrflow()
    runner = Runner(
        args.ocrmypdf,
        args.ocrflow,
        args.jobs,
        deskew=not args.no_deskew,
        ocrflow_args=tuple(shlex.split(args.ocrflow_args)),
    )
    info: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        "versions": versions(runner),
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    print("machine:", json.dumps(info["machine"]))
    for name, version in info["versions"].items():
        print(f"{name:12} {version}")
    if "ocrmypdf" in args.tools and info["versions"]["ocrmypdf"].startswith("unavailable"):
        print(f"warning: {args.ocrmypdf} does not run; its column will be failures")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-ocrmypdf-") as temp:
        work = args.keep.resolve() if args.keep else Path(temp)
        if args.keep:
            shutil.rmtree(work / "runs", ignore_errors=True)
        for page_set in sets:
            print(
                f"\nset {page_set.key} ({page_set.label}): {len(page_set.docs)} files", flush=True
            )
            folder = work / "runs" / page_set.key
            results.append(bench_set(page_set, args.tools, runner, folder, args))
        for result in results:
            print_set(result, args)
        print_verdict(results)
    info["machine"]["load_after"] = os.getloadavg()
    print(f"\nload average before {info['machine']['load_before']}, after {os.getloadavg()}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        data = _json_safe(report(results, info))
        args.json.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
