"""Every ``ocrflow`` command loads ``ocrflow.cli``: the dependencies of one command or format
(the job service, eval, Parquet) must not be imported for all the others, nor be needed where
they are absent (a core install, a GPU host that only runs ``ocrflow run``)."""

from __future__ import annotations

import subprocess
import sys

# The optional extras' packages (pyproject.toml): serve, eval, parquet, http, s3, ray, docling.
ONLY_FOR_ONE_COMMAND = (
    "rapidfuzz", "fastapi", "fastapi_offline", "sqlalchemy", "alembic", "uvicorn",
    "python_multipart", "psycopg", "pyarrow", "aiohttp", "requests", "s3fs", "ray",
    "docling_core",
)  # fmt: skip


def test_the_cli_does_not_import_what_only_one_extra_needs() -> None:
    code = (
        "import sys, ocrflow.cli\n"
        f"print(','.join(m for m in {ONLY_FOR_ONE_COMMAND!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "", done.stdout
