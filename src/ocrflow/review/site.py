"""Build the review site of a run: ``index.html`` plus one page per document, with page
images rendered from the sources beside each page's Markdown.

Records stream through once: each selected document's images are rendered (in worker
processes), its page is written, and its index row is appended to a spool file; the index is
put together at the end, when the counts it shows are known. Memory holds the documents in
flight (or the sample), never the run.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocrflow.errors import ConfigError
from ocrflow.review.boxes import box_tools, legend_labels, low_lines, overlay_html
from ocrflow.review.imagepool import ImagePool
from ocrflow.review.images import PageImageFile, PageImageJob
from ocrflow.review.markup import ImageResolver, markdown_renderer
from ocrflow.review.pages import (
    PageView,
    document_facts,
    document_head,
    document_tail,
    index_head,
    index_row,
    index_tail,
    page_section,
    whole_text_section,
)
from ocrflow.review.select import DEFAULT_SEED, parse_only, select_records
from ocrflow.review.texts import DocumentText, read_document_text
from ocrflow.sinks.results import done_markers
from ocrflow.storage.local import LocalStore, Store, output_errors
from ocrflow.storage.names import local_path
from ocrflow.storage.open import open_store
from ocrflow.workspace.records import DoneRecord, PageSummary
from ocrflow.workspace.state import Workspace

DEFAULT_DIR = "review"
#: Marks a folder as a review site, so a rebuild may clear the pages of the last one.
MARKER = ".ocrflow-review"
_ROWS_SPOOL = ".index-rows.tmp"


@dataclass(frozen=True, slots=True)
class ReviewOptions:
    """What ``ocrflow review`` was asked for."""

    output: str
    dest: str | None = None
    only: tuple[str, ...] = ()
    sample: int | None = None
    seed: int = DEFAULT_SEED
    workers: int = 2


@dataclass(slots=True)
class ReviewStats:
    """What a review build saw and wrote."""

    index: Path
    documents_total: int = 0
    documents_shown: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    routes: set[str] = field(default_factory=set)
    images: int = 0
    image_errors: int = 0

    def see(self, record: DoneRecord) -> None:
        """Count a document of the run, shown or not."""
        self.documents_total += 1


def default_dest(output: str) -> str:
    """Where the site goes without ``-o``: ``OUT/review`` (OUT must then be local)."""
    if "://" in output and not output.startswith("file://"):
        raise ConfigError(f"{output} is not a local folder: give the review a local -o DIR")
    return str(Path(output.removeprefix("file://"), DEFAULT_DIR))


def build_review(options: ReviewOptions) -> ReviewStats:
    """Write the review site of the run at ``options.output``; return what it holds."""
    if options.sample is not None and options.sample < 1:
        raise ConfigError("--sample must be at least 1")
    parse_only(options.only)  # refuse unknown filters before anything is written
    store = open_store(options.output)
    if not Workspace(store).recorded_config():
        raise ConfigError(f"{options.output} holds no ocrflow run")
    dest = Path(options.dest or default_dest(options.output)).resolve()
    with output_errors(dest):  # an unwritable DIR is one line and exit 3, not a traceback
        return _build(store, dest, options)


def _build(store: Store, dest: Path, options: ReviewOptions) -> ReviewStats:
    _prepare(dest)
    stats = ReviewStats(index=dest / "index.html")
    selected = select_records(
        done_markers(store),
        only=parse_only(options.only),
        sample=options.sample,
        seed=options.seed,
        counter=stats.see,
    )
    spool = dest / _ROWS_SPOOL
    with spool.open("w", encoding="utf-8") as rows, ImagePool[DoneRecord](options.workers) as pool:
        for record, images in pool.map(selected, lambda r: image_job(r, dest)):
            rows.write(_write_document(store, dest, record, images, stats))
    _write_index(dest, spool, stats, options)
    return stats


def _prepare(dest: Path) -> None:
    """Make ``dest``; clear the document pages of an earlier review there (only ours)."""
    if dest.exists() and any(dest.iterdir()) and not (dest / MARKER).exists():
        raise ConfigError(f"{dest} exists and is not an ocrflow review: choose another -o")
    for part in ("docs", "pages"):
        shutil.rmtree(dest / part, ignore_errors=True)
    (dest / "docs").mkdir(parents=True, exist_ok=True)
    (dest / MARKER).write_text("made by ocrflow review; rebuilt on each run\n")


def local_source(source: str) -> str | None:
    """The local path of a document's source, or ``None`` for URLs and dataset rows."""
    if "#row=" in source:
        return None
    if source.startswith("file://"):
        return local_path(source)  # a name that is not UTF-8, percent-encoded
    if "://" in source:
        return None
    return source


