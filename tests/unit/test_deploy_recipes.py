"""CI checks of the cluster recipes in deploy/ (Kubernetes, SLURM, Hugging Face Jobs,
SageMaker, Cloud Run) and of docs/deploy.md, offline: nothing is pulled, submitted or started.
Here: every recipe's command lines, the Kubernetes manifests, the SLURM array and ShellCheck;
the rest of each job recipe in tests/unit/test_deploy_jobs.py.

Every ``ocrflow …`` command line in the recipes (in shell scripts, in YAML container commands
and ``sh -c`` scripts, in the RayJob entrypoint, in the docs' bash blocks, as the Hugging Face
Jobs script builds it) is parsed by the real Typer command. Kubernetes manifests go through
``kubernetes-validate`` (strict: an unknown field fails); its bundled schemas have no CRDs, so
the KubeRay ``RayJob`` gets a structural check instead. Shell scripts go through ShellCheck.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ocrflow.recipes.olmocr import SERVER_FLAGS
from tests.needs import need
from tests.unit.test_deploy_files import parse_command

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "kubernetes"
SLURM = DEPLOY / "slurm"
HF_SCRIPT = DEPLOY / "hf-jobs" / "ocr-dataset.py"
SAGEMAKER = DEPLOY / "sagemaker"
CLOUD_RUN = DEPLOY / "cloud-run" / "job.yaml"
DOCS = REPO / "docs" / "deploy.md"
#: The Kubernetes version the manifests are validated against (its schemas ship in the wheel).
KUBERNETES_VERSION = "1.33"
#: Kinds whose schema kubernetes-validate does not bundle (CRDs), checked structurally below.
CRD_KINDS = {"RayJob"}

_EXPANSION = re.compile(r"\$\{[^}]*\}|\$\([^)]*\)|\$\w+")
_ALL_ARGUMENTS = re.compile(r"\"?\$[@*]\"?")
_REDIRECT = re.compile(r"(?<=\s)\d*(?:>>?|<)&?\s*\S+")
_INVOCATION = re.compile(r"(?<![\w/.-])ocrflow\s+(?=[a-z])")
_OPERATORS = set(";&|()<>")
_KEYWORDS = {"then", "do", "else", "if", "until", "while", "exec", "time", "!"}
_COMMENT = re.compile(r"(?:^|\s)#.*$")


# -- finding ocrflow command lines ---------------------------------------------------------
def shell_commands(script: str) -> list[list[str]]:
    """The ``ocrflow …`` command lines of a shell script: continuations joined, comments
    dropped, only where a command starts (not ``pip install ocrflow``), each cut at the first
    operator, every ``$…`` expansion read as ``1`` (a value every option here accepts) and
    ``"$@"`` dropped."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        line = _COMMENT.sub("", line)
        for match in _INVOCATION.finditer(line):
            if not _at_command_position(line[: match.start()]):
                continue
            text = _ALL_ARGUMENTS.sub("", _EXPANSION.sub("1", line[match.start() :]))
            text = _REDIRECT.sub(" ", text)
            lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = []
            for word in lexer:
                if set(word) <= _OPERATORS:
                    break
                words.append(word)
            found.append(words)
    return found


def _at_command_position(prefix: str) -> bool:
    """Whether a word after ``prefix`` is run as a command (not an argument: ``-g ocrflow``)."""
    words = prefix.split()
    if not words or prefix.rstrip()[-1] in _OPERATORS | {"{"}:
        return True
    return words[-1] in _KEYWORDS or re.fullmatch(r"\w+=\S*", words[-1]) is not None


def document_commands(node: Any) -> Iterator[list[str]]:
    """The ``ocrflow …`` command lines in a loaded YAML/JSON document: argument lists that
    start with ``ocrflow`` (a container's command + args) and any in its strings."""
    if isinstance(node, dict):
        argv = [*node.get("command", []), *node.get("args", [])]
        skip = {"command", "args"} if argv[:1] == ["ocrflow"] else set()
        if skip:
            yield [str(word) for word in argv]
        for key, value in node.items():
            if key not in skip:
                yield from document_commands(value)
    elif isinstance(node, list):
        for item in node:
            yield from document_commands(item)
    elif isinstance(node, str):
        yield from shell_commands(node)


