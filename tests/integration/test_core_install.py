"""``pip install ocrflow`` without extras: a working CPU converter, and a command that needs
an extra says which one (exit 2), not a traceback.

Builds a fresh venv (pinned by constraints/test.txt, through pip's cache: the first run on a
machine downloads the core dependencies, about 50 s with a warm cache) from a copy of the
package's files, so that nothing is written into the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# What the package build reads; the tests and the checkout's venv stay out of the copy.
PACKAGE_FILES = ("pyproject.toml", "README.md", "LICENSE", "src", "constraints")

# The optional extras' packages: none may be in the core install.
EXTRAS_PACKAGES = (
    "pyarrow", "pikepdf", "lxml", "fastapi", "sqlalchemy", "alembic", "uvicorn", "rapidfuzz",
    "aiohttp",
)  # fmt: skip

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding ocrflow's core install and nothing else."""
    base = tmp_path_factory.mktemp("core-install")
    tree = base / "ocrflow"
    tree.mkdir()
    for name in PACKAGE_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tree / name)
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip"]
    subprocess.run(
        [*pip, "install", "-q", "--disable-pip-version-check", "-c",
         str(tree / "constraints" / "test.txt"), str(tree)],
        check=True, timeout=1500, env=_env(),
    )  # fmt: skip
    return env_dir


def _env() -> dict[str, str]:
    # Not the checkout's venv nor its sources: only what the core install put in the venv.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PIP_NO_INPUT"] = "1"
    return env


def test_the_core_install_holds_no_extra(core_venv: Path) -> None:
    python = core_venv / "bin" / "python"
    code = (
        "import importlib.util as u, sys\n"
        f"print(','.join(m for m in {EXTRAS_PACKAGES!r} if u.find_spec(m)))"
    )
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True, env=_env()
    )
    assert done.stdout.strip() == "", f"installed without an extra: {done.stdout}"


def test_the_core_install_converts_the_examples(core_venv: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [str(core_venv / "bin" / "ocrflow"), "run", str(EXAMPLES), "-o", str(out), "--json"],
        capture_output=True, text=True, timeout=900, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    documents = {p.name for p in EXAMPLES.iterdir() if p.is_file()}
    written = {p.name.removesuffix(".md") for p in (out / "markdown").glob("*.md")}
    assert written == documents
    text = (out / "markdown" / "scanned.pdf.md").read_text()
    assert len(text.split()) > 20, "the embedded engine read no text"
    assert (out / "results").is_dir() or list(out.glob("*.jsonl")), "no JSONL was written"


def test_serve_without_its_extra_names_it(core_venv: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(core_venv / "bin" / "ocrflow"), "serve", "--root", str(tmp_path / "root")],
        capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "pip install 'ocrflow[serve]'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("fmt", "extra"), [("parquet", "parquet"), ("pdf", "pdf")])
def test_a_format_without_its_extra_names_it(
    core_venv: Path, tmp_path: Path, fmt: str, extra: str
) -> None:
    done = subprocess.run(
        [str(core_venv / "bin" / "ocrflow"), "run", str(EXAMPLES / "born-digital.pdf"),
         "-o", str(tmp_path / "out"), "--format", fmt],
        capture_output=True, text=True, timeout=120, env=_env(),
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert f"pip install 'ocrflow[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr
