"""Image inputs as PDF pages: one page a frame (a multi-frame TIFF gives one page each).

A page measures the image at its own resolution: the DPI the file records, else
``DEFAULT_DPI`` (300, a scanner's usual setting: a file that does not say was most likely
scanned, and a photo's "72 dpi" is kept as it says). A page is never larger than
``MAX_PAGE_POINTS`` a side (200 inches, Acrobat's limit): a bigger one is scaled down.

JPEG files are embedded as they are (``DCTDecode``: not one byte decoded or re-encoded);
other formats are decoded once and stored losslessly (Flate; bilevel images at one bit a
pixel). The page shows the image as the pipeline read it: EXIF orientation is applied by
the matrix that places the image, never by turning the pixels.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pikepdf
from PIL import Image

#: Resolution assumed where an image records none (or an implausible one, under 10 dpi).
DEFAULT_DPI = 300.0
#: The largest page side, in points.
MAX_PAGE_POINTS = 14400.0
_ORIENTATION = 0x0112


def _placement(orientation: int, width: float, height: float) -> tuple[float, ...]:
    """The ``cm`` mapping the image's unit square onto a ``width`` x ``height`` page so it
    shows upright per its EXIF ``orientation`` (1..8, as ``ImageOps.exif_transpose``)."""
    return {
        2: (-width, 0, 0, height, width, 0),
        3: (-width, 0, 0, -height, width, height),
        4: (width, 0, 0, -height, 0, height),
        5: (0, -height, -width, 0, width, height),
        6: (0, -height, width, 0, 0, height),
        7: (0, height, width, 0, 0, 0),
        8: (0, height, -width, 0, width, 0),
    }.get(orientation, (width, 0, 0, height, 0, 0))


def _dpi(image: Image.Image) -> tuple[float, float]:
    raw = image.info.get("dpi") or ()  # none: unpacking fails, the default below
    try:
        x, y = (float(v) for v in raw)
    except (TypeError, ValueError):
        return DEFAULT_DPI, DEFAULT_DPI
    if x < 10 or y < 10:
        return DEFAULT_DPI, DEFAULT_DPI
    return x, y


def _orientation(image: Image.Image) -> int:
    try:
        value = int(image.getexif().get(_ORIENTATION, 1))
    except (TypeError, ValueError, OSError):
        return 1
    return value if 1 <= value <= 8 else 1


def _jpeg_stream(pdf: pikepdf.Pdf, image: Image.Image, data: bytes) -> pikepdf.Stream:
    stream = pikepdf.Stream(pdf, data)
    stream.Filter = pikepdf.Name.DCTDecode
    spaces = {"L": "/DeviceGray", "RGB": "/DeviceRGB", "CMYK": "/DeviceCMYK"}
    stream.ColorSpace = pikepdf.Name(spaces[image.mode])
    if image.mode == "CMYK" and "adobe" in image.info:
        # Adobe (Photoshop) CMYK JPEGs store inverted ink values.
        stream.Decode = pikepdf.Array([1, 0] * 4)
    return stream


def _pixel_stream(pdf: pikepdf.Pdf, image: Image.Image) -> pikepdf.Stream:
    frame = image
    if frame.mode == "1":
        space, bits = "/DeviceGray", 1
    elif frame.mode in {"L", "RGB"}:
        space, bits = ("/DeviceGray" if frame.mode == "L" else "/DeviceRGB"), 8
    elif frame.mode in {"I", "I;16", "I;16B", "I;16L", "F"}:
        frame, space, bits = frame.convert("L"), "/DeviceGray", 8
    else:
        # Transparency is flattened over white paper, as a printout would show it.
        rgba = frame.convert("RGBA")
        paper = Image.new("RGB", rgba.size, "white")
        paper.paste(rgba, mask=rgba.getchannel("A"))
        frame, space, bits = paper, "/DeviceRGB", 8
    stream = pikepdf.Stream(pdf, zlib.compress(frame.tobytes(), 6))
    stream.Filter = pikepdf.Name.FlateDecode
    stream.ColorSpace = pikepdf.Name(space)
    stream.BitsPerComponent = bits
    return stream


def image_pages(pdf: pikepdf.Pdf, path: str) -> Iterator[pikepdf.Page]:
    """Append one page to ``pdf`` for each frame of the image at ``path``; yield each."""
    with Image.open(path) as image:
        frames = max(1, int(getattr(image, "n_frames", 1)))
        passthrough = image.format == "JPEG" and frames == 1 and image.mode in {"L", "RGB", "CMYK"}
        raw = open(path, "rb").read() if passthrough else b""  # noqa: SIM115 - read at once
        for index in range(frames):
            image.seek(index)
            yield _page(pdf, image, raw)


def _page(pdf: pikepdf.Pdf, image: Image.Image, jpeg: bytes) -> pikepdf.Page:
    stream = _jpeg_stream(pdf, image, jpeg) if jpeg else _pixel_stream(pdf, image)
    stream.Type = pikepdf.Name.XObject
    stream.Subtype = pikepdf.Name.Image
    stream.Width, stream.Height = image.width, image.height
    if "/BitsPerComponent" not in stream:
        stream.BitsPerComponent = 8
    orientation = _orientation(image)
    dpi_x, dpi_y = _dpi(image)
    shown = (image.height, image.width) if orientation >= 5 else (image.width, image.height)
    if orientation >= 5:
        dpi_x, dpi_y = dpi_y, dpi_x
    width, height = shown[0] * 72 / dpi_x, shown[1] * 72 / dpi_y
    shrink = min(1.0, MAX_PAGE_POINTS / max(width, height))
    width, height = width * shrink, height * shrink
    matrix = " ".join(
        f"{v:.4f}".rstrip("0").rstrip(".") for v in _placement(orientation, width, height)
    )
    content = f"q {matrix} cm /Im0 Do Q\n".encode("ascii")
    page = pikepdf.Dictionary(
        Type=pikepdf.Name.Page,
        MediaBox=pikepdf.Array([0, 0, round(width, 4), round(height, 4)]),
        Resources=pikepdf.Dictionary(XObject=pikepdf.Dictionary(Im0=pdf.make_indirect(stream))),
        Contents=pdf.make_indirect(pikepdf.Stream(pdf, content)),
    )
    pdf.pages.append(pikepdf.Page(page))
    return pdf.pages[-1]
