"""Managed vLLM servers: the command line, and process handling against a fake ``vllm``."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from ocrflow.engines.server import (
    ManagedServers,
    ServerSpec,
    build_command,
    data_parallel_size,
    printable_command,
    replica_devices,
)
from ocrflow.errors import ConfigError, EngineUnavailable

FAKE_VLLM = Path(__file__).resolve().parents[2] / "data" / "fake_vllm_cli.py"
FAST = {"poll_interval_s": 0.1, "stop_timeout_s": 5.0, "restart_delay_s": 0.0}


def fake_spec(tmp_path: Path, *flags: str, **fields: Any) -> ServerSpec:
    """A spec that runs the fake ``vllm serve`` with its logs under ``tmp_path``."""
    fields.setdefault("ready_timeout_s", 15.0)
    return ServerSpec(
        model="tiny-model",
        served_model_name="olmocr",
        flags=("--fake-delay", "0.2", *flags),
        command=(sys.executable, str(FAKE_VLLM), "serve"),
        log_dir=str(tmp_path / "logs"),
        **fields,
    )


def family(pid: int) -> list[int]:
    """``pid`` and all its descendants, now."""
    proc = psutil.Process(pid)
    return [pid, *(child.pid for child in proc.children(recursive=True))]


def running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie is not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def eventually(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    """Wait until ``check()`` is true, or fail the test."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


# --- the command line --------------------------------------------------------------------


def test_build_command_puts_owned_flags_first_and_given_flags_verbatim() -> None:
    flags = ("--max-model-len", "16384", "--limit-mm-per-prompt", '{"video": 0}', "--x=1")
    spec = ServerSpec(model="allenai/olmOCR", served_model_name="olmocr", flags=flags)
    argv = build_command(spec, 8123)
    assert argv == [
        "vllm", "serve", "allenai/olmOCR",
        "--host=127.0.0.1", "--port=8123", "--served-model-name=olmocr",
        *flags,
    ]  # fmt: skip
    assert """--limit-mm-per-prompt '{"video": 0}'""" in printable_command(argv)


def test_build_command_defaults_the_served_name_to_the_model() -> None:
    spec = ServerSpec(model="/models/x", command=("/venv/bin/vllm", "serve"), host="0.0.0.0")
    argv = build_command(spec, 9000)
    assert argv[:3] == ["/venv/bin/vllm", "serve", "/models/x"]
    assert "--served-model-name=/models/x" in argv and "--host=0.0.0.0" in argv


def test_api_key_never_reaches_the_command_line() -> None:
    spec = ServerSpec(model="m", api_key="sk-secret")
    assert "sk-secret" not in printable_command(build_command(spec, 1))
    assert "sk-secret" not in repr(spec)


@pytest.mark.parametrize("flag", ["--port", "--port=8000", "--host", "--api-key=k",
                                  "--served-model-name", "--served_model_name=x"])  # fmt: skip
def test_flags_ocrflow_owns_are_refused(flag: str) -> None:
    with pytest.raises(ConfigError, match="set by ocrflow"):
        ServerSpec(model="m", flags=(flag, "x"))


def test_replicas_follow_gpus_unless_data_parallel() -> None:
    assert replica_devices(ServerSpec(model="m")) == [None]
    assert replica_devices(ServerSpec(model="m", gpus=("0", "1", "2,3"))) == ["0", "1", "2,3"]
    dp = ServerSpec(model="m", gpus=("0", "1"), flags=("--data-parallel-size", "2"))
    assert replica_devices(dp) == ["0,1"]


def test_data_parallel_size_reads_every_spelling() -> None:
    assert data_parallel_size(()) == 1
    assert data_parallel_size(("-dp", "2")) == 2
    assert data_parallel_size(("--data-parallel-size=4", "--x")) == 4
    assert data_parallel_size(("--data_parallel_size", "3")) == 3
    with pytest.raises(ConfigError):
        data_parallel_size(("-dp", "two"))


# --- processes (fake vllm) ---------------------------------------------------------------


