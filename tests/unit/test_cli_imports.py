"""Every ``ocrflow`` command loads ``ocrflow.cli``: the dependencies of one command (the job
service, eval) must not be imported for all the others, nor be needed where they are absent
(a GPU host that only runs ``ocrflow run``)."""

from __future__ import annotations

import subprocess
import sys

ONLY_FOR_ONE_COMMAND = ("rapidfuzz", "fastapi", "sqlalchemy", "alembic", "uvicorn", "psycopg")


def test_the_cli_does_not_import_what_only_serve_or_eval_needs() -> None:
    code = (
        "import sys, ocrflow.cli\n"
        f"print(','.join(m for m in {ONLY_FOR_ONE_COMMAND!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "", done.stdout
