"""Option injection: a job chooses only what the deployment allows (docs/security.md).

Before: a job's ``options`` could set ``model``, ``recipe`` and ``recipe_option`` (with
``server_flags``), and a service started with ``--engine vllm`` ran vLLM with them: a
job-chosen model with ``--trust-remote-code``, ``--allowed-local-media-path /``, a
``--download-dir``, and ``--chat-template=/etc/passwd`` from a "model" named so. Now the
model, recipe and server flags are the operator's; a job picks among ``--allow-model``
names and sets a few harmless recipe options. The end-to-end test runs a real ``ocrflow
serve --engine vllm`` whose ``vllm`` is a stand-in that records its argv, then serves as
the fake OpenAI server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.errors import ConfigError
from ocrflow.service.options import OptionError, check_service_engine, job_config, parse_options
from tests.integration.serve_helpers import EXAMPLES, REPO, TOKEN_A, auth, serving, wait_status

SERVICE_MODEL = "tiny-vlm"
ALLOWED = "other/tiny-vlm"
#: What no job may ever put on vLLM's command line.
FORBIDDEN = ("/etc/passwd", "--trust-remote-code", "--allowed-local-media-path",
             "--download-dir", "--chat-template", "evil", "/tmp/dl")  # fmt: skip

#: (options, the option the 422 must name)
HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"model": "--chat-template=/etc/passwd"}, "model"),
    ({"model": "-x"}, "model"),
    ({"model": "evil/remote-code"}, "model"),
    ({"model": "/etc"}, "model"),
    ({"model": ALLOWED + " --trust-remote-code"}, "model"),
    ({"recipe_option": {"server_flags": ["--trust-remote-code"]}}, "recipe_option.server_flags"),
    ({"recipe_option": {"server_flags": ["--allowed-local-media-path", "/"]}},
     "recipe_option.server_flags"),
    ({"recipe_option": {"server_flags": ["--download-dir", "/tmp/dl"]}},
     "recipe_option.server_flags"),
    ({"recipe-option": {"gpu_preset": "fp8"}}, "recipe_option.gpu_preset"),
    ({"recipe_option": {"prompt_file": "/etc/passwd"}}, "recipe_option.prompt_file"),
    ({"recipe_option": {"model": "evil/x"}}, "recipe_option.model"),
    ({"recipe_option": {"max_tokens": 10**9}}, "recipe_option.max_tokens"),
    ({"recipe_option": {"mode": "free"}}, "recipe_option"),
    ({"recipe": "dots"}, "recipe"),  # its server flags hold --trust-remote-code
    ({"recipe": "olmocr", "model": ALLOWED}, "recipe"),
    ({"recipe": "dots", "model": "evil/dots-ocr"}, "model"),
    ({"server_flags": ["--trust-remote-code"]}, "server_flags"),
    ({"vllm_arg": "--trust-remote-code"}, "vllm_arg"),
    ({"vllm_command": "sh -c id"}, "vllm_command"),
    ({"served_model_name": "--chat-template=/etc/passwd"}, "served_model_name"),
    ({"languages": "eng --tessdata-dir /etc"}, "languages"),
]  # fmt: skip


def _base(**engine: Any) -> RunConfig:
    options = {"kind": "vllm", "model": SERVICE_MODEL, "recipe": "markdown", **engine}
    return RunConfig(inputs=(), output="/srv/out", engine=EngineOptions(**options))


def _job(raw: dict[str, Any], base: RunConfig | None = None) -> EngineOptions:
    config = job_config(base or _base(), parse_options(raw), ["in"], "/srv/out/job",
                        allowed_models=(ALLOWED,))  # fmt: skip
    return config.engine


# --- the option policy ---------------------------------------------------------------


@pytest.mark.parametrize("raw, name", HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_each_hostile_option_is_refused_naming_it(raw: dict[str, Any], name: str) -> None:
    with pytest.raises(OptionError) as refused:
        _job(raw)
    assert repr(name) in str(refused.value)


def test_a_job_keeps_the_service_engine_when_it_chooses_nothing() -> None:
    base = _base(served_model_name="served", recipe_options={"server_flags": ["--dtype", "x"]})
    assert _job({}, base) == base.engine  # same engine: the service's server is shared
    assert _job({"model": SERVICE_MODEL, "recipe": "markdown"}, base) == base.engine


def test_an_allowed_model_gets_its_own_name_recipe_and_no_operator_flags() -> None:
    base = _base(served_model_name="served", recipe_options={"server_flags": ["--dtype", "x"]})
    engine = _job({"model": ALLOWED, "recipe_option": {"max_tokens": 64}}, base)
    assert (engine.model, engine.served_model_name) == (ALLOWED, None)
    assert (engine.recipe, engine.recipe_options) == ("markdown", {"max_tokens": 64})
    assert engine.server_flags == base.engine.server_flags == ()


def test_another_allowed_model_may_take_the_recipe_its_name_implies() -> None:
    base = _base()
    config = job_config(base, parse_options({"model": "org/DeepSeek-OCR"}), ["in"], "/o",
                        allowed_models=("org/DeepSeek-OCR",))  # fmt: skip
    assert config.engine.recipe == "deepseek"
    explicit = parse_options({"model": "org/DeepSeek-OCR", "recipe": "markdown"})
    assert job_config(base, explicit, ["in"], "/o", allowed_models=("org/DeepSeek-OCR",))


def test_harmless_recipe_options_reach_the_recipe() -> None:
    raw = {"max_tokens": 100, "prompt": "Read it.", "temperatures": [0.0, 0.4],
           "table_format": "markdown"}  # fmt: skip
    engine = _job({"recipe_option": raw})
    assert engine.recipe_options == {**raw, "temperatures": (0.0, 0.4)}


def test_without_allowed_models_only_the_service_model_may_be_named() -> None:
    options = parse_options({"model": ALLOWED})
    with pytest.raises(OptionError, match="'model'"):
        job_config(_base(), options, ["in"], "/o")
    assert job_config(_base(), parse_options({"model": SERVICE_MODEL}), ["in"], "/o")


def test_a_cpu_service_offers_no_model_or_recipe() -> None:
    base = RunConfig(inputs=(), output="/o")
    for raw, name in [({"model": "a/b"}, "model"), ({"recipe": "olmocr"}, "recipe")]:
        with pytest.raises(OptionError, match=repr(name)):
            job_config(base, parse_options(raw), ["in"], "/o")


@pytest.mark.parametrize(
    "kind, model, allowed, needle",
    [("vllm", "--chat-template=/etc/passwd", (), "--model"),
     ("vllm", "ok/model", ("../x",), "--allow-model"),
     ("vllm", "ok/model", ("a b",), "--allow-model"),
     ("openai", "ok", ("-x",), "--allow-model"),
     ("vllm", None, (), "needs --model"),
     ("embedded", None, ("a/b",), "--allow-model")],
)  # fmt: skip
def test_the_operator_flags_are_checked_at_start(
    kind: str, model: str | None, allowed: tuple[str, ...], needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle):
        check_service_engine(EngineOptions(kind=kind, model=model), allowed)  # type: ignore[arg-type]


def test_served_names_of_an_openai_server_stay_free_form() -> None:
    engine = EngineOptions(kind="openai", model="llava:13b", servers=("http://127.0.0.1:1/v1",))
    assert check_service_engine(engine, ["qwen:7b", "qwen:7b", "llava:13b"]) == ("qwen:7b",)


# --- a real ocrflow serve --engine vllm with a stand-in vllm -------------------------

STAND_IN = """\
import json, os, sys
argv = sys.argv[1:]
with open(os.environ["OCRFLOW_TEST_ARGV_LOG"], "a") as log:
    log.write(json.dumps({"pid": os.getpid(), "argv": argv}) + "\\n")

