"""Evaluate one run: bench tests (with repeats) and CER/word F1 against ground truth."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath

from ocrflow.evaluation.bench import PassRate, TestResult, pass_rates, run_test
from ocrflow.evaluation.checks import BenchTest
from ocrflow.evaluation.documents import RunDocuments, resolve_name
from ocrflow.evaluation.metrics import TextScores, aggregate_scores, score_text

TRUTH_SUFFIXES = (".md", ".txt")


@dataclass(frozen=True)
class DocumentScore:
    """CER/word F1 of one document against its ground-truth file."""

    document: str
    truth: str
    scores: TextScores


@dataclass(frozen=True)
class RunEvaluation:
    """Everything ``ocrflow eval`` reports about one run."""

    location: str
    results: list[TestResult]
    rates: dict[str, PassRate]
    documents: list[DocumentScore]
    overall: TextScores | None


def _majority(test: BenchTest, texts: list[str] | None) -> TestResult:
    """The reference's rule for repeats: a test passes when more than half of them pass."""
    if not texts:
        return run_test(test, None)
    runs = [run_test(test, text) for text in texts]
    passed = sum(r.passed for r in runs) / len(runs) > 0.5
    why = "" if passed else next(r.explanation for r in runs if not r.passed)
    return TestResult(test.id, test.type, test.pdf, test.page, passed, why)


def evaluate_tests(tests: list[BenchTest], docs: RunDocuments) -> list[TestResult]:
    """Run every test on its page of ``docs`` (missing documents/pages fail)."""
    names = sorted(docs.pages)
    resolved: dict[str, str | None] = {}
    results = []
    for test in tests:
        if test.pdf not in resolved:
            resolved[test.pdf] = resolve_name(test.pdf, names)
        name = resolved[test.pdf]
        texts = docs.pages[name].get(test.page) if name else None
        results.append(_majority(test, texts))
    return results


def find_truth(document: str, truth_dir: Path) -> Path | None:
    """The ground-truth file of ``document``: ``<stem>.md``/``.txt``, else the first
    ``<stem>.<anything>.md``/``.txt`` (``x.gt.txt``, ``x.easyocr-reference.md``)."""
    stem = PurePath(document).stem
    exact = [truth_dir / f"{stem}{suffix}" for suffix in TRUTH_SUFFIXES]
    for path in exact:
        if path.is_file():
            return path
    loose = sorted(
        p for p in truth_dir.glob(f"{glob_escape(stem)}.*") if p.suffix in TRUTH_SUFFIXES
    )
    return loose[0] if loose else None


def glob_escape(text: str) -> str:
    """``text`` with glob metacharacters escaped."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def score_documents(docs: RunDocuments, truth_dir: Path) -> list[DocumentScore]:
    """CER/word F1 of every document that has a ground-truth file in ``truth_dir``."""
    scored = []
    for name in sorted(docs.pages):
        truth = find_truth(name, truth_dir)
        if truth is None:
            continue
        reference = truth.read_text(encoding="utf-8")
        scored.append(DocumentScore(name, truth.name, score_text(reference, docs.text(name))))
    return scored


def evaluate_run(
    docs: RunDocuments, tests: list[BenchTest], truth_dir: Path | None = None
) -> RunEvaluation:
    """Bench results and pass rates, plus text scores when ``truth_dir`` is given."""
    results = evaluate_tests(tests, docs)
    documents = score_documents(docs, truth_dir) if truth_dir else []
    overall = aggregate_scores([d.scores for d in documents]) if documents else None
    return RunEvaluation(docs.location, results, pass_rates(results), documents, overall)
