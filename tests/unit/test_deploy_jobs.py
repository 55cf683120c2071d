"""CI checks of the one-shot job recipes in deploy/ (SLURM's vLLM start, Hugging Face Jobs,
SageMaker, Cloud Run) and of their sections in docs/deploy.md. Command lines, Kubernetes and
ShellCheck: tests/unit/test_deploy_recipes.py.

``start-vllm.sh`` runs for real against a stand-in vLLM (Python's HTTP server on loopback
serving ``/health``); the Hugging Face Jobs script converts a real Parquet dataset with the
embedded engine; the SageMaker request is checked against botocore's model of the API.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import botocore.session
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from botocore.validate import ParamValidator
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from PIL import Image, ImageDraw, ImageFont

from ocrflow.executors.shards import choose_shard
from tests.unit.test_deploy_files import parse_command
from tests.unit.test_deploy_recipes import (
    CLOUD_RUN,
    DEPLOY,
    DOCS,
    HF_SCRIPT,
    REPO,
    SAGEMAKER,
    SLURM,
    load_hf_script,
    run_shellcheck,
)

# PEP 723's reference regular expression for an inline metadata block.
_METADATA = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


# -- SLURM: start-vllm.sh against a stand-in vLLM -----------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stand_in(tmp_path: Path, body: str) -> Path:
    """An executable that start-vllm.sh runs as ``$VLLM serve MODEL … --port P``."""
    script = tmp_path / "vllm"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


def _start_vllm(tmp_path: Path, vllm: Path, timeout_s: int) -> subprocess.CompletedProcess[str]:
    assert shutil.which("curl"), "start-vllm.sh polls /health with curl"
    port = _free_port()
    env = {
        **os.environ,
        "VLLM": str(vllm),
        "VLLM_PORT": str(port),
        "VLLM_READY_TIMEOUT": str(timeout_s),
        "VLLM_LOG": str(tmp_path / "vllm.log"),
        "ROOT": str(tmp_path / "www"),
    }
    # Sourced as the array script does; the server it leaves running is stopped here.
    command = (
        f'source {shlex.quote(str(SLURM / "start-vllm.sh"))}; echo "$VLLM_URL"; kill "$VLLM_PID"'
    )
    return subprocess.run(
        ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=120
    )


def test_start_vllm_waits_for_health(tmp_path: Path) -> None:
    server = (
        'port=""; while [ $# -gt 0 ]; do [ "$1" = --port ] && port=$2; shift; done\n'
        'sleep 1; mkdir -p "$ROOT" && touch "$ROOT/health"\n'
        f'exec {shlex.quote(sys.executable)} -m http.server "$port" --bind 127.0.0.1 '
        '--directory "$ROOT"\n'
    )
    done = _start_vllm(tmp_path, _stand_in(tmp_path, server), timeout_s=60)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1\n", done.stdout)
    assert "vLLM ready at" in done.stderr
    assert "GET /health" in (tmp_path / "vllm.log").read_text()


def test_start_vllm_stops_when_vllm_exits(tmp_path: Path) -> None:
    crash = 'echo "CUDA error: out of memory" >&2; exit 1\n'
    done = _start_vllm(tmp_path, _stand_in(tmp_path, crash), timeout_s=60)
    assert done.returncode == 1 and not done.stdout
    assert "vLLM exited before it was ready" in done.stderr
    assert "CUDA error: out of memory" in done.stderr  # the end of its log


def test_start_vllm_gives_up_after_its_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    hang = f"echo $$ > {shlex.quote(str(pid_file))}; exec sleep 300\n"
    done = _start_vllm(tmp_path, _stand_in(tmp_path, hang), timeout_s=1)
    assert done.returncode == 1 and not done.stdout
    assert "vLLM not ready after 1s" in done.stderr
    assert not _running(int(pid_file.read_text())), "the hung server was stopped"


def _running(pid: int, wait_s: float = 5.0) -> bool:
    """Whether ``pid`` still runs after ``wait_s`` (a zombie nobody reaps counts as ended)."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.1)
    return True


# -- Hugging Face Jobs ---------------------------------------------------------------------
def _script_metadata() -> dict[str, Any]:
    (block,) = [m for m in _METADATA.finditer(HF_SCRIPT.read_text()) if m["type"] == "script"]
    lines = block["content"].splitlines(keepends=True)
    return tomllib.loads("".join(line[2:] if line.startswith("# ") else line[1:] for line in lines))


def test_hf_script_header_declares_ocrflow() -> None:
    metadata = _script_metadata()
    names = {Requirement(dep).name for dep in metadata["dependencies"]}
    assert {"ocrflow", "huggingface_hub"} <= names
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert metadata["requires-python"] == project["requires-python"]
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in SpecifierSet(
        metadata["requires-python"]
    )


