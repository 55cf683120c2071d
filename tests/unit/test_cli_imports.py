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


def test_leaving_at_once_runs_exit_functions_but_does_not_wait_for_freeing_models() -> None:
    """``ocrflow.cli.leave_at_once`` ends the process without freeing every object: what
    was written is flushed and exit functions run; a thread that only frees models (one
    that would take a minute here) is not waited for."""
    code = (
        "import atexit, threading, time\n"
        "from ocrflow.cli import leave_at_once\n"
        "from ocrflow.engines.embedded import RELEASE_THREAD\n"
        "threading.Thread(target=time.sleep, args=(60,), name=RELEASE_THREAD).start()\n"
        "atexit.register(lambda: print('exit functions ran'))\n"
        "print('in the buffer', end='')\n"
        "leave_at_once(3)\n"
        "print('not reached')\n"
    )
    done = _python(code)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "in the buffer" + "exit functions ran\n"


def test_a_thread_still_at_work_gets_the_usual_exit() -> None:
    """A thread at work when the command returns (an executor not shut down, an upload)
    would be cut short, or never told to stop: the process exits as usual instead."""
    code = (
        "import sys, threading, time\n"
        "from ocrflow.cli import leave_at_once\n"
        "def work():\n"
        "    time.sleep(0.5)\n"
        "    print('work done')\n"
        "threading.Thread(target=work).start()\n"
        "leave_at_once(3)\n"
        "print('left as usual')\n"
        "sys.exit(3)\n"
    )
    done = _python(code)
    assert done.returncode == 3, done.stderr
    assert "left as usual" in done.stdout and "work done" in done.stdout


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a Python of its own, within 30 s (a minute's wait fails)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)


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
