"""SIGKILL a process writing Parquet shards, resume it, finalize: every document exactly once.

The child follows the pipeline's order: sink write → the sink's flush policy → done markers
for the documents of a written shard (``on_commit``); a resumed child skips documents with a
done marker. One kill lands in the worst window on purpose (a shard written, its markers
not), others at random moments.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from ocrflow.sinks.parquet import finalize_shards
from ocrflow.storage.local import LocalStore
from ocrflow.storage.shards import shard_keys

DOCS = 150
CHILD = r"""
import json, os, signal, sys, time
from ocrflow.sinks.parquet import ParquetSink
from ocrflow.storage.shards import ShardLimits
from ocrflow.sinks import DocumentMeta, FinishedDocument
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, PageResult, Route

out, count, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = LocalStore(out)
commits = []

def on_commit(ids):
    commits.append(ids)
    if len(commits) == kill_at:  # the shard is on disk, its done markers are not
        os.kill(os.getpid(), signal.SIGKILL)
    for doc_id in ids:
        store.write_bytes(f".ocrflow/done/{doc_id}.json", json.dumps({"doc_id": doc_id}).encode())

sink = ParquetSink(store, "w", limits=ShardLimits(max_rows=7), on_commit=on_commit)
meta = DocumentMeta("x.pdf", "0" * 64, None, "fake", "fp")
print("ready", flush=True)
for i in range(count):
    doc_id = f"doc{i:04d}"
    if store.exists(f".ocrflow/done/{doc_id}.json"):
        continue
    time.sleep(0.003)
    page = PageResult(1, f"text of {doc_id}", Route.ENGINE)
    result = DocumentResult(doc_id, f"/in/{doc_id}", DocStatus.OK, (page,), 1)
    sink.write(FinishedDocument(result, meta))
sink.close()
print("finished", flush=True)
"""


def _start(out: Path, kill_at: int = 0) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(out), str(DOCS), str(kill_at)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    return child


def _rows(out: Path) -> list[str]:
    store = LocalStore(out)
    ids: list[str] = []
    for key in shard_keys(store):
        ids.extend(
            ds.dataset(out / key, format="parquet").to_table(columns=["id"])["id"].to_pylist()
        )
    return ids


def test_sigkill_and_resume_leave_every_document_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    worst = _start(out, kill_at=3)
    assert worst.wait(timeout=60) == -signal.SIGKILL
    rng = random.Random()
    delays = []
    for _ in range(2):
        child = _start(out)
        delays.append(round(rng.uniform(0.0, 0.4), 3))
        time.sleep(delays[-1])
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    resumed = _start(out)
    assert resumed.communicate(timeout=120)[0] == "finished\n"

    store = LocalStore(out)
    expected = {f"doc{i:04d}" for i in range(DOCS)}
    done = {key.rsplit("/", 1)[-1].removesuffix(".json") for key in store.list(".ocrflow/done")}
    assert done == expected
    before = _rows(out)
    assert len(before) > DOCS, f"the worst-window kill left no duplicate (delays {delays})"

    report = finalize_shards(store, done_ids=done)
    after = _rows(out)
    assert sorted(after) == sorted(expected), f"delays {delays}, report {report}"
    assert report.rows_kept == DOCS and report.rows_dropped == len(before) - DOCS


def test_finalized_shards_open_in_datasets_pandas_and_pyarrow(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    pandas = pytest.importorskip("pandas")
    out = tmp_path / "out"
    assert _start(out, kill_at=2).wait(timeout=60) == -signal.SIGKILL
    assert _start(out).communicate(timeout=120)[0] == "finished\n"
    store = LocalStore(out)
    finalize_shards(
        store, done_ids=[k.rsplit("/", 1)[-1][:-5] for k in store.list(".ocrflow/done")]
    )
    files = [str(out / key) for key in shard_keys(store)]

    loaded = datasets.load_dataset(
        "parquet", data_files=files, split="train", cache_dir=str(tmp_path / "hf")
    )
    assert sorted(loaded["id"]) == [f"doc{i:04d}" for i in range(DOCS)]
    assert {r["text"] for r in loaded} == {f"text of doc{i:04d}" for i in range(DOCS)}
    frame = pandas.concat(pandas.read_parquet(f) for f in files)
    assert frame["id"].is_unique and len(frame) == DOCS
    assert ds.dataset(files, format="parquet").count_rows() == DOCS
