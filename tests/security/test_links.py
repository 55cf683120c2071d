"""Walks and globs never leave an allowed folder: a link inside it to a file or folder
outside is never read, whether the job names the folder (``DIR``), a glob (``DIR/*/*.pdf``,
``DIR/**``) or the link itself; a link that changes after planning is checked again when
it is read."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ocrflow.config import InputOptions
from ocrflow.config.access import AccessRefused, service_policy
from ocrflow.errors import SourceError
from ocrflow.inputs.copies import RowFetcher
from ocrflow.inputs.expand import expand_inputs
from tests.integration.serve_helpers import TOKEN_A, Served, auth, serving, wait_status
from tests.security.access_helpers import everything_said, text_pdf

pytestmark = pytest.mark.slow

INSIDE = "INSIDEALLOWEDDOC"
OUTSIDE = "OUTSIDELINKEDSECRET"


@dataclass
class Tree:
    allowed: Path
    outside: Path


def _tree(base: Path) -> Tree:
    """``allowed/`` with a document, links out (to a file, a folder, the root) and a loop;
    ``outside/`` with the secret."""
    allowed, outside = base / "allowed", base / "outside"
    (allowed / "sub").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    (allowed / "sub" / "inside.pdf").write_bytes(text_pdf(INSIDE))
    for target in (outside / "secret.pdf", outside / "deep" / "secret2.pdf"):
        target.write_bytes(text_pdf(OUTSIDE))
    (allowed / "sub" / "link.pdf").symlink_to(outside / "secret.pdf")
    (allowed / "sub" / "linkdir").symlink_to(outside)
    (allowed / "rootlink").symlink_to("/")
    (allowed / "sub" / "loop").symlink_to(allowed)
    os.mkfifo(allowed / "sub" / "fifo.pdf")
    return Tree(allowed, outside)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    return _tree(tmp_path_factory.mktemp("links"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tree: Tree) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("links-serve") / "root"
    with serving(root, "--workers", "1", "--allow-uri-prefix", str(tree.allowed)) as running:
        yield running


def _patterns(tree: Tree) -> list[str]:
    a = tree.allowed
    return [str(a), f"{a}/*/*.pdf", f"{a}/**", f"{a}/**/*.pdf", f"{a}/*", f"{a}/sub/*"]


@pytest.mark.parametrize("index", range(6))
def test_walks_and_globs_read_nothing_through_a_link_out(
    served: Served, tree: Tree, index: int
) -> None:
    pattern = _patterns(tree)[index]
    answer = httpx.post(served.url + "/v1/jobs", json={"uris": [pattern]}, headers=auth(TOKEN_A),
                        timeout=60)  # fmt: skip
    assert answer.status_code == 201, (pattern, answer.text)
    with httpx.Client(base_url=served.url, timeout=60) as client:
        job = wait_status(client, answer.json()["id"], {"done", "failed"}, timeout=120)
        said = everything_said(client, job["id"], TOKEN_A)
    assert INSIDE in said, (pattern, job)
    assert OUTSIDE not in said, (pattern, job)
    assert str(tree.outside) not in said
    reasons = {f["reason"] for f in job["failures"]}
    assert reasons <= {"path_not_allowed"}, job["failures"]
    assert job["documents"].get("ok") == 1, job


@pytest.mark.parametrize("name", ["sub/link.pdf", "sub/linkdir/secret.pdf", "sub/linkdir",
                                  "rootlink/etc/passwd", "sub/fifo.pdf"])  # fmt: skip
def test_naming_a_link_out_is_refused(served: Served, tree: Tree, name: str) -> None:
    answer = httpx.post(served.url + "/v1/jobs", json={"uris": [str(tree.allowed / name)]},
                        headers=auth(TOKEN_A), timeout=60)  # fmt: skip
    assert 400 <= answer.status_code < 500, (name, answer.text)
    assert str(tree.outside) not in answer.text


def test_a_restricted_walk_records_links_out_as_refused(tree: Tree) -> None:
    options = InputOptions(access=service_policy((str(tree.allowed),)))
    for pattern in _patterns(tree):
        sources = expand_inputs([pattern], options=options)
        kinds = {s.rel: s.kind for s in sources}
        assert "pdf" in kinds.values(), (pattern, kinds)
        for source in sources:
            assert str(tree.outside) not in source.uri
            if source.kind == "path_not_allowed":
                assert source.size == 0 and source.rel.endswith("link.pdf"), source
        assert not any("secret" in rel for rel in kinds), (pattern, kinds)


def test_the_cli_keeps_following_its_users_links(tree: Tree) -> None:
    kinds = {s.rel: s.kind for s in expand_inputs([str(tree.allowed / "sub")])}
    assert kinds == {"inside.pdf": "pdf", "link.pdf": "pdf"}  # read through: the user's files


def test_a_file_replaced_by_a_link_after_planning_is_not_read(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    policy = service_policy((str(tree.allowed),))
    victim = tree.allowed / "sub" / "victim.pdf"
    victim.write_bytes(text_pdf(INSIDE))
    planned = {s.rel: s for s in expand_inputs([str(tree.allowed / "sub")],
                                               options=InputOptions(access=policy))}  # fmt: skip
    assert planned["victim.pdf"].kind == "pdf"
    victim.unlink()
    victim.symlink_to(tree.outside / "secret.pdf")  # between planning and reading
    fetcher = RowFetcher(access=policy)  # what a worker reads through, policy from the run
    with pytest.raises(AccessRefused), fetcher.local_copy(planned["victim.pdf"].uri):
        pass
    victim.unlink()
    victim.symlink_to("/dev/zero")
    with pytest.raises(AccessRefused), fetcher.local_copy(planned["victim.pdf"].uri):
        pass
    with (
        pytest.raises(SourceError, match="not a regular file"),
        RowFetcher().local_copy("/dev/zero"),
    ):
        pass  # the CLI too never reads a device


def test_a_joining_worker_checks_again_when_it_reads(tmp_path: Path) -> None:
    """Planned by the API, read by ``ocrflow worker --root`` after the file became a link
    out: the worker applies the job's recorded policy and reads nothing of it."""
    tree = _tree(tmp_path / "files")
    victim = tree.allowed / "sub" / "victim.pdf"
    victim.write_bytes(text_pdf(INSIDE))
    root = tmp_path / "root"
    args = ["--workers", "0", "--allow-uri-prefix", str(tree.allowed)]
    with serving(root, *args) as service, httpx.Client(base_url=service.url, timeout=60) as client:
        answer = client.post("/v1/jobs", json={"uris": [str(victim.parent)]}, headers=auth(TOKEN_A))
        assert answer.status_code == 201, answer.text
        victim.unlink()
        victim.symlink_to(tree.outside / "secret.pdf")  # between planning and reading
        worker = subprocess.run(
            [sys.executable, "-m", "ocrflow.cli", "worker", "--root", str(root),
             "--exit-when-idle", "-q"],
            capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert worker.returncode == 0, worker.stderr
        job = wait_status(client, answer.json()["id"], {"done", "failed"}, timeout=120)
        said = everything_said(client, job["id"], TOKEN_A)
    assert OUTSIDE not in said and INSIDE in said
    reasons = sorted(f["reason"] for f in job["failures"])
    assert reasons == ["path_not_allowed", "path_not_allowed"], job  # victim.pdf, link.pdf


def test_a_preview_never_follows_an_input_swapped_for_a_link(tmp_path: Path) -> None:
    """A finished job's upload replaced by a link to a file outside: its page preview is
    refused (404), never rendered from the link's target; an untouched job's renders."""
    secret = tmp_path / "secret.pdf"
    secret.write_bytes(text_pdf(OUTSIDE))
    answers = {}
    with (
        serving(tmp_path / "root", "--workers", "1") as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        for name in ("kept", "swapped"):
            files = {"files": (f"{name}.pdf", text_pdf(INSIDE), "application/pdf")}
            job_id = client.post("/v1/jobs", files=files, headers=auth(TOKEN_A)).json()["id"]
            wait_status(client, job_id, {"done"}, timeout=120)
            docs = client.get(f"/v1/jobs/{job_id}/documents", headers=auth(TOKEN_A)).json()
            doc_id = docs["documents"][0]["id"]
            if name == "swapped":
                upload = tmp_path / "root" / "jobs" / job_id / "in" / "swapped.pdf"
                upload.unlink()
                upload.symlink_to(secret)
            page = f"/v1/jobs/{job_id}/documents/{doc_id}/pages/1.jpg"
            answers[name] = client.get(page, headers=auth(TOKEN_A))
    assert answers["kept"].status_code == 200
    assert answers["swapped"].status_code == 404, answers["swapped"].text
