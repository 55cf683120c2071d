"""Static shards: ``ocrflow run --shard I/N`` works on a stable 1/N of the run's items.

For schedulers that start N copies of one command and share no workspace (a Kubernetes
Indexed Job, a SLURM job array, a Cloud Run job): task ``I`` of ``N`` takes the items whose
id hashes to ``I`` (``WorkItem.shard``), so N tasks over the same inputs and settings cover
every document exactly once, whether they write to one OUT or each to its own. An item's
id comes from its source's location, its name in OUT and the settings, never from the
order of the inputs or the host; the ranges of a split document stay in their document's
shard.

Where the shard comes from, first found wins:

1. ``--shard I/N`` (``I`` counts from 0), or the older ``--shard-index I --num-shards N``.
2. The environment, only when sharding was asked for: ``--shard auto``, or
   ``OCRFLOW_SHARD_COUNT`` / ``OCRFLOW_SHARD_INDEX`` set. The index is
   ``OCRFLOW_SHARD_INDEX``, else the platform's (``JOB_COMPLETION_INDEX``,
   ``SLURM_ARRAY_TASK_ID`` less ``SLURM_ARRAY_TASK_MIN``, ``CLOUD_RUN_TASK_INDEX``); the count
   is ``OCRFLOW_SHARD_COUNT``, else the same platform's (``SLURM_ARRAY_TASK_COUNT``,
   ``CLOUD_RUN_TASK_COUNT``; Kubernetes sets none).

A platform's variables alone never shard a run: an array task that converts inputs of its
own (``part-$SLURM_ARRAY_TASK_ID/``) must not silently drop the rest of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ocrflow.config import RunConfig
from ocrflow.config.environment import SHARD_VARIABLES, ShardVariables
from ocrflow.errors import ConfigError
from ocrflow.executors.local import plan_jobs
from ocrflow.inputs.source import Source
from ocrflow.storage.open import open_store
from ocrflow.workspace.records import WorkItem
from ocrflow.workspace.workitems import Manifest, document_items

AUTO = "auto"
_PAIR = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*", re.ASCII)
_OWN = SHARD_VARIABLES[0]


@dataclass(frozen=True, slots=True)
class Shard:
    """Task ``index`` (from 0) of ``count``; ``origin`` says where it was given."""

    index: int
    count: int
    origin: str = "--shard"

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"the shard count must be 1 or more ({self.origin})")
        if not 0 <= self.index < self.count:
            raise ConfigError(
                f"shard index {self.index} is not in 0..{self.count - 1} ({self.origin}): "
                "shards count from 0"
            )

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, item: WorkItem) -> bool:
        """Whether ``item`` is this shard's (the test the item loop makes)."""
        return item.shard(self.count) == self.index


def parse_shard(text: str) -> Shard:
    """``"I/N"`` as a ``Shard``; ``ConfigError`` for anything else."""
    match = _PAIR.fullmatch(text)
    if match is None:
        raise ConfigError(f"--shard takes I/N (e.g. 0/3, 1/3, 2/3) or {AUTO}, not {text!r}")
    return Shard(int(match[1]), int(match[2]))


def choose_shard(
    spec: str | None,
    shard_index: int | None,
    num_shards: int | None,
    variables: Mapping[str, str],
) -> Shard | None:
    """The run's shard (module docstring: the order); ``None``: the run takes every item.
    ``variables``: the set shard variables (``config.environment.shard_settings()``)."""
    older = shard_index is not None or num_shards is not None
    if spec is not None and older:
        raise ConfigError("give --shard or --shard-index/--num-shards, not both")
    if older:
        return shard_from_flags(shard_index, num_shards)
    if spec is not None and spec.strip().lower() != AUTO:
        return parse_shard(spec)
    if spec is None and not any(name in variables for name in (_OWN.index, _OWN.count)):
        return None  # not asked for: platform variables alone never shard a run
    return environment_shard(variables)


def shard_from_flags(shard_index: int | None, num_shards: int | None) -> Shard | None:
    """``--shard-index`` and ``--num-shards`` (both or neither) as a ``Shard``."""
    if shard_index is None and num_shards is None:
        return None
    if shard_index is None or num_shards is None:
        raise ConfigError("--shard-index and --num-shards go together")
    return Shard(shard_index, num_shards, "--shard-index/--num-shards")


def environment_shard(variables: Mapping[str, str]) -> Shard:
    """The shard the environment names (sharding was asked for: it must name one)."""
    group = next((g for g in SHARD_VARIABLES if g.index in variables), None)
    if group is None:
        names = ", ".join(g.index for g in SHARD_VARIABLES)
        raise ConfigError(f"sharding was asked for but no shard index is set ({names})")
    index = _task_number(group, variables)
    count_variable = _OWN.count if _OWN.count in variables else group.count
    if count_variable is None or count_variable not in variables:
        raise ConfigError(
            f"{group.index} is set but no shard count: set {_OWN.count} (for a Kubernetes "
            "Indexed Job: its completions) or pass --shard I/N"
        )
    return Shard(index, _number(variables, count_variable), f"{group.index}, {count_variable}")


def _task_number(group: ShardVariables, variables: Mapping[str, str]) -> int:
    """The task's place from 0: its number less the first one, over the step (SLURM)."""
    offset = _number(variables, group.index)
    if group.first and group.first in variables:
        offset -= _number(variables, group.first)
    step = _number(variables, group.step) if group.step and group.step in variables else 1
    if offset < 0 or step < 1 or offset % step:
        raise ConfigError(f"{group.index} does not name a task of an evenly spaced array")
    return offset // step


def _number(variables: Mapping[str, str], name: str) -> int:
    text = variables[name].strip()
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(f"{name} must be a whole number, not {variables[name]!r}")
    return int(text)


def shard_part(config: RunConfig, sources: Sequence[Source], shard: Shard) -> int:
    """How many of ``sources`` fall in ``shard``, named as planning them into
    ``config.output`` will name them (names earlier runs gave are kept)."""
    known = {item.uri: item.rel for item in Manifest(open_store(config.output)).items()}
    items = document_items(plan_jobs(list(sources), known), config.fingerprint())
    return sum(1 for item in items if shard.holds(item))
