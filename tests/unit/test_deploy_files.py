"""CI lint of deploy/: the compose example, its prometheus.yml and the systemd unit.

Nothing is pulled or started. The compose file is checked by ``docker compose config -q``
when the plugin is installed, and always by reading it: the services, their images, ports
bound to 127.0.0.1, declared volumes and secrets, the vLLM flags of the olmOCR recipe, and
Prometheus scraping each service on the port it listens on. Every ``ocrflow serve`` flag in
the compose file and in the unit is parsed by the real command. The unit goes through
``systemd-analyze verify`` (with ExecStart pointed at this checkout's ``ocrflow``).
"""

from __future__ import annotations

import configparser
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import typer
import yaml

from ocrflow.cli import app
from ocrflow.recipes.olmocr import SERVER_FLAGS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
#: compose-spec/compose-spec@170098b schema/compose-spec.json (Apache-2.0; tests/data/README.md)
COMPOSE_SCHEMA = Path(__file__).resolve().parents[1] / "data" / "compose-spec.json"
UNIT = DEPLOY / "ocrflow-serve.service"
SERVICES = {"ocrflow", "postgres", "vllm", "prometheus"}


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def _flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def parse_command(argv: list[str]) -> dict[str, Any]:
    """Parse ``ocrflow COMMAND ARGS…`` as the CLI would, without running it: an unknown
    command, an unknown or misspelt flag or a bad value raises (click's usage errors)."""
    assert argv[0] == "ocrflow", argv
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert argv[1] in commands, f"ocrflow has no command {argv[1]!r}"
    with commands[argv[1]].make_context(argv[1], list(argv[2:])) as context:
        # A repeatable flag is a tuple in some typer versions and a list in others.
        return {k: list(v) if isinstance(v, tuple) else v for k, v in context.params.items()}


def _parse_serve(args: list[str]) -> dict[str, Any]:
    return parse_command(["ocrflow", "serve", *args])


def test_compose_services_and_ports() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == SERVICES
    for name, service in services.items():
        assert service.get("image"), f"{name} has no image"
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        for dependency in service.get("depends_on", []):
            assert dependency in services, f"{name} depends on unknown {dependency}"
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (DEPLOY / source).is_file(), f"{name} mounts missing {source}"
            else:
                assert source in compose["volumes"], f"{name} uses undeclared volume {source}"
        for secret in service.get("secrets", []):
            assert secret in compose["secrets"], f"{name} uses undeclared secret {secret}"


def test_compose_vllm_serves_olmocr_with_the_recipe_flags() -> None:
    command = _compose()["services"]["vllm"]["command"]
    assert _flag(command, "--model") == "allenai/olmOCR-2-7B-1025-FP8"
    joined = " ".join(command)
    assert " ".join(SERVER_FLAGS) in joined
    assert "--kv-cache-dtype fp8" in joined  # what ocrflow adds on GPUs (docs/benchmarks.md)
    assert _compose()["services"]["vllm"]["image"].startswith("vllm/vllm-openai:")


def test_compose_ocrflow_command_parses_and_points_at_its_peers() -> None:
    service = _compose()["services"]["ocrflow"]
    command = service["command"]
    assert command[:2] == ["ocrflow", "serve"]
    params = _parse_serve(command[2:])
    assert str(params["port"]) == "8080" and params["host"] == "0.0.0.0"
    assert "@postgres:5432/" in params["db"]
    assert service["ports"] == ["127.0.0.1:8080:8080"]
    vllm = _compose()["services"]["vllm"]["command"]
    assert params["server"] == [f"http://vllm:{_flag(vllm, '--port')}/v1"]
    assert params["model"] == _flag(vllm, "--model")
    assert params["served_model_name"] == _flag(vllm, "--served-model-name")


def test_prometheus_scrapes_ocrflow_and_vllm_where_they_listen() -> None:
    services = _compose()["services"]
    prometheus = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    targets = {
        job["job_name"]: target
        for job in prometheus["scrape_configs"]
        for group in job["static_configs"]
        for target in group["targets"]
    }
    assert targets == {"ocrflow": "ocrflow:8080", "vllm": "vllm:8000"}
    for job, target in targets.items():
        host, port = target.split(":")
        assert host in services
        assert _flag(services[host]["command"], "--port") == port, job


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    """The file against the Compose Specification's own JSON schema (what ``docker compose
    config`` checks first; no daemon, no pull): a misspelt key or a wrong type fails here."""
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(_compose()), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    # The schema is strict enough to catch what a typo would break.
    broken = _compose()
    broken["services"]["ocrflow"]["port"] = broken["services"]["ocrflow"].pop("ports")
    assert list(validator.iter_errors(broken))


def _exec_start() -> list[str]:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(UNIT.read_text().replace("\\\n", " "))
    assert {"Unit", "Service", "Install"} <= set(unit.sections())
    return shlex.split(unit["Service"]["ExecStart"])


def test_systemd_unit_command_parses() -> None:
    command = _exec_start()
    assert command[0].endswith("/ocrflow") and command[1] == "serve"
    params = _parse_serve(command[2:])
    assert params["host"] == "127.0.0.1"


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    """``systemd-analyze verify`` where systemd is installed (the parse above otherwise)."""
    if shutil.which("systemd-analyze") is None:
        assert _exec_start()
        return
    ocrflow = Path(sys.executable).with_name("ocrflow")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/opt/ocrflow/bin/ocrflow", str(ocrflow)))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    # verify exits 0 on unknown keys and bad values too: any message is a finding.
    assert done.returncode == 0 and not done.stderr.strip() and not done.stdout.strip(), (
        done.stdout + done.stderr
    )
