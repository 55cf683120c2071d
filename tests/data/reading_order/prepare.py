"""How the pages here were made from OCR-D/gt_structure_text (see README.md).

    python prepare.py SOURCE_DIR NAME...

For each NAME, SOURCE_DIR holds ``NAME.xml`` (PAGE XML) and the page image (``NAME.jpg``
or ``NAME.tif``). The image is turned grey and scaled to 2000 px on its longer side
(JPEG, quality 80); ``NAME.regions.json`` lists the text regions in the ground truth's
``ReadingOrder``, each with its type, box (in pixels of the scaled image) and text;
``NAME.txt`` (only where the ground truth has text) is the regions' text in that order,
a blank line apart.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from PIL import Image

LONG_SIDE = 2000


def regions(xml: Path, scale: float) -> list[dict[str, object]]:
    """The page's text regions in reading order: type, box (scaled) and text."""
    root = ET.parse(xml).getroot()
    ns = root.tag.split("}")[0] + "}"
    page = root.find(f"{ns}Page")
    found = {r.get("id"): r for r in page.iter(f"{ns}TextRegion")}
    refs = page.find(f"{ns}ReadingOrder").iter(f"{ns}RegionRefIndexed")
    ordered = [r.get("regionRef") for r in sorted(refs, key=lambda r: int(r.get("index")))]
    out = []
    for ref in ordered:
        region = found.get(ref)
        if region is None:
            continue
        points = region.find(f"{ns}Coords").get("points").split()
        xs, ys = zip(*((int(v) for v in p.split(",")) for p in points), strict=True)
        lines = [
            u.text
            for line in region.findall(f"{ns}TextLine")
            if (u := line.find(f"{ns}TextEquiv/{ns}Unicode")) is not None and u.text
        ]
        box = [round(v * scale) for v in (min(xs), min(ys), max(xs), max(ys))]
        out.append(
            {"type": region.get("type") or "paragraph", "box": box, "text": "\n".join(lines)}
        )
    return out


def main(source: Path, names: list[str]) -> None:
    """Write the scaled image, regions and text of each page into this folder."""
    here = Path(__file__).parent
    for name in names:
        image_path = next(p for p in source.glob(f"{name}.*") if p.suffix != ".xml")
        image = Image.open(image_path).convert("L")
        scale = LONG_SIDE / max(image.size)
        image = image.resize(
            (round(image.width * scale), round(image.height * scale)), Image.LANCZOS
        )
        image.save(here / f"{name}.jpg", quality=80, optimize=True)
        found = regions(source / f"{name}.xml", scale)
        (here / f"{name}.regions.json").write_text(
            json.dumps(found, ensure_ascii=False, indent=1) + "\n"
        )
        if any(r["text"] for r in found):
            text = "\n\n".join(str(r["text"]) for r in found if r["text"])
            (here / f"{name}.txt").write_text(text + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
