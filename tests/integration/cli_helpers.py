"""Run the real ``ocrflow`` command in a subprocess and read what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def ocrflow(
    *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``ocrflow ARGS`` as a user would run it (not a tty: plain log lines)."""
    return subprocess.run(
        [sys.executable, "-m", "ocrflow.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def results(out: Path) -> list[dict[str, Any]]:
    """Every Dolma record under OUT/results."""
    records = []
    for path in sorted((out / "results").glob("*.jsonl")):
        records.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return records


def status_json(out: Path) -> dict[str, Any]:
    done = ocrflow("status", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
