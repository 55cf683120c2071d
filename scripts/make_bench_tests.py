"""Write tests/data/bench_tests.jsonl: olmOCR-bench tests for pages of ../shared/corpus.

The tests come from the corpus's ground-truth files only (never from an engine's output):

* docling JSON (``groundtruth/docling__*.json``) gives every text item with its page and
  box, and tables as cell grids: ``present`` tests for body texts, ``order`` tests for
  consecutive paragraphs and, on two-column pages, for the end of the left column before
  the start of the right one, ``table`` tests for cells with their right/lower neighbour
  and column heading;
* plain-text ground truth (``.txt``, ``.gt.txt``, reference ``.md``) gives ``present``
  tests for lines and an ``order`` test for the first line before the last one;
* every page gets a ``baseline`` test.

Every generated test is then run on the ground truth itself (the whole document as the
page's text) and dropped if it fails there, so a perfect transcription passes them all.
Run it again only on purpose: ``python scripts/make_bench_tests.py [CORPUS]``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ocrflow.evaluation.bench import load_tests, parse_test, run_test

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "bench_tests.jsonl"
DOCLING = (
    "2305.03393v1-pg9",
    "amt_handbook_sample",
    "code_and_formula",
    "normal_4pages",
    "redp5110_sampled",
    "right_to_left_01",
    "table_mislabeled_as_picture",
)
# (document, ground-truth file) for plain-text ground truth; several scans share one text.
PLAIN = (
    ("pdfs/ocrmypdf__linn.pdf", "ocrmypdf__linn.txt"),
    ("pdfs/ocrmypdf__skew.pdf", "ocrmypdf__linn.txt"),
    ("pdfs/ocrmypdf__ccitt.pdf", "ocrmypdf__linn.txt"),
    ("images/ocrmypdf__linn.png", "ocrmypdf__linn.txt"),
    ("pdfs/olmocr__edgar.pdf", "olmocr__edgar.md"),
    ("pdfs/olmocr__edgar_image.pdf", "olmocr__edgar.md"),
    ("pdfs/docling__ocr_test.pdf", "docling__ocr_test.easyocr-reference.md"),
    (
        "pdfs/docling__ocr_test_rotated_90.pdf",
        "docling__ocr_test_rotated_90.tesseract-reference.md",
    ),
    (
        "pdfs/docling__ocr_test_rotated_180.pdf",
        "docling__ocr_test_rotated_180.tesseract-reference.md",
    ),
    ("images/tesseract__phototest.tif", "tesseract__phototest.gold.txt"),
    ("images/tesseract__eurotext.tif", "tesseract__eurotext.txt"),
    (
        "images/ocrd-linegt__alexis_ruhe01_1852_0018_022.tif",
        "ocrd-linegt__alexis_ruhe01_1852_0018_022.gt.txt",
    ),
    (
        "images/ocrd-linegt__alexis_ruhe01_1852_0035_019.tif",
        "ocrd-linegt__alexis_ruhe01_1852_0035_019.gt.txt",
    ),
)
BODY_LABELS = {"text", "list_item", "section_header", "caption", "title", "paragraph"}


def snippet(text: str, limit: int = 70) -> str:
    """The start of ``text``, whitespace collapsed, cut at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut if len(cut) >= limit // 2 else text[:limit]


def tolerance(text: str, share: int) -> int:
    """Allowed edits: one per ``share`` characters (OCR is not perfect)."""
    return len(text) // share


def visible_text(text: str) -> str:
    """Docling writes the name of a bullet glyph's font ("SM590000") into list items."""
    return re.sub(r"^SM590000\s*", "", text)


