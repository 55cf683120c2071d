"""The web page in real headless Chromium against a real ``ocrflow serve`` (uvicorn) process.

The user types the token, uploads a two-page PDF through the form, watches the job's
progress bar reach done, opens the document and sees both page images (rendered by the
server, loaded with the token) beside their Markdown. A screenshot is kept as an artefact.
The service's ``/metrics`` then shows the job's pages, its document and the job as done.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser import open_browser, save_screenshot
from tests.integration.serve_helpers import listens
from tests.needs import REPO

pytestmark = pytest.mark.slow

TOKEN = "web-page-token-5d1e"
PAGES = [
    ["Harbour survey 2026", "The eastern pier needs new fenders."],
    ["Second page: costs", "Fenders cost less than repairs to hulls."],
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[str]:
    """``ocrflow serve`` with one token and one in-process worker; its base URL."""
    port = _free_port()
    log = (tmp_path / "serve.log").open("w")
    args = [sys.executable, "-m", "ocrflow.cli", "serve", "--host", "127.0.0.1",
            "--port", str(port), "--root", str(tmp_path / "root"), "--workers", "1"]  # fmt: skip
    env = {**os.environ, "OCRFLOW_API_TOKENS": TOKEN}
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            # Another test's server may hold the guessed port for a while: /health counts
            # once this process listens on it.
            with contextlib.suppress(httpx.TransportError):
                if listens(proc, port) and httpx.get(f"{url}/health", timeout=2).is_success:
                    break
            assert time.monotonic() < deadline, "ocrflow serve did not start"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _wait(condition, timeout: float = 60.0, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_upload_watch_and_read_a_document(serve: str, tmp_path: Path) -> None:
    import make_examples
    from selenium.webdriver.common.by import By

    pdf = tmp_path / "harbour.pdf"
    pdf.write_bytes(make_examples.text_pdf(PAGES))
    with open_browser() as driver:
        driver.get(serve + "/")
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.ID, "save-token").click()
        _wait(lambda: driver.find_element(By.ID, "token-state").text == "token set", 10)
        driver.find_element(By.ID, "files").send_keys(str(pdf))
        driver.find_element(By.ID, "upload").click()
        _wait(lambda: "queued" in driver.find_element(By.ID, "upload-state").text, 30, "upload")
        job_id = driver.find_element(By.ID, "upload-state").text.split()[1]
        row = f'#jobs tr[data-job-id="{job_id}"]'
        _wait(lambda: driver.find_elements(By.CSS_SELECTOR, row), 10, "the job's row")

        def done() -> bool:
            rows = driver.find_elements(By.CSS_SELECTOR, row)
            return bool(rows) and rows[0].get_attribute("data-status") == "done"

        _wait(done, 120, "the job to finish")
        bar = driver.find_element(By.CSS_SELECTOR, f"{row} [role=progressbar]")
        assert bar.get_attribute("aria-valuenow") == "100"
        assert driver.find_element(By.CSS_SELECTOR, f"{row} .job-pages").text == "2 / 2"

        driver.find_element(By.CSS_SELECTOR, f"{row} .open-job").click()
        _wait(lambda: driver.find_elements(By.CSS_SELECTOR, "#documents .doc"), 20, "documents")
        driver.find_element(By.CSS_SELECTOR, "#documents .doc").click()
        _wait(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#document .page")) == 2, 20)

        def images_loaded() -> bool:
            images = driver.find_elements(By.CSS_SELECTOR, "#document .page img")
            return len(images) == 2 and all(
                driver.execute_script("return arguments[0].naturalWidth", img) > 0 for img in images
            )

        _wait(images_loaded, 60, "both page images")
        text = driver.find_element(By.ID, "document").text
        assert "eastern pier needs new fenders" in text
        assert "Fenders cost less than repairs" in text
        routes = driver.find_elements(By.CSS_SELECTOR, "#document .badge.route")
        assert [r.text for r in routes] == ["text_layer", "text_layer"]
        assert not driver.find_elements(By.CSS_SELECTOR, "#document .badge.fallback")
        created = driver.find_element(By.CSS_SELECTOR, f"{row} td:nth-child(2)").text
        assert created and "Invalid" not in created
        driver.set_window_size(1280, 2000)
        shot = save_screenshot(driver, "web_page_document")
    assert shot.stat().st_size > 10_000
    # The service's /metrics counted the job's pages (its in-process worker reported them).
    metrics = httpx.get(f"{serve}/metrics", timeout=10).text
    assert 'ocrflow_pages_total{route="text_layer",status="ok"} 2.0' in metrics
    assert 'ocrflow_documents_total{reason="",status="ok"} 1.0' in metrics
    assert 'ocrflow_jobs{status="done"} 1.0' in metrics
    assert "ocrflow_queue_pages 0.0" in metrics
