"""Headless Chromium for tests of the web pages ocrflow ships (shared by every browser test).

Debian's ``chromium`` is driven through Selenium and Debian's ``/usr/bin/chromedriver``. The
driver path is passed explicitly so that selenium-manager never looks for (or downloads) a
driver or a browser, and the browser starts with a fresh profile and no background network.

Use the ``browser`` fixture (function scoped) or ``module_browser`` (one browser for a module,
cheaper when many tests only load pages); both are registered for every test by
``tests/conftest.py``. ``open_browser()`` is the context manager behind them, for scripts.
``save_screenshot(driver, name)`` keeps a PNG (the window, or the ``full_page``) under
``tests/artefacts/`` (git-ignored, or ``$OCRFLOW_TEST_ARTEFACTS``) and prints where it went.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.needs import REPO, need_browser

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTEFACTS_VARIABLE = "OCRFLOW_TEST_ARTEFACTS"
WINDOW = (1280, 900)
# Why each flag: no display (headless), containers forbid the sandbox, no GPU here, /dev/shm is
# small in containers, and nothing may talk to the network or update itself during a test.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--allow-file-access-from-files",
)
PAGE_LOAD_TIMEOUT_S = 30


def chromium_binary() -> str:
    """The Chromium executable: Debian's real binary, else whatever ``chromium`` is on PATH."""
    debian = Path("/usr/lib/chromium/chromium")
    if debian.is_file():
        return str(debian)
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "need_browser() should have skipped"
    return found


def chromedriver_path() -> str:
    """Debian's chromedriver, given to Selenium explicitly (selenium-manager stays unused)."""
    if CHROMEDRIVER.is_file():
        return str(CHROMEDRIVER)
    found = shutil.which("chromedriver")
    assert found, "need_browser() should have skipped"
    return found


@contextmanager
def open_browser(window: tuple[int, int] = WINDOW) -> Iterator[WebDriver]:
    """A headless Chromium WebDriver with a throwaway profile; quit and cleaned up on exit.

    Skips the calling test (``[needs browser]``) when chromium or chromedriver is missing.
    """
    need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = Path(tempfile.mkdtemp(prefix="ocrflow-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_binary()
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={window[0]},{window[1]}")
    service = Service(executable_path=chromedriver_path())
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    """A fresh headless Chromium WebDriver for one test."""
    with open_browser() as driver:
        yield driver


@pytest.fixture(scope="module")
def module_browser() -> Iterator[WebDriver]:
    """One headless Chromium WebDriver shared by the tests of a module."""
    with open_browser() as driver:
        yield driver


def artefacts_dir() -> Path:
    """Where tests keep screenshots and other artefacts (created; git-ignored by default)."""
    folder = Path(os.environ.get(ARTEFACTS_VARIABLE) or REPO / "tests" / "artefacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_screenshot(driver: WebDriver, name: str, *, full_page: bool = False) -> Path:
    """Save a PNG of the current page as ``<artefacts>/<name>.png``; print the path.

    ``full_page`` grows the window to the page's height first (capped at 8,000 px), so the
    picture shows the whole page, then restores the window.
    """
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "screenshot"
    target = artefacts_dir() / f"{safe}.png"
    size = driver.get_window_size()
    if full_page:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        # The window is taller than its viewport by the (invisible) browser frame: add room.
        wanted = min(max(int(height) + 200, size["height"]), 8000)
        driver.set_window_size(size["width"], wanted)
    try:
        assert driver.save_screenshot(str(target)), f"screenshot to {target} failed"
    finally:
        if full_page:
            driver.set_window_size(size["width"], size["height"])
    print(f"screenshot saved: {target}")
    return target


def file_url(path: Path) -> str:
    """The ``file://`` URL of a local file, as the browser wants it."""
    return path.resolve().as_uri()
