"""``ocrflow worker`` and ``ocrflow retry`` use the split size and lease TTL the run recorded,
and take an API key of their own (never recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import make_examples

from ocrflow.storage.open import open_store
from ocrflow.workspace.workitems import Manifest

from .cli_helpers import ocrflow, results

SENTENCE = "Worker options are recorded with the run so that every worker agrees on them."


DOCUMENTS = 12


def _documents(folder: Path, count: int, pages: int) -> None:
    folder.mkdir()
    for n in range(count):
        body = [[f"Document {n} page {p}. {SENTENCE}"] for p in range(1, pages + 1)]
        (folder / f"doc{n:02d}.pdf").write_bytes(make_examples.text_pdf(body))


def test_worker_splits_with_the_recorded_size(tmp_path: Path) -> None:
    # The shard of a document hangs on its path (tmp_path): with 6 documents the joining
    # worker's shard is empty in 1 run of 64 (CI hit it); with 12, in 1 of 4,096.
    _documents(tmp_path / "docs", count=DOCUMENTS, pages=5)
    out = tmp_path / "out"
    first = ocrflow(
        "run", str(tmp_path / "docs"), "-o", str(out), "--text-layer", "only", "-q",
        "--split-pages", "2", "--lease-ttl", "45", "--shard-index", "0", "--num-shards", "2",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    recorded = json.loads((out / ".ocrflow" / "config.json").read_text())["run"]["scale"]
    assert recorded == {"split_pages": 2, "lease_ttl_s": 45.0}

    joined = ocrflow(
        "worker", str(out), "--shard-index", "1", "--num-shards", "2", "--api-key", "sk-w0rker",
        "--json",
    )  # fmt: skip
    assert joined.returncode == 0, joined.stderr
    assert "sk-w0rker" not in joined.stdout + joined.stderr
    report = json.loads(joined.stdout)
    assert report["pages"].get("ok", 0) >= 5, "the joining worker converted documents itself"

    manifest = Manifest(open_store(str(out)))
    parents = [item for item in manifest.items() if not item.is_range]
    assert len(parents) == DOCUMENTS
    # Every 5-page document, whichever worker took it, became 3 ranges of at most 2 pages.
    for parent in parents:
        assert len(manifest.ranges(parent.item_id)) == 3, parent.rel
    records = results(out)
    assert len(records) == DOCUMENTS
    assert all(len(r["attributes"]["pdf_page_numbers"]) == 5 for r in records)
    assert "sk-w0rker" not in (out / ".ocrflow" / "config.json").read_text()
