"""What the CLI prints for people: a run's summary and ``ocrflow status`` as tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ocrflow.observe.confidence_spread import spread_rows
from ocrflow.observe.runstats import RunStats


def print_run_summary(stats: RunStats, output: str) -> None:
    """This run's tallies, and beside them the whole OUT's documents when known
    (``stats.out``): runs and workers sharing OUT each did a part of it."""
    console = Console(stderr=True)
    whole: dict[str, int] | None = (stats.out or {}).get("documents")
    table = Table(title=f"ocrflow run -> {output}", show_header=True)
    for column in ("what", "this run", *(("whole OUT",) if whole is not None else ())):
        table.add_column(column, justify="left" if column == "what" else "right")
    for status in sorted(set(stats.documents) | set(whole or {})):
        counts = [stats.documents.get(status, 0)]
        if whole is not None:
            counts.append(whole.get(status, 0))
        table.add_row(f"documents {status}", *map(str, counts))
    if stats.skipped_documents:
        table.add_row("  of which already done", str(stats.skipped_documents))
    for route, count in sorted(stats.routes.items()):
        table.add_row(f"pages via {route}", str(count))
    for reason, count in stats.files_skipped.counts.most_common():
        table.add_row(f"files left out: {reason}", str(count))
    elapsed = stats.elapsed_s
    table.add_row("pages/s", f"{stats.pages_done / max(elapsed, 1e-9):.2f}")
    table.add_row("elapsed", f"{elapsed:.1f} s")
    console.print(table)
    others = _finished_by_others(stats, whole or {})
    if others:
        console.print(f"  {others} documents of OUT were finished by other runs or workers")
    for failure in stats.failures[:20]:
        console.print(
            f"  [yellow]{failure['status']}[/] "
            + escape(f"{failure['source']}: [{failure['reason']}] {failure['message']}"),
            highlight=False,
        )


def _finished_by_others(stats: RunStats, whole: dict[str, int]) -> int:
    """Finished documents of OUT this run neither did nor found done when it started."""
    finished = sum(n for status, n in whole.items() if status != "pending")
    return max(finished - sum(stats.documents.values()), 0)


def print_status(report: dict[str, Any]) -> None:
    console = Console()
    table = Table(title=f"ocrflow status {report['output']}")
    table.add_column("what")
    table.add_column("count", justify="right")
    for key in ("documents", "pages", "routes", "failures_by_reason"):
        for name, count in sorted(report[key].items()):
            table.add_row(f"{key.replace('_', ' ')}: {name}", str(count))
    for reason, count in sorted(report.get("files_skipped", {}).items()):
        table.add_row(f"files left out (last planning): {reason}", str(count))
    last = report.get("last_run") or {}
    if last:
        table.add_row("last run pages/s", str(last.get("pages_per_s")))
        if last.get("tokens_out"):
            table.add_row("last run tokens out/s", str(last.get("tokens_out_per_s")))
    for what, count in spread_rows(report):
        table.add_row(what, count)
    if report["tokens"]["out"]:
        table.add_row("tokens in / out", f"{report['tokens']['in']} / {report['tokens']['out']}")
    table.add_row("active leases", str(len(report["active_leases"])))
    for worker in report["workers"]:
        state = "alive" if worker["alive"] else "finished"
        table.add_row(
            f"worker {worker['worker']} ({state})",
            f"{worker['pages']} pages, {worker['pages_per_s']} pages/s",
        )
    if "cost_per_1000_pages" in report:
        table.add_row("cost per 1,000 pages", str(report["cost_per_1000_pages"]))
    console.print(table)
    for failure in report["failures"][:50]:
        console.print(
            f"  {failure['status']} {failure['source']}: [{failure['reason']}] "
            f"{failure['message']}",
            highlight=False,
            markup=False,
        )
