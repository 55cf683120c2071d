"""The job service's document view draws each block's box over the page image, coloured by
label, with toggles, a legend and each page's confidence, and marks lines read with a low
confidence: a real ``ocrflow serve`` (tokens, its Content-Security-Policy) converts a
photographed invoice and a page the engine turns 90° to read with the embedded engine; a
third document's result is then rewritten by hand with a line at confidence 0.3. The page
is driven in headless Chromium like a user would: token, job, document."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from ocrflow import results
from ocrflow.document import Document
from ocrflow.review.boxes import LABEL_COLOURS
from ocrflow.service.layout import JobDir
from ocrflow.sinks.results import done_marker
from ocrflow.storage.local import LocalStore
from ocrflow.types import BlockLabel
from tests.browser import open_browser, save_screenshot
from tests.integration.serve_helpers import EXAMPLES, TOKEN_A, Served, auth, serving, wait_status
from tests.integration.test_review_boxes import (
    HOSTILE,
    assert_drawn_at,
    css,
    low_confidence_pages,
    rect,
    rgb,
)
from tests.review_helpers import add_document

pytestmark = pytest.mark.slow
STYLE = Path(__file__).resolve().parents[2] / "src" / "ocrflow" / "service" / "static" / "style.css"
UPLOADS = (
    ("invoice-photo.jpg", "image/jpeg"),
    ("rotated-page.png", "image/png"),
    ("born-digital.pdf", "application/pdf"),
)


class Job:
    """A finished job of the service: its id, OUT and documents by file name."""

    def __init__(self, served: Served, root: Path, job_id: str) -> None:
        self.served, self.id, self.out = served, job_id, JobDir(root, job_id).out

    def documents(self) -> dict[str, Document]:
        return {Path(d.source).name: d for d in results(self.out)}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    root = tmp_path_factory.mktemp("boxes") / "root"
    with (
        serving(root, "--workers", "1", "-q") as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        files = [("files", (n, (EXAMPLES / n).read_bytes(), t)) for n, t in UPLOADS]
        answer = client.post("/v1/jobs", files=files, headers=auth(TOKEN_A))
        assert answer.status_code == 201, answer.text
        job_id = str(answer.json()["id"])
        assert wait_status(client, job_id, {"done", "failed"}, timeout=300)["status"] == "done"
        finished = Job(served, root, job_id)
        # The engine reads these clean pages with confidence: give one document a poor line.
        pdf = finished.documents()["born-digital.pdf"]
        marker = done_marker(LocalStore(finished.out), pdf.id)
        assert marker is not None
        add_document(finished.out, pdf.id, marker.source, low_confidence_pages())
        yield finished


def _open_document(driver: WebDriver, job: Job, doc: Document) -> list[WebElement]:
    """Open the web page, use the token, open the job and the document; wait until every
    page image has loaded; return the pages."""
    driver.get(job.served.url + "/")
    driver.find_element(By.ID, "token").send_keys(TOKEN_A)
    driver.find_element(By.ID, "save-token").click()
    row = f'tr[data-job-id="{job.id}"] button.open-job'
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, row))
    driver.find_element(By.CSS_SELECTOR, row).click()
    link = f'button.doc[data-doc-id="{doc.id}"]'
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, link))
    driver.find_element(By.CSS_SELECTOR, link).click()

    def loaded(d: WebDriver) -> bool:
        images = d.find_elements(By.CSS_SELECTOR, "#document .page img")
        widths = [d.execute_script("return arguments[0].naturalWidth", i) for i in images]
        return len(images) == len(doc.pages) and all(w > 100 for w in widths)

    WebDriverWait(driver, 120).until(loaded)
    return driver.find_elements(By.CSS_SELECTOR, "#document .page")


def _check_boxes(driver: WebDriver, page: WebElement, doc: Document, index: int) -> None:
    model = doc.pages[index]
    image = rect(driver, page.find_element(By.TAG_NAME, "img"))
    boxes = page.find_elements(By.CSS_SELECTOR, ".boxes .box")
    assert model.blocks and all(block.bbox for block in model.blocks)
    assert len(boxes) == len(model.blocks)
    for element, block in zip(boxes, model.blocks, strict=True):
        assert block.bbox is not None and element.is_displayed()
        assert element.get_attribute("data-label") == block.label
        assert css(driver, element, "border-top-color") == rgb(LABEL_COLOURS[block.label])
        # The preview is the page as rendered, not turned: boxes are on it as they are.
        assert_drawn_at(image, rect(driver, element), block.bbox)


def _csp_violations(driver: WebDriver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if "Content Security" in e["message"]]


def test_the_style_sheet_has_the_review_palette() -> None:
    rules = dict(
        re.findall(r'\[data-label="(\w+)"\] \{ --c: (#[0-9a-f]{6}); \}', STYLE.read_text())
    )
    assert rules == {str(label): LABEL_COLOURS[label] for label in BlockLabel}


@pytest.mark.parametrize("name", ["invoice-photo.jpg", "rotated-page.png"])
def test_boxes_lie_on_the_preview_in_their_labels_colour(job: Job, name: str) -> None:
    doc = job.documents()[name]
    assert name != "rotated-page.png" or doc.pages[0].rotation == 90
    with open_browser() as driver:
        pages = _open_document(driver, job, doc)
        for index, page in enumerate(pages):
            _check_boxes(driver, page, doc, index)
            badge = page.find_element(By.CSS_SELECTOR, ".badge.confidence").text
            assert badge == f"confidence {doc.pages[index].confidence:.2f}"
        legend = driver.find_elements(By.CSS_SELECTOR, "#legend .swatch[data-label]")
        assert {s.get_attribute("data-label") for s in legend} == {
            b.label for p in doc.pages for b in p.blocks
        }
        assert not driver.find_element(By.ID, "show-low").is_displayed()  # no low line here
        save_screenshot(driver, f"serve_boxes_{name}", full_page=True)
        toggle = driver.find_element(By.ID, "show-boxes")
        toggle.click()
        boxes = driver.find_elements(By.CSS_SELECTOR, "#document .box")
        assert boxes and not any(box.is_displayed() for box in boxes)
        toggle.click()
        assert all(box.is_displayed() for box in boxes)
        assert _csp_violations(driver) == []


def test_a_low_confidence_line_is_marked(job: Job) -> None:
    doc = job.documents()["born-digital.pdf"]
    with open_browser() as driver:
        first, second = _open_document(driver, job, doc)
        assert driver.execute_script("return window.pwned") is None
        _check_boxes(driver, first, doc, 0)
        _check_boxes(driver, second, doc, 1)
        [marked] = first.find_elements(By.CSS_SELECTOR, ".low-line")
        assert not second.find_elements(By.CSS_SELECTOR, ".low-line")
        assert css(driver, marked, "outline-style") == "dashed"
        assert css(driver, marked, "outline-color") == "rgb(224, 0, 0)"
        assert "repeating-linear-gradient" in css(driver, marked, "background-image")
        assert HOSTILE in (marked.get_attribute("title") or "")
        image = rect(driver, first.find_element(By.TAG_NAME, "img"))
        assert_drawn_at(image, rect(driver, marked), (0.12, 0.30, 0.70, 0.34))
        badge = first.find_element(By.CSS_SELECTOR, ".badge.confidence")
        assert badge.text == "confidence 0.42 (1 line < 0.8)"
        assert "low" in (badge.get_attribute("class") or "")
        assert second.find_element(By.CSS_SELECTOR, ".badge.confidence").text == "confidence none"
        assert "line confidence < 0.8" in driver.find_element(By.ID, "legend").text
        save_screenshot(driver, "serve_boxes_low_confidence", full_page=True)

        driver.find_element(By.ID, "show-low").click()
        assert not marked.is_displayed()
        assert all(b.is_displayed() for b in first.find_elements(By.CSS_SELECTOR, ".box"))
        driver.find_element(By.ID, "show-low").click()
        assert marked.is_displayed()
        assert _csp_violations(driver) == []


def test_the_document_json_carries_boxes_and_confidence(job: Job) -> None:
    doc = job.documents()["born-digital.pdf"]
    url = f"{job.served.url}/v1/jobs/{job.id}/documents/{doc.id}"
    body = httpx.get(url, headers=auth(TOKEN_A), timeout=30).json()
    first, second = body["page_list"]
    assert body["low_confidence"] == 0.8
    assert first["confidence"] == 0.42 and second["confidence"] is None
    assert [b["label"] for b in first["boxes"]] == ["title", "text", "figure"]
    assert first["boxes"][1]["bbox"] == [0.10, 0.28, 0.90, 0.40]
    assert first["low_lines"] == [
        {"bbox": [0.12, 0.30, 0.70, 0.34], "confidence": 0.3, "text": HOSTILE}
    ]