def test_start_serves_one_replica_per_gpu_and_stop_leaves_no_process(tmp_path: Path) -> None:
    spec = fake_spec(tmp_path, gpus=("0", "1"), api_key="sk-secret")

    async def scenario() -> list[int]:
        async with ManagedServers(spec, **FAST) as servers:
            assert len(set(servers.urls)) == 2 and servers.ready_urls == servers.urls
            async with httpx.AsyncClient() as client:
                for url in servers.urls:
                    assert (await client.get(url + "/models")).status_code == 401
                    reply = await client.get(
                        url + "/models", headers={"Authorization": "Bearer sk-secret"}
                    )
                    assert reply.json()["data"][0]["id"] == "olmocr"
            pids = [pid for r in servers.replicas for pid in family(r.pid or 0)]
            assert len(pids) == 4  # each server has its "EngineCore" child
            for pid in pids:
                assert "sk-secret" not in " ".join(psutil.Process(pid).cmdline())
        assert {r.state for r in servers.replicas} == {"stopped"}
        await servers.stop()  # idempotent
        return pids

    pids = asyncio.run(scenario())
    assert not any(running(pid) for pid in pids)
    logs = sorted((tmp_path / "logs").iterdir())
    assert [p.name for p in logs] == ["vllm-0.log", "vllm-1.log"]
    assert "CUDA_VISIBLE_DEVICES 1" in logs[1].read_text()
    assert all("sk-secret" not in p.read_text() for p in logs)


def test_a_rejected_flag_fails_fast_with_the_log_tail(tmp_path: Path) -> None:
    servers = ManagedServers(fake_spec(tmp_path, "--no-such-flag"), **FAST)
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match="unrecognized arguments: --no-such-flag"):
        asyncio.run(servers.start())
    assert time.monotonic() - started < 10
    assert servers.replicas[0].exit_code() == 2


def test_one_failed_replica_fails_the_start_and_stops_the_others(tmp_path: Path) -> None:
    flags = ("--fake-state", str(tmp_path / "starts.txt"), "--fake-fail-after", "1")
    servers = ManagedServers(fake_spec(tmp_path, *flags, gpus=("0", "1")), **FAST)
    with pytest.raises(EngineUnavailable, match="exited with status 3"):
        asyncio.run(servers.start())
    codes = [r.exit_code() for r in servers.replicas]
    assert 3 in codes and None not in codes  # the healthy one was stopped, not left behind


def test_a_server_that_never_answers_misses_the_deadline(tmp_path: Path) -> None:
    spec = fake_spec(tmp_path, "--fake-delay", "60", ready_timeout_s=1.0)
    servers = ManagedServers(spec, **FAST)
    with pytest.raises(EngineUnavailable, match="not ready after 1 s") as caught:
        asyncio.run(servers.start())
    assert "Starting vLLM" not in str(caught.value) and "child pid" in str(caught.value)
    assert not running(servers.replicas[0].pid or 0)


