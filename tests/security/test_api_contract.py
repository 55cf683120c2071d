"""schemathesis (a third-party OpenAPI fuzzer) against a real ``ocrflow serve``, every
check on: no 5xx, every status and body as the OpenAPI declares (one error shape,
``{"detail": str}``), what the schema refuses is refused, what it allows is taken (but see
``schemathesis.toml`` for the one exception and why), ``Allow`` names a path's methods,
and a request without a token is refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.serve_helpers import TOKEN_A, serving

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).with_name("schemathesis.toml")
EXAMPLES = 40
#: Operations without parameters or body: schemathesis has one request to make, not 40.
FIXED_OPERATIONS = {("GET", "/health")}


def test_schemathesis_finds_no_failure(tmp_path: Path) -> None:
    st = Path(sys.executable).with_name("st")
    # Quotas off: with 60 submissions a minute, most POSTs would be 429s (declared, and
    # passing every check) that never reach the body's validation.
    limits = ("--max-submissions-per-minute", "0", "--max-queued-jobs", "0")
    with serving(tmp_path / "root", "--workers", "0", "-q", *limits) as served:
        spec = httpx.get(f"{served.url}/openapi.json", timeout=10).json()
        done = subprocess.run(
            [str(st), "--config-file", str(CONFIG), "run", f"{served.url}/openapi.json",
             # Every check, use_after_free included: a DELETEd job answers 404 to every
             # read (cancelling, which keeps the results, is POST .../cancel).
             "-H", f"Authorization: Bearer {TOKEN_A}", "--checks", "all",
             "--max-examples", str(EXAMPLES), "--seed", "1", "--no-color",
             "--report", "har", "--report-dir", str(tmp_path / "report")],
            capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False,
        )  # fmt: skip
        log = served.log()
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-6000:]
    summary = report.split("SUMMARY")[-1]
    assert " passed" in summary and "failed" not in summary and "failure" not in summary, summary
    assert "Traceback" not in log, log[-4000:]
    counts = _requests_per_operation(spec, next((tmp_path / "report").glob("har-*")))
    thin = {op: n for op, n in counts.items() if n < EXAMPLES and op not in FIXED_OPERATIONS}
    assert not thin, f"fewer than {EXAMPLES} requests: {thin}"


def _requests_per_operation(spec: dict[str, Any], har: Path) -> Counter[tuple[str, str]]:
    """Requests the HAR report holds for each operation of ``spec`` (path templates matched
    as regular expressions); every declared operation is counted, 0 when never asked."""
    templates = [
        (method.upper(), path, re.compile(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path))))
        for path, item in spec["paths"].items()
        for method in item
    ]
    counts = Counter({(method, path): 0 for method, path, _ in templates})
    for entry in json.loads(har.read_text())["log"]["entries"]:
        method = entry["request"]["method"]
        path = re.sub(r"^[a-z]+://[^/]+", "", entry["request"]["url"]).split("?")[0]
        for declared, template, pattern in templates:
            if declared == method and pattern.fullmatch(path):
                counts[(method, template)] += 1
                break
    return counts
