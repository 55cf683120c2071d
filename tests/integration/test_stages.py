"""extract -> describe -> assemble end to end, against two fake vLLM servers: one reads
pages (DeepSeek grounding output with image boxes), the other describes figures (each
answer names the figure image it saw, so the test can tell it landed after the right link)."""

from __future__ import annotations

import base64
import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.sinks import DocumentMeta, FigureSink, FinishedDocument
from ocrflow.sinks.parquet import read_documents
from ocrflow.storage.local import LocalStore
from ocrflow.types import DocStatus, DocumentResult, Figure, PageResult, PageStatus, Route
from ocrflow.workspace.state import Workspace
from tests.fakevllm.process import ServerHandle, running_server
from tests.fakevllm.replies import page_tag

from .cli_helpers import ocrflow, results

LINK = re.compile(r"!\[([^\]]*)\]\(((?:\.\./)*figures/[^)]+)\)\n\n([^\n]+)")
PAGE_SERVER = ("--reply-format", "deepseek", "--model", "deepseek-ocr", "--pages-per-s", "200")
FIGURES_PER_PAGE = 2


def _make_pdfs(folder: Path, documents: int, pages: int) -> None:
    """PDFs of random coloured boxes: every page (and so every crop) differs."""
    folder.mkdir(parents=True)
    rng = random.Random(7)
    for number in range(documents):
        images = []
        for _ in range(pages):
            image = Image.new("RGB", (480, 640), "white")
            draw = ImageDraw.Draw(image)
            for _ in range(60):
                x, y = rng.randrange(480), rng.randrange(640)
                colour = tuple(rng.randrange(256) for _ in range(3))
                draw.rectangle([x, y, x + 25, y + 18], fill=colour)
            images.append(image)
        images[0].save(folder / f"report-{number}.pdf", save_all=True, append_images=images[1:])


def _extract_args(inputs: Path, out: Path, server: ServerHandle) -> list[str]:
    return [
        "run", str(inputs), "-o", str(out), "--text-layer", "off", "--engine", "openai",
        "--server", server.base_url, "--model", "deepseek-ocr", "--recipe", "deepseek",
        "--format", "markdown,jsonl,parquet,json,chunks,docling", "--workers", "1", "-q",
    ]  # fmt: skip


def _describe_args(out: Path, server: ServerHandle) -> list[str]:
    return ["describe", str(out), "--server", server.base_url, "--model", "describe-vlm", "-q"]


def _ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr[-3000:]


def _crop_tags(out: Path) -> dict[str, str]:
    """Each figure file (relative to OUT) and the tag the fake server gives its image."""
    return {
        str(path.relative_to(out)): page_tag(base64.b64encode(path.read_bytes()).decode())
        for path in sorted((out / "figures").rglob("*.png"))
    }


def _check_described(out: Path) -> None:
    """Every figure link in the Markdown is followed by the description of that figure."""
    tags = _crop_tags(out)
    assert len(tags) == 4 * FIGURES_PER_PAGE
    seen = set()
    for markdown in (out / "markdown").rglob("*.md"):
        text = markdown.read_text()
        links = LINK.findall(text)
        assert len(links) == text.count("](")  # no link without a paragraph after it
        for alt, link, paragraph in links:
            figure = os.path.relpath((markdown.parent / link).resolve(), out.resolve())
            assert paragraph.startswith(f"Figure {tags[figure]}:"), (figure, paragraph)
            assert alt == paragraph  # the description is the alt text too
            seen.add(figure)
    assert seen == set(tags)
    described = {
        f["path"]: f["description"] for r in results(out) for f in r["attributes"]["figures"]
    }
    assert {p: d.split(":")[0] for p, d in described.items()} == {
        p: f"Figure {t}" for p, t in tags.items()
    }
    rows = read_documents(LocalStore(out)).to_pylist()
    assert {f["path"]: f["description"] for r in rows for f in r["figures"]} == described
    _check_other_formats(out, set(described.values()))