def body_items(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Text items of the body in reading order (docling's ``body`` tree, pictures skipped)."""

    def walk(ref: str) -> Iterator[dict[str, Any]]:
        _, kind, index = ref.split("/")
        item = doc[kind][int(index)]
        if kind == "texts":
            yield {**item, "text": visible_text(item.get("text", ""))}
        if kind in {"groups", "texts"} or ref == "#/body":
            for child in item.get("children", []):
                yield from walk(child["$ref"])

    for child in doc["body"]["children"]:
        yield from walk(child["$ref"])


PRIVATE_USE = re.compile("[\ue000-\uf8ff\U000f0000-\U0010ffff]")


def usable(item: dict[str, Any]) -> bool:
    """A body text worth a test: long enough, mostly letters, no dot leaders and no
    private-use glyphs (symbol fonts docling could not map)."""
    text = item.get("text", "")
    if PRIVATE_USE.search(text):
        return False
    letters = sum(c.isalpha() for c in text)
    return (
        item.get("label") in BODY_LABELS
        and item.get("content_layer", "body") == "body"
        and bool(item.get("prov"))
        and len(text) >= 25
        and letters >= 0.6 * len(text)
        and ". . ." not in text
    )


def page_of(item: dict[str, Any]) -> int:
    return int(item["prov"][0]["page_no"])


def spread(items: list[Any], n: int) -> list[Any]:
    """``n`` items evenly spread over ``items`` (all of them when fewer)."""
    if len(items) <= n:
        return items
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def present_test(pdf: str, page: int, tid: str, text: str) -> dict[str, Any]:
    text = snippet(text)
    return {
        "pdf": pdf,
        "page": page,
        "id": tid,
        "type": "present",
        "text": text,
        "max_diffs": tolerance(text, 12),
    }


def order_test(pdf: str, page: int, tid: str, before: str, after: str) -> dict[str, Any]:
    before, after = snippet(before, 40), snippet(after, 40)
    diffs = min(tolerance(before, 12), tolerance(after, 12))
    return {
        "pdf": pdf,
        "page": page,
        "id": tid,
        "type": "order",
        "before": before,
        "after": after,
        "max_diffs": diffs,
    }


def column_order(doc: dict[str, Any], page: int, items: list[dict[str, Any]]) -> tuple | None:
    """(last left-column paragraph, first right-column paragraph) on a two-column page."""
    width = float(doc["pages"][str(page)]["size"]["width"])
    left = [i for i in items if i["prov"][0]["bbox"]["r"] < 0.55 * width and len(i["text"]) > 60]
    right = [i for i in items if i["prov"][0]["bbox"]["l"] > 0.45 * width and len(i["text"]) > 60]
    if len(left) >= 2 and len(right) >= 2:
        return left[-1], right[0]
    return None


def docling_text_tests(name: str, doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    pdf = f"pdfs/docling__{name}.pdf"
    by_page: dict[int, list[dict[str, Any]]] = {}
    for item in body_items(doc):
        if usable(item):
            by_page.setdefault(page_of(item), []).append(item)
    for page, items in sorted(by_page.items()):
        stem = f"{name}_p{page}"
        for n, item in enumerate(spread(items, 3)):
            yield present_test(pdf, page, f"{stem}_present_{n}", item["text"])
        if len(items) >= 2:
            yield order_test(pdf, page, f"{stem}_order_0", items[0]["text"], items[-1]["text"])
        if pair := column_order(doc, page, items):
            yield order_test(pdf, page, f"{stem}_order_columns", pair[0]["text"], pair[1]["text"])


def clean_cell(text: str) -> str:
    return " ".join(text.split())


def good_cell(text: str) -> bool:
    """A cell worth a test: short, with letters or digits, not dot leaders, and not several
    values docling merged from separate lines ("0.965 0.969", "OTSL HTML", "y y")."""
    tokens = text.split()
    merged = len(tokens) >= 2 and (
        all(re.fullmatch(r"[\d.,]+", t) for t in tokens)
        or all(len(t) == 1 for t in tokens)
        or text == "OTSL HTML"
    )
    return (
        2 <= len(text) <= 40 and any(c.isalnum() for c in text) and ". ." not in text and not merged
    )


def table_cell_tests(pdf: str, page: int, stem: str, table: dict[str, Any]) -> Iterator[dict]:
    """Cells with their right and lower neighbours (and column heading) in the grid."""
    cells = table["data"]["table_cells"]
    at = {(c["start_row_offset_idx"], c["start_col_offset_idx"]): c for c in cells}
    heads = {
        c["start_col_offset_idx"]: clean_cell(c["text"])
        for c in cells
        if c["start_row_offset_idx"] == 0 and c.get("column_header")
    }
    made = 0
    for cell in sorted(cells, key=lambda c: (c["start_row_offset_idx"], c["start_col_offset_idx"])):
        text = clean_cell(cell["text"])
        row, col = cell["start_row_offset_idx"], cell["start_col_offset_idx"]
        right = at.get((row, cell["end_col_offset_idx"]))
        down = at.get((cell["end_row_offset_idx"], col))
        if not good_cell(text) or made >= 6 or row == 0:
            continue
        test: dict[str, Any] = {
            "pdf": pdf,
            "page": page,
            "id": f"{stem}_cell_{made}",
            "type": "table",
            "cell": text,
            "max_diffs": len(text) // 8,
        }
        if right and good_cell(clean_cell(right["text"])):
            test["right"] = clean_cell(right["text"])
        if down and good_cell(clean_cell(down["text"])):
            test["down"] = clean_cell(down["text"])
        if good_cell(heads.get(col, "")) and row > 1:
            test["top_heading"] = heads[col]
        if len(test) > 7:  # at least one relation besides the cell itself
            made += 1
            yield test


def docling_tests(corpus: Path, name: str) -> tuple[list[dict], str]:
    doc = json.loads((corpus / "groundtruth" / f"docling__{name}.json").read_text("utf-8"))
    tests = list(docling_text_tests(name, doc))
    for n, table in enumerate(doc["tables"]):
        page = int(table["prov"][0]["page_no"])
        tests += table_cell_tests(f"pdfs/docling__{name}.pdf", page, f"{name}_p{page}_t{n}", table)
    truth = (corpus / "groundtruth" / f"docling__{name}.md").read_text("utf-8")
    pages = int(max(doc["pages"], key=int))
    tests += [baseline(f"pdfs/docling__{name}.pdf", p, name, truth) for p in range(1, pages + 1)]
    return tests, truth


CJK = re.compile("[\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af]")


def baseline(pdf: str, page: int, stem: str, truth: str) -> dict[str, Any]:
    test = {"pdf": pdf, "page": page, "id": f"{stem}_p{page}_baseline", "type": "baseline"}
    if CJK.search(truth):  # the reference's baseline refuses CJK, right only for English
        test["check_disallowed_characters"] = False
    return test


def plain_lines(truth: str) -> list[str]:
    truth = re.sub(r"(?s)\A---\n.*?\n---\n", "", truth)  # front matter of olmOCR output
    return [ln.strip() for ln in truth.splitlines() if len(ln.strip()) >= 20]


def plain_tests(corpus: Path, pdf: str, truth_name: str) -> tuple[list[dict], str]:
    truth = (corpus / "groundtruth" / truth_name).read_text("utf-8")
    lines = plain_lines(truth) or [truth.strip()]
    stem = Path(pdf).name.replace(".", "_")  # linn.pdf and linn.png need two ids
    tests = [
        present_test(pdf, 1, f"{stem}_present_{n}", ln) for n, ln in enumerate(spread(lines, 4))
    ]
    if len(lines) >= 2:
        tests.append(order_test(pdf, 1, f"{stem}_order_0", lines[0], lines[-1]))
    tests.append(baseline(pdf, 1, stem, truth))
    return tests, truth


def passes_on_truth(test: dict[str, Any], truth: str) -> bool:
    return run_test(parse_test(test), truth).passed


def main(corpus: Path) -> None:
    kept: list[dict[str, Any]] = []
    made = [docling_tests(corpus, name) for name in DOCLING]
    made += [plain_tests(corpus, pdf, truth) for pdf, truth in PLAIN]
    for tests, truth in made:
        for test in tests:
            if passes_on_truth(test, truth):
                kept.append(test)
            else:
                print(f"dropped (fails on its own ground truth): {test['id']}", file=sys.stderr)
    OUT.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in kept), "utf-8")
    load_tests(OUT)  # refuses duplicate ids and invalid tests
    pages = {(t["pdf"], t["page"]) for t in kept}
    print(f"{len(kept)} tests for {len(pages)} pages -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "corpus")
