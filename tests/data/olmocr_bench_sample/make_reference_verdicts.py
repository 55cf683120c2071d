"""Recompute reference_verdicts.json with the reference code (run OUTSIDE this repository).

    python3 -m venv /tmp/refbench
    /tmp/refbench/bin/pip install rapidfuzz fuzzysearch beautifulsoup4 lxml tqdm playwright
    git clone https://github.com/allenai/olmocr /tmp/olmocr   # or any checkout
    /tmp/refbench/bin/python make_reference_verdicts.py /tmp/olmocr

It imports olmocr/bench/tests.py from that checkout (nothing of it is copied here) and runs
every test of dataset.jsonl and blanks.jsonl on outputs/ and on perturbed/, adding the
benchmark's automatic per-PDF baseline test. Math tests render with the reference's KaTeX
in Debian's chromium through Playwright (no browser download).
"""

from __future__ import annotations

import json
import os
import sys
import weakref
from pathlib import Path

HERE = Path(__file__).resolve().parent


def patch_browser(render: object) -> None:
    """Make the reference launch /usr/bin/chromium instead of Playwright's own build."""
    from playwright.sync_api import sync_playwright

    def init(self: object) -> None:
        p = sync_playwright().start()
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        self.p, self.browser, self._closed = p, b, False  # type: ignore[attr-defined]
        self._finalizer = weakref.finalize(self, render._cleanup_playwright, p, b)  # type: ignore[attr-defined]

    render._BrowserOwner.__init__ = init  # type: ignore[attr-defined]


def verdicts(outputs: Path, tests: list) -> dict[str, bool]:
    found = {}
    for test in tests:
        md = outputs / f"{os.path.splitext(test.pdf)[0]}_pg{test.page}_repeat1.md"
        found[test.id] = bool(test.run(md.read_text(encoding="utf-8"))[0])
    return dict(sorted(found.items()))


def main(checkout: Path) -> None:
    sys.path.insert(0, str(checkout))
    from olmocr.bench.katex import render
    from olmocr.bench.tests import BaselineTest, load_single_test

    patch_browser(render)
    lines = [
        ln
        for name in ("dataset.jsonl", "blanks.jsonl")
        for ln in (HERE / name).read_text().splitlines()
        if ln.strip()
    ]
    tests = [load_single_test(ln) for ln in lines]
    for pdf in sorted({t.pdf for t in tests}):
        if not any(t.type == "baseline" and t.pdf == pdf for t in tests):
            tests.append(BaselineTest(id=f"{pdf}_baseline", pdf=pdf, page=1, type="baseline"))
    result = {"source": "allenai/olmocr olmocr/bench/tests.py, see README.md"}
    for outputs in ("outputs", "perturbed"):
        result[outputs] = verdicts(HERE / outputs, tests)  # type: ignore[assignment]
    (HERE / "reference_verdicts.json").write_text(json.dumps(result, indent=1) + "\n")
    os._exit(0)  # the reference's browser threads would keep the process alive


if __name__ == "__main__":
    main(Path(sys.argv[1]))