def _check_other_formats(out: Path, descriptions: set[str]) -> None:
    """Assemble rewrote every format that holds figures: json, chunks and docling hold each
    description too (pdf, hocr and alto hold printed words only)."""
    assert descriptions and all(descriptions)
    for fmt, suffix in (("json", ".json"), ("chunks", ".jsonl"), ("docling", ".json")):
        files = list((out / fmt).rglob(f"*{suffix}"))
        assert len(files) == 2, fmt
        text = "".join(
            json.dumps(json.loads(line)) for f in files for line in f.read_text().splitlines()
        )
        for description in descriptions:
            assert json.dumps(description)[1:-1] in text, (fmt, description)


def _markdown(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in (out / "markdown").rglob("*.md")}


@pytest.mark.slow
def test_extract_describe_assemble_then_one_command(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    _make_pdfs(inputs, documents=2, pages=2)
    describer_flags = ("--model", "describe-vlm", "--pages-per-s", "200")
    with (
        running_server(*PAGE_SERVER, "--figures-per-page", FIGURES_PER_PAGE) as pages,
        running_server(*describer_flags) as describer,
    ):
        out = tmp_path / "out"
        _ok(ocrflow(*_extract_args(inputs, out, pages)))
        _ok(ocrflow(*_describe_args(out, describer)))
        figures = len(_crop_tags(out))
        assert describer.stats()["received"] == figures  # one request a figure
        assert sum(describer.stats()["figures"].values()) == figures
        _ok(ocrflow(*_describe_args(out, describer)))
        assert describer.stats()["received"] == figures  # the second sent nothing
        _ok(ocrflow("assemble", str(out), "-q"))
        _check_described(out)
        assert pages.stats()["figures"] == {}  # extract's server saw no figure request

        one = tmp_path / "one"
        staged = [
            *_extract_args(inputs, one, pages), "--stages", "extract,describe,assemble",
            "--describe-model", "describe-vlm", "--describe-server", describer.base_url,
        ]  # fmt: skip
        _ok(ocrflow(*staged))
        assert describer.stats()["received"] == 2 * figures
    assert _markdown(one) == _markdown(out)


def _answered(out: Path) -> set[str]:
    """Figure files (relative to OUT) that have a stored answer."""
    found = set()
    for path in (out / ".ocrflow" / "describe").glob("*/*/p*.json"):
        if not path.name.endswith(".failed.json"):
            found.add(f"figures/{path.parent.name}/{path.stem}.png")
    return found


@pytest.mark.slow
def test_sigkill_during_describe_then_rerun_repeats_no_figure(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    _make_pdfs(inputs, documents=2, pages=2)
    # A slow describer: 2 figures at once, 4 a second, so the kill lands mid-way.
    slow = ("--model", "describe-vlm", "--pages-per-s", "4", "--max-num-seqs", "2")
    with running_server(*PAGE_SERVER, "--figures-per-page", FIGURES_PER_PAGE) as pages:
        out = tmp_path / "out"
        _ok(ocrflow(*_extract_args(inputs, out, pages)))
    tags = _crop_tags(out)
    with running_server(*slow) as describer:
        command = [sys.executable, "-m", "ocrflow.cli", *_describe_args(out, describer)]
        first = subprocess.Popen(command, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        try:
            while len(_answered(out)) < 2:
                assert first.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        committed = _answered(out)
        assert 2 <= len(committed) < len(tags)
        time.sleep(0.5)  # the server notices the closed connections
        first_stats = describer.stats()
        before = Counter(first_stats["figures"])
        _ok(ocrflow(*_describe_args(out, describer)))
        after = Counter(describer.stats()["figures"])
        stats = describer.stats()
    _ok(ocrflow("assemble", str(out), "-q"))
    _check_described(out)  # none missing
    again = after - before
    asked = {figure: after[tag] for figure, tag in tags.items()}
    # A figure with an answer before the kill was never asked again ...
    assert not {tags[f] for f in committed} & set(again)
    assert all(asked[f] == 1 for f in committed)
    # ... and a figure asked twice was in flight at the kill: asked in the first run,
    # without a stored answer. The server's count proves it: requests == figures + those.
    in_flight = {f for f in tags if before[tags[f]] and f not in committed}
    assert {f for f, n in asked.items() if n > 1} <= in_flight
    assert all(n <= 2 for n in asked.values())
    assert stats["received"] == len(tags) + sum(before[tags[f]] for f in in_flight)
    assert stats["outcomes"].get("aborted", 0) <= len(in_flight)
    # Whole answers: one a figure, plus any the kill caught between answer and write.
    lost = first_stats["outcomes"].get("stop", 0) - len(committed)
    assert stats["outcomes"]["stop"] == len(tags) + lost
    assert 0 <= lost <= len(in_flight)


def _figure_out(out: Path, documents: int, figures: int) -> int:
    """An OUT as extract leaves it, made with the real figure sink and done markers."""
    rng = random.Random(3)
    store = LocalStore(out)
    workspace = Workspace(store)
    config = RunConfig(inputs=("x",), output=str(out), engine=EngineOptions(kind="openai"))
    workspace.bind(config)
    for number in range(documents):
        crops = []
        for index in range(figures):
            buffer = io.BytesIO()
            Image.frombytes("RGB", (160, 120), rng.randbytes(160 * 120 * 3)).save(buffer, "PNG")
            crops.append(Figure(1, index, "image", (0.1, 0.1, 0.5, 0.5), buffer.getvalue()))
        text = "".join(f"{f.placeholder}\n\n" for f in crops)
        page = PageResult(1, text, Route.ENGINE, PageStatus.OK, figures=tuple(crops))
        result = DocumentResult(f"d{number}", f"/in/{number}", DocStatus.OK, (page,), 1)
        meta = DocumentMeta(f"{number}.pdf", "", None, "openai:x", config.fingerprint())
        FigureSink(store).write(FinishedDocument(result, meta))
        workspace.mark_done(result)
    return documents * figures


@pytest.mark.slow
def test_three_describe_processes_share_one_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    figures = _figure_out(out, documents=30, figures=3)
    flags = ("--model", "describe-vlm", "--pages-per-s", "60", "--max-num-seqs", "8")
    with running_server(*flags) as server:
        command = [sys.executable, "-m", "ocrflow.cli", *_describe_args(out, server), "--json"]
        workers = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(3)]
        described = [json.loads(w.communicate(timeout=120)[0])["described"] for w in workers]
        asked = server.stats()["figures"]
    assert sum(described) == figures == len(asked)  # every figure, by one worker each
    assert set(asked.values()) == {1}


def test_refused_figures_fail_once_per_run_and_the_next_run_describes_them(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    figures = _figure_out(out, documents=2, figures=2)
    refusing = ("--model", "describe-vlm", "--context-overflow", "1")
    with running_server(*refusing) as server:
        done = ocrflow(*_describe_args(out, server), "--json")
        asked = server.stats()["figures"]
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert (report["failed"], report["described"]) == (figures, 0)
    # The context overflow is "fixable": each figure is sent 3 times (2 smaller crops).
    assert len(asked) == 3 * figures and set(asked.values()) == {1}
    _ok(ocrflow("assemble", str(out), "-q"))
    assert not any(f["description"] for r in results(out) for f in r["attributes"]["figures"])
    with running_server("--model", "describe-vlm", "--pages-per-s", "200") as server:
        done = ocrflow(*_describe_args(out, server), "--json")
        assert server.stats()["received"] == figures
    assert json.loads(done.stdout)["described"] == figures
    assert not list((out / ".ocrflow" / "describe").rglob("*.failed.json"))
