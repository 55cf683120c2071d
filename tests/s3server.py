"""A real S3 endpoint for tests: moto's standalone server in its own process.

    with running_s3() as (endpoint_url, env):
        subprocess.run([...], env={**os.environ, **env})

or, in a test module, ``from tests.s3server import s3_endpoint`` and ask for the fixture.
The env dict holds everything a subprocess needs (fake credentials, region, endpoint).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.needs import need

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 5.0


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def s3_env(endpoint_url: str) -> dict[str, str]:
    """Environment that points boto3/s3fs (and so ocrflow) at ``endpoint_url``."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint_url,
        # No instance-metadata lookups, no shared config files from the host.
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


@contextlib.contextmanager
def running_s3() -> Iterator[tuple[str, dict[str, str]]]:
    """Start ``python -m moto.server`` on a free port; yield ``(endpoint_url, env)``.

    The server is stopped (terminated, then killed) on exit, whatever happened.
    """
    last_error = ""
    for _ in range(3):  # the free port may be taken between probing and binding
        port = free_port()
        endpoint = f"http://127.0.0.1:{port}"
        env = s3_env(endpoint)
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                start_new_session=True,
            )
            try:
                if _wait_ready(proc, endpoint):
                    yield endpoint, env
                    return
                log.seek(0)
                last_error = log.read().decode(errors="replace")[-2000:]
            finally:
                _stop(proc)
    raise RuntimeError(f"moto server did not start: {last_error}")


def _wait_ready(proc: subprocess.Popen[bytes], endpoint: str) -> bool:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1) as reply:
                if reply.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=_STOP_TIMEOUT_S)


@dataclass(frozen=True)
class S3Endpoint:
    """A running moto server: its URL and the environment that reaches it."""

    url: str
    env: dict[str, str]

    def client(self) -> Any:
        """A boto3 S3 client for this endpoint."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            region_name=self.env["AWS_DEFAULT_REGION"],
        )

    def new_bucket(self, prefix: str = "test") -> str:
        """Create a bucket with a fresh name, so tests never see each other's objects."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """A moto S3 server for the session; this process's environment points at it too."""
    need("s3", importlib.util.find_spec("moto") is not None, "moto is not installed")
    need("s3", importlib.util.find_spec("s3fs") is not None, "s3fs is not installed")
    with running_s3() as (url, env), pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        yield S3Endpoint(url, env)
