"""``ocrflow run --shard I/N`` over the real corpus: N tasks cover every document exactly
once, each writing to its own OUT or all to one. Text layer only, first page only: the
shards are about which documents a task takes, not about OCR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ocrflow.config.builder import build_run_config
from ocrflow.executors.local import plan_jobs
from ocrflow.executors.shards import Shard, shard_part
from ocrflow.inputs.expand import expand_inputs
from ocrflow.sinks.results import done_markers
from ocrflow.storage.open import open_store
from ocrflow.workspace.workitems import document_items

from .cli_helpers import ocrflow, status_json

pytestmark = pytest.mark.slow

FAST = ("--text-layer", "only", "--pages", "1", "--json", "--page-timeout", "60")


def _inputs(corpus: Path) -> list[str]:
    return [str(corpus / "pdfs"), str(corpus / "images")]


def _converted(out: Path) -> list[str]:
    """The source of every document OUT holds a done marker for."""
    return [marker.source for marker in done_markers(open_store(str(out)))]


@pytest.mark.parametrize("count", [1, 3, 7])
def test_shards_partition_the_corpus(corpus: Path, tmp_path: Path, count: int) -> None:
    config = build_run_config(_inputs(corpus), tmp_path / "out", text_layer="only")
    sources = expand_inputs(config.inputs, exclude=[config.output], options=config.input)
    assert len(sources) > 100
    items = document_items(plan_jobs(sources), config.fingerprint())
    parts = [{i.uri for i in items if Shard(s, count).holds(i)} for s in range(count)]
    assert sum(len(p) for p in parts) == len(sources)  # no overlap ...
    assert set().union(*parts) == {s.uri for s in sources}  # ... and nothing left out
    assert all(parts), "a shard of the corpus is empty"
    assert [shard_part(config, sources, Shard(s, count)) for s in range(count)] == [
        len(p) for p in parts
    ]


def test_three_tasks_each_with_its_own_out(corpus: Path, tmp_path: Path) -> None:
    """The three ways to name a shard: the flag, its older form, a platform's variables."""
    runs = [
        (["--shard", "0/3"], {}),
        (["--shard-index", "1", "--num-shards", "3"], {}),
        (["--shard", "auto"], {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1",
                               "SLURM_ARRAY_TASK_COUNT": "3"}),
    ]  # fmt: skip
    seen: list[str] = []
    for index, (flags, env) in enumerate(runs):
        out = tmp_path / f"out{index}"
        done = ocrflow("run", *_inputs(corpus), "-o", str(out), *FAST, *flags, env=env)
        assert done.returncode in (0, 1), done.stderr[-2000:]  # some corpus files fail
        assert "Traceback" not in done.stderr
        converted = _converted(out)
        summary = json.loads(done.stdout)
        assert sum(summary["documents"].values()) == len(converted)
        total = summary["out"]["documents"]
        assert f"shard {index}/3: this run's part is {len(converted)} of " in done.stderr
        assert total.get("pending", 0) == sum(total.values()) - len(converted)
        seen.extend(converted)
    inputs = sum(len(list(Path(folder).iterdir())) for folder in _inputs(corpus))
    assert len(seen) == len(set(seen)) == inputs


def test_seven_tasks_share_one_out(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    parts = []
    for index in range(7):
        env = {"OCRFLOW_SHARD_INDEX": str(index), "OCRFLOW_SHARD_COUNT": "7"}
        done = ocrflow("run", *_inputs(corpus), "-o", str(out), *FAST, env=env)
        assert done.returncode in (0, 1), done.stderr[-2000:]
        parts.append(sum(json.loads(done.stdout)["documents"].values()))
        assert f"shard {index}/7: this run's part is {parts[-1]} of " in done.stderr
    converted = _converted(out)
    assert len(converted) == len(set(converted)) == sum(parts)
    report = status_json(out)
    assert "pending" not in report["documents"]
    assert sum(report["documents"].values()) == len(converted)
    inputs = sum(len(list(Path(folder).iterdir())) for folder in _inputs(corpus))
    assert len(converted) == inputs
