"""Issue 21's table: each client run against the bare client on a fresh and on a warm server.

    python bench/gpu/ratios.py RESULTS.jsonl --fresh LABEL --warm LABEL [--only PREFIX]

Whole run: pages/s over the client's wall time (for a managed server, ``ocrflow run
--engine vllm``, from the moment the server answered: its start is a per-replica cost
reported apart). Busy window: pages over the time the server had a request. ``lead_s`` and
``tail_s``: idle server time before the first request (after the server answered, for a
managed one) and after the last answer.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _rate(row: dict[str, Any]) -> float:
    return float(row.get("after_ready_pages_per_s") or row["pages_per_s"])


def rows_table(rows: list[dict[str, Any]], fresh: dict[str, Any], warm: dict[str, Any]) -> str:
    """The Markdown table of ``rows`` with ratios to the two bare runs."""
    head = (
        "| run | client | pages | pages/s (whole) | busy pages/s | whole / fresh | whole / warm "
        "| busy / fresh | busy / warm | lead s | tail s | running | GPU % | client CPU s "
        "(main / render) |"
    )
    lines = [head, "|" + "---|" * 14]
    for row in rows:
        lead = row.get("lead_after_ready_s", row.get("lead_s", ""))
        cpu = row.get("client_cpu") or {}
        cpu_s = f"{cpu.get('main_cpu_s', '')} / {cpu.get('workers_cpu_s', '')}" if cpu else ""
        busy = row.get("busy_pages_per_s", 0.0)
        start = f" (+{row['server_start_s']} s start)" if "server_start_s" in row else ""
        cells = [
            row["label"], row["client"], row["pages"], f"{_rate(row):.2f}{start}", f"{busy:.2f}",
            f"{_rate(row) / fresh['pages_per_s']:.3f}", f"{_rate(row) / warm['pages_per_s']:.3f}",
            f"{busy / fresh['busy_pages_per_s']:.3f}", f"{busy / warm['busy_pages_per_s']:.3f}",
            lead, row.get("tail_s", ""), row.get("running_mean", ""), row.get("gpu_util_mean", ""),
            cpu_s,
        ]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--fresh", required=True, help="label of the bare run on a fresh server")
    parser.add_argument("--warm", required=True, help="label of the bare run on a warm server")
    parser.add_argument("--only", default="", help="rows whose label starts with this")
    args = parser.parse_args()
    rows = [json.loads(x) for x in args.results.read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r["label"].startswith(args.only)]
    by_label = {r["label"]: r for r in rows}
    print(rows_table(rows, by_label[args.fresh], by_label[args.warm]))


if __name__ == "__main__":
    main()
