"""``ocrflow review`` without a browser: selection (--only, --sample), escaping, missing
sources, figure links, and what the site's files hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ocrflow.errors import ConfigError
from ocrflow.review import ReviewOptions, build_review, markdown_to_html
from ocrflow.review.select import parse_only, select_records
from ocrflow.sinks.results import done_markers
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, Figure, Route
from tests.review_helpers import EXAMPLES, add_document, make_mixed_run, page


def _ids(out: Path, **kw: object) -> list[str]:
    records = done_markers(LocalStore(out))
    return [r.doc_id for r in select_records(records, **kw)]  # type: ignore[arg-type]


def test_parse_only_accepts_lists_and_refuses_unknown_values() -> None:
    assert parse_only(["failed,partial", "failed"]) == ("failed", "partial")
    assert parse_only([]) == ()
    with pytest.raises(ConfigError, match="bogus"):
        parse_only(["bogus"])


def test_only_filters_by_status_and_fallback(tmp_path: Path) -> None:
    statuses = make_mixed_run(tmp_path, 9)
    assert sorted(_ids(tmp_path, only=("failed",))) == sorted(
        d for d, s in statuses.items() if s == "failed"
    )
    partial = sorted(d for d, s in statuses.items() if s == "partial")
    assert sorted(_ids(tmp_path, only=("partial",))) == partial
    assert sorted(_ids(tmp_path, only=("fallback",))) == partial  # their page 2 fell back
    assert len(_ids(tmp_path, only=("failed", "partial"))) == 6
    assert len(_ids(tmp_path)) == 9


def test_sample_is_reproducible_nested_and_seeded(tmp_path: Path) -> None:
    make_mixed_run(tmp_path, 30)
    five = _ids(tmp_path, sample=5)
    assert len(five) == 5 and five == _ids(tmp_path, sample=5)
    assert set(five) <= set(_ids(tmp_path, sample=8))  # growing N only adds documents
    assert set(_ids(tmp_path, sample=5, seed=7)) != set(five)
    failed = _ids(tmp_path, sample=3, only=("failed",))
    assert len(failed) == 3 and all(int(d[3:]) % 3 == 2 for d in failed)
    assert len(_ids(tmp_path, sample=100)) == 30
    with pytest.raises(ConfigError):
        _ids(tmp_path, sample=0)


def test_sample_ignores_listing_order(tmp_path: Path) -> None:
    make_mixed_run(tmp_path, 20)
    records = list(done_markers(LocalStore(tmp_path)))
    forward = [r.doc_id for r in select_records(records, sample=4)]
    backward = [r.doc_id for r in select_records(reversed(records), sample=4)]
    assert forward == backward


def test_sampled_site_holds_only_the_sample(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_mixed_run(out, 12)
    options = ReviewOptions(str(out), sample=4, only=("partial", "failed"), workers=1)
    stats = build_review(options)
    site = out / "review"
    assert stats.documents_total == 12 and stats.documents_shown == 4
    assert len(list((site / "docs").glob("*.html"))) == 4
    index = (site / "index.html").read_text()
    assert index.count('<tr class="doc"') == 4
    assert "4 of 12 documents" in index and "sample of 4 (seed 0)" in index
    # page images only for the documents shown that have pages (failed ones have none)
    shown = {p.stem for p in (site / "docs").glob("*.html")}
    rendered = {p.name for p in (site / "pages").iterdir()}
    assert rendered == {d for d in shown if int(d[3:]) % 3 == 1}  # the partial ones
    assert all(len(list((site / "pages" / d).glob("*.jpg"))) == 2 for d in rendered)


def test_markdown_html_is_shown_not_run() -> None:
    html = markdown_to_html(
        "<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[x](javascript:alert(3))"
    )
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_site_escapes_model_output_and_names(tmp_path: Path) -> None:
    out = tmp_path / "out"
    hostile = tmp_path / '<b onmouseover="x">evil.pdf'
    hostile.write_bytes((EXAMPLES / "born-digital.pdf").read_bytes())
    add_document(out, "evil", hostile, [page(1, "<script>window.pwned = 1</script>\n\n**bold**")])
    build_review(ReviewOptions(str(out), workers=1))
    doc = (out / "review" / "docs" / "evil.html").read_text()
    index = (out / "review" / "index.html").read_text()
    assert "<script" not in doc and "<strong>bold</strong>" in doc
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in doc
    assert '<b onmouseover="x">' not in doc + index
    assert index.count("<script") == 1  # the filter script, nothing else


def test_missing_source_and_failed_document_are_reported(tmp_path: Path) -> None:
    out = tmp_path / "out"
    gone = tmp_path / "gone.pdf"
    add_document(out, "gone", gone, [page(1, "was here")])
    add_document(out, "bad", tmp_path / "bad.pdf", [], DocStatus.FAILED, "corrupt", "bad xref")
    stats = build_review(ReviewOptions(str(out), workers=1))
    assert stats.documents_shown == 2 and stats.images == 0 and stats.image_errors == 1
    gone_page = (out / "review" / "docs" / "gone.html").read_text()
    assert "the source file no longer exists" in gone_page and "was here" in gone_page
    bad_page = (out / "review" / "docs" / "bad.html").read_text()
    assert "[corrupt] bad xref" in bad_page
    assert 'data-flags="missing-source"' in (out / "review" / "index.html").read_text()


def test_figures_link_from_the_document_page_to_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    figure = Figure(1, 0, "image", (0.1, 0.1, 0.5, 0.5), b"\x89PNG fake")
    source = EXAMPLES / "born-digital.pdf"
    pages = [page(1, f"before\n\n{figure.placeholder}", figures=(figure,))]
    add_document(out, "figs", source, pages)
    (out / "figures" / "figs").mkdir(parents=True)
    (out / "figures" / "figs" / "p1-0.png").write_bytes(b"png")
    site = tmp_path / "elsewhere" / "site"
    build_review(ReviewOptions(str(out), dest=str(site), workers=1))
    doc = (site / "docs" / "figs.html").read_text()
    src = re.search(r'<img src="([^"]+)" alt="image"', doc)
    assert src is not None
    assert (site / "docs" / src.group(1)).resolve() == out / "figures" / "figs" / "p1-0.png"
    image = re.search(r'<img class="page-image" src="([^"]+)"', doc)
    assert image is not None and (site / "docs" / image.group(1)).is_file()


def test_refuses_a_folder_it_did_not_make_and_a_folder_without_a_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_mixed_run(out, 1)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not an ocrflow review"):
        build_review(ReviewOptions(str(out), dest=str(tmp_path / "mine"), workers=1))
    with pytest.raises(ConfigError, match="holds no ocrflow run"):
        build_review(ReviewOptions(str(tmp_path / "mine"), workers=1))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_route_of_fallback_pages_and_their_reason_show(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_mixed_run(out, 2)
    build_review(ReviewOptions(str(out), workers=1))
    doc = (out / "review" / "docs" / "doc0001.html").read_text()
    assert f'data-route="{Route.FALLBACK}"' in doc
    assert "fallback reason: [engine_error] HTTP 500 x3" in doc
    assert "attempts 3" in doc and "fallback text_layer" in doc
