"""A local Ray cluster (ray.init(num_cpus=2)) gives the same outputs as the local executor."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.needs import need

from .cli_helpers import ocrflow, results

pytestmark = pytest.mark.slow
need(
    "ray",
    importlib.util.find_spec("ray") is not None,
    "Ray is not installed: pip install 'ocrflow[ray]'",
)


def _pages(out: Path) -> dict[str, list[tuple[int, str]]]:
    found = {}
    for record in results(out):
        text = record["text"]
        found[record["metadata"]["source_path"]] = [
            (page, text[start:end]) for start, end, page in record["attributes"]["pdf_page_numbers"]
        ]
    return found


def test_ray_run_equals_local_run(samples: Path, corpus: Path, tmp_path: Path) -> None:
    inputs = [str(samples), str(corpus / "pdfs" / "docling__redp5110_sampled.pdf")]
    local = ocrflow("run", *inputs, "-o", str(tmp_path / "local"), "--split-pages", "8", "-q")
    assert local.returncode == 0, local.stderr[-2000:]
    on_ray = ocrflow(
        "run",
        *inputs,
        "-o",
        str(tmp_path / "ray"),
        "--executor",
        "ray",
        "--ray-workers",
        "2",
        "--workers",
        "1",
        "--split-pages",
        "8",
        "--json",
        "-q",
        env={"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"},
    )
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert json.loads(on_ray.stdout)["documents"] == {"ok": 7}
    local_pages, ray_pages = _pages(tmp_path / "local"), _pages(tmp_path / "ray")
    assert set(local_pages) == set(ray_pages)
    assert local_pages == ray_pages
