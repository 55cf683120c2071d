"""tests/data/bench_tests.jsonl: valid, covering at least 30 corpus pages (tables and
two-column reading order included), and passed by the corpus's own ground truth."""

from __future__ import annotations

from pathlib import Path

from ocrflow.evaluation.bench import load_tests, run_tests

BENCH_TESTS = Path(__file__).resolve().parents[2] / "data" / "bench_tests.jsonl"


def test_the_set_covers_thirty_pages_with_every_kind() -> None:
    tests = load_tests(BENCH_TESTS)
    pages = {(t.pdf, t.page) for t in tests}
    assert len(pages) >= 30
    assert {t.type for t in tests} >= {"present", "order", "table", "baseline"}
    assert sum(t.type == "table" for t in tests) >= 15
    assert sum(t.id.endswith("order_columns") for t in tests) >= 5
    assert all(t.pdf.startswith(("pdfs/", "images/")) for t in tests)


def test_every_page_exists_in_the_corpus(corpus: Path) -> None:
    for pdf in {t.pdf for t in load_tests(BENCH_TESTS)}:
        assert (corpus / pdf).is_file(), pdf


def _truth_for(corpus: Path, pdf: str) -> str:
    stem = Path(pdf).stem
    shared = {
        "ocrmypdf__skew": "ocrmypdf__linn",
        "ocrmypdf__ccitt": "ocrmypdf__linn",
        "olmocr__edgar_image": "olmocr__edgar",
    }
    stem = shared.get(stem, stem)
    found = [
        p
        for p in sorted((corpus / "groundtruth").glob(f"{stem}.*"))
        if p.suffix in {".md", ".txt"} and ".doctags." not in p.name
    ]
    return found[0].read_text("utf-8")


def test_the_ground_truth_passes_every_test(corpus: Path) -> None:
    """A perfect transcription (the ground truth itself, whole document as each page)
    passes: the tests ask for what is on the page, not for one engine's quirks."""
    tests = load_tests(BENCH_TESTS)
    pages = {(t.pdf, t.page): _truth_for(corpus, t.pdf) for t in tests}
    failed = [(r.id, r.explanation) for r in run_tests(tests, pages) if not r.passed]
    assert failed == []
