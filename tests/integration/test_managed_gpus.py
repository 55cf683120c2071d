"""``ocrflow run --engine vllm --gpus 0,1``: one server per GPU, started, fed and stopped by
ocrflow, each with its own ``CUDA_VISIBLE_DEVICES``, the pages shared between them.

The servers are the test server playing ``vllm serve`` (``tests/fakevllm/vllm_serve.py``):
each prints its request counters into its log when ocrflow stops it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import psutil
import pytest

from .cli_helpers import ocrflow, results, status_json

REPO = Path(__file__).resolve().parents[2]
PAGES = 40


def _received(log: str) -> int:
    """Requests the server took, from the counters it printed when ocrflow stopped it."""
    line = next(line for line in log.splitlines() if line.startswith("STATS "))
    return int(json.loads(line.removeprefix("STATS "))["received"])


@pytest.mark.timeout(300)
def test_one_server_per_gpu_shares_the_pages(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    fake = "--max-num-seqs 8 --pages-per-s 20 --tokens-per-page 20 --reply-format olmocr"
    done = ocrflow(
        "run", str(corpus / "pdfs" / "unstructured__DA-619p.pdf"), "--pages", f"1-{PAGES}",
        "-o", str(out), "--text-layer", "off", "--engine", "vllm", "--model", "tiny-model",
        "--gpus", "0,1", "--recipe", "olmocr",
        "--vllm-command", f"{sys.executable} -m tests.fakevllm.vllm_serve serve",
        "--vllm-arg", f"{fake} --stats-on-exit", "--json",
        env={"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["pages"] == {"ok": PAGES} and summary["routes"] == {"engine": PAGES}
    pages = [s[2] for s in results(out)[0]["attributes"]["pdf_page_numbers"]]
    assert pages == list(range(1, PAGES + 1))

    logs = [(out / ".ocrflow" / "logs" / f"vllm-{i}.log").read_text() for i in (0, 1)]
    assert "CUDA_VISIBLE_DEVICES=0" in logs[0] and "CUDA_VISIBLE_DEVICES=1" in logs[1]
    # The olmOCR recipe's GPU preset went to both: vLLM would keep an fp8 KV cache.
    starts = [[ln for ln in log.splitlines() if ln.startswith("=== ocrflow:")] for log in logs]
    assert [len(lines) for lines in starts] == [1, 1]  # started once each, never restarted
    assert all("--kv-cache-dtype fp8" in lines[0] for lines in starts)
    served = [_received(log) for log in logs]
    assert sum(served) == PAGES
    assert min(served) >= PAGES // 4, served  # both replicas worked, neither starved
    assert status_json(out)["pages"] == {"ok": PAGES}
    # Each replica's port, from the command line ocrflow logged: none is served any more.
    ports = {re.search(r"--port=(\d+)", lines[0]).group(1) for lines in starts}  # type: ignore[union-attr]
    assert len(ports) == 2
    leftovers = [
        p for p in psutil.process_iter(["cmdline"])
        if "tests.fakevllm" in " ".join(p.info["cmdline"] or [])
        and any(f"--port={port}" in " ".join(p.info["cmdline"] or []) for port in ports)
    ]  # fmt: skip
    assert not leftovers
