"""Client CPU per page of the two-step ``mineru`` recipe against one-step recipes, on the
test server (tests/fakevllm).

Run::

    .venv/bin/python bench/bench_recipe_steps.py [--pages 1-4] [--repeat 3] [--json FILE]

Each setting converts the same corpus PDFs (``../shared/corpus/pdfs``, ``--text-layer off``)
with ``ocrflow run`` in a subprocess against one fake server, answering instantly, and
measures the CPU the run used (user + system, its render workers included:
``RUSAGE_CHILDREN`` around the run; the server's own CPU is not counted):

- ``mineru``: the layout request on the 1036 px page, then one request per block crop
  (the server's layout has 5 blocks to read, ``formats_steps.LAYOUT_BLOCKS``), with step
  checkpoints in OUT as a resumable run writes them;
- ``mineru-nockpt``: the same with the reader's step checkpoints turned off (what they
  cost; a run always writes them);
- ``markdown@2339``: a one-step recipe on pages rendered as large as MinerU's (2339 px),
  so the difference is what the steps cost, not the larger render;
- ``markdown``: the same one-step recipe at its own size (1288 px).

Prints CPU seconds per page (median of ``--repeat`` runs) and the requests sent per page.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakevllm.formats_steps import LAYOUT_MARKER  # noqa: E402
from tests.fakevllm.process import running_server  # noqa: E402

CORPUS = ROOT / ".." / "shared" / "corpus" / "pdfs"
PDFS = (
    "docling__normal_4pages.pdf",
    "docling__2305.03393v1-pg9.pdf",
    "pdfjs__tracemonkey.pdf",
    "olmocr__lots_of_sci_tables.pdf",
)
MODEL = "test-model"
#: The ``ocrflow`` command with the reader's step checkpoints turned off.
DRIVER = """
import sys
from ocrflow.executors import worker
_build = worker.build_pipeline
def build_pipeline(config, workspace, session, reader, **kw):
    reader.steps = None
    return _build(config, workspace, session, reader, **kw)
worker.build_pipeline = build_pipeline
from ocrflow.cli import main
main()
"""
#: Setting -> (recipe, extra ``ocrflow run`` options, step checkpoints in OUT).
SETTINGS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "mineru": ("mineru", (), True),
    "mineru-nockpt": ("mineru", (), False),
    "markdown@2339": ("markdown", ("--target-dim", "2339"), True),
    "markdown": ("markdown", (), True),
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(
    url: str, recipe: str, extra: tuple[str, ...], pages: str, checkpoints: bool
) -> dict[str, Any]:
    """One ``ocrflow run``: its CPU seconds and pages."""
    program = ["-m", "ocrflow.cli"] if checkpoints else ["-c", DRIVER]
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            sys.executable, *program, "run", *(str(CORPUS / p) for p in PDFS),
            "-o", out, "--text-layer", "off", "--engine", "openai", "--server", url,
            "--model", MODEL, "--recipe", recipe, "--pages", pages, "--json", "-q", *extra,
        ]  # fmt: skip
        before = _cpu()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
        cpu = _cpu() - before
    if done.returncode != 0:
        raise SystemExit(f"{recipe}: ocrflow failed:\n{done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    return {"cpu_s": cpu, "pages": sum(summary["pages"].values()), "wall_s": summary["elapsed_s"]}


def bench(pages: str, repeat: int) -> dict[str, Any]:
    """Every setting ``repeat`` times against one server per reply format."""
    report: dict[str, Any] = {}
    for name, (recipe, extra, checkpoints) in SETTINGS.items():
        fmt = "mineru" if recipe == "mineru" else "markdown"
        flags = ("--reply-format", fmt, "--figure-marker", LAYOUT_MARKER, "--model", MODEL)
        with running_server(*flags, "--tokens-per-page", 40, "--pages-per-s", 2000) as server:
            runs = [
                one_run(server.base_url, recipe, extra, pages, checkpoints) for _ in range(repeat)
            ]
            requests = server.stats()["received"]
        page_count = runs[0]["pages"]
        report[name] = {
            "pages": page_count,
            "cpu_s_per_page": round(statistics.median(r["cpu_s"] for r in runs) / page_count, 4),
            "wall_s": round(statistics.median(r["wall_s"] for r in runs), 2),
            "requests_per_page": round(requests / (page_count * repeat), 2),
        }
    return report


def main() -> None:
    """Parse the options, run the bench, print the table (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", default="1-4", help="pages of each PDF (ocrflow --pages)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report = bench(args.pages, args.repeat)
    print(f"{'setting':<16}{'pages':>7}{'CPU s/page':>12}{'requests/page':>15}{'wall s':>9}")
    for name, row in report.items():
        print(
            f"{name:<16}{row['pages']:>7}{row['cpu_s_per_page']:>12.4f}"
            f"{row['requests_per_page']:>15.2f}{row['wall_s']:>9.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
