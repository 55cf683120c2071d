"""Parquet outputs: sink cost per document, and memory of streaming a dataset input.

    .venv/bin/python bench/bench_parquet.py [--docs 1000] [--rows 200 2000]

(a) The same synthetic ``DocumentResult``s (3 pages of ~1.5 kB text each) go through the JSONL
    sink (``JsonlSink``: one JSONL file a document, written atomically) and through
    ``ParquetSink`` (buffered rows, one zstd shard per 256 rows), each into its own local OUT,
    in this one run; prints µs/doc for each and their ratio.
(b) An image dataset (``scripts/make_dataset.py``: PNG pages in an HF ``Image`` column, row
    groups of 16 rows) of each size in ``--rows`` is iterated with ``iter_dataset_rows`` in a
    fresh child process; prints the child's peak RSS (``ru_maxrss``) and its Arrow pool peak.
    Streaming means both stay about the same whatever the row count.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))
import make_dataset  # noqa: E402

from ocrflow.sinks import DocumentMeta, FinishedDocument, JsonlSink, ParquetSink  # noqa: E402
from ocrflow.storage.local import LocalStore  # noqa: E402
from ocrflow.types import DocStatus, DocumentResult, PageResult, Route  # noqa: E402

LINE = "The reading room received four hundred boxes of letters, invoices and contracts. "
CHILD = r"""
import json, resource, sys
import pyarrow as pa
from ocrflow.inputs.dataset import iter_dataset_rows
pool, peak, rows, total = pa.default_memory_pool(), 0, 0, 0
for row in iter_dataset_rows(sys.argv[1], batch_size=16):
    rows += 1
    total += len(row.data)
    peak = max(peak, pool.bytes_allocated())
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rows": rows, "bytes": total, "rss_kb": rss, "arrow_peak": peak}))
"""


def documents(count: int) -> list[DocumentResult]:
    """Synthetic finished documents, three text pages each."""
    return [
        DocumentResult(
            f"{i:024x}",
            f"/in/doc-{i}.pdf",
            DocStatus.OK,
            tuple(
                PageResult(p, LINE * 18, Route.ENGINE, attributes={"rotation": 0})
                for p in (1, 2, 3)
            ),
            page_count=3,
        )
        for i in range(count)
    ]


def time_sink(sink: JsonlSink | ParquetSink, docs: list[DocumentResult]) -> float:
    """µs a document, ``close()`` (the last shard) included."""
    meta = DocumentMeta("doc.pdf", "0" * 64, None, "bench", "fp")
    start = time.perf_counter()
    for doc in docs:
        sink.write(FinishedDocument(doc, meta))
    sink.close()
    return (time.perf_counter() - start) / len(docs) * 1e6


def bench_sinks(count: int) -> None:
    docs = documents(count)
    with tempfile.TemporaryDirectory() as tmp:
        jsonl_us = time_sink(JsonlSink(LocalStore(f"{tmp}/a")), docs)
        parquet_us = time_sink(ParquetSink(LocalStore(f"{tmp}/b"), "bench"), docs)
        size = sum(p.stat().st_size for p in Path(tmp, "b", "parquet").glob("*.parquet"))
    print(f"(a) {count} documents, 3 pages, {len(docs[0].pages[0].text) * 3} chars each")
    print(f"    JSONL sink (JsonlSink):      {jsonl_us:9.1f} µs/doc")
    print(f"    Parquet sink (ParquetSink):  {parquet_us:9.1f} µs/doc ({size / 1e6:.2f} MB)")
    print(f"    Parquet / JSONL: {parquet_us / jsonl_us:.3f}")


def bench_dataset_memory(sizes: list[int]) -> None:
    maker = make_dataset
    print("(b) iterating an image dataset in a child process (batch 16, row groups of 16)")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in sizes:
            path = Path(tmp, f"pages-{rows}.parquet")
            maker.write_image_dataset(path, rows, row_group_size=16)
            child = subprocess.run(
                [sys.executable, "-c", CHILD, str(path)],
                capture_output=True,
                text=True,
                check=True,
                env={"PYTHONPATH": str(ROOT / "src")},
            )
            got = json.loads(child.stdout)
            print(
                f"    {rows:6d} rows, file {path.stat().st_size / 1e6:7.1f} MB: "
                f"peak RSS {got['rss_kb'] / 1024:6.1f} MiB, Arrow pool peak "
                f"{got['arrow_peak'] / 1e6:5.2f} MB ({got['rows']} rows read)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--rows", type=int, nargs="+", default=[200, 2000])
    args = parser.parse_args()
    bench_sinks(args.docs)
    bench_dataset_memory(args.rows)


if __name__ == "__main__":
    main()
