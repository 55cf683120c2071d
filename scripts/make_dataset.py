"""Generate a Hugging Face-style image dataset (Parquet) of scanned-looking pages.

    python scripts/make_dataset.py pages.parquet --rows 200

Columns: ``id`` (string), ``image`` (the ``Image`` feature: struct of ``bytes`` and ``path``,
PNG bytes) and ``label``; the schema carries the ``huggingface`` metadata that ``datasets``
writes, so ``datasets.load_dataset("parquet", ...)`` decodes ``image`` as an image. Pages come
from ``make_examples.page_image`` and ``scanned``; a few distinct pages are made and reused,
so big datasets are quick to write. Deterministic.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
FEATURES = {
    "id": {"dtype": "string", "_type": "Value"},
    "image": {"_type": "Image"},
    "label": {"dtype": "string", "_type": "Value"},
}
SCHEMA = pa.schema(
    [("id", pa.string()), ("image", IMAGE_TYPE), ("label", pa.string())]
).with_metadata({"huggingface": json.dumps({"info": {"features": FEATURES}})})


def _examples() -> ModuleType:
    path = Path(__file__).with_name("make_examples.py")
    spec = importlib.util.spec_from_file_location("make_examples", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page_pngs(count: int, *, size: tuple[int, int] = (620, 877)) -> list[bytes]:
    """``count`` distinct scanned-looking pages as PNG bytes."""
    examples = _examples()
    pngs = []
    for seed in range(count):
        lines = [f"Page {seed + 1} of the sample dataset", "", *examples.ENGLISH[2:]]
        page = examples.scanned(examples.page_image(lines, size=size), seed)
        buffer = io.BytesIO()
        page.save(buffer, format="PNG")
        pngs.append(buffer.getvalue())
    return pngs


def write_image_dataset(
    path: str | Path, rows: int, *, distinct: int = 4, row_group_size: int = 16
) -> list[bytes]:
    """Write ``rows`` rows to ``path``, one small row group at a time; returns the pages."""
    pngs = page_pngs(distinct)
    with pq.ParquetWriter(str(path), SCHEMA) as writer:
        for start in range(0, rows, row_group_size):
            batch = [
                {
                    "id": f"doc-{i:06d}",
                    "image": {"bytes": pngs[i % distinct], "path": f"doc-{i:06d}.png"},
                    "label": f"page {i % distinct}",
                }
                for i in range(start, min(rows, start + row_group_size))
            ]
            writer.write_table(pa.Table.from_pylist(batch, schema=SCHEMA))
    return pngs


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--rows", type=int, default=200)
    args = parser.parse_args(argv)
    write_image_dataset(args.path, args.rows)


if __name__ == "__main__":
    main(sys.argv[1:])
