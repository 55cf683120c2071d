"""Every environment variable ocrflow reads, read here and nowhere else.

A variable is read when it is needed, never copied into a recorded configuration: each
process that joins a run (``ocrflow worker``, a Ray actor, a service slot) reads its own
environment, and tests set a variable in a child process. An empty variable counts as unset.
Libraries read their own (``AWS_*`` by s3fs); subprocesses inherit the whole environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: The key sent to OpenAI-compatible servers, first set wins; ``--api-key`` wins over both
#: (``ocrflow.config.builder`` documents the order for every command).
API_KEY_VARIABLES = ("OCRFLOW_API_KEY", "OPENAI_API_KEY")
#: ``ocrflow serve``'s accepted tokens, comma-separated (beside ``--token-file``).
TOKENS_VARIABLE = "OCRFLOW_API_TOKENS"
#: This machine's name in lease owners (default: the hostname; ``workspace.leases``).
HOST_ID_VARIABLE = "OCRFLOW_HOST_ID"
#: The endpoint of ``s3://`` URLs when no storage option names one.
S3_ENDPOINT_VARIABLE = "OCRFLOW_S3_ENDPOINT_URL"
#: Rows per Parquet shard: lets tests write shards often.
PARQUET_ROWS_VARIABLE = "OCRFLOW_PARQUET_MAX_ROWS"


@dataclass(frozen=True, slots=True)
class ShardVariables:
    """The variables one platform sets on each task of an array of tasks."""

    platform: str
    #: This task's number.
    index: str
    #: How many tasks there are (``None``: the platform sets no such variable).
    count: str | None = None
    #: The first task's number, when the numbers may start above 0 (SLURM ``--array=1-7``).
    first: str | None = None
    #: The step between task numbers (SLURM ``--array=0-12:4``).
    step: str | None = None


#: Where ``ocrflow run`` finds its static shard (``executors.shards`` says when it looks):
#: ocrflow's own pair first, then the platforms', in this order.
SHARD_VARIABLES = (
    ShardVariables("ocrflow", "OCRFLOW_SHARD_INDEX", "OCRFLOW_SHARD_COUNT"),
    ShardVariables("Kubernetes Indexed Job", "JOB_COMPLETION_INDEX"),
    ShardVariables(
        "SLURM job array",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        first="SLURM_ARRAY_TASK_MIN",
        step="SLURM_ARRAY_TASK_STEP",
    ),
    ShardVariables("Cloud Run job", "CLOUD_RUN_TASK_INDEX", "CLOUD_RUN_TASK_COUNT"),
)


def setting(name: str) -> str | None:
    """The value of the variable ``name``; ``None`` when it is unset or empty."""
    return os.environ.get(name) or None


def environment_api_key() -> str | None:
    """The API key from the environment: ``OCRFLOW_API_KEY``, else ``OPENAI_API_KEY``."""
    for name in API_KEY_VARIABLES:
        value = setting(name)
        if value:
            return value
    return None


def shard_settings() -> dict[str, str]:
    """The ``SHARD_VARIABLES`` that are set, by name (raw values: the caller parses them)."""
    names = {
        name
        for group in SHARD_VARIABLES
        for name in (group.index, group.count, group.first, group.step)
        if name
    }
    return {name: value for name in sorted(names) if (value := setting(name)) is not None}
