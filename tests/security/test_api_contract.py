"""schemathesis (a third-party OpenAPI fuzzer) against a real ``ocrflow serve``: no request
the schema allows, nor any it generates to break it, gets a 5xx answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.serve_helpers import TOKEN_A, serving

pytestmark = pytest.mark.slow


def test_schemathesis_finds_no_server_error(tmp_path: Path) -> None:
    st = Path(sys.executable).with_name("st")
    with serving(tmp_path / "root", "--workers", "0", "-q") as served:
        done = subprocess.run(
            [str(st), "run", f"{served.url}/openapi.json",
             "-H", f"Authorization: Bearer {TOKEN_A}", "--checks", "not_a_server_error",
             "--max-examples", "40", "--seed", "1", "--no-color"],
            capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False,
        )  # fmt: skip
        log = served.log()
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-4000:]
    assert " passed" in report and "failed" not in report.split("SUMMARY")[-1], report[-2000:]
    assert "Traceback" not in log, log[-4000:]
