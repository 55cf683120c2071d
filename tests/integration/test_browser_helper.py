"""The shared headless-Chromium helper (tests/browser.py) drives a real browser offline."""

from __future__ import annotations

from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser import file_url, save_screenshot


def test_browser_opens_file_page_runs_script_and_saves_screenshot(
    browser: WebDriver, tmp_path: Path
) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<!doctype html><title>helper check</title><p id='p'>static</p>"
        "<script>document.getElementById('p').textContent = 'scripted';</script>",
        encoding="utf-8",
    )
    browser.get(file_url(page))
    assert browser.title == "helper check"
    assert browser.find_element(By.ID, "p").text == "scripted"
    shot = save_screenshot(browser, "browser_helper")
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
