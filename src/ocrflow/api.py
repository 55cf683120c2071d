"""The Python API: ``ocrflow.convert`` (one document, no workspace), ``ocrflow.run`` (a
resumable batch, as ``ocrflow run`` does it), and ``build_run_config``, the one place the
options of ``ocrflow run`` become a ``RunConfig`` (``ocrflow.config.builder``, which the
CLI, the job service and joining workers use too).

Options have the Python names of ``ocrflow run``'s flags (``--text-layer`` is
``text_layer``, ``--server`` is ``server``, ``--format`` is ``output_format``). An option
left out, or given as ``None``, takes the configuration's default (``ocrflow.config``), so
defaults are stated once. Errors are ``ocrflow.errors``' (``ConfigError`` for a bad option).

Pages are rendered in worker processes started by ``forkserver``, which import the main
module: a script calls the API under ``if __name__ == "__main__":`` (a notebook needs not).
"""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ocrflow.config.builder import OPTION_NAMES, UnknownOption, build_run_config, check_option_names
from ocrflow.config.flags import flag_for
from ocrflow.document import Document
from ocrflow.errors import ConfigError
from ocrflow.executors.local import run_local
from ocrflow.executors.plan import Plan, execute_plan, worker_options
from ocrflow.executors.preflight import check_before_start
from ocrflow.inputs.expand import expand_inputs
from ocrflow.inputs.skips import Skipped
from ocrflow.observe.runstats import RunStats
from ocrflow.observe.status import out_summary
from ocrflow.sinks.results import results
from ocrflow.stages.commands import run_later_stages
from ocrflow.storage.open import open_store
from ocrflow.workspace.state import Workspace

__all__ = ["NothingToConvert", "RunSummary", "UnknownOption", "build_run_config", "convert", "run"]

#: Options of how a batch runs, not of what it makes (``ocrflow.run`` only).
_RUN_OPTIONS = frozenset(
    {"executor", "ray_address", "ray_workers", "shard_index", "num_shards", "quiet"}
)


class NothingToConvert(ConfigError):
    """The inputs hold no PDF or image (``ocrflow run`` exits 5)."""

    reason = "nothing_to_convert"


def convert(source: str | os.PathLike[str] | bytes | Any, **options: Any) -> Document:
    """Convert one document and return it; nothing is kept on disk.

    ``source``: a path (or URL) of a PDF or image, its bytes, or a PIL image. ``options``:
    those of ``ocrflow run`` that shape the result (``engine``, default embedded;
    ``pages``, ``text_layer``, ``target_dim``, ``languages``, ``model``, ``server``, …).
    The pipeline is ``ocrflow run``'s, over a temporary OUT removed afterwards, so
    ``doc.markdown`` is the text of OUT/markdown/<name>.md without its final newline.
    Figure links in the Markdown name files that are not kept: use ``run`` for figures.
    Raises ``UnknownOption``/``ConfigError`` for options, ``NothingToConvert`` when the
    source is no document, ``SourceError`` and the other ``ocrflow.errors`` as a run does.
    """
    for name in ("output_format", "split_pages", "lease_ttl", "stages", *_RUN_OPTIONS):
        if name in options:
            raise UnknownOption(f"convert() takes no option {name!r}: it is one of run()'s")
    with tempfile.TemporaryDirectory(prefix="ocrflow-convert-") as scratch:
        path = _source_path(source, Path(scratch))
        out = Path(scratch) / "out"
        options["output_format"] = "jsonl"  # the texts and blocks results() reads
        summary = run(path, out, **options)
        documents = list(results(out))
        if not documents:
            failure = summary.stats.failures[0] if summary.stats.failures else {}
            raise ConfigError(str(failure.get("message") or f"{path}: not converted"))
        return documents[0]


@dataclass(frozen=True)
class RunSummary:
    """What ``ocrflow.run`` did: the run's figures and what the whole OUT holds."""

    stats: RunStats
    #: What ``ocrflow run`` would exit with (0: all converted; 1: some failed, …).
    exit_code: int

    def to_dict(self) -> dict[str, Any]:
        """The summary ``ocrflow run --json`` prints."""
        return self.stats.record() | {"failures": self.stats.failures, "out": self.stats.out}


