"""Open raster images (png, jpeg, tiff incl. multi-page, webp) as documents of frames."""

from __future__ import annotations

import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

from ocrflow.errors import RenderError
from ocrflow.render.resolution import Resolution, fit_pixels, stated_dpi
from ocrflow.types import Reason


def open_image(path: str, *, max_image_pixels: int) -> Image.Image:
    """Open an image lazily, refusing decompression bombs before any pixel is decoded:
    over ``max_image_pixels`` (``--max-image-pixels``), not over Pillow's own default."""
    # Pillow's limit is process-wide; images are opened in render worker processes (and by
    # the review's pool, with the same default), so setting it here never races.
    Image.MAX_IMAGE_PIXELS = max_image_pixels
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(path)
    except (
        UnidentifiedImageError,
        Image.DecompressionBombError,
        Image.DecompressionBombWarning,
    ) as exc:
        raise _classify(exc) from exc
    except OSError as exc:
        raise RenderError(f"unreadable image: {exc}", reason=Reason.CORRUPT) from exc
    if image.width * image.height > max_image_pixels:
        image.close()
        raise RenderError(
            f"image is {image.width}x{image.height} px, over the {max_image_pixels} px limit "
            "(--max-image-pixels)",
            reason=Reason.TOO_LARGE,
        )
    return image


def _classify(exc: Exception) -> RenderError:
    if isinstance(exc, UnidentifiedImageError):
        return RenderError(f"not an image PIL can read: {exc}", reason=Reason.NOT_A_DOCUMENT)
    return RenderError(f"image too large (--max-image-pixels): {exc}", reason=Reason.TOO_LARGE)


def frame_count(image: Image.Image) -> int:
    """Frames in a (possibly multi-page) image."""
    return max(1, int(getattr(image, "n_frames", 1)))


def render_frame(
    image: Image.Image,
    frame: int,
    *,
    target_dim: int | None = None,
    resolution: Resolution | None = None,
    max_pixels: int | None = None,
) -> Image.Image:
    """Frame ``frame`` (1-based) upright per EXIF, scaled so its longest side is
    ``target_dim``, or as ``resolution`` says (then shrunk to ``max_pixels`` if need be)."""
    resolution = resolution or Resolution(target_dim=target_dim or 1288)
    try:
        image.seek(frame - 1)
        scale = resolution.image_scale(image.size, stated_dpi(image.info))
        if max_pixels is not None and resolution.dpi is not None:
            scale = fit_pixels(scale, image.width, image.height, max_pixels)
        side = max(1, round(max(image.size) * scale))
        if image.format == "JPEG":
            # Let libjpeg decode at a reduced scale: far less memory and time for big photos.
            image.draft("RGB", (side, side))
        frame_image = ImageOps.exif_transpose(image.convert("RGB"))
    except (OSError, ValueError, EOFError) as exc:
        raise RenderError(f"cannot decode frame {frame}: {exc}", reason=Reason.CORRUPT) from exc
    return fit_longest_side(frame_image, side)


def fit_longest_side(image: Image.Image, target_dim: int) -> Image.Image:
    """Resize so the longest side is ``target_dim`` (down or up), keeping the aspect ratio."""
    scale = target_dim / max(image.size)
    if abs(scale - 1) < 1e-3:
        return image
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS if scale < 1 else Image.Resampling.BICUBIC)
