"""Every file a run, an export and a review write follows the umask, like any program's:
0644 files and 0755 folders under umask 022 (a web server or another uid can read them),
0600 and 0700 under umask 077. Writes go through temp files renamed into place, which must
not keep ``mkstemp``'s private 0600."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import make_examples
import pytest

pytestmark = pytest.mark.slow


def _ocrflow(umask: int, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ocrflow.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        preexec_fn=lambda: os.umask(umask),  # the umask is what the test is about
    )
    assert done.returncode == 0, done.stderr


def _modes(root: Path) -> dict[str, set[str]]:
    """``{"files": {modes}, "dirs": {modes}}`` of everything under ``root`` (itself too)."""
    found: dict[str, set[str]] = {"files": set(), "dirs": {oct(stat.S_IMODE(root.stat().st_mode))}}
    for path in root.rglob("*"):
        mode = path.lstat().st_mode
        if stat.S_ISREG(mode):
            found["files"].add(oct(stat.S_IMODE(mode)))
        elif stat.S_ISDIR(mode):
            found["dirs"].add(oct(stat.S_IMODE(mode)))
    return found


MODES = [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)]


@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), MODES)
def test_outputs_follow_the_umask(
    tmp_path: Path, umask: int, file_mode: int, dir_mode: int
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.pdf").write_bytes(make_examples.text_pdf([["A page of text."], ["Another."]]))
    (folder / "b.pdf").write_bytes(make_examples.text_pdf([["A second document."]]))
    out, pq, hf = tmp_path / "out", tmp_path / "pq", tmp_path / "hf"
    _ocrflow(umask, "run", str(folder), "-o", str(out), "--format", "markdown,jsonl,parquet", "-q")
    _ocrflow(umask, "export", str(out), str(pq), "--format", "parquet")
    _ocrflow(umask, "export", str(out), str(hf), "--format", "hf")
    _ocrflow(umask, "review", str(out), "-q", "--workers", "1")
    assert (out / "results").is_dir() and (out / "parquet").is_dir() and (out / "review").is_dir()
    for root in (out, pq, hf):
        modes = _modes(root)
        assert modes == {"files": {oct(file_mode)}, "dirs": {oct(dir_mode)}}, root
