"""``ocrflow review``: a static HTML site to spot-check a run, page image beside Markdown.

Public helpers others reuse (the job service's document view): ``markdown_to_html`` (safe
Markdown → HTML), ``render_page_jpeg`` / ``render_page_jpegs`` (page images from a source).
"""

from __future__ import annotations

from ocrflow.review.images import render_page_jpeg, render_page_jpegs
from ocrflow.review.markup import markdown_renderer, markdown_to_html
from ocrflow.review.site import ReviewOptions, ReviewStats, build_review

__all__ = [
    "ReviewOptions",
    "ReviewStats",
    "build_review",
    "markdown_renderer",
    "markdown_to_html",
    "render_page_jpeg",
    "render_page_jpegs",
]
