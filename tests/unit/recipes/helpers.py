"""What the recipe tests share: sample replies and a stand-in page image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ocrflow.types import EngineReply, ImageSize, PageImage

DATA = Path(__file__).resolve().parents[2] / "data" / "recipes"


def sample(name: str) -> str:
    """The text of a sample reply in ``tests/data/recipes``."""
    return (DATA / name).read_text(encoding="utf-8")


def reply(
    text: str,
    finish_reason: str = "stop",
    image_width: int | None = None,
    image_height: int | None = None,
    **attributes: Any,
) -> EngineReply:
    """An engine reply carrying ``text``, ``attributes`` and the size of the image sent."""
    size = ImageSize(image_width, image_height) if image_width and image_height else None
    return EngineReply(
        text=text, finish_reason=finish_reason, attributes=attributes, image_size=size
    )


def page_image(width: int = 996, height: int = 1288) -> PageImage:
    """A page image of the given size (the bytes are never looked at)."""
    return PageImage(data=b"\x89PNG", width=width, height=height)
