"""Real OS errors on OUT for tests: a tiny tmpfs (ENOSPC), a read-only remount (EROFS), and a
child process without root's permission override (EACCES).

As root, permission bits do not stop writes; dropping ``CAP_DAC_OVERRIDE`` (and friends) from
the child's capability bounding set makes the kernel apply them again. Each helper skips the
calling test, saying why, where the machine does not allow it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

# Root keeps every capability but the ones that let it ignore permission bits.
NO_PERMISSION_OVERRIDE = ("setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner")


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` (e.g. ``"1m"``) mounted at ``path`` for the block."""
    path.mkdir(parents=True, exist_ok=True)
    done = _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root / CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield path
    finally:
        # Lazy: a child that still holds a file open must not keep the mount alive.
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def remount(path: Path, mode: str) -> None:
    """Remount the tmpfs at ``path`` ``ro`` or ``rw``."""
    done = _mount("-o", f"remount,{mode}", str(path))
    if done.returncode != 0:
        pytest.skip(f"cannot remount {path} {mode}: {done.stderr.strip()}")


def fill(path: Path, leave_bytes: int) -> Path:
    """Write a filler file so that about ``leave_bytes`` stay free on ``path``'s file system."""
    stats = os.statvfs(path)
    free = stats.f_bavail * stats.f_frsize
    filler = path / "filler"
    with filler.open("wb") as handle:
        handle.write(b"\0" * max(free - leave_bytes, 0))
    return filler


def free_bytes(path: Path) -> int:
    """Bytes free on ``path``'s file system."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def without_permission_override() -> tuple[str, ...]:
    """The command prefix that runs a child with permission bits enforced, or skip."""
    if os.geteuid() != 0:
        return ()  # not root: permission bits apply already
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot drop CAP_DAC_OVERRIDE")
    probe = subprocess.run([*NO_PERMISSION_OVERRIDE, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"setpriv cannot drop capabilities here: {probe.stderr.decode().strip()}")
    return NO_PERMISSION_OVERRIDE


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
