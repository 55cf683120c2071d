"""Decide, per rendered page, where its text comes from."""

from __future__ import annotations

from ocrflow.render.jobs import RenderedPage
from ocrflow.types import PageResult, PageStatus, Reason, Route


def route_page(page: RenderedPage, text_layer: str) -> Route:
    """The route for a rendered page: text layer, blank, engine, or none (nothing usable)."""
    if page.error:
        return Route.NONE
    if text_layer == "only":
        # Never OCR: whatever text the layer has is the page's text, even one the quality
        # check would send to the engine; a page with none fails (``no_text_layer``).
        has_text = page.text_ok or bool((page.text or "").strip())
        return Route.TEXT_LAYER if has_text else Route.NONE
    if page.text_ok and page.image is None:
        return Route.TEXT_LAYER
    if page.blank:
        return Route.BLANK
    return Route.ENGINE if page.image is not None else Route.NONE


def settled_page(page: RenderedPage, route: Route) -> PageResult:
    """The result for a page that needs no engine call."""
    attributes = _quality_attributes(page)
    if route is Route.TEXT_LAYER:
        text = page.text or ""
        return PageResult(page.page, text, route, attributes=attributes, blocks=page.text_blocks)
    if route is Route.BLANK:
        return PageResult(page.page, "", route, attributes=attributes)
    if page.error:
        return PageResult(
            page.page,
            "",
            Route.NONE,
            PageStatus.FAILED,
            error=page.error,
            reason=page.reason or Reason.RENDER_ERROR,
            attributes=attributes,
        )
    # Not ``ok`` with empty text: the page was not converted (``ocrflow retry`` with OCR on
    # converts it).
    return PageResult(
        page.page,
        "",
        Route.NONE,
        PageStatus.FAILED,
        reason=Reason.NO_TEXT_LAYER,
        error="the page has no text layer and OCR is off (--text-layer only)",
        attributes=attributes,
    )


def _quality_attributes(page: RenderedPage) -> dict[str, object]:
    if page.text_score is None:
        return {}
    return {
        "text_layer_score": round(page.text_score, 3),
        "text_layer_rejected": list(page.text_reasons),
    }
