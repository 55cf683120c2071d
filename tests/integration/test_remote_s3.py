"""ocrflow.remote against a real S3 API: moto's standalone server in its own process.

Also the generic fsspec path (``memory://``), where conditional writes are emulated.
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ocrflow.errors import SourceError, WorkspaceError
from ocrflow.inputs.expand import expand_inputs
from ocrflow.inputs.remote import expand_remote, local_copy
from ocrflow.storage.fsspec_store import FsspecStore
from ocrflow.storage.open import open_store
from tests.s3server import S3Endpoint

from .cli_helpers import ocrflow

s3 = pytest.mark.s3


def _pdf(text: str = "Hello world from S3 test page one") -> bytes:
    import make_examples  # scripts/ is on sys.path (tests/conftest.py)

    return make_examples.text_pdf([[text]])


def _png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (32, 16), 255).save(buffer, format="PNG")
    return buffer.getvalue()


def _race(count: int, attempt: Callable[[int], bool]) -> list[bool]:
    """Run ``attempt(i)`` in ``count`` threads released at the same instant."""
    start = threading.Barrier(count)
    outcomes: list[bool] = [False] * count

    def one(i: int) -> None:
        start.wait()
        outcomes[i] = attempt(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


@pytest.fixture
def bucket(s3_endpoint: S3Endpoint) -> str:
    return s3_endpoint.new_bucket()


@pytest.fixture
def store(bucket: str) -> FsspecStore:
    return FsspecStore(f"s3://{bucket}/ws/")


# -- the store ---------------------------------------------------------------------------
@s3
def test_write_read_list_delete(store: FsspecStore, bucket: str) -> None:
    assert store.root == f"s3://{bucket}/ws"
    assert isinstance(open_store(f"s3://{bucket}/ws"), FsspecStore)
    assert store.read_bytes("done/a.json") is None
    store.write_bytes("done/a.json", b'{"a": 1}')
    store.write_bytes("done/sub/b.json", b"b")
    store.write_bytes("done-other/c.json", b"c")  # a sibling prefix, not under done/
    store.write_bytes("top.json", b"t")
    assert store.read_bytes("done/a.json") == b'{"a": 1}'
    assert store.exists("done/a.json") and not store.exists("done/zzz.json")
    assert store.list("done") == ["done/a.json", "done/sub/b.json"]
    assert store.list("done/") == store.list("done")
    assert store.list("") == ["done-other/c.json", "done/a.json", "done/sub/b.json", "top.json"]
    assert store.list("nothing") == []
    assert store.url("done/a.json") == f"s3://{bucket}/ws/done/a.json"
    store.delete("done/a.json")
    store.delete("done/a.json")  # a missing key is not an error
    assert store.read_bytes("done/a.json") is None
    assert store.list("done") == ["done/sub/b.json"]
    assert not store.exists("done/a.json")


@s3
def test_listing_sees_other_writers(store: FsspecStore, s3_endpoint: S3Endpoint) -> None:
    # Another worker writes behind this process's back: no stale directory cache.
    assert store.list("runs") == []
    bucket, _, prefix = store.root.removeprefix("s3://").partition("/")
    s3_endpoint.client().put_object(Bucket=bucket, Key=f"{prefix}/runs/x.json", Body=b"{}")
    assert store.list("runs") == ["runs/x.json"]
    assert store.exists("runs/x.json")


@s3
def test_unsafe_keys_refused(store: FsspecStore) -> None:
    for key in ("../escape", "a//b", "/abs", "", "a/./b"):
        with pytest.raises(WorkspaceError):
            store.write_bytes(key, b"x")


@s3
def test_missing_bucket_is_a_workspace_error(s3_endpoint: S3Endpoint) -> None:
    store = FsspecStore(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/ws")
    with pytest.raises(WorkspaceError):
        store.write_bytes("a.json", b"x")
    # A missing bucket must not read as "someone else created it first".
    with pytest.raises(WorkspaceError):
        store.create_exclusive("a.json", b"x")


@s3
def test_writes_are_seen_whole(store: FsspecStore) -> None:
    size = 2 << 20
    blobs = [bytes([65 + i]) * size for i in range(2)]
    store.write_bytes("big.bin", blobs[0])
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            store.write_bytes("big.bin", blobs[i % 2])

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen = set()
        for _ in range(25):
            data = store.read_bytes("big.bin")
            assert data in blobs, "a reader saw a partial or mixed object"
            seen.add(data[:1])
    finally:
        stop.set()
        thread.join()
    assert seen  # at least one whole object read


@s3
def test_create_exclusive(store: FsspecStore) -> None:
    assert store.create_exclusive(".ocrflow/config.json", b"first")
    assert not store.create_exclusive(".ocrflow/config.json", b"second")
    assert store.read_bytes(".ocrflow/config.json") == b"first"


@s3
def test_create_exclusive_race_has_one_winner(store: FsspecStore) -> None:
    for trial in range(5):
        key = f"leases/item-{trial}"
        outcomes = _race(8, lambda i, key=key: store.create_exclusive(key, f"owner-{i}".encode()))
        assert outcomes.count(True) == 1, outcomes
        assert store.read_bytes(key) == f"owner-{outcomes.index(True)}".encode()


@s3
def test_write_if_match(store: FsspecStore) -> None:
    assert store.read_with_version("lease") == (None, None)
    assert store.write_if_match("lease", b"v1", None)  # None: only if absent
    assert not store.write_if_match("lease", b"again", None)
    data, etag = store.read_with_version("lease")
    assert data == b"v1" and etag
    assert store.write_if_match("lease", b"v2", etag)
    assert not store.write_if_match("lease", b"stale", etag)  # the version moved on
    data2, etag2 = store.read_with_version("lease")
    assert data2 == b"v2" and etag2 != etag
    store.delete("lease")
    assert not store.write_if_match("lease", b"v3", etag2)  # gone: nothing to take over
    assert store.read_bytes("lease") is None


@s3
def test_write_if_match_race_has_one_winner(store: FsspecStore) -> None:
    store.write_bytes("lease", b"expired")
    _, etag = store.read_with_version("lease")
    outcomes = _race(8, lambda i: store.write_if_match("lease", f"taker-{i}".encode(), etag))
    assert outcomes.count(True) == 1, outcomes
    assert store.read_bytes("lease") == f"taker-{outcomes.index(True)}".encode()


@s3
def test_endpoint_from_ocrflow_variable(
    bucket: str,
    s3_endpoint: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.setenv("OCRFLOW_S3_ENDPOINT_URL", s3_endpoint.url)
    store = FsspecStore(f"s3://{bucket}/x", storage_options={"skip_instance_cache": True})
    store.write_bytes("k", b"v")
    assert s3_endpoint.client().get_object(Bucket=bucket, Key="x/k")["Body"].read() == b"v"


# -- inputs ------------------------------------------------------------------------------
@pytest.fixture
def inputs(bucket: str, s3_endpoint: S3Endpoint) -> str:
    client = s3_endpoint.client()
    objects = {
        "in/a.pdf": _pdf(),
        "in/sub/b.png": _png(),
        "in/sub/deep/no-suffix": _pdf("no suffix"),  # kept: the content says PDF
        "in/sub/junk-first.pdf": b"junk" * 25 + _pdf(),
        "in/mislabeled.pdf": _png(),  # the content wins over the name
        "in/empty.pdf": b"",
        "in/notes.txt": b"just some text",  # dropped: neither name nor content
        "in/.hidden.pdf": _pdf(),
        "in/.cache/c.pdf": _pdf(),
        "in-other/x.pdf": _pdf(),  # a sibling prefix, not under in/
    }
    for key, body in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    return bucket


@s3
def test_expand_prefix(inputs: str) -> None:
    bucket = inputs
    sources = list(expand_remote(f"s3://{bucket}/in"))
    assert [(s.rel, s.kind) for s in sources] == [
        ("a.pdf", "pdf"),
        ("empty.pdf", "empty"),
        ("mislabeled.pdf", "image"),
        ("sub/b.png", "image"),
        ("sub/deep/no-suffix", "pdf"),
        ("sub/junk-first.pdf", "pdf"),
    ]
    a = sources[0]
    assert a.uri == f"s3://{bucket}/in/a.pdf" and a.size == len(_pdf())
    assert [s.rel for s in expand_remote(f"s3://{bucket}/in/")] == [s.rel for s in sources]
    # Through the public entry point too.
    assert [s.uri for s in expand_inputs([f"s3://{bucket}/in/"])] == [s.uri for s in sources]


@s3
def test_expand_glob_and_single_object(inputs: str) -> None:
    bucket = inputs
    flat = [(s.rel, s.kind) for s in expand_remote(f"s3://{bucket}/in/*.pdf")]
    assert flat == [("a.pdf", "pdf"), ("empty.pdf", "empty"), ("mislabeled.pdf", "image")]
    nested = [s.rel for s in expand_remote(f"s3://{bucket}/in/**/*.pdf")]
    assert nested == ["a.pdf", "empty.pdf", "mislabeled.pdf", "sub/junk-first.pdf"]
    # ``**`` matches folders and their objects: each object once, never a hidden one.
    everything = [s.rel for s in expand_remote(f"s3://{bucket}/in/**")]
    assert everything == [s.rel for s in expand_remote(f"s3://{bucket}/in")]
    # A matched folder is walked; rels stay relative to the pattern's fixed part.
    folders = [s.rel for s in expand_remote(f"s3://{bucket}/in/s*")]
    assert folders == ["sub/b.png", "sub/deep/no-suffix", "sub/junk-first.pdf"]
    single = list(expand_remote(f"s3://{bucket}/in/notes.txt"))  # named: kept, fails later
    assert [(s.rel, s.kind, s.size) for s in single] == [("notes.txt", "unknown", 14)]
    with pytest.raises(SourceError):
        list(expand_remote(f"s3://{bucket}/nothing-here"))
    with pytest.raises(SourceError):
        list(expand_remote(f"s3://{bucket}/in/*.docx"))


@s3
def test_local_copy(inputs: str) -> None:
    uri = f"s3://{inputs}/in/a.pdf"
    with local_copy(uri) as path:
        assert path.endswith(".pdf") and Path(path).read_bytes() == _pdf()
    assert not Path(path).exists()
    with pytest.raises(SourceError) as too_large, local_copy(uri, max_bytes=10):
        pass
    assert too_large.value.reason == "too_large"
    with pytest.raises(SourceError) as missing, local_copy(f"s3://{inputs}/in/missing.pdf"):
        pass
    assert missing.value.reason == "unreadable"


def test_local_copy_of_a_local_path_is_the_path(tmp_path: Path) -> None:
    file = tmp_path / "a.pdf"
    file.write_bytes(b"%PDF-1.4")
    with local_copy(str(file)) as path:
        assert path == str(file)
    with local_copy(f"file://{file}") as path:
        assert path == str(file)
    assert file.exists()


# -- the generic fsspec path (no conditional writes in the protocol) ----------------------
def test_memory_store_emulates_conditional_writes() -> None:
    store = FsspecStore(f"memory://ocrflow-{uuid.uuid4().hex}")
    store.write_bytes("a/b", b"x")
    assert store.read_bytes("a/b") == b"x" and store.list("a") == ["a/b"]
    assert store.create_exclusive("c", b"1") and not store.create_exclusive("c", b"2")
    data, version = store.read_with_version("c")
    assert data == b"1" and version
    assert store.write_if_match("c", b"2", version)
    assert not store.write_if_match("c", b"3", version)
    store.delete("c")
    assert store.read_bytes("c") is None and store.read_with_version("c") == (None, None)


def test_memory_expand() -> None:
    root = f"memory://in-{uuid.uuid4().hex}"
    store = FsspecStore(root)
    store.write_bytes("x/a.pdf", _pdf())
    store.write_bytes("x/b.bin", _png())
    store.write_bytes("x/c.txt", b"text")
    assert [(s.rel, s.kind) for s in expand_remote(root)] == [
        ("x/a.pdf", "pdf"),
        ("x/b.bin", "image"),
    ]


# -- the product: ocrflow run writing its workspace to S3 ----------------------------------
@s3
@pytest.mark.slow
def test_cli_run_to_s3(bucket: str, s3_endpoint: S3Endpoint, tmp_path: Path) -> None:
    pdf = tmp_path / "hello.pdf"
    pdf.write_bytes(_pdf())
    out = f"s3://{bucket}/out"
    secret = f"sEcReT-{uuid.uuid4().hex}"  # moto accepts any key: make it recognisable
    env = {**s3_endpoint.env, "AWS_SECRET_ACCESS_KEY": secret}
    done = ocrflow("run", str(pdf), "-o", out, "--text-layer", "only", env=env)
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr

    client = s3_endpoint.client()
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert "out/markdown/hello.pdf.md" in keys
    assert any(k.startswith("out/results/") and k.endswith(".jsonl") for k in keys)
    assert any(k.startswith("out/.ocrflow/done/") and k.endswith(".json") for k in keys)
    assert "out/.ocrflow/config.json" in keys
    markdown = client.get_object(Bucket=bucket, Key="out/markdown/hello.pdf.md")["Body"].read()
    assert b"Hello world from S3" in markdown

    status = ocrflow("status", out, "--json", env=env)
    assert status.returncode == 0, status.stderr
    summary = json.loads(status.stdout)
    assert summary["output"] == out and summary["documents"] == {"ok": 1}

    again = ocrflow("run", str(pdf), "-o", out, "--text-layer", "only", "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["documents_skipped"] == 1  # resumed from the S3 workspace
