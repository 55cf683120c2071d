"""``ocrflow review`` end to end: a real run (the embedded engine on examples/ PDFs, one
corrupt file, one source deleted afterwards), the real command, and the site opened from
disk in headless Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.browser import file_url, save_screenshot
from tests.integration.cli_helpers import ocrflow, results
from tests.review_helpers import EXAMPLES, add_document, page

pytestmark = pytest.mark.slow  # one real OCR run (a few pages) for the module


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OUT of a real run: 3 text-layer pages, a blank + a scanned page, a corrupt PDF, and a
    copy of a PDF whose source is deleted after the run."""
    inputs = tmp_path_factory.mktemp("inputs")
    for name in ("born-digital.pdf", "with-blank-page.pdf"):
        shutil.copy(EXAMPLES / name, inputs / name)
    shutil.copy(EXAMPLES / "born-digital.pdf", inputs / "deleted-later.pdf")
    (inputs / "corrupt.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage\n")
    out = tmp_path_factory.mktemp("run") / "out"
    done = ocrflow("run", str(inputs), "-o", str(out), "-q", "--workers", "1")
    assert done.returncode == 1, done.stderr  # the corrupt file fails, the others convert
    (inputs / "deleted-later.pdf").unlink()
    review = ocrflow("review", str(out))
    assert review.returncode == 0, review.stderr
    assert "review of 4 of 4 documents" in review.stdout
    return out


def _done_records(out: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((out / ".ocrflow" / "done").glob("*.json"))]


def _visible_rows(driver: WebDriver) -> list[str]:
    rows = driver.find_elements(By.CSS_SELECTOR, "#docs tbody tr")
    return [r.find_element(By.TAG_NAME, "a").text for r in rows if r.is_displayed()]


def test_index_lists_every_document_and_filters(module_browser: WebDriver, run_out: Path) -> None:
    done = _done_records(run_out)
    module_browser.get(file_url(run_out / "review" / "index.html"))
    names = _visible_rows(module_browser)
    assert len(names) == len(done) == 4
    assert sorted(names) == sorted(str(r["rel"]) for r in done)
    links = module_browser.find_elements(By.CSS_SELECTOR, "#docs a")
    hrefs = {a.get_attribute("href") or "" for a in links}
    assert all(any(r["id"] in h for h in hrefs) for r in results(run_out))
    save_screenshot(module_browser, "review_index")

    Select(module_browser.find_element(By.ID, "f-status")).select_by_value("failed")
    assert _visible_rows(module_browser) == ["corrupt.pdf"]
    assert module_browser.find_element(By.ID, "shown").text == "1"
    Select(module_browser.find_element(By.ID, "f-status")).select_by_value("")
    Select(module_browser.find_element(By.ID, "f-flag")).select_by_value("missing-source")
    assert _visible_rows(module_browser) == ["deleted-later.pdf"]
    Select(module_browser.find_element(By.ID, "f-flag")).select_by_value("")
    Select(module_browser.find_element(By.ID, "f-route")).select_by_value("blank")
    assert _visible_rows(module_browser) == ["with-blank-page.pdf"]
    Select(module_browser.find_element(By.ID, "f-route")).select_by_value("")
    module_browser.find_element(By.ID, "f-text").send_keys("born")
    assert _visible_rows(module_browser) == ["born-digital.pdf"]
    module_browser.find_element(By.ID, "f-text").clear()
    module_browser.execute_script(
        "document.getElementById('f-text').dispatchEvent(new Event('input'))"
    )
    heading = module_browser.find_element(By.CSS_SELECTOR, "#docs thead th")  # "document"
    heading.click()
    assert _visible_rows(module_browser) == sorted(names)
    heading.click()
    assert _visible_rows(module_browser) == sorted(names, reverse=True)


def _open_document(driver: WebDriver, out: Path, rel: str) -> dict[str, object]:
    record = next(r for r in _done_records(out) if r["rel"] == rel)
    driver.get(file_url(out / "review" / "docs" / f"{record['doc_id']}.html"))
    return record


def test_document_page_shows_each_page_image_beside_its_text(
    module_browser: WebDriver, run_out: Path
) -> None:
    for rel in ("born-digital.pdf", "with-blank-page.pdf"):
        record = _open_document(module_browser, run_out, rel)
        text = next(r["text"] for r in results(run_out) if r["id"] == record["doc_id"])
        images = module_browser.find_elements(By.CSS_SELECTOR, "img.page-image")
        assert len(images) == record["page_count"] == len(record["pages"])  # type: ignore[arg-type]
        for image in images:  # really loaded from disk, not a broken link
            assert module_browser.execute_script("return arguments[0].naturalWidth", image) > 100
        sections = module_browser.find_elements(By.CSS_SELECTOR, "section.page")
        routes = [s.get_attribute("data-route") for s in sections]
        assert routes == [p["route"] for p in record["pages"]]  # type: ignore[union-attr]
        shown = " ".join(s.find_element(By.CLASS_NAME, "markdown").text for s in sections)
        words = [w for w in str(text).split() if w.isalpha() and len(w) > 3][:20]
        assert words and all(w in shown for w in words)
        save_screenshot(module_browser, f"review_{rel}", full_page=True)


def test_failed_and_missing_documents_say_why(module_browser: WebDriver, run_out: Path) -> None:
    record = _open_document(module_browser, run_out, "corrupt.pdf")
    reason = module_browser.find_element(By.ID, "reason").text
    assert record["reason"] == "corrupt" and "[corrupt]" in reason
    assert str(record["message"])[:30] in reason
    assert not module_browser.find_elements(By.CSS_SELECTOR, "img.page-image")
    save_screenshot(module_browser, "review_failed")

    record = _open_document(module_browser, run_out, "deleted-later.pdf")
    assert "no longer exists" in module_browser.find_element(By.ID, "missing-source").text
    missing = module_browser.find_elements(By.CSS_SELECTOR, "section.page .missing")
    assert len(missing) == 3 and "no longer exists" in missing[0].text
    text = next(r["text"] for r in results(run_out) if r["id"] == record["doc_id"])
    first_line = str(text).strip().splitlines()[0].lstrip("# ")
    assert first_line in module_browser.find_element(By.CSS_SELECTOR, ".markdown").text


def test_script_in_model_output_does_not_run(module_browser: WebDriver, tmp_path: Path) -> None:
    out = tmp_path / "out"
    markdown = (
        "# Title\n\n<script>window.pwned = 1; document.title = 'pwned'</script>\n\n"
        '<img src=x onerror="window.pwned = 2">\n\n[link](javascript:window.pwned=3)'
    )
    add_document(out, "hostile", EXAMPLES / "born-digital.pdf", [page(1, markdown)])
    review = ocrflow("review", str(out), "--only", "failed,partial,fallback")
    assert review.returncode == 0 and "review of 0 of 1" in review.stdout
    assert ocrflow("review", str(out)).returncode == 0
    module_browser.get(file_url(out / "review" / "docs" / "hostile.html"))
    assert module_browser.execute_script("return window.pwned") is None
    assert module_browser.title != "pwned"
    shown = module_browser.find_element(By.CSS_SELECTOR, ".markdown").text
    assert "<script>window.pwned = 1;" in shown
    assert module_browser.find_element(By.CSS_SELECTOR, ".markdown h1").text == "Title"