def run(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    **options: Any,
) -> RunSummary:
    """Run ``ocrflow run INPUTS -o OUTPUT`` with ``options`` in this process and return
    its summary: resumable (a second call converts only what is not done), the same
    outputs, the same configuration checks. Beside the options of ``build_run_config``:
    ``executor`` (``"local"`` or ``"ray"``), ``ray_address``, ``ray_workers``,
    ``shard_index``/``num_shards``, and ``quiet`` (default ``True``: no progress display).

    Raises ``NothingToConvert`` when the inputs hold no document, ``ConfigError`` for
    options, ``OutputError`` when OUT cannot be written, ``EngineFailing`` when the engine
    kept failing; a failed document is no error (see ``exit_code`` and ``stats``).
    """
    check_option_names(options, OPTION_NAMES | _RUN_OPTIONS)
    batch = {k: options.pop(k) for k in _RUN_OPTIONS & set(options)}
    try:
        config = build_run_config(inputs, output, **options)
    except ValidationError as exc:
        raise ConfigError(_option_message(exc)) from None
    check_before_start(config)
    skipped = Skipped()
    sources = expand_inputs(
        config.inputs, exclude=[config.output], options=config.input, skipped=skipped
    )
    if not sources:
        held = f" (left out: {skipped.summary()})" if skipped.counts else ""
        raise NothingToConvert(f"nothing to convert: the inputs hold no PDF or image{held}")
    plan = Plan(
        config,
        sources,
        worker_options(config.scale, batch.get("shard_index"), batch.get("num_shards")),
        batch.get("executor") or "local",
        batch.get("ray_address"),
        batch.get("ray_workers") or 2,
        skipped=skipped,
    )
    quiet = batch.get("quiet", True)
    stats = _execute(plan, quiet=quiet)
    stats.out = out_summary(Workspace(open_store(config.output)))
    later = run_later_stages(config, quiet=quiet)
    return RunSummary(stats, max(stats.exit_code(), later))


def _execute(plan: Plan, *, quiet: bool) -> RunStats:
    """Run the plan here; from a thread with an event loop running (a notebook), the
    local executor runs in a thread of its own (signals are the main thread's)."""
    if threading.current_thread() is threading.main_thread() and not _loop_running():
        return execute_plan(plan, quiet=quiet)
    if plan.executor != "local":
        raise ConfigError("executor='ray' runs only from the main thread, outside event loops")

    def work() -> RunStats:
        return asyncio.run(
            run_local(plan.config, sources=plan.sources, worker=plan.worker, skipped=plan.skipped)
        )

    with ThreadPoolExecutor(1, thread_name_prefix="ocrflow-run") as pool:
        return pool.submit(work).result()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _source_path(source: Any, scratch: Path) -> str:
    """A path or URL the inputs can name: ``source`` itself, or its bytes or image
    written into ``scratch``."""
    if isinstance(source, str | os.PathLike):
        return os.fspath(source)
    if isinstance(source, bytes | bytearray | memoryview):
        blob = bytes(source)
        path = scratch / f"document{_suffix(blob)}"
        path.write_bytes(blob)
        return str(path)
    if hasattr(source, "save") and hasattr(source, "mode"):  # a PIL image
        path = scratch / "image.png"
        source.save(path, format="PNG")
        return str(path)
    raise TypeError(f"convert() takes a path, bytes or a PIL image, not {type(source).__name__}")


def _suffix(blob: bytes) -> str:
    """The file suffix of a document's bytes (the inputs know documents by suffix)."""
    if blob.startswith(b"%PDF"):
        return ".pdf"
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(blob)) as image:
            kind = (image.format or "").lower()
    except (UnidentifiedImageError, OSError):
        raise ConfigError("convert(): the bytes are neither a PDF nor an image") from None
    return {"jpeg": ".jpg", "tiff": ".tiff", "png": ".png"}.get(kind, f".{kind}")


def _option_message(exc: ValidationError) -> str:
    """The first error, under the option's Python name (``page_timeout``)."""
    first = exc.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    flag = flag_for(tuple(first["loc"]))
    if flag is None:
        return message
    name = flag.split("/")[-1].lstrip("-").replace("-", "_")
    return f"invalid value for {name}: {message}"
