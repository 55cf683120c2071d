"""How many pixels a page gets: a VLM's pixel target, or a CPU engine's resolution.

A VLM reads best at a fixed image size (its recipe's ``target_dim``, the longest side). A
CPU engine reads print best at a resolution: a scanned page at its own (its pixels are all
there is; resampling them only loses or invents detail), capped so that a 600- or 2400-dpi
scan does not cost four or sixty times the pixels for nothing, and a born-digital page at
the engine's dpi. Pure functions, run in the render workers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: A scan that claims less than this is taken at this resolution: below it the image was
#: placed oddly (a stamp-sized picture of a page). Nothing finer is enforced: enlarging a
#: 72-dpi scan to 100 dpi made Tesseract's CER worse (0.275 -> 0.292 on a corpus page).
MIN_SCAN_DPI = 50.0
#: What an image file that states no resolution is taken to be (most were scanned), as
#: the searchable PDF takes it too.
UNSTATED_IMAGE_DPI = 300.0


@dataclass(frozen=True, slots=True)
class Resolution:
    """The size pages are rendered at: ``dpi`` set, a resolution (scans at their own, at
    most ``max_scan_dpi``, when that is set too); else ``target_dim`` px on the longest side."""

    target_dim: int = 1288
    dpi: float | None = None
    max_scan_dpi: float | None = None

    def pdf_scale(self, width_pt: float, height_pt: float, scan_dpi: float) -> float:
        """Pixels per PDF point for a page ``width_pt`` x ``height_pt``, whose finest covering
        image has ``scan_dpi`` (0.0: not a scan)."""
        if self.dpi is None:
            return self.target_dim / max(width_pt, height_pt)
        return self.page_dpi(scan_dpi) / 72

    def page_dpi(self, scan_dpi: float) -> float:
        """The dpi a PDF page is rendered at (``dpi`` mode only)."""
        assert self.dpi is not None
        if self.max_scan_dpi is None or scan_dpi <= 0:
            return self.dpi
        return min(max(scan_dpi, MIN_SCAN_DPI), self.max_scan_dpi)

    def image_scale(self, size: tuple[int, int], stated_dpi: float | None) -> float:
        """Scale of an image input's frame of ``size`` px that states ``stated_dpi``: the
        longest side to ``target_dim``; in dpi mode the image as it is, shrunk only when it
        is finer than ``max_scan_dpi`` (an image is never enlarged: a photo that says
        "72 dpi" is thousands of pixels wide)."""
        if self.dpi is None:
            return self.target_dim / max(size)
        own = stated_dpi if stated_dpi and stated_dpi >= MIN_SCAN_DPI else UNSTATED_IMAGE_DPI
        cap = self.max_scan_dpi or self.dpi
        return min(1.0, cap / own)


def fit_pixels(scale: float, width: float, height: float, max_pixels: int) -> float:
    """``scale``, lowered so that ``width`` x ``height`` scaled holds at most ``max_pixels``."""
    area = width * height * scale * scale
    if area <= max_pixels:
        return scale
    return scale * math.sqrt(max_pixels / area) * 0.999


def stated_dpi(info: Mapping[Any, Any]) -> float | None:
    """The resolution an image file states (PIL's ``info["dpi"]``), if any."""
    dpi = info.get("dpi")
    if isinstance(dpi, tuple) and dpi:
        try:
            value = float(max(dpi[:2]))
        except (TypeError, ValueError):
            return None
        # A file may say anything: a zero denominator reads as inf or nan.
        return value if math.isfinite(value) and value > 0 else None
    return None
