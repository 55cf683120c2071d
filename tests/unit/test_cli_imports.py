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


def test_worker_processes_are_not_sent_the_command_line_to_import() -> None:
    """The console script is a file with no module name: multiprocessing had every render
    worker run it again (the whole CLI, 0.5 s of imports before its first page). Once the
    command line runs, the workers are told the main module is ``ocrflow.__main__``, which
    they leave alone, as they do for any package's ``__main__``."""
    code = (
        "import sys\n"
        "from multiprocessing import spawn\n"
        "from ocrflow.cli import main\n"
        "sys.argv = ['ocrflow', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('MAIN', spawn.get_preparation_data('probe').get('init_main_from_name'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "MAIN ocrflow.__main__" in done.stdout, done.stdout[-500:]


def test_python_dash_m_ocrflow_is_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ocrflow", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "run" in done.stdout, done.stderr[-500:]