def test_hf_script_arguments() -> None:
    hf = load_hf_script()
    args = hf.parse_args(["user/scans", "user/scans-ocr"])
    assert (args.source, args.dest, args.engine, args.files) == (
        "user/scans",
        "user/scans-ocr",
        "embedded",
        "*.parquet",
    )
    args = hf.parse_args(
        ["a/b", "c/d", "--engine", "vllm", "--model", "m", "--dataset-column", "pdf"]
    )
    argv = hf.ocrflow_command(args, [Path("x.parquet"), Path("y.parquet")], Path("o"))
    params = parse_command(argv)
    assert params["inputs"] == ["x.parquet", "y.parquet"] and params["output"] == "o"
    assert params["output_format"] == "markdown,jsonl,parquet" and params["dataset_column"] == "pdf"
    for bad in (
        ["a/b", "c/d", "--engine", "vllm"],
        ["a/b", "c/d", "--engine", "openai", "--model", "m"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            hf.parse_args(bad)
        assert exit_info.value.code == 2


def _scan_png(text: str) -> bytes:
    image = Image.new("RGB", (900, 220), "white")
    ImageDraw.Draw(image).text((40, 60), text, fill="black", font=ImageFont.load_default(64))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_hf_script_converts_a_parquet_dataset(tmp_path: Path) -> None:
    """The job's conversion step on a local dataset (download and upload need the Hub)."""
    hf = load_hf_script()
    image = {"bytes": _scan_png("HELLO PARQUET"), "path": "scan.png"}
    table = pa.table({"id": ["row-1"], "image": [image], "label": ["kept"]})
    source = tmp_path / "train-00000.parquet"
    pq.write_table(table, source)
    args = hf.parse_args(["u/in", "u/out", "--work-dir", str(tmp_path / "work")])
    args.dataset_id_column = "id"
    dataset = hf.convert(args, [source])
    (written,) = sorted(dataset.glob("*.parquet"))
    rows = pq.read_table(written).to_pylist()
    assert [(r["id"], r["label"], r["ocr_status"]) for r in rows] == [("row-1", "kept", "ok")]
    assert "PARQUET" in rows[0]["markdown"].upper()


# -- SageMaker -----------------------------------------------------------------------------
def _processing_job() -> dict[str, Any]:
    return json.loads((SAGEMAKER / "processing-job.json").read_text())


def test_sagemaker_request_matches_the_api_model() -> None:
    """botocore's own model of CreateProcessingJob (shipped in botocore: offline): required
    fields, field names, types; a misspelt key fails."""
    operation = botocore.session.get_session().get_service_model("sagemaker")
    shape = operation.operation_model("CreateProcessingJob").input_shape
    request = _processing_job()
    report = ParamValidator().validate(request, shape)
    assert not report.has_errors(), report.generate_report()
    assert set(shape.required_members) <= set(request)
    request["ProcessingResources"]["ClusterConfig"]["InstanceTyp"] = "ml.g6.2xlarge"
    assert ParamValidator().validate(request, shape).has_errors()


def _assigned(script: str, name: str) -> str:
    match = re.search(rf"^{name}=(\S+)$", script, flags=re.MULTILINE)
    assert match is not None, name
    return match.group(1)


def test_sagemaker_script_reads_and_writes_where_the_job_mounts() -> None:
    request = _processing_job()
    inputs = {i["InputName"]: i["S3Input"] for i in request["ProcessingInputs"]}
    (output,) = request["ProcessingOutputConfig"]["Outputs"]
    script = (SAGEMAKER / "process.sh").read_text()
    assert _assigned(script, "INPUT") == inputs["documents"]["LocalPath"]
    assert _assigned(script, "OUTPUT") == output["S3Output"]["LocalPath"]
    for path in (*(i["LocalPath"] for i in inputs.values()), output["S3Output"]["LocalPath"]):
        assert path.startswith("/opt/ml/processing/")
    code = inputs["code"]
    entry = request["AppSpecification"]["ContainerEntrypoint"]
    assert entry[-1] == f"{code['LocalPath']}/process.sh"
    assert code["S3Uri"].endswith("/process.sh")
    extra = request["AppSpecification"]["ContainerArguments"]
    parse_command(["ocrflow", "run", "in", "-o", "out", *extra])  # passed on by "$@"


# -- Cloud Run -----------------------------------------------------------------------------
def _cloud_run_job() -> dict[str, Any]:
    return yaml.safe_load(CLOUD_RUN.read_text())


def test_cloud_run_job_has_a_gpu_and_shards_by_task_index() -> None:
    job = _cloud_run_job()
    assert (job["apiVersion"], job["kind"]) == ("run.googleapis.com/v1", "Job")
    execution = job["spec"]["template"]["spec"]
    assert execution["taskCount"] == execution["parallelism"] > 1
    task = execution["template"]["spec"]
    assert task["nodeSelector"]["run.googleapis.com/gpu-type"].startswith("nvidia-")
    (container,) = task["containers"]
    limits = container["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"
    assert int(limits["cpu"]) >= 4 and int(limits["memory"].removesuffix("Gi")) >= 16
    script = container["args"][0]
    assert "--shard auto" in script
    # What `--shard auto` takes from the variables Cloud Run sets on task 2 of 8.
    cloud_run = {"CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "8"}
    shard = choose_shard("auto", None, None, cloud_run)
    assert shard is not None and (shard.index, shard.count) == (2, 8)
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["OCRFLOW_OUT"].startswith(("gs://", "s3://"))
    run_shellcheck("--shell=sh", "-", stdin=script)


# -- docs ----------------------------------------------------------------------------------
def test_docs_have_a_section_for_every_recipe_file() -> None:
    docs = DOCS.read_text()
    for title in ("Kubernetes", "SLURM", "Hugging Face Jobs", "SageMaker", "Cloud Run Jobs"):
        assert f"\n## {title}\n" in docs, title
    for path in sorted(DEPLOY.glob("*/*")):
        assert path.name in docs, f"docs/deploy.md does not mention {path.relative_to(REPO)}"
