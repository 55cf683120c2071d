"""The HTTP layer: headers on the web page, /docs from the package, the checks of a service
without tokens, bad parameters as 4xx, and files only their owner can read."""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.serve_helpers import (
    TOKEN_A,
    Served,
    auth,
    serving,
    submit_samples,
    wait_status,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("http") / "root"
    with serving(root, "--workers", "1") as running:
        yield running


@pytest.fixture(scope="module")
def open_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A service without tokens (loopback only)."""
    root = tmp_path_factory.mktemp("open") / "root"
    with serving(root, "--workers", "0", tokens="") as running:
        yield running


@pytest.mark.parametrize("path", ["/", "/docs", "/health", "/v1/jobs", "/static/app.js"])
def test_every_answer_carries_the_security_headers(served: Served, path: str) -> None:
    response = httpx.get(served.url + path, headers=auth(TOKEN_A), timeout=10)
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_docs_load_nothing_from_elsewhere(served: Served) -> None:
    page = httpx.get(served.url + "/docs", timeout=10).text
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources, page
    assert all(s.startswith("/") or s.startswith("data:") for s in sources), sources
    assert "<script>" not in page  # no inline script: the CSP allows none
    for source in (s for s in sources if s.startswith("/")):
        asset = httpx.get(served.url + source, timeout=10)
        assert asset.status_code == 200 and len(asset.content) > 100, source
    assert httpx.get(served.url + "/docs/assets/..%2f..%2fapp.py", timeout=10).status_code == 404


@pytest.mark.parametrize(
    "query",
    ["offset=99999999999999999999", "offset=-1", "limit=0", "limit=100000", "status=nope",
     "offset=1e3", "limit=%00"],
)  # fmt: skip
def test_bad_list_parameters_are_422(served: Served, query: str) -> None:
    response = httpx.get(f"{served.url}/v1/jobs?{query}", headers=auth(TOKEN_A), timeout=10)
    assert response.status_code == 422, response.text
    assert "detail" in response.json()


def test_job_files_are_for_their_owner_only(served: Served, tmp_path: Path) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        job_id = submit_samples(client)
        wait_status(client, job_id, {"done"}, timeout=120)
    root = Path(served.log_path).parent / "root"
    job = root / "jobs" / job_id
    paths = [job, *job.rglob("*")]
    assert len(paths) > 10
    for path in paths:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_symlink():
            continue
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"


def test_results_name_inputs_relative_to_the_job(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        job_id = submit_samples(client)
        wait_status(client, job_id, {"done"}, timeout=120)
        results = client.get(f"/v1/jobs/{job_id}/results", headers=auth(TOKEN_A)).text
        job = client.get(f"/v1/jobs/{job_id}", headers=auth(TOKEN_A)).text
    root = str(Path(served.log_path).parent / "root")
    assert results.count('"id"') == 3
    assert root not in results and "/jobs/" not in results
    assert root not in job


def test_without_tokens_a_start_up_warning(open_served: Served) -> None:
    assert "authentication is off" in open_served.log()


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:80", "10.0.0.1", "127.0.0.1.nip.io", "", "[::2]"]
)
def test_without_tokens_other_host_names_are_refused(open_served: Served, host: str) -> None:
    response = httpx.get(open_served.url + "/v1/jobs", headers={"Host": host}, timeout=10)
    assert response.status_code == 403
    assert httpx.get(open_served.url + "/v1/jobs", timeout=10).status_code == 200


def test_without_tokens_cross_origin_posts_are_refused(open_served: Served) -> None:
    files = {"files": ("a.png", b"\x89PNG\r\n\x1a\n" + b"0" * 64, "image/png")}
    for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Origin": "null"}):  # fmt: skip
        response = httpx.post(open_served.url + "/v1/jobs", files=files, headers=headers,
                              timeout=10)  # fmt: skip
        assert response.status_code == 403, (headers, response.text)
    listed = httpx.get(open_served.url + "/v1/jobs", timeout=10).json()["jobs"]
    assert listed == []


def test_docs_render_offline_under_the_policy(served: Served) -> None:
    """Swagger UI draws the API in headless Chromium from the service's own files, with no
    request elsewhere and no Content-Security-Policy violation (the browser has no network)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.browser import open_browser, save_screenshot

    with open_browser() as driver:
        driver.get(served.url + "/docs")
        WebDriverWait(driver, 60).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
        )
        paths = {e.text for e in driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
        save_screenshot(driver, "service_docs")
        logs = driver.get_log("browser")
    assert "/v1/jobs" in paths and "/v1/jobs/{job_id}" in paths
    violations = [e["message"] for e in logs if "Content Security Policy" in e["message"]]
    assert violations == []
