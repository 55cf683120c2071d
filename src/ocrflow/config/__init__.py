"""One typed, frozen run configuration. Its fingerprint names the outputs."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ocrflow.config.access import AccessPolicy
from ocrflow.config.machine import usable_cpus
from ocrflow.config.pagespec import validate_page_spec
from ocrflow.errors import ConfigError

TextLayerMode = Literal["auto", "off", "only", "redo"]
EngineKind = Literal["embedded", "tesseract", "openai", "vllm"]


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RenderOptions(_Options):
    """How pages become pixels."""

    #: Longest side of rendered pages; ``None`` lets the engine or recipe choose.
    target_dim: int | None = Field(None, ge=64, le=10_000)
    #: Render every page at this resolution instead; ``None`` lets the engine choose (a
    #: CPU engine reads scans at their own resolution). ``target_dim`` wins over it.
    dpi: int | None = Field(None, ge=36, le=1200)
    #: Rendered bitmaps larger than this many pixels are refused (bombs).
    max_pixels: int = Field(40_000_000, ge=1_000_000)
    #: A page side longer than this many PDF points is treated as corrupt (a page claiming 2^31 pt).
    max_page_points: float = Field(200_000.0, gt=0)
    #: Source images with more pixels than this are refused before decoding.
    max_image_pixels: int = Field(400_000_000, ge=1_000_000)
    page_timeout_s: float = Field(60.0, gt=0)
    workers: int = Field(default_factory=lambda: min(4, usable_cpus()), ge=1, le=256)
    #: Per-worker address-space cap, MiB; a render that needs more fails as ``too_large``.
    worker_memory_mb: int = Field(1536, ge=256)


class RouteOptions(_Options):
    """Which pages go to the engine."""

    #: auto: a page's own text when it is good, else OCR; off: OCR every page; only: never
    #: OCR; redo: as auto, but a page whose text is hidden (an earlier OCR's) is OCR'd again.
    text_layer: TextLayerMode = "auto"


class EngineOptions(_Options):
    """Which engine reads the pages that need OCR."""

    kind: EngineKind = "embedded"
    model: str | None = None
    #: The name the server knows the model by, when it differs from ``model``.
    served_model_name: str | None = None
    recipe: str | None = None
    servers: tuple[str, ...] = ()
    api_key: SecretStr | None = None
    max_concurrency: int | None = Field(None, ge=1)
    #: Embedded engine: OCR calls that run at once (each uses ``threads`` cores).
    parallel: int = Field(default_factory=lambda: min(2, usable_cpus()), ge=1)
    threads: int | None = Field(None, ge=1)
    languages: str = "eng"
    #: Embedded engine: its inference runtime (``engines/runtime.py``): ``auto`` is OpenVINO
    #: where it is installed (the core install on Linux x86_64, macOS arm64, Windows), else
    #: ONNX Runtime.
    backend: Literal["onnxruntime", "openvino", "auto"] = "auto"
    #: Embedded engine: ``auto`` reads lines with the recogniser cut down to alphabetic
    #: scripts where a page's longest lines are alphabetic (OpenVINO only; the whole one
    #: reads other scripts), ``all`` with the whole recogniser (``engines/ppocr_charset.py``).
    charset: Literal["auto", "all"] = "auto"
    #: Share of a document's pages that may fall back before the document is ``partial``.
    max_page_error_rate: float = Field(0.0, ge=0.0, le=1.0)
    #: Everything for one page (attempts, backoff) ends by this deadline.
    page_deadline_s: float = Field(600.0, gt=0)
    request_timeout_s: float = Field(180.0, gt=0)
    guided: bool = False
    #: VLMs: ask the server for token log-probabilities, a page confidence signal (the
    #: reply grows by about a tenth; off by default).
    logprobs: bool = False
    #: Recipe overrides, e.g. ``{"max_tokens": 2048, "prompt": "..."}``.
    recipe_options: dict[str, Any] = Field(default_factory=dict)
    #: Managed vLLM: one replica per entry of ``gpus``; extra ``vllm serve`` flags.
    gpus: tuple[str, ...] = ()
    server_flags: tuple[str, ...] = ()
    vllm_command: tuple[str, ...] = ("vllm", "serve")
    ready_timeout_s: float = Field(900.0, gt=0)
    #: ``--engine openai``: stop when no server can be connected to for this long
    #: (refused, DNS, TLS); a server that answers but is loading gets ``ready_timeout_s``.
    unreachable_timeout_s: float = Field(60.0, gt=0)
    #: ``--engine openai``/``vllm``: stop the run (exit 4) once every server has failed
    #: every request for this long (``engines/breaker.py``); 0: never.
    fail_after_s: float = Field(120.0, ge=0)
    #: Managed vLLM: a named set of serving flags (``ocrflow.engines.presets``), e.g. "fp8".
    preset: str | None = None

    @model_validator(mode="after")
    def _preset_needs_managed_vllm(self) -> EngineOptions:
        if self.preset and self.kind != "vllm":
            raise ValueError("--preset sets flags of a server ocrflow starts: use --engine vllm")
        return self


class OutputOptions(_Options):
    """What the sinks write. ``formats`` is recorded with the run (a joining worker or a
    retry writes the same formats) but is not part of the fingerprint: it changes which
    files exist, never what a page says."""

    page_separator: bool = False
    #: ``--sidecar`` (OCRmyPDF's flag): the ``txt`` format goes along with ``formats``, each
    #: document's plain text, pages apart by form feeds. Declared before ``formats``, whose
    #: check adds it.
    sidecar: bool = False
    #: Output formats, names from ``ocrflow.sinks.KNOWN_FORMATS`` (checked there, where the
    #: sinks are registered); figure files always go along.
    formats: tuple[str, ...] = Field(("markdown", "jsonl"), validate_default=True)
    #: ``chunks``: the most tokens a chunk holds (a table or formula is never split).
    chunk_tokens: int = Field(512, ge=16, le=65536)
    #: Leave blocks labelled page_header / page_footer out of the Markdown, text and
    #: chunks (the layout formats keep them).
    drop_headers_footers: bool = False
    #: Name each source in the outputs by its path relative to the input that named it,
    #: not by its URI (the job service: a server's folders are not its clients' business).
    relative_source_names: bool = False
    #: ``--pdfa``: searchable PDFs are written as PDF/A-2b (``sinks/pdfa.py``); an
    #: encrypted input keeps its encryption and gets a plain searchable PDF.
    pdfa: bool = False
    #: ``--rotate-pages``: an OCR'd page the engine turned to read is shown upright in the
    #: searchable PDF (its ``/Rotate`` turned by as much). Like ``formats``, neither changes
    #: what a page says: not part of the fingerprint.
    rotate_pages: bool = False
    #: ``--deskew``: an OCR'd page whose lines the engine measured askew is shown
    #: straightened in the searchable PDF (``sinks/pdf_deskew.py``; no image re-encoded).
    deskew: bool = False

    @field_validator("formats")
    @classmethod
    def _sidecar_is_txt(cls, formats: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        # One place turns --sidecar into the format every sink, stage and worker sees.
        if info.data.get("sidecar") and "txt" not in formats:
            return (*formats, "txt")
        return formats

    def fingerprint_fields(self) -> dict[str, object]:
        """What changes a document's text outputs, only where set (older runs keep their
        fingerprint)."""
        chunks: dict[str, object] = {}
        if self.chunk_tokens != 512:
            chunks["chunk_tokens"] = self.chunk_tokens
        drop = {"drop_headers_footers": True} if self.drop_headers_footers else {}
        return chunks | drop


class InputOptions(_Options):
    """How dataset inputs (Parquet, ``save_to_disk`` folders) become documents. Recorded with
    the run, so ``ocrflow worker`` and ``retry`` read rows the same way. The column is part of
    the fingerprint (another column holds other pages); the id column is not (it names rows:
    their items differ anyway)."""

    #: The column holding each row's image or PDF; ``None``: the only such column.
    dataset_column: str | None = None
    #: The column holding each row's id; ``None``: ``<shard stem>-<row index>``.
    dataset_id_column: str | None = None
    #: What the run may read (``ocrflow.access``): the CLI trusts its user; the job service
    #: restricts each job to its uploads and the operator's prefixes. Recorded, so a
    #: joining worker checks again when it reads; not part of the fingerprint.
    access: AccessPolicy = AccessPolicy()


class ScaleOptions(_Options):
    """How work is cut and leased among workers. Recorded with the run, so a joining
    ``ocrflow worker`` or ``ocrflow retry`` uses the same values; not part of the
    fingerprint (they change who does a page, never what it says)."""

    #: Documents with more selected pages than this are split into items of this size.
    split_pages: int = Field(500, ge=1)
    #: Seconds a work-item lease lasts unrenewed.
    lease_ttl_s: float = Field(120.0, gt=0)


#: The stages of a run, in run order.
STAGES = ("extract", "describe", "assemble")


def parse_stages(text: str) -> tuple[str, ...]:
    """``extract,describe,assemble`` as a tuple in run order (``ocrflow run`` always
    extracts: the later stages alone are ``ocrflow describe`` and ``ocrflow assemble``)."""
    chosen = {s.strip().lower() for s in text.split(",") if s.strip()}
    unknown = chosen - set(STAGES)
    if unknown or "extract" not in chosen:
        raise ConfigError(
            f"--stages {text!r}: give extract, then describe and/or assemble "
            f"(unknown: {', '.join(sorted(unknown)) or 'none'})"
        )
    return tuple(s for s in STAGES if s in chosen)


class StageOptions(_Options):
    """Which stages ``ocrflow run`` runs (``--stages``), and the describe stage's own model
    and servers when they differ from extract's. Not part of the fingerprint: the later
    stages read the workspace and never change what extract wrote for a page."""

    stages: tuple[str, ...] = ("extract",)
    describe_model: str | None = None
    describe_servers: tuple[str, ...] = ()


class PassOptions(_Options):
    """What happens to a page's Markdown after the engine read it: the canonical clean pass
    (``ocrflow.markdown_clean``) and DeepSeek-OCR's region second passes
    (``ocrflow.second_pass``). In the fingerprint only when not at their defaults, so runs
    that do not use them keep the fingerprint they had."""

    #: Run the canonical Markdown pass (``--no-clean`` keeps the model's text as it is).
    clean: bool = True
    #: Grounded regions of these labels are cropped and read again (``--roi-labels``).
    roi_labels: tuple[str, ...] = ()
    #: Pages read again in the 1280 px mode when a required label is missing, per worker.
    retry_large_cap: int = Field(0, ge=0)
    #: Labels a page with a table-like layout must have, else it is a retry candidate.
    required_labels: tuple[str, ...] = ("table",)

    def fingerprint_fields(self) -> dict[str, object]:
        """The settings that changed from their defaults (they change a page's text)."""
        defaults = PassOptions().model_dump(mode="json")
        changed = {k: v for k, v in self.model_dump(mode="json").items() if v != defaults[k]}
        if not self.retry_large_cap:  # the labels matter only to the large-mode retry
            changed.pop("required_labels", None)
        return changed


class RunConfig(_Options):
    """Everything one run needs, built once by the CLI and passed down by parts."""

    inputs: tuple[str, ...]
    output: str
    pages: str | None = None
    passwords: tuple[SecretStr, ...] = ()
    render: RenderOptions = RenderOptions()
    route: RouteOptions = RouteOptions()
    engine: EngineOptions = EngineOptions()
    out: OutputOptions = OutputOptions()
    scale: ScaleOptions = ScaleOptions()
    input: InputOptions = InputOptions()
    stages: StageOptions = StageOptions()
    passes: PassOptions = PassOptions()

    @field_validator("pages")
    @classmethod
    def _pages_parse(cls, value: str | None) -> str | None:
        return validate_page_spec(value) if value else value

    @model_validator(mode="after")
    def _second_passes_need_deepseek(self) -> RunConfig:
        # Checked here, before any server is waited for; a recipe inferred from the model
        # name is checked when the reader is built.
        wanted = self.passes.roi_labels or self.passes.retry_large_cap
        vlm = self.engine.kind in {"openai", "vllm"} and self.engine.recipe in {None, "deepseek"}
        if wanted and not vlm:
            raise ValueError("--roi-labels/--retry-large-cap need the deepseek recipe (grounding)")
        return self

    def public_dump(self) -> dict[str, object]:
        """The configuration as JSON-ready data without passwords or keys."""
        data = self.model_dump(mode="json", exclude={"passwords": True, "engine": {"api_key"}})
        return data

    def fingerprint_fields(self) -> dict[str, object]:
        """The settings that change what a page's output is; nothing else."""
        # The dataset column only when set: runs without it keep the fingerprint they had.
        column = self.input.dataset_column
        base = ({"dataset_column": column} if column is not None else {}) | {
            "pages": self.pages,
            "target_dim": self.render.target_dim,
            "text_layer": self.route.text_layer,
            "engine": self.engine.kind,
            "model": self.engine.model,
            "recipe": self.engine.recipe,
            "guided": self.engine.guided,
            "recipe_options": self.engine.recipe_options,
            "languages": self.engine.languages if self.engine.kind == "tesseract" else None,
            "page_separator": self.out.page_separator,
        }
        return base | self._optional_fingerprint_fields()

    def _optional_fingerprint_fields(self) -> dict[str, object]:
        """Settings added later, present only when used (older runs keep their fingerprint)."""
        preset = {"preset": self.engine.preset} if self.engine.preset else {}
        dpi = {"dpi": self.render.dpi} if self.render.dpi is not None else {}
        return preset | dpi | self.out.fingerprint_fields() | self.passes.fingerprint_fields()

    def fingerprint(self) -> str:
        """A short stable hash of ``fingerprint_fields``."""
        blob = json.dumps(self.fingerprint_fields(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]
