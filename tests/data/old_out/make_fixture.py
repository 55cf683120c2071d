"""Regenerate this fixture: an OUT written by ocrflow before pages carried blocks.

Run it with the *old* code on the path, from the repository root (on purpose only: the
fixture stands for workspaces already out there)::

    git worktree add --detach /tmp/oldmain <commit before the document model>
    PYTHONPATH=/tmp/oldmain/src .venv/bin/python tests/data/old_out/make_fixture.py

It writes ``in/`` (a one-page scan read by the embedded engine and a ten-page born-digital
PDF) and converts them into ``out/``. The run is killed (SIGKILL, from inside
``Workspace.save_pages``) right after the PDF's first chunk of pages is checkpointed and
once the scan is done: ``out/`` holds one finished document and one interrupted mid-way.
Logs, run records, leases and the manifest are dropped afterwards: the manifest names the
inputs by the absolute paths of the machine that wrote it, so a copy elsewhere plans its
items afresh. The document state (config, done markers, checkpoints) and the outputs are
kept as the old code wrote them.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.pdfwords import Page, make_pdf, paragraph_words  # noqa: E402

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
NOTE = ["Archive note 17", "Boxes arrive on Monday", "Scan every letter twice"]


def write_inputs(folder: Path) -> None:
    """The two input documents."""
    folder.mkdir(parents=True, exist_ok=True)
    image = Image.new("1", (640, 220), 1)
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, 30)
    for row, line in enumerate(NOTE):
        draw.text((30, 25 + row * 60), line, font=font, fill=0)
    image.save(folder / "note.png", optimize=True)
    pages = [
        Page(paragraph_words([f"Report page {n} of ten", f"The ledger line {n} is balanced"]))
        for n in range(1, 11)
    ]
    (folder / "report.pdf").write_bytes(make_pdf(pages))


def patch_save_pages(out: Path) -> None:
    """Kill the process after the first checkpoint of the ten-page PDF, once the scan is
    done; later checkpoints wait for the kill."""
    from ocrflow.workspace import state as workspace

    original = workspace.Workspace.save_pages
    saved = threading.Event()

    def save_then_die(self: object, doc_id: str, pages: list) -> None:  # type: ignore[type-arg]
        if max(p.page for p in pages) <= 1:
            original(self, doc_id, pages)
            return
        if saved.is_set():
            time.sleep(3600)
        original(self, doc_id, pages)
        saved.set()
        deadline = time.monotonic() + 120
        while not any((out / ".ocrflow" / "done").glob("*.json")):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)

    workspace.Workspace.save_pages = save_then_die  # type: ignore[method-assign]


def main() -> None:
    """Write the inputs, run the old code until it is killed, trim the workspace."""
    for name in ("in", "out"):
        shutil.rmtree(HERE / name, ignore_errors=True)
    write_inputs(HERE / "in")
    pid = os.fork()
    if pid == 0:
        os.chdir(HERE)
        patch_save_pages(HERE / "out")
        from ocrflow.cli import app

        sys.argv = ["ocrflow", "run", "in", "-o", "out", "--workers", "1", "-q"]
        app()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("old run ended with", status)
    for junk in ("logs", "runs", "manifest", "items", "leases", "ranges"):
        shutil.rmtree(HERE / "out" / ".ocrflow" / junk, ignore_errors=True)
    for folder in sorted((HERE / "out").rglob("*"), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # git keeps no empty folders: the fixture has none either


if __name__ == "__main__":
    main()
