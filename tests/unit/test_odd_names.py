"""Names that are not UTF-8, what a walk leaves out, and flag names in errors: the pieces
that keep a hostile archive from stopping a run, tested on real files."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from pydantic import ValidationError

from ocrflow.config import RenderOptions, RunConfig, ScaleOptions
from ocrflow.config.flags import validation_message
from ocrflow.inputs.expand import OCRFLOW_MARKERS, expand_inputs
from ocrflow.inputs.skips import Skipped, load_skipped, save_skipped
from ocrflow.service.uploads import UploadError, check_uploaded_documents
from ocrflow.storage.local import LocalStore
from ocrflow.storage.names import escape_bytes, local_path, local_uri, safe_relpath, shown
from ocrflow.workspace.records import WorkItem
from ocrflow.workspace.workitems import document_items, item_id_for

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
LATIN1 = os.fsdecode(b"caf\xe9.pdf")  # a Latin-1 file name, as Python reads it


def test_a_latin1_name_gets_a_readable_unique_output_name() -> None:
    assert safe_relpath(LATIN1) == "caf%E9.pdf"
    assert safe_relpath(os.fsdecode(b"caf\xe8.pdf")) != safe_relpath(LATIN1)
    assert safe_relpath(safe_relpath(LATIN1)) == safe_relpath(LATIN1)  # stable
    assert escape_bytes("plain.pdf") == "plain.pdf"


def test_a_local_uri_holds_no_surrogate_and_opens_the_same_file(tmp_path: Path) -> None:
    path = os.path.join(os.fsdecode(bytes(tmp_path)), os.fsdecode(b"a #%\xff\xfe.pdf"))
    Path(path).write_bytes(PDF)
    uri = local_uri(path)
    assert uri.startswith("file://") and uri.isascii() and uri.encode("utf-8")
    assert "#" not in uri  # never read as a dataset row's "#row=" mark
    assert local_path(uri) == path and Path(local_path(uri)).read_bytes() == PDF
    assert local_uri(str(tmp_path / "plain.pdf")) == str(tmp_path / "plain.pdf")
    assert local_path("s3://b/k.pdf") == "s3://b/k.pdf"
    assert shown(path).endswith("a #%\\xff\\xfe.pdf")
    json.dumps(shown(path), ensure_ascii=False).encode("utf-8")  # never raises


def test_work_items_of_odd_names_serialise_and_come_back(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for raw in (b"caf\xe9.pdf", b"caf\xe8.pdf", b"ok.pdf"):
        (Path(os.fsdecode(bytes(folder))) / os.fsdecode(raw)).write_bytes(PDF)
    sources = expand_inputs([str(folder)])
    assert sorted(s.rel for s in sources) == ["caf%E8.pdf", "caf%E9.pdf", "ok.pdf"]
    items = document_items(((s, s.rel) for s in sources), "fp")
    for item in items:
        again = WorkItem.load(item.model_dump_json())
        assert again == item and Path(local_path(again.uri)).read_bytes() == PDF
    assert len({i.item_id for i in items}) == 3
    assert item_id_for(os.fsdecode(b"/x/\xe9"), "r", "fp")  # a stray surrogate: no crash


def test_a_walk_counts_what_it_leaves_out(tmp_path: Path) -> None:
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "a.pdf").write_bytes(PDF)
    (root / "notes.txt").write_text("not a document")
    (root / ".secret.pdf").write_bytes(PDF)
    (root / "rows.parquet").write_bytes(b"PAR1....PAR1")
    (root / "loop").symlink_to(root / "loop")
    (root / "gone.pdf").symlink_to(root / "nowhere.pdf")
    (root / "linkdir").symlink_to(root / "sub")
    (root / "zero.pdf").symlink_to("/dev/zero")
    os.mkfifo(root / "fifo.pdf")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock.pdf"))
    old = root / "old-out"
    (old / OCRFLOW_MARKERS[0]).mkdir(parents=True)
    (old / "page.jpg").write_bytes(b"\xff\xd8\xff")
    skipped = Skipped()
    sources = expand_inputs([str(root)], skipped=skipped)
    assert [s.rel for s in sources] == ["a.pdf"]
    assert dict(skipped.counts) == {
        "hidden": 2, "not_a_document": 1, "dataset_in_folder": 1, "broken_link": 2,
        "link_to_folder": 1, "not_a_file": 3, "ocrflow_output": 1,
    }  # fmt: skip
    assert skipped.examples["not_a_document"] == [str(root / "notes.txt")]
    store = LocalStore(str(tmp_path / "out"))
    save_skipped(store, skipped)
    assert load_skipped(store).counts == skipped.counts


def test_named_inputs_that_are_not_files_fail_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.pdf")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    named = ["/dev/zero", str(tmp_path / "fifo.pdf"), str(tmp_path / "loop")]
    kinds = {Path(s.uri).name: s.kind for s in expand_inputs(named)}
    assert kinds == {"zero": "not_a_file", "fifo.pdf": "not_a_file", "loop": "unreadable"}


@pytest.mark.parametrize(
    ("build", "flag"),
    [
        (lambda: RenderOptions(page_timeout_s=0), "--page-timeout"),
        (lambda: RenderOptions(workers=0), "--workers"),
        (lambda: ScaleOptions(lease_ttl_s=-1), "--lease-ttl"),
        (lambda: RunConfig(inputs=("a",), output="o", engine={"kind": "x"}), "--engine"),
    ],
)
def test_errors_name_the_flag_not_the_field(build: object, flag: str) -> None:
    with pytest.raises(ValidationError) as caught:
        build()  # type: ignore[operator]
    message = validation_message(caught.value)
    assert message.startswith(f"invalid value for {flag}: "), message
    assert "_s:" not in message and "kind" not in message


def test_an_upload_that_is_not_a_document_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "a.pdf").write_bytes(PDF)
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "scan").write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 32)  # no suffix, an image
    with pytest.raises(UploadError, match=r"'notes\.txt' is not a PDF or an image") as caught:
        check_uploaded_documents([tmp_path / "a.pdf", tmp_path / "notes.txt"])
    assert caught.value.status == 422
    check_uploaded_documents([tmp_path / "a.pdf", tmp_path / "scan"])
    (tmp_path / "rows.parquet").write_bytes(b"PAR1")
    check_uploaded_documents([tmp_path / "rows.parquet", tmp_path / "notes.txt"])  # its card