def _yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _bash_blocks(markdown: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", markdown, flags=re.DOTALL)


def load_hf_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ocr_dataset", HF_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hf_command() -> list[str]:
    hf = load_hf_script()
    args = hf.parse_args(["u/in", "u/out", "--engine", "openai", "--model", "m", "--server", "s"])
    return hf.ocrflow_command(args, [Path("a.parquet")], Path("out"))


def recipe_commands() -> dict[str, list[list[str]]]:
    """Every recipe's ocrflow command lines, by file."""
    found: dict[str, list[list[str]]] = {}
    for path in sorted(DEPLOY.glob("*/*")):
        name = str(path.relative_to(REPO))
        if path.suffix in (".yaml", ".json"):
            docs = _yaml_docs(path)  # JSON is YAML
            found[name] = [c for doc in docs for c in document_commands(doc)]
        elif path.suffix in (".sh", ".sbatch"):
            found[name] = shell_commands(path.read_text())
    found[str(HF_SCRIPT.relative_to(REPO))] = [_hf_command()]
    found["docs/deploy.md"] = [c for b in _bash_blocks(DOCS.read_text()) for c in shell_commands(b)]
    return found


def test_the_extractor_finds_commands_and_ignores_the_rest() -> None:
    script = (
        "# ocrflow run commented out\npip install ocrflow gcsfs\n"
        'x=1; ocrflow status "$OUT" --json 2>/dev/null | python3 -c "…"\n'
        'ocrflow worker ${OUT} \\\n  --shard-index $(cat i) --num-shards 2 "$@" || rc=$?\n'
    )
    assert shell_commands(script) == [
        ["ocrflow", "status", "1", "--json"],
        ["ocrflow", "worker", "1", "--shard-index", "1", "--num-shards", "2"],
    ]
    with pytest.raises(Exception, match="no-such-flag"):
        parse_command(["ocrflow", "worker", "out", "--no-such-flag"])


def test_every_recipe_command_line_parses() -> None:
    found = recipe_commands()
    expected = {  # file -> ocrflow commands it must hold (none found would pass vacuously)
        "deploy/kubernetes/workers-job.yaml": {"run", "status", "worker"},
        "deploy/kubernetes/rayjob.yaml": {"run"},
        "deploy/kubernetes/serve.yaml": {"serve"},
        "deploy/slurm/ocrflow-array.sbatch": {"run", "status", "worker"},
        "deploy/sagemaker/process.sh": {"run", "status"},
        "deploy/cloud-run/job.yaml": {"run"},
        "deploy/hf-jobs/ocr-dataset.py": {"run"},
        "docs/deploy.md": {"run", "worker", "status"},
    }
    for name, commands in expected.items():
        assert {c[1] for c in found[name]} >= commands, (name, found[name])
    for name, command_lines in found.items():
        for argv in command_lines:
            try:
                parse_command(argv)
            except Exception as exc:  # click's usage errors: say where
                raise AssertionError(f"{name}: {shlex.join(argv)}: {exc}") from exc


# -- Kubernetes ----------------------------------------------------------------------------
def _k8s_docs() -> dict[tuple[str, str], dict[str, Any]]:
    docs = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in _yaml_docs(path):
            docs[doc["kind"], doc["metadata"]["name"]] = doc
    return docs


def test_kubernetes_manifests_validate() -> None:
    """Strict validation against the bundled Kubernetes schemas: an unknown or misplaced
    field, a wrong type or a missing required field fails."""
    skipped = set()
    for (kind, name), doc in _k8s_docs().items():
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            skipped.add(kind)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{kind}/{name}: {exc.message}") from exc
    assert skipped == CRD_KINDS
    broken = _k8s_docs()["Deployment", "ocrflow-vllm"]
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    containers = doc["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _service_url(docs: dict[tuple[str, str], dict[str, Any]], name: str) -> str:
    port = docs["Service", name]["spec"]["ports"][0]["port"]
    return f"http://{name}:{port}/v1"


def test_vllm_deployment_serves_the_recipe_on_a_gpu_with_a_readiness_probe() -> None:
    docs = _k8s_docs()
    deployment, service = docs["Deployment", "ocrflow-vllm"], docs["Service", "ocrflow-vllm"]
    vllm = _container(deployment)
    args = vllm["args"]
    assert " ".join(SERVER_FLAGS) in " ".join(args)
    assert args[args.index("--model") + 1] == "allenai/olmOCR-2-7B-1025-FP8"
    resources = vllm["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == 1
    ports = {p["name"]: p["containerPort"] for p in vllm["ports"]}
    assert ports["http"] == int(args[args.index("--port") + 1]) == 8000
    assert vllm["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert (
        service["spec"]["selector"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def _script(doc: dict[str, Any]) -> str:
    container = _container(doc)
    assert container["command"] == ["/bin/sh", "-c"]
    return container["args"][0]


def test_workers_job_plans_once_and_joins_the_rest() -> None:
    docs = _k8s_docs()
    job = docs["Job", "ocrflow-workers"]
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] > 1
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    script = _script(job)
    assert '"$JOB_COMPLETION_INDEX" = 0' in script
    env = {e["name"]: e.get("value") for e in _container(job)["env"]}
    run, status, worker = shell_commands(script)
    assert run[:2] == ["ocrflow", "run"] and worker[:2] == ["ocrflow", "worker"]
    assert status[:2] == ["ocrflow", "status"]
    assert "$INPUTS" in script and '-o "$OUT"' in script and 'worker "$OUT"' in script
    assert env["OUT"].startswith("s3://")
    assert parse_command(run)["server"] == [_service_url(docs, "ocrflow-vllm")]


def test_serve_deployment_parses_and_mounts_what_it_names() -> None:
    docs = _k8s_docs()
    serve = docs["Deployment", "ocrflow-serve"]
    container = _container(serve)
    params = parse_command(container["command"])
    assert params["host"] == "0.0.0.0" and params["server"] == [_service_url(docs, "ocrflow-vllm")]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(params["root"]).startswith(mounts["jobs"] + "/")
    assert str(params["token_file"]).startswith(mounts["tokens"] + "/")
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert {p["containerPort"] for p in container["ports"]} == {params["port"]}
    volumes = {v["name"]: v for v in serve["spec"]["template"]["spec"]["volumes"]}
    assert volumes["jobs"]["persistentVolumeClaim"]["claimName"] in {
        name for kind, name in docs if kind == "PersistentVolumeClaim"
    }


def _ray_pin() -> str:
    pins = (REPO / "constraints" / "test.txt").read_text()
    match = re.search(r"^ray==(\S+)$", pins, flags=re.MULTILINE)
    assert match is not None
    return match.group(1)


def test_rayjob_structure() -> None:
    """What KubeRay's RayJob CRD (ray.io/v1) requires, and what ocrflow needs of it."""
    docs = _k8s_docs()
    job = docs["RayJob", "ocrflow-ray"]
    assert job["apiVersion"] == "ray.io/v1"
    spec = job["spec"]
    (run,) = shell_commands(spec["entrypoint"])
    params = parse_command(run)
    assert params["executor"] == "ray" and params["ray_address"] == "auto"
    assert params["server"] == [_service_url(docs, "ocrflow-vllm")]
    assert spec["shutdownAfterJobFinishes"] is True
    cluster = spec["rayClusterSpec"]
    assert cluster["rayVersion"] == _ray_pin()  # the Ray the tests ran with
    assert f"FROM rayproject/ray:{_ray_pin()}-" in (K8S / "rayjob.yaml").read_text()
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        assert isinstance(group["rayStartParams"], dict)
        (container,) = group["template"]["spec"]["containers"]
        assert container["name"] and container["image"]
    for group in cluster["workerGroupSpecs"]:
        assert group["groupName"]
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    # The pods of each group validate as Kubernetes pod templates.
    for group in groups:
        template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"}}
        kubernetes_validate.validate(
            {**template, "template": group["template"]}, KUBERNETES_VERSION, strict=True
        )


# -- shell scripts -------------------------------------------------------------------------
def run_shellcheck(*args: str, stdin: str | None = None) -> None:
    need("shellcheck", shutil.which("shellcheck") is not None, "no shellcheck (system-deps.sh)")
    done = subprocess.run(
        ["shellcheck", *args], input=stdin, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "script", ["slurm/ocrflow-array.sbatch", "slurm/start-vllm.sh", "sagemaker/process.sh"]
)
def test_shell_scripts_passrun_shellcheck(script: str) -> None:
    run_shellcheck("--external-sources", str(DEPLOY / script))


def test_container_shell_scripts_passrun_shellcheck() -> None:
    run_shellcheck("--shell=sh", "-", stdin=_script(_k8s_docs()["Job", "ocrflow-workers"]))


def test_array_script_starts_vllm_and_calls_it() -> None:
    text = (SLURM / "ocrflow-array.sbatch").read_text()
    assert re.search(r"^#SBATCH --array=\d+-\d+$", text, flags=re.MULTILINE)
    assert re.search(r"^#SBATCH --gres=gpu:1$", text, flags=re.MULTILINE)
    assert 'source "$START_VLLM"' in text
    commands = {argv[1]: argv for argv in shell_commands(text)}
    run, worker = commands["run"], commands["worker"]
    assert run[run.index("--server") + 1] == worker[worker.index("--server") + 1] == "1"
    assert '--server "$VLLM_URL"' in text
    start = (SLURM / "start-vllm.sh").read_text().replace("\\\n", " ")
    (serve,) = [
        shlex.split(line) for line in start.splitlines() if line.startswith('"$VLLM" serve')
    ]
    assert " ".join(SERVER_FLAGS) in " ".join(serve)
