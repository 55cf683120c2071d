"""Reply formats of the multi-step and DocTags recipes: MinerU2.5 and Granite-Docling.

Each reply keeps the fake server's contract (``replies.py``): it names the image's tag and
ends its text with ``(temperature T)`` where it has text.

- ``mineru``: MinerU2.5 answers two kinds of requests. Its layout requests reach the server
  as figure requests: start it with ``--figure-marker`` ``LAYOUT_MARKER`` and
  ``replies.figure_text`` answers them with ``layout_text`` (``/stats`` then counts layout
  requests under ``figures``, by the page image's tag). Every other request is a block
  crop, answered with the crop's text (its tag and temperature).
- ``mineru-loop``: the same, but a crop whose tag's last two hex digits are a multiple of
  3 gets a generation loop (finish_reason ``stop``) at every temperature: its block fails
  (about a third of the crops), deterministically by crop image.
- ``granite-docling``: DocTags with a title, a text, a picture and a page footer on the
  0-500 grid.
"""

from __future__ import annotations

STEP_FORMATS = ("mineru", "mineru-loop", "granite-docling")
#: The text that marks a MinerU layout request (give it to ``--figure-marker``).
LAYOUT_MARKER = "Layout Detection:"

#: The layout's blocks (0-1000 grid of the page): five are read by a crop, the image not.
LAYOUT_BLOCKS = (
    ("title", (100, 50, 900, 90)),
    ("text", (100, 120, 900, 600)),
    ("equation", (200, 620, 800, 700)),
    ("table", (100, 720, 900, 860)),
    ("image", (150, 870, 850, 930)),
    ("page_number", (490, 950, 510, 965)),
)
CROPS_PER_PAGE = sum(1 for kind, _ in LAYOUT_BLOCKS if kind != "image")


def is_layout_prompt(prompt: str) -> bool:
    """Whether a request's text is MinerU's layout prompt."""
    return LAYOUT_MARKER in prompt


def layout_text(tags: list[str]) -> str:
    """MinerU's layout reply (the same blocks on every page; the tag is not in it)."""
    return "\n".join(
        f"<|box_start|>{x0:03d} {y0:03d} {x1:03d} {y1:03d}<|box_end|>"
        f"<|ref_start|>{kind}<|ref_end|><|rotate_up|>"
        for kind, (x0, y0, x1, y1) in LAYOUT_BLOCKS
    )


def crop_fails(tag: str) -> bool:
    """Whether a ``mineru-loop`` crop of this image tag always loops."""
    return int(tag[-2:], 16) % 3 == 0


def step_format_text(fmt: str, tags: list[str], heading: str, body: str, tail: str) -> str:
    """The reply of ``fmt`` (one of ``STEP_FORMATS``) to a page or crop request."""
    tag = tags[0] if tags else "page-none"
    if fmt in ("mineru", "mineru-loop"):
        if fmt == "mineru-loop" and crop_fails(tag):
            return "the table of the " * 40
        return f"Crop {tag}: {body[:80]}{tail}"
    if fmt == "granite-docling":
        title = heading.removeprefix("# ")
        return (
            f"<doctag><title><loc_50><loc_25><loc_450><loc_45>{title}</title>\n"
            f"<text><loc_50><loc_60><loc_450><loc_300>{body}{tail}</text>\n"
            "<picture><loc_75><loc_320><loc_425><loc_450></picture>\n"
            "<page_footer><loc_245><loc_475><loc_255><loc_482>1</page_footer>\n</doctag>"
        )
    raise ValueError(f"not a step reply format: {fmt!r}")