def value(flag):
    # ocrflow passes its values joined to their flags: a stand-in that finds them so
    # also checks the argv form.
    for arg in argv:
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    raise SystemExit(f"stand-in vllm: no {flag}=VALUE in {argv}")

os.execv(sys.executable, [
    sys.executable, "-m", "tests.fakevllm.server", "--host", value("--host"),
    "--port", value("--port"), "--model", value("--served-model-name"),
    "--pages-per-s", "200", "--tokens-per-page", "20",
])
"""


def _submit(url: str, options: dict[str, Any]) -> httpx.Response:
    files = [("files", ("a.pdf", (EXAMPLES / "born-digital.pdf").read_bytes(), "application/pdf"))]
    data = {"options": json.dumps({"pages": "1", "text_layer": "off", **options})}
    return httpx.post(url + "/v1/jobs", files=files, data=data, headers=auth(TOKEN_A), timeout=30)


def _recorded(log: Path) -> list[dict[str, Any]]:
    if not log.is_file():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def _stop_stand_ins(records: list[dict[str, Any]], marker: str) -> None:
    """The serve stops its vLLM servers; any left (only ours: their argv names ``marker``)
    are killed, so that no test leaves a process behind."""
    deadline = time.monotonic() + 15
    for record in records:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(record["pid"])
            while proc.is_running() and time.monotonic() < deadline:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    break
                time.sleep(0.1)
            if proc.is_running() and marker in " ".join(proc.environ().values()):
                os.kill(proc.pid, signal.SIGKILL)


@pytest.mark.slow
def test_jobs_never_reach_the_vllm_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in, argv_log = tmp_path / "vllm_stand_in.py", tmp_path / "argv.jsonl"
    stand_in.write_text(STAND_IN)
    monkeypatch.setenv("OCRFLOW_TEST_ARGV_LOG", str(argv_log))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO),
                       os.environ.get("PYTHONPATH")])))  # fmt: skip
    root = tmp_path / "root"
    args = ["--engine", "vllm", "--model", SERVICE_MODEL, "--recipe", "markdown",
            "--allow-model", ALLOWED, "--vllm-command", f"{sys.executable} {stand_in} serve",
            "-q"]  # fmt: skip
    try:
        with serving(root, *args) as served, httpx.Client(base_url=served.url) as client:
            for options, name in HOSTILE:
                answer = _submit(served.url, options)
                assert answer.status_code == 422, (options, answer.text)
                assert repr(name) in answer.json()["detail"], (options, answer.text)
            mine = _submit(served.url, {})
            other = _submit(served.url, {"model": ALLOWED, "recipe_option": {"max_tokens": 64}})
            # Per-job options on the service's model share its server: varying them must
            # not start a vLLM per value.
            varied = [_submit(served.url, {"recipe_option": {"max_tokens": n}}) for n in (50, 70)]
            accepted = [mine, other, *varied]
            assert all(a.status_code == 201 for a in accepted), [a.text for a in accepted]
            for job_id in (a.json()["id"] for a in accepted):
                job = wait_status(client, job_id, {"done", "failed"}, timeout=120)
                assert job["status"] == "done", (job, served.log())
            jobs = {p.name for p in (root / "jobs").iterdir()}
            assert jobs == {a.json()["id"] for a in accepted}  # no refused job stayed
    finally:
        _stop_stand_ins(_recorded(argv_log), str(argv_log))
    started = [record["argv"] for record in _recorded(argv_log)]
    assert sorted(argv[1] for argv in started) == sorted([SERVICE_MODEL, ALLOWED]), started
    for argv in started:
        assert argv[0] == "serve" and not argv[1].startswith("-")
        assert not [a for a in argv if any(bad in a for bad in FORBIDDEN)], argv
    assert f"--served-model-name={ALLOWED}" in next(a for a in started if a[1] == ALLOWED)


@pytest.mark.parametrize(
    "args, needle",
    [(["--engine", "vllm", "--model=--chat-template=/etc/passwd"], "--model"),
     (["--engine", "vllm", "--model", "ok/model", "--allow-model", "../../etc"], "--allow-model"),
     (["--engine", "vllm", "--model", "ok/model", "--allow-model=-x"], "--allow-model"),
     (["--allow-model", "ok/model"], "--allow-model")],
)  # fmt: skip
def test_serve_refuses_bad_model_flags_at_start(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ocrflow.cli", "serve", "--root", str(tmp_path / "root"), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "error:" in done.stderr and needle in done.stderr, done.stderr
