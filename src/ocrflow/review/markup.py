"""Markdown to HTML for people to read, safe for text a model wrote.

Raw HTML in the Markdown is not passed through (``html: False``): it shows as text, so a page
whose OCR output holds ``<script>`` or ``<img onerror=…>`` cannot run anything in the
reviewer's browser. Link targets go through markdown-it's own check, which refuses
``javascript:``, ``vbscript:``, ``file:`` and non-image ``data:`` URLs.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

#: Turns an image path found in the Markdown into the ``src`` the HTML page should use, or
#: ``None`` to show the image as a plain link instead of loading it.
ImageResolver = Callable[[str], str | None]


def markdown_renderer(resolve_image: ImageResolver | None = None) -> MarkdownIt:
    """A CommonMark renderer with tables and strikethrough, raw HTML off.

    ``resolve_image`` rewrites image sources (e.g. ``figures/…`` paths relative to OUT into
    paths relative to the page showing them). Without it, only relative sources load;
    absolute URLs (``http:``…) become links, so opening a review never reaches the network.
    """
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    resolver = resolve_image or _relative_only

    def render_image(
        renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
    ) -> str:
        token = tokens[idx]
        alt = renderer.renderInlineAsText(token.children or [], options, env)
        src = resolver(str(token.attrGet("src") or ""))
        if src is None:
            target = html.escape(str(token.attrGet("src") or ""))
            return f'<a class="remote-image" href="{target}">[image: {html.escape(alt)}]</a>'
        return f'<img src="{html.escape(src)}" alt="{html.escape(alt)}" loading="lazy">'

    md.add_render_rule("image", render_image)
    return md


def markdown_to_html(text: str, resolve_image: ImageResolver | None = None) -> str:
    """``text`` (Markdown) as an HTML fragment; raw HTML in it is shown, never interpreted."""
    return markdown_renderer(resolve_image).render(text)


def _relative_only(src: str) -> str | None:
    parts = urlsplit(src)
    if parts.scheme or parts.netloc or src.startswith("/"):
        return None
    return src
