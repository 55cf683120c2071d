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
        "import atexit, sys\n"
        "from multiprocessing import spawn\n"
        "from ocrflow.cli import main\n"
        "def probe():\n"
        "    print('MAIN', spawn.get_preparation_data('probe').get('init_main_from_name'))\n"
        "atexit.register(probe)\n"
        "sys.argv = ['ocrflow', '--help']\n"
        "main()\n"
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


def test_leaving_waits_for_work_and_exit_functions_but_not_for_freeing_models() -> None:
    """``ocrflow.cli.leave`` ends the process without freeing every object: what was
    written is flushed, exit functions run and threads at work are waited for; a thread
    that only frees models (one that would take a minute here) is not."""
    code = (
        "import atexit, sys, threading, time\n"
        "from ocrflow.cli import leave\n"
        "from ocrflow.engines.embedded import RELEASE_THREAD\n"
        "def work():\n"
        "    time.sleep(0.5)\n"
        "    print('work done')\n"
        "threading.Thread(target=work).start()\n"
        "threading.Thread(target=time.sleep, args=(60,), name=RELEASE_THREAD).start()\n"
        "atexit.register(lambda: print('exit functions ran'))\n"
        "print('in the buffer', end='')\n"
        "leave(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("in the buffer")
    assert "work done" in done.stdout and "exit functions ran" in done.stdout


def test_the_command_line_keeps_its_exit_codes() -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "ocrflow", "--version"], capture_output=True, text=True, timeout=120
    )
    assert ok.returncode == 0 and ok.stdout.startswith("ocrflow "), ok.stderr
    usage = subprocess.run(
        [sys.executable, "-m", "ocrflow", "run", "--no-such-flag"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert usage.returncode == 2 and "--no-such-flag" in usage.stderr
