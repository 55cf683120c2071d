"""End to end: the real CLI on generated sample documents with the embedded engine."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from .cli_helpers import ocrflow, results, status_json

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def converted(samples: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("run") / "out"
    done = ocrflow("run", str(samples), "-o", str(out), "--page-separator", "--workers", "2")
    return out, done


def _by_source(out: Path) -> dict[str, dict]:
    return {Path(r["metadata"]["source_path"]).name: r for r in results(out)}


def test_run_converts_every_sample(converted: tuple[Path, object]) -> None:
    out, done = converted
    assert done.returncode == 0, done.stderr
    records = _by_source(out)
    assert set(records) == {
        "born-digital.pdf",
        "scanned.pdf",
        "invoice-photo.jpg",
        "rotated-page.png",
        "german-scan.tiff",
        "with-blank-page.pdf",
    }
    for name in records:
        assert (out / "markdown" / f"{name}.md").is_file()


def test_routes_per_page(converted: tuple[Path, object]) -> None:
    records = _by_source(converted[0])
    born = records["born-digital.pdf"]
    assert born["metadata"]["routes"] == {"text_layer": 3}
    assert "Größe der Sammlung" in born["text"]
    assert records["scanned.pdf"]["metadata"]["routes"] == {"engine": 2}
    assert records["with-blank-page.pdf"]["metadata"]["routes"] == {"engine": 1, "blank": 1}
    assert records["german-scan.tiff"]["metadata"]["pdf-total-pages"] == 2


def test_ocr_reads_scans_and_rotations(converted: tuple[Path, object]) -> None:
    records = _by_source(converted[0])
    scanned = records["scanned.pdf"]["text"].lower()
    assert "reading room received four hundred boxes" in " ".join(scanned.split())
    rotated = records["rotated-page.png"]
    assert "quarterly report" in rotated["text"].lower()
    assert rotated["attributes"]["page_rotation"][0][2] in (90, 270)
    assert "invoice" in records["invoice-photo.jpg"]["text"].lower()


def test_page_spans_match_text(converted: tuple[Path, object]) -> None:
    out = converted[0]
    for record in results(out):
        text = record["text"]
        spans = record["attributes"]["pdf_page_numbers"]
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
        for (_, end, _), (start, _, _) in itertools.pairwise(spans):
            assert text[end:start] == "\n\n"  # pages are joined by exactly one blank line
        # Each span holds exactly its page's text, as the Markdown's page sections show it.
        md = (out / "markdown" / f"{record['metadata']['source_path']}.md").read_text()
        sections = md.split("<!-- page ")[1:]
        by_page = {int(s.split(" -->", 1)[0]): s.split(" -->", 1)[1].strip() for s in sections}
        for start, end, page in spans:
            assert text[start:end] == by_page[page], (record["metadata"]["source_path"], page)


def test_markdown_has_page_markers(converted: tuple[Path, object]) -> None:
    md = (converted[0] / "markdown" / "born-digital.pdf.md").read_text()
    assert md.index("<!-- page 1 -->") < md.index("<!-- page 2 -->") < md.index("<!-- page 3 -->")


def test_status_json(converted: tuple[Path, object]) -> None:
    report = status_json(converted[0])
    assert report["documents"] == {"ok": 6}
    assert report["pages"] == {"ok": 11}
    assert report["failures"] == []
    assert report["last_run"]["pages_per_s"] > 0


def test_rerun_skips_finished_documents(converted: tuple[Path, object], samples: Path) -> None:
    out = converted[0]
    before = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    again = ocrflow("run", str(samples), "-o", str(out), "--page-separator", "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["documents_skipped"] == 6
    assert summary["pages"] == {}
    after = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    assert after == before


def test_other_settings_are_refused(converted: tuple[Path, object], samples: Path) -> None:
    done = ocrflow("run", str(samples), "-o", str(converted[0]), "--text-layer", "off")
    assert done.returncode == 2
    assert "other settings" in done.stderr


def test_usage_errors_exit_2(tmp_path: Path, samples: Path) -> None:
    assert ocrflow("run", str(tmp_path / "missing.pdf"), "-o", str(tmp_path / "o")).returncode == 2
    bad_pages = ocrflow("run", str(samples), "-o", str(tmp_path / "o2"), "--pages", "5-2")
    assert bad_pages.returncode == 2 and "backwards" in bad_pages.stderr
    assert (
        ocrflow("run", str(samples), "-o", str(tmp_path / "o3"), "--text-layer", "x").returncode
        == 2
    )


def test_pages_and_text_layer_only(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "only"
    done = ocrflow(
        "run",
        str(samples / "born-digital.pdf"),
        str(samples / "scanned.pdf"),
        "-o",
        str(out),
        "--text-layer",
        "only",
        "--pages",
        "2-end",
    )
    # The scan has no text layer: its page failed (no_text_layer), never ``ok`` and empty.
    assert done.returncode == 1, done.stderr
    records = _by_source(out)
    assert [s[2] for s in records["born-digital.pdf"]["attributes"]["pdf_page_numbers"]] == [2, 3]
    assert records["born-digital.pdf"]["metadata"]["status"] == "ok"
    assert "scanned.pdf" not in records  # a failed document has no text to write
    failures = status_json(out)["failures"]
    assert [(Path(f["source"]).name, f["reason"]) for f in failures] == [
        ("scanned.pdf", "no_text_layer")
    ], failures
