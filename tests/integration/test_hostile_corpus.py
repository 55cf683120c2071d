"""The whole hostile corpus through the real CLI: every input gets a status, nothing hangs,
no traceback escapes, memory stays bounded, passwords work."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .cli_helpers import ocrflow, status_json

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from treemem import run_measured

pytestmark = pytest.mark.slow

EXPECTED_FAILURES = {
    "pdfplumber__empty.pdf": "empty",
    "qpdf__not-a-pdf.pdf": "not_a_document",
    "ocrmypdf__invalid.pdf": "corrupt",
    "pdfjs__bug1020226.pdf": "corrupt",
    "pdf2image__test_corrupted.pdf": "corrupt",
    "pdfjs__bug1606566.pdf": "not_a_document",
    "qpdf__zero-pages.pdf": "empty",
    "pdfjs__issue3371.pdf": "encrypted",
    "pdfjs__saslprep-r6.pdf": "encrypted",
    "pdfjs__issue6010_2.pdf": "encrypted",
    "pdfplumber__password-example.pdf": "encrypted",
    "pypdf-samples__libreoffice-writer-password.pdf": "encrypted",
    "docling__2206.01062_pg3_password.pdf": "encrypted",
}


@pytest.fixture(scope="module")
def hostile_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("hostile") / "out"
    # One page of each document, rendered small, keeps the run short (OCR of full-size pages
    # was most of its 154 s, and nothing here checks what the engine read): every file is
    # still opened, probed and its first page rendered, bombs included.
    cmd = [
        sys.executable,
        "-m",
        "ocrflow.cli",
        "run",
        str(corpus / "pdfs"),
        str(corpus / "images"),
        "-o",
        str(out),
        "--pages",
        "1",
        "--json",
        "--page-timeout",
        "60",
        "--target-dim",
        "640",
    ]
    usage = run_measured(cmd, timeout=1800)
    return out, usage


def test_every_input_gets_a_status(hostile_run, corpus: Path) -> None:
    out, usage = hostile_run
    assert usage.returncode == 1, usage.stderr[-2000:]  # some inputs fail, the run finishes
    assert "Traceback" not in usage.stderr
    summary = json.loads(usage.stdout)
    inputs = len(list((corpus / "pdfs").iterdir())) + len(list((corpus / "images").iterdir()))
    assert sum(summary["documents"].values()) == inputs
    report = status_json(out)
    assert sum(report["documents"].values()) == inputs
    reasons = {Path(f["source"]).name: f["reason"] for f in report["failures"]}
    for name, reason in EXPECTED_FAILURES.items():
        assert reasons.get(name) == reason, (name, reasons.get(name))
    assert all(f["message"] for f in report["failures"])


def test_peak_memory_stays_under_2_gib(hostile_run) -> None:
    _, usage = hostile_run
    assert usage.peak_rss_mb < 2048, f"peak RSS of the process tree: {usage.peak_rss_mb:.0f} MiB"


def test_owner_password_only_and_bombs_convert(hostile_run) -> None:
    out, _ = hostile_run
    ok = {
        Path(r["source"]).name
        for r in json.loads(ocrflow("status", str(out), "--json").stdout)["failures"]
    }
    for name in (
        "pdfjs__secHandler.pdf",
        "pdfjs__large_jpeg_downscale.pdf",
        "ocrmypdf__enormous.pdf",
        "pdfjs__poppler-67295-0.pdf",
        "pdfminer__issue-1113-evil-xobjects.pdf",
        "pdfjs__ContentStreamCycleType3insideType3.pdf",
    ):
        assert name not in ok, name


#: Each encrypted file of the corpus and its user password.
PASSWORDS = {
    "pdfjs__issue3371.pdf": "ELXRTQWS",
    "pdfjs__saslprep-r6.pdf": "S\u00aaSL\u00adprep",
    "pdfjs__issue6010_2.pdf": "æøå",
    "pdfplumber__password-example.pdf": "test",
    "docling__2206.01062_pg3_password.pdf": "1234",
}


def test_encrypted_files_open_with_their_password(corpus: Path, tmp_path: Path) -> None:
    """One run over every encrypted file, with a passwords file (a wrong one first): each
    file finds its own; then one run with only a wrong password fails each as encrypted.
    (Two runs, not two a file: each run loads the engine.)"""
    files = [str(corpus / "pdfs" / name) for name in PASSWORDS]
    passwords = tmp_path / "pw.txt"
    passwords.write_text("wrong\n" + "\n".join(PASSWORDS.values()) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    done = ocrflow(
        "run", *files, "-o", str(out), "--passwords", str(passwords), "--pages", "1",
        "--json", "-q", "--target-dim", "640",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["documents"] == {"ok": len(PASSWORDS)}
    for password in PASSWORDS.values():
        assert password not in done.stdout + done.stderr
    wrong = ocrflow(
        "run", *files, "-o", str(tmp_path / "o2"), "--password", "nope", "--pages", "1",
        "--json", "-q", "--target-dim", "640",
    )  # fmt: skip
    assert wrong.returncode == 1
    reasons = {Path(f["source"]).name: f["reason"] for f in json.loads(wrong.stdout)["failures"]}
    assert reasons == dict.fromkeys(PASSWORDS, "encrypted")


def test_retry_requeues_failed_documents(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    locked = corpus / "pdfs" / "pdfplumber__password-example.pdf"
    plain = corpus / "pdfs" / "olmocr__edgar.pdf"
    first = ocrflow("run", str(locked), str(plain), "-o", str(out), "--pages", "1", "-q")
    assert first.returncode == 1
    assert status_json(out)["documents"] == {"ok": 1, "failed": 1}
    again = ocrflow("retry", str(out), "--password", "test", "-q")
    assert again.returncode == 0, again.stderr[-2000:]
    report = status_json(out)
    assert report["documents"] == {"ok": 2} and report["failures"] == []
