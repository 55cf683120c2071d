"""Which command-line flag sets each configuration field: an invalid value is reported
under the flag the user typed (``--page-timeout``), never the field (``page_timeout_s``)."""

from __future__ import annotations

from pydantic import ValidationError

#: Field name (unique across the option models of ``ocrflow.config``) -> its flag.
FIELD_FLAGS = {
    "inputs": "INPUTS",
    "output": "-o/--output",
    "pages": "--pages",
    "target_dim": "--target-dim",
    "dpi": "--dpi",
    "max_pixels": "--max-pixels",
    "max_image_pixels": "--max-image-pixels",
    "worker_memory_mb": "--render-memory",
    "page_timeout_s": "--page-timeout",
    "workers": "--workers",
    "text_layer": "--text-layer",
    "kind": "--engine",
    "model": "--model",
    "served_model_name": "--served-model-name",
    "recipe": "--recipe",
    "servers": "--server",
    "max_concurrency": "--max-concurrency",
    "parallel": "--parallel",
    "threads": "--threads",
    "languages": "--languages",
    "backend": "--embedded-backend",
    "charset": "--embedded-charset",
    "max_page_error_rate": "--max-page-error-rate",
    "page_deadline_s": "--page-deadline",
    "request_timeout_s": "--request-timeout",
    "recipe_options": "--recipe-option",
    "gpus": "--gpus",
    "server_flags": "--vllm-arg",
    "vllm_command": "--vllm-command",
    "ready_timeout_s": "--ready-timeout",
    "unreachable_timeout_s": "--unreachable-timeout",
    "fail_after_s": "--fail-after",
    "preset": "--preset",
    "roi_labels": "--roi-labels",
    "retry_large_cap": "--retry-large-cap",
    "formats": "--format",
    "page_separator": "--page-separator",
    "chunk_tokens": "--chunk-tokens",
    "drop_headers_footers": "--drop-headers-footers",
    "sidecar": "--sidecar",
    "pdfa": "--pdfa",
    "rotate_pages": "--rotate-pages",
    "deskew": "--deskew",
    "logprobs": "--logprobs",
    "dataset_column": "--dataset-column",
    "dataset_id_column": "--dataset-id-column",
    "split_pages": "--split-pages",
    "lease_ttl_s": "--lease-ttl",
    "stages": "--stages",
    "describe_model": "--describe-model",
    "describe_servers": "--describe-server",
}


def flag_for(loc: tuple[int | str, ...]) -> str | None:
    """The flag of a pydantic error location (``("render", "page_timeout_s")``): its last
    named field's; ``None`` for an error of the whole configuration."""
    names = [part for part in loc if isinstance(part, str)]
    for name in reversed(names):
        if name in FIELD_FLAGS:
            return FIELD_FLAGS[name]
    return names[-1] if names else None


def validation_message(exc: ValidationError) -> str:
    """One line for the first error: ``invalid value for --page-timeout: Input should be
    greater than 0``; a check of the whole configuration gives its own message."""
    first = exc.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    flag = flag_for(tuple(first["loc"]))
    return f"invalid value for {flag}: {message}" if flag else message
