"""Peak memory of a whole ``ocrflow run`` over a dataset input, against its row count.

    .venv/bin/python bench/bench_dataset_run.py [--rows 200 2000]

For each size, a Parquet dataset (HF ``Image`` column, row groups of 16) of white 620×877
PNG pages plus an ``id`` and a ``label`` column is converted by ``ocrflow run DATA -o OUT
--format jsonl,parquet --dataset-id-column id`` in a fresh process: planning (one source a
row), fetching each row through the worker's row cursor, rendering, routing (a white page is
routed ``blank``: no engine call, so 2,000 rows take minutes, not the ~0.4 s/page the
embedded engine would need), the sinks and the write-back of the dataset with ``markdown``
and ``ocr_status``. Prints the peak RSS of the ``ocrflow`` process (``ru_maxrss`` of the
largest child: the main process or one render worker) and the wall time. Streaming means the
peak stays about the same whatever the row count.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("label", pa.string()),
    ]
)
CHILD = r"""
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": done.returncode, "rss_kb": peak, "err": done.stderr[-2000:]}))
"""


def white_page() -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (620, 877), 255).save(buffer, format="PNG")
    return buffer.getvalue()


def write_dataset(path: Path, rows: int) -> None:
    page = white_page()
    with pq.ParquetWriter(str(path), SCHEMA) as writer:
        for start in range(0, rows, 16):
            batch = [
                {"id": f"doc-{i:06d}", "image": {"bytes": page, "path": None}, "label": str(i)}
                for i in range(start, min(rows, start + 16))
            ]
            writer.write_table(pa.Table.from_pylist(batch, schema=SCHEMA))


def measure(rows: int, tmp: Path) -> None:
    data, out = tmp / f"pages-{rows}.parquet", tmp / f"out-{rows}"
    write_dataset(data, rows)
    command = [sys.executable, "-m", "ocrflow.cli", "run", str(data), "-o", str(out), "-q",
               "--format", "jsonl,parquet", "--dataset-id-column", "id",
               "--workers", "1"]  # fmt: skip
    start = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", CHILD, *command], capture_output=True, text=True)
    wall = time.perf_counter() - start
    got = json.loads(child.stdout)
    written = sum(pq.read_metadata(p).num_rows for p in (out / "dataset").glob("*.parquet"))
    records = len(list((out / "results").glob("*.jsonl")))
    print(
        f"    {rows:6d} rows: exit {got['rc']}, peak RSS {got['rss_kb'] / 1024:6.1f} MiB, "
        f"{wall:6.1f} s, {records} JSONL records, {written} write-back rows"
    )
    if got["rc"] != 0:
        print(got["err"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200, 2000])
    args = parser.parse_args()
    print("ocrflow run over an image dataset (white pages: blank route, no engine call)")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            measure(rows, Path(tmp))


if __name__ == "__main__":
    main()
