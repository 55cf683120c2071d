"""Generate the sample documents in examples/ from scratch (no third-party files).

    python scripts/make_examples.py examples

Writes a born-digital PDF (with a German page), an image-only "scanned" PDF, a photo-like
JPEG, a page rotated by 90 degrees, a two-page TIFF and a blank-page PDF. Deterministic:
the same script gives the same files.
"""

from __future__ import annotations

import io
import random
import sys
import zlib
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
)

ENGLISH = [
    "Quarterly Report on Library Digitisation",
    "",
    "The reading room received four hundred boxes of letters, invoices and",
    "contracts in March. Each box was scanned at three hundred dots per inch",
    "and checked by two archivists before it was returned to storage.",
    "",
    "Costs fell by twelve percent compared with the previous quarter, mainly",
    "because the new scanners need less manual cropping and fewer retakes.",
]
GERMAN = [
    "Bericht über die Digitalisierung",
    "",
    "Die Größe der Sammlung wächst jedes Jahr. Für die Übertragung der",
    "Briefe und Verträge benötigen wir schnelle, zuverlässige Werkzeuge.",
    "Schöne Grüße aus dem Archiv in München.",
]
INVOICE = [
    "INVOICE No. 2024-0117",
    "",
    "Bill to: Northwind Traders, 12 Harbour Street, Bristol",
    "Date: 14 March 2024        Due: 13 April 2024",
    "",
    "Item                               Qty      Price",
    "Archival boxes, acid free           40     160.00",
    "Scanning service, per page        2500     375.00",
    "",
    "Total due                                  535.00",
]


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu when the system has it (it covers umlauts), else Pillow's built-in font."""
    for candidate in FONT_CANDIDATES:
        if Path(candidate).exists():
            return ImageFont.truetype(candidate, size)
    return ImageFont.load_default(size=size)


def page_image(lines: list[str], *, size: tuple[int, int] = (1240, 1754)) -> Image.Image:
    """A white A4-ish page at 150 dpi with the lines typeset on it."""
    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    y = 150
    for i, line in enumerate(lines):
        face = font(42 if i == 0 else 27)
        draw.text((120, y), line, font=face, fill=20)
        y += 70 if i == 0 else 44
    return image


def scanned(image: Image.Image, seed: int) -> Image.Image:
    """Make a clean page look scanned: slight blur, speckle noise, a grey cast."""
    rng = random.Random(seed)
    noisy = image.filter(ImageFilter.GaussianBlur(0.6)).point(lambda v: int(v * 0.93 + 8))
    pixels = noisy.load()
    for _ in range(noisy.width * noisy.height // 400):
        x, y = rng.randrange(noisy.width), rng.randrange(noisy.height)
        pixels[x, y] = rng.choice((90, 140, 200))
    return noisy.rotate(0.4, fillcolor=245, resample=Image.Resampling.BICUBIC)


def photo(image: Image.Image, seed: int) -> Image.Image:
    """A phone-photo look: uneven light, colour cast, a slight tilt, JPEG-sized."""
    rng = random.Random(seed)
    rgb = Image.merge(
        "RGB", (image, image.point(lambda v: int(v * 0.97)), image.point(lambda v: int(v * 0.9)))
    )
    shade = Image.linear_gradient("L").resize(rgb.size).point(lambda v: 200 + v // 5)
    lit = Image.composite(rgb, Image.new("RGB", rgb.size, (120, 110, 95)), shade)
    tilted = lit.rotate(2.5 + rng.random(), expand=True, fillcolor=(70, 60, 50))
    return tilted.filter(ImageFilter.GaussianBlur(0.8))


# -- a tiny PDF writer: enough for text pages (Helvetica, WinAnsi) and JPEG image pages ------


def _pdf(objects: list[bytes]) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def _stream(data: bytes, extra: bytes = b"", compress: bool = True) -> bytes:
    if compress:
        data, extra = zlib.compress(data), extra + b" /Filter /FlateDecode"
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def _escape(text: str) -> bytes:
    raw = text.encode("cp1252")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def text_pdf(pages: list[list[str]]) -> bytes:
    """A born-digital PDF: one page per list of lines, Helvetica with WinAnsi encoding."""
    n = len(pages)
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(n))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for lines in pages:
        ops = [b"BT /F1 20 Tf 72 760 Td 26 TL"]
        for i, line in enumerate(lines):
            size = 20 if i == 0 else 12
            ops.append(b"/F1 %d Tf (%s) Tj T*" % (size, _escape(line)))
        ops.append(b"ET")
        page_no = len(objects) + 1
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (page_no + 1)
        )
        objects.append(_stream(b"\n".join(ops)))
    return _pdf(objects)


def image_pdf(images: list[Image.Image]) -> bytes:
    """An image-only PDF (a "scan"): each image fills a US-letter page, JPEG-encoded."""
    n = len(images)
    kids = b" ".join(b"%d 0 R" % (3 + 3 * i) for i in range(n))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n),
    ]
    for image in images:
        jpeg = io.BytesIO()
        image.convert("L").save(jpeg, format="JPEG", quality=80)
        base = len(objects) + 1
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /XObject << /Im0 %d 0 R >> >> /Contents %d 0 R >>"
            % (base + 1, base + 2)
        )
        objects.append(
            _stream(
                jpeg.getvalue(),
                b" /Type /XObject /Subtype /Image /Width %d /Height %d "
                b"/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /DCTDecode" % image.size,
                compress=False,
            )
        )
        objects.append(_stream(b"q 612 0 0 792 0 0 cm /Im0 Do Q"))
    return _pdf(objects)


def main(target: Path) -> None:
    """Write every sample into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    (target / "born-digital.pdf").write_bytes(text_pdf([ENGLISH, GERMAN, INVOICE]))
    pages = [scanned(page_image(ENGLISH), 1), scanned(page_image(INVOICE), 2)]
    (target / "scanned.pdf").write_bytes(image_pdf(pages))
    photo(page_image(INVOICE), 3).save(target / "invoice-photo.jpg", quality=85)
    scanned(page_image(ENGLISH), 4).rotate(90, expand=True).save(target / "rotated-page.png")
    german = scanned(page_image(GERMAN), 5)
    german.save(
        target / "german-scan.tiff",
        save_all=True,
        append_images=[scanned(page_image(INVOICE), 6)],
        compression="tiff_deflate",
    )
    blank = Image.new("L", (1240, 1754), 250)
    (target / "with-blank-page.pdf").write_bytes(
        image_pdf([scanned(page_image(ENGLISH[:4]), 7), blank])
    )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "examples"))