def test_a_loading_replica_reports_progress_at_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Loading weights takes minutes: "waiting for vLLM at URL: loading (N s)" lines come
    at WARNING (``-q`` shows them) until the replica answers."""
    caplog.set_level(logging.WARNING, logger="ocrflow.server")
    spec = fake_spec(tmp_path, "--fake-delay", "2.5")

    async def scenario() -> str:
        async with ManagedServers(spec, **FAST, progress_s=(0.4, 0.8)) as servers:
            return servers.urls[0]

    url = asyncio.run(scenario())
    notes = [r for r in caplog.records if r.getMessage().startswith("waiting for vLLM")]
    assert len(notes) >= 2
    assert all(r.levelno == logging.WARNING for r in notes)
    assert notes[0].getMessage().startswith(f"waiting for vLLM at {url}: loading (")
    assert notes[-1].getMessage().endswith(" s)")


def test_a_killed_replica_is_restarted_and_its_orphans_reaped(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with ManagedServers(fake_spec(tmp_path), **FAST) as servers:
            replica = servers.replicas[0]
            old = family(replica.pid or 0)
            os.kill(old[0], signal.SIGKILL)  # the "EngineCore" child survives its parent
            await eventually(lambda: replica.state == "restarting")
            assert servers.ready_urls == []
            await eventually(lambda: replica.state == "ready")
            assert servers.restarts == {0: 1} and replica.pid not in old
            assert not any(running(pid) for pid in old)
            async with httpx.AsyncClient() as client:
                assert (await client.get(replica.url + "/models")).status_code == 200

    asyncio.run(scenario())


def test_a_replica_stays_down_when_its_restarts_are_spent(tmp_path: Path) -> None:
    state = tmp_path / "starts.txt"
    flags = ("--fake-state", str(state), "--fake-fail-after", "1")

    async def scenario() -> None:
        async with ManagedServers(fake_spec(tmp_path, *flags, max_restarts=2), **FAST) as servers:
            replica = servers.replicas[0]
            os.kill(replica.pid or 0, signal.SIGKILL)
            await eventually(lambda: replica.state == "down")
            assert servers.restarts == {0: 2} and servers.ready_urls == []

    asyncio.run(scenario())
    assert len(state.read_text().splitlines()) == 3
    assert "start 3: failing on purpose" in (tmp_path / "logs" / "vllm-0.log").read_text()


def test_stop_escalates_to_sigkill_for_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    async def scenario() -> list[int]:
        fast = {**FAST, "stop_timeout_s": 0.5}
        async with ManagedServers(fake_spec(tmp_path, "--fake-stubborn-child"), **fast) as srv:
            return family(srv.replicas[0].pid or 0)

    pids = asyncio.run(scenario())
    assert len(pids) == 2 and not any(running(pid) for pid in pids)


def test_an_error_or_cancellation_in_the_caller_stops_everything(tmp_path: Path) -> None:
    seen: list[int] = []

    async def failing() -> None:
        async with ManagedServers(fake_spec(tmp_path), **FAST) as servers:
            seen.extend(family(servers.replicas[0].pid or 0))
            raise RuntimeError("pipeline failed")

    async def cancelled_during_start() -> None:
        servers = ManagedServers(fake_spec(tmp_path, "--fake-delay", "60"), **FAST)
        task = asyncio.create_task(servers.start())
        await eventually(lambda: bool(servers.replicas) and servers.replicas[0].pid is not None)
        await asyncio.sleep(0.3)
        seen.extend(family(servers.replicas[0].pid or 0))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with pytest.raises(RuntimeError, match="pipeline failed"):
        asyncio.run(failing())
    asyncio.run(cancelled_during_start())
    assert len(seen) == 4 and not any(running(pid) for pid in seen)


def test_the_finalizer_kills_servers_whose_owner_never_stopped_them(tmp_path: Path) -> None:
    async def abandon() -> list[int]:
        servers = ManagedServers(fake_spec(tmp_path), **FAST)
        await servers.start()
        pids = family(servers.replicas[0].pid or 0)
        servers._finalizer()  # what interpreter exit (or garbage collection) runs
        return pids

    pids = asyncio.run(abandon())
    deadline = time.monotonic() + 5
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in pids)


def test_olmocr_gpu_flags_only_when_gpus_are_named() -> None:
    from ocrflow.config import EngineOptions
    from ocrflow.readers.session import managed_flags
    from ocrflow.recipes.olmocr import OlmocrRecipe

    recipe = OlmocrRecipe()
    on_cpu = managed_flags(recipe, EngineOptions(kind="vllm", model="m"))
    on_gpus = managed_flags(
        recipe,
        EngineOptions(
            kind="vllm", model="m", gpus=("0",), server_flags=("--kv-cache-dtype", "auto")
        ),
    )
    assert "--kv-cache-dtype" not in on_cpu
    assert on_gpus[-4:] == ("--kv-cache-dtype", "fp8", "--kv-cache-dtype", "auto"), on_gpus


def test_launch_gives_urls_at_once_and_begin_stop_overlaps_the_callers_work(
    tmp_path: Path,
) -> None:
    # The run renders while the servers load (launch, then wait_ready), and stops them in
    # the background while it writes its outputs (begin_stop, then stop_or_kill).
    servers = ManagedServers(fake_spec(tmp_path, "--fake-delay", "1.0"), **FAST)

    async def scenario() -> list[int]:
        urls = servers.launch()
        assert urls == servers.urls and servers.ready_urls == []  # not ready yet
        with pytest.raises(httpx.ConnectError):  # its port opens after --fake-delay
            async with httpx.AsyncClient() as client:
                await client.get(urls[0] + "/models")
        await servers.wait_ready()
        assert servers.ready_urls == urls
        pids = [pid for r in servers.replicas for pid in family(r.pid or 0)]
        servers.begin_stop()
        servers.begin_stop()  # once is enough; a second call changes nothing
        await servers.stop_or_kill()
        return pids

    pids = asyncio.run(scenario())
    assert pids and not any(running(pid) for pid in pids)
    assert {r.state for r in servers.replicas} == {"stopped"}
