"""Turn a rendered page that needs OCR into a page result, through an engine.

``PlainReader`` serves engines that answer plain text (the embedded engines). The VLM path,
with recipes and an attempt policy, lives in ``vlm_reader.py``.
"""

from __future__ import annotations

from typing import Protocol

from ocrflow.engines.base import Engine
from ocrflow.errors import EngineError
from ocrflow.render.jobs import RenderedPage
from ocrflow.types import ImageSize, PageKey, PageRequest, PageResult, PageStatus, Reason, Route


class PageReader(Protocol):
    """Reads one rendered page that needs an engine."""

    image_encoding: str

    async def read(self, page: RenderedPage, page_key: PageKey) -> PageResult: ...

    async def aclose(self) -> None: ...


class PlainReader:
    """One engine call a page; on failure, fall back to whatever text layer there is."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.image_encoding = engine.image_encoding

    async def aclose(self) -> None:
        """Nothing of its own to close: the engine belongs to the session."""

    async def read(self, page: RenderedPage, page_key: PageKey) -> PageResult:
        """OCR ``page``; an engine failure becomes a fallback or a failed page, never raises."""
        assert page.image is not None
        request = PageRequest(image=page.image, page_key=str(page_key))
        try:
            reply = await self.engine.infer(request)
        except EngineError as exc:
            return fallback_page(page, f"{type(exc).__name__}: {exc}", attempts=1)
        attributes = {"rotation": reply.rotation, "engine": reply.engine, **reply.attributes}
        return PageResult(
            page.page,
            reply.text,
            Route.ENGINE,
            attempts=1,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            latency_s=reply.latency_s,
            attributes=attributes,
            image_size=ImageSize(page.image.width, page.image.height),
            blocks=reply.blocks,
        )


def fallback_page(
    page: RenderedPage,
    error: str,
    *,
    attempts: int,
    tokens_in: int = 0,
    tokens_out: int = 0,
    reason: str = Reason.ENGINE_ERROR,
    **extra: object,
) -> PageResult:
    """A page the engine could not read: its text layer if it has one, else a failure.

    ``reason`` says why the engine could not (``engine_error``, ``empty_reply``). The
    tokens the failed attempts used are kept: they were paid for.
    """
    usable = bool(page.text and page.text.strip())
    return PageResult(
        page.page,
        page.text or "" if usable else "",
        Route.FALLBACK,
        PageStatus.OK if usable else PageStatus.FAILED,
        attempts=attempts,
        error=error,
        reason=reason,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        attributes={"fallback": "engine" if "fallback_engine" in extra else "text_layer", **extra}
        if usable
        else dict(extra),
        blocks=page.text_blocks if usable else (),
    )
