"""What the VLM integration tests share: the CLI command line, and reading a run back.

The fake server names each page it answers ``page-<12 hex>``, a hash of the image it was
sent (``tests/fakevllm/replies.py``), and counts requests per image in ``/stats``. These
helpers turn an output directory back into per-page texts and records so that tests can
check every page once, each with its own image's answer.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ocrflow.render.jobs import PageJob, RenderSpec, render_pages

from .cli_helpers import results

TAG = re.compile(r"page-[0-9a-f]{12}")
MODEL = "olmocr"


def vlm_args(server_url: str, *extra: str) -> list[str]:
    """``ocrflow run`` options for the fake server with the olmOCR recipe, every page OCR'd."""
    return [
        "--text-layer", "off",
        "--engine", "openai",
        "--server", server_url,
        "--model", MODEL,
        "--recipe", "olmocr",
        "--json", "-q",
        *extra,
    ]  # fmt: skip


def image_tag(data: bytes) -> str:
    """The tag the fake server gives an image: SHA-1 of its base64 text, 12 hex digits."""
    return "page-" + hashlib.sha1(base64.b64encode(data)).hexdigest()[:12]


def rendered_tags(pdf: Path, pages: tuple[int, ...], target_dim: int = 1288) -> dict[int, str]:
    """Render ``pages`` as the run did and return each page's tag (blank pages have none)."""
    spec = RenderSpec(target_dim=target_dim, text_layer="off", encoding="png")
    rendered = render_pages(PageJob(str(pdf), "pdf", pages, spec))
    return {p.page: image_tag(p.image.data) for p in rendered if p.image is not None}


def page_texts(out: Path) -> dict[str, list[tuple[int, str]]]:
    """``{source: [(page, text), …]}`` from OUT/results, in record order, via the spans."""
    texts: dict[str, list[tuple[int, str]]] = {}
    for record in results(out):
        pages = texts.setdefault(record["metadata"]["Source-File"], [])
        for start, end, number in record["attributes"]["pdf_page_numbers"]:
            pages.append((number, record["text"][start:end]))
    return texts


def done_records(out: Path) -> list[dict[str, Any]]:
    """Every done marker under OUT/.ocrflow/done."""
    folder = out / ".ocrflow" / "done"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def checkpointed_pages(out: Path) -> dict[str, set[int]]:
    """``{doc_id: pages}`` held in OUT/.ocrflow/pages checkpoints (unfinished documents)."""
    found: dict[str, set[int]] = {}
    for path in (out / ".ocrflow" / "pages").glob("*/*.json"):
        try:
            pages = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written
        found.setdefault(path.parent.name, set()).update(p["page"] for p in pages)
    return found


def requests_sent(page: dict[str, Any]) -> int:
    """Requests the reader made for a page: one per attempt, plus each transient retry."""
    attributes = page.get("attributes") or {}
    return int(page.get("attempts") or 0) + int(attributes.get("transient_retries") or 0)


def check_tags(texts: list[tuple[int, str]]) -> dict[int, str]:
    """Each engine page's single tag; asserts no tag answers two pages."""
    tags: dict[int, str] = {}
    for number, text in texts:
        found = set(TAG.findall(text))
        assert len(found) <= 1, f"page {number} holds the answers of several images: {found}"
        if found:
            tags[number] = found.pop()
    repeated = [t for t, n in Counter(tags.values()).items() if n > 1]
    assert not repeated, f"one image's answer on several pages: {repeated}"
    return tags
