"""The session fails when a whole group of tests skips, unless OCRFLOW_ALLOW_SKIP says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
from tests.needs import need


def test_needs_vllm():
    need("vllm", False, "not here")


def test_needs_nothing():
    assert True
"""


def _run_probe(tmp_path: Path, allow: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import SkipGuard\n\n\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(SkipGuard(), 'guard')\n"
    )
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "OCRFLOW_ALLOW_SKIP"}
    env["PYTHONPATH"] = str(REPO)
    if allow is not None:
        env["OCRFLOW_ALLOW_SKIP"] = allow
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_skipped_group_fails_the_session(tmp_path: Path) -> None:
    done = _run_probe(tmp_path, allow=None)
    assert done.returncode == 1, done.stdout
    assert "1 passed, 1 skipped" in done.stdout
    assert "whole test groups skipped: vllm (1 tests)" in done.stdout
    assert "OCRFLOW_ALLOW_SKIP=vllm" in done.stdout


@pytest.mark.parametrize("allow", ["vllm", "tesseract,vllm", "all"])
def test_an_allowed_group_may_skip(tmp_path: Path, allow: str) -> None:
    done = _run_probe(tmp_path, allow=allow)
    assert done.returncode == 0, done.stdout
    assert "whole test groups skipped" not in done.stdout


def test_another_allowed_group_does_not_cover_this_one(tmp_path: Path) -> None:
    assert _run_probe(tmp_path, allow="tesseract").returncode == 1
