"""Build the engine a configuration names."""

from __future__ import annotations

from ocrflow.config import EngineOptions
from ocrflow.engines.base import Engine
from ocrflow.errors import ConfigError


def build_engine(options: EngineOptions) -> Engine:
    """The engine for ``options.kind``; heavy imports happen only for the engine chosen."""
    if options.kind == "embedded":
        from ocrflow.engines.embedded import EmbeddedEngine

        return EmbeddedEngine(
            threads=options.threads,
            max_parallel=options.parallel,
            backend=options.backend,
            charset=options.charset,
        )
    if options.kind == "tesseract":
        from ocrflow.engines.tesseract import TesseractEngine

        return TesseractEngine(languages=options.languages, max_parallel=options.parallel)
    raise ConfigError(f"engine {options.kind!r} needs a server; see --engine openai / vllm")