def image_job(record: DoneRecord, dest: Path) -> PageImageJob | None:
    """The page images to render for a document: every page it recorded, upright as the
    engine read it; ``None`` when it has no pages or its source is not a local file."""
    path = local_source(record.source)
    if path is None or not record.pages:
        return None
    rotations = tuple((p.page, page_turn(p)) for p in record.pages if page_turn(p))
    folder = dest / "pages" / record.doc_id
    return PageImageJob(path, tuple(p.page for p in record.pages), str(folder), rotations)


def page_turn(summary: PageSummary) -> int:
    """Degrees clockwise the engine turned the page to read it (the review image is turned
    so too, and so are the boxes drawn over it)."""
    return int(summary.attributes.get("rotation") or 0) % 360


def _write_document(
    store: Store, dest: Path, record: DoneRecord, images: list[PageImageFile], stats: ReviewStats
) -> str:
    """Write one document's page; return its index row."""
    path = local_source(record.source)
    facts = document_facts(record, source_exists=path is None or os.path.isfile(path))
    stats.documents_shown += 1
    stats.statuses[facts.status] += 1
    stats.routes.update(facts.routes)
    href = f"docs/{record.doc_id}.html"
    text = read_document_text(store, record)
    render = markdown_renderer(figure_resolver(store, dest / "docs")).render
    by_page = {image.page: image for image in images}
    models = text.models.values()
    tools = box_tools(legend_labels(models), any(low_lines(m) for m in models))
    parts = [document_head(facts, record, "../index.html", tools)]
    for summary in sorted(record.pages, key=lambda p: p.page):
        image = by_page.get(summary.page)
        stats.images += bool(image and image.name)
        stats.image_errors += bool(image and image.error)
        parts.append(page_section(_page_view(record, summary, image, text, render), facts.name))
    if text.whole is not None:
        parts.append(whole_text_section(render(text.whole), text.origin))
    parts.append(document_tail(toggles=bool(tools)))
    (dest / href).write_text("".join(parts), encoding="utf-8")
    return index_row(facts, href)


def _page_view(
    record: DoneRecord,
    summary: PageSummary,
    image: PageImageFile | None,
    text: DocumentText,
    render: Callable[[str], str],
) -> PageView:
    src = f"../pages/{record.doc_id}/{image.name}" if image and image.name else None
    error = _no_image_reason(record) if image is None else image.error
    markdown = render(text.pages.get(summary.page, ""))
    model = text.models.get(summary.page)
    if model is None:
        return PageView(summary, src, error, markdown)
    overlay = overlay_html(model, page_turn(summary)) if src else ""
    return PageView(summary, src, error, markdown, overlay, model.confidence, len(low_lines(model)))


def _no_image_reason(record: DoneRecord) -> str:
    if local_source(record.source) is None:
        return f"the source is not a local file ({record.source})"
    return "not rendered"


def figure_resolver(store: Store, page_dir: Path) -> ImageResolver:
    """Image paths in a document's Markdown are relative to OUT (``figures/…``): lead them
    from the page's folder to OUT instead. For a remote OUT, images show as links."""
    if not isinstance(store, LocalStore):
        return lambda _src: None
    root = store.root

    def resolve(src: str) -> str | None:
        if "://" in src or src.startswith(("/", "data:")):
            return None
        return os.path.relpath(os.path.join(root, src), page_dir)

    return resolve


def _scope(options: ReviewOptions, stats: ReviewStats) -> str:
    parts = [f"{stats.documents_shown} of {stats.documents_total} documents of {options.output}"]
    if options.only:
        parts.append(f"only {', '.join(options.only)}")
    if options.sample is not None:
        parts.append(f"sample of {options.sample} (seed {options.seed})")
    return "; ".join(parts)


def _write_index(dest: Path, spool: Path, stats: ReviewStats, options: ReviewOptions) -> None:
    """The index page: header with counts and filters, the spooled rows, the script."""
    target = dest / "index.html"
    partial = dest / "index.html.tmp"
    with partial.open("w", encoding="utf-8") as out, spool.open(encoding="utf-8") as rows:
        title = f"ocrflow review — {options.output}"
        scope = _scope(options, stats)
        out.write(index_head(title, scope, stats.statuses, stats.routes, stats.documents_shown))
        shutil.copyfileobj(rows, out)
        out.write(index_tail())
    os.replace(partial, target)
    spool.unlink()
