"""``ocrflow review`` draws each block's box over its page image, coloured by label, with a
toggle and a legend, and marks lines read with a low confidence: a real run (the embedded
engine on a photographed invoice and a page it turns 90° to read) plus a document written
by hand whose line has confidence 0.3, the real command, and the site in headless Chromium.
Every box's drawn rectangle is compared with its block's box, in pixels."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from ocrflow import results
from ocrflow.document import Document, Page
from ocrflow.review.boxes import LABEL_COLOURS
from ocrflow.types import BBox, Block, BlockLabel, Line
from tests.browser import file_url, save_screenshot
from tests.integration.cli_helpers import ocrflow
from tests.review_helpers import EXAMPLES, add_document, page

pytestmark = pytest.mark.slow  # one real OCR run (two pages) for the module

LOW_ID = "00c0ffee00c0ffee"
HOSTILE = '"><img src=x onerror="window.pwned=1">'
TOLERANCE_PX = 2.0


def low_confidence_pages() -> list[Any]:
    """Page 1: a title, a paragraph with one line at 0.3 (marked) and one at 0.95 (not),
    a figure; confidence 0.42. Page 2: a formula with no confidence anywhere."""
    low = Line(HOSTILE, (0.12, 0.30, 0.70, 0.34), 0.3)
    blocks = (
        Block(BlockLabel.TITLE, "# Title", (0.10, 0.05, 0.90, 0.12), 0.97),
        Block(BlockLabel.TEXT, "para", (0.10, 0.28, 0.90, 0.40), 0.6,
              (low, Line("fine", (0.12, 0.35, 0.80, 0.39), 0.95)), HOSTILE),
        Block(BlockLabel.FIGURE, "fig", (0.25, 0.50, 0.75, 0.85)),
    )  # fmt: skip
    formula = (Block(BlockLabel.FORMULA, "$$x$$", (0.3, 0.3, 0.6, 0.4)),)
    return [
        page(1, "# Title\n\npara\n\nfig", blocks=blocks, attributes={"mean_confidence": 0.42}),
        page(2, "$$x$$", blocks=formula),
    ]


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    inputs = tmp_path_factory.mktemp("inputs")
    for name in ("invoice-photo.jpg", "rotated-page.png"):
        shutil.copy(EXAMPLES / name, inputs / name)
    out = tmp_path_factory.mktemp("run") / "out"
    done = ocrflow("run", str(inputs), "-o", str(out), "-q", "--workers", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    add_document(out, LOW_ID, EXAMPLES / "born-digital.pdf", low_confidence_pages())
    review = ocrflow("review", str(out))
    assert review.returncode == 0, review.stderr
    assert "review of 3 of 3 documents" in review.stdout
    return out


def _document(out: Path, name: str) -> Document:
    return next(d for d in results(out) if Path(d.source).name == name)


def _open(driver: WebDriver, out: Path, doc: Document) -> None:
    driver.get(file_url(out / "review" / "docs" / f"{doc.id}.html"))


def rect(driver: WebDriver, element: WebElement) -> dict[str, float]:
    return dict(
        driver.execute_script("return arguments[0].getBoundingClientRect().toJSON()", element)
    )


def css(driver: WebDriver, element: WebElement, prop: str) -> str:
    """The computed value of CSS property ``prop`` (colours as ``rgb(r, g, b)``)."""
    script = "return getComputedStyle(arguments[0]).getPropertyValue(arguments[1])"
    return str(driver.execute_script(script, element, prop))


def rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def _turned(box: BBox, degrees: int) -> BBox:
    """``box`` on the page after a clockwise turn (the review shows pages so turned)."""
    x0, y0, x1, y1 = box
    if degrees == 90:  # (x, y) goes to (1 - y, x)
        return (1 - y1, x0, 1 - y0, x1)
    assert degrees == 0, degrees
    return box


def assert_drawn_at(image: dict[str, float], drawn: dict[str, float], box: BBox) -> None:
    x0, y0, x1, y1 = box
    expected = {
        "left": image["left"] + x0 * image["width"],
        "top": image["top"] + y0 * image["height"],
        "right": image["left"] + x1 * image["width"],
        "bottom": image["top"] + y1 * image["height"],
    }
    for side, value in expected.items():
        assert drawn[side] == pytest.approx(value, abs=TOLERANCE_PX), (side, drawn, box)
    assert image["left"] - 0.5 <= drawn["left"] and drawn["right"] <= image["right"] + 0.5
    assert image["top"] - 0.5 <= drawn["top"] and drawn["bottom"] <= image["bottom"] + 0.5


def _check_page_boxes(driver: WebDriver, section: WebElement, model: Page) -> list[WebElement]:
    image_element = section.find_element(By.CSS_SELECTOR, "img.page-image")
    assert driver.execute_script("return arguments[0].naturalWidth", image_element) > 100
    image = rect(driver, image_element)
    boxes = section.find_elements(By.CSS_SELECTOR, ".boxes .box")
    assert model.blocks and all(block.bbox for block in model.blocks)
    assert len(boxes) == len(model.blocks)
    for element, block in zip(boxes, model.blocks, strict=True):
        assert element.get_attribute("data-label") == block.label
        colour = css(driver, element, "border-top-color")
        assert colour == rgb(LABEL_COLOURS[block.label]), (block.label, colour)
        assert element.is_displayed()
        assert block.bbox is not None
        assert_drawn_at(image, rect(driver, element), _turned(block.bbox, model.rotation))
    return boxes


def _sections(driver: WebDriver) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, "section.page")


@pytest.mark.parametrize("name", ["invoice-photo.jpg", "rotated-page.png"])
def test_each_block_is_drawn_on_its_text_in_its_labels_colour(
    module_browser: WebDriver, run_out: Path, name: str
) -> None:
    doc = _document(run_out, name)
    _open(module_browser, run_out, doc)
    assert name != "rotated-page.png" or doc.pages[0].rotation == 90
    labels = {block.label for p in doc.pages for block in p.blocks}
    legend = module_browser.find_elements(By.CSS_SELECTOR, "#legend .swatch[data-label]")
    assert {s.get_attribute("data-label") for s in legend} == labels
    for swatch in legend:
        colour = css(module_browser, swatch, "border-top-color")
        assert colour == rgb(LABEL_COLOURS[swatch.get_attribute("data-label") or ""])
    for section, model in zip(_sections(module_browser), doc.pages, strict=True):
        _check_page_boxes(module_browser, section, model)
        assert model.confidence is not None
        shown = section.find_element(By.CSS_SELECTOR, ".confidence").text
        assert f"confidence {model.confidence:.2f}" in shown
    assert not module_browser.find_elements(By.CSS_SELECTOR, ".low-line")
    save_screenshot(module_browser, f"review_boxes_{name}", full_page=True)

    toggle = module_browser.find_element(By.ID, "show-boxes")
    toggle.click()
    boxes = module_browser.find_elements(By.CSS_SELECTOR, ".box")
    assert boxes and not any(box.is_displayed() for box in boxes)
    toggle.click()
    assert all(box.is_displayed() for box in boxes)


def test_a_line_read_with_low_confidence_is_marked(
    module_browser: WebDriver, run_out: Path
) -> None:
    doc = _document(run_out, "born-digital.pdf")
    assert doc.id == LOW_ID
    _open(module_browser, run_out, doc)
    assert module_browser.execute_script("return window.pwned") is None
    first, second = _sections(module_browser)
    _check_page_boxes(module_browser, first, doc.pages[0])
    _check_page_boxes(module_browser, second, doc.pages[1])
    [marked] = first.find_elements(By.CSS_SELECTOR, ".low-line")
    assert not second.find_elements(By.CSS_SELECTOR, ".low-line")
    assert css(module_browser, marked, "outline-style") == "dashed"
    assert css(module_browser, marked, "outline-color") == "rgb(224, 0, 0)"
    assert "repeating-linear-gradient" in css(module_browser, marked, "background-image")
    assert HOSTILE in (marked.get_attribute("title") or "")  # as text, never as markup
    image = rect(module_browser, first.find_element(By.CSS_SELECTOR, "img.page-image"))
    assert_drawn_at(image, rect(module_browser, marked), (0.12, 0.30, 0.70, 0.34))

    confidence = first.find_element(By.CSS_SELECTOR, ".confidence")
    assert confidence.text.startswith("confidence 0.42") and "1 line" in confidence.text
    assert "low" in (confidence.get_attribute("class") or "")
    assert second.find_element(By.CSS_SELECTOR, ".confidence").text == "confidence none"
    legend = module_browser.find_element(By.ID, "legend").text
    assert "line confidence < 0.8" in legend
    save_screenshot(module_browser, "review_boxes_low_confidence", full_page=True)

    toggle = module_browser.find_element(By.ID, "show-low")
    toggle.click()
    assert not marked.is_displayed()
    assert all(box.is_displayed() for box in first.find_elements(By.CSS_SELECTOR, ".box"))
    toggle.click()
    assert marked.is_displayed()


def test_boxes_follow_the_image_at_any_width(module_browser: WebDriver, run_out: Path) -> None:
    doc = _document(run_out, "invoice-photo.jpg")
    _open(module_browser, run_out, doc)
    size = module_browser.get_window_size()
    try:
        for width in (700, 1900):
            module_browser.set_window_size(width, size["height"])
            [section] = _sections(module_browser)
            _check_page_boxes(module_browser, section, doc.pages[0])
    finally:
        module_browser.set_window_size(size["width"], size["height"])
