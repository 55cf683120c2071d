"""Every environment variable ocrflow reads, read here and nowhere else.

A variable is read when it is needed, never copied into a recorded configuration: each
process that joins a run (``ocrflow worker``, a Ray actor, a service slot) reads its own
environment, and tests set a variable in a child process. An empty variable counts as unset.
Libraries read their own (``AWS_*`` by s3fs); subprocesses inherit the whole environment.
"""

from __future__ import annotations

import os

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
