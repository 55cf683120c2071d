"""Granite-Docling (``ibm-granite/granite-docling-258M``): a page in DocTags, read by docling-core.

Written from the authors' code, repository docling-project/docling at commit
e1cb2b234c48ff29746b0f2f843d07f8e23905a0:

- Request (``docling/datamodel/vlm_model_specs.py``, ``GRANITEDOCLING_VLLM``;
  ``stage_model_specs.py``, ``VLM_CONVERT_GRANITE_DOCLING``): prompt ``Convert this page to
  docling.``, the page at scale 2.0 (144 dpi: 1684 px on A4's long side), temperature 0,
  ``max_new_tokens`` 8192, stop strings ``</doctag>`` and ``<|end_of_text|>``, special tokens
  kept (``skip_special_tokens=False``: the DocTags and ``<loc_N>`` tokens are special). The
  image comes before the prompt (``docling/utils/api_image_request.py``).
- Server: ``vllm serve ibm-granite/granite-docling-258M --revision untied``
  (``docs/examples/vlm_pipeline_api_model.py``).
- Output: DocTags (``<doctag><text><loc_68><loc_206><loc_318><loc_213>...</text>...``),
  boxes on a 0-500 grid. As docling's VLM pipeline does, the reply is turned into a
  ``DoclingDocument`` by docling-core (``DocTagsDocument.from_doctags_and_image_pairs`` and
  ``DoclingDocument.load_from_doctags``; without the page image the page is 1 x 1, so its
  boxes are fractions of the page), whose items become the blocks and whose
  ``export_to_markdown`` is the page's Markdown (page headers and footers, in docling's
  furniture layer, stay out of it).
- Weights: Apache-2.0 (the model card).

docling-core comes with the ``docling`` extra; without it the recipe says which line to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ocrflow.errors import MissingExtra, ParseError
from ocrflow.recipes.base import ChatRecipe, ParsedPage
from ocrflow.recipes.cards import RecipeCard
from ocrflow.recipes.common import MALFORMED, reject_loop, require_stop
from ocrflow.recipes.layout import FigureSet
from ocrflow.recipes.markup import TABLES_HTML, check_table_format, convert_tables
from ocrflow.recipes.text import ensure_heading, normalize_whitespace
from ocrflow.types import Block, BlockLabel, EngineReply, unit_box

PROMPT = "Convert this page to docling."
STOP = ("</doctag>", "<|end_of_text|>")
SERVER_FLAGS = ("--revision", "untied")
#: docling-core's item labels in the document model's vocabulary (others: text, kept).
LABELS = {
    "title": BlockLabel.TITLE,
    "section_header": BlockLabel.SECTION_HEADER,
    "list_item": BlockLabel.LIST_ITEM,
    "table": BlockLabel.TABLE,
    "document_index": BlockLabel.TABLE,
    "picture": BlockLabel.FIGURE,
    "chart": BlockLabel.FIGURE,
    "caption": BlockLabel.CAPTION,
    "formula": BlockLabel.FORMULA,
    "footnote": BlockLabel.FOOTNOTE,
    "page_header": BlockLabel.PAGE_HEADER,
    "page_footer": BlockLabel.PAGE_FOOTER,
    "code": BlockLabel.CODE,
}
#: What docling's Markdown export writes for a picture (replaced by our placeholders).
_IMAGE_MARK = "<!--ocrflow:picture-->"

CARD = RecipeCard(
    models=("ibm-granite/granite-docling-258M",),
    boxes=True,
    licence="Apache-2.0",
    notes="DocTags (0-500 grid) read by docling-core: the docling extra",
)


@dataclass(frozen=True, slots=True)
class GraniteDoclingRecipe(ChatRecipe):
    """Granite-Docling: image then ``Convert this page to docling.``; DocTags back."""

    model: str = ""
    name: str = "granite-docling"
    target_dim: int = 1684
    temperatures: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3)
    max_tokens: int = 8192
    server_flags: tuple[str, ...] = SERVER_FLAGS
    table_format: str = TABLES_HTML

    def __post_init__(self) -> None:
        check_table_format(self.table_format)

    @property
    def prompt(self) -> str:
        """docling's prompt for the model."""
        return PROMPT

    def extra_body(self, attempt: int) -> dict[str, Any]:
        """docling's stop strings; the DocTags tokens kept in the text."""
        return {"stop": list(STOP), "skip_special_tokens": False}

    def parse(self, reply: EngineReply) -> ParsedPage:
        """The DocTags page as docling-core reads it: Markdown, figures and blocks."""
        require_stop(reply)
        text = doctags_of(reply.text)
        doc = load_doctags(text)
        figures = FigureSet()
        blocks = doc_blocks(doc, figures, self.table_format)
        if not blocks:
            raise ParseError("the DocTags reply holds no element", reason=MALFORMED)
        markdown = doc.export_to_markdown(image_placeholder=_IMAGE_MARK)
        for figure in figures.figures:
            markdown = markdown.replace(_IMAGE_MARK, figure.placeholder, 1)
        markdown = normalize_whitespace(markdown.replace(_IMAGE_MARK, ""))
        reject_loop(markdown)
        return ParsedPage(markdown, 0, figures.attributes(), tuple(figures.figures), blocks)


def doctags_of(text: str) -> str:
    """The DocTags of a reply: from ``<doctag>`` on (a chat transcript's ``Assistant:``
    goes), closed when the stop string cut the closing tag."""
    start = text.find("<doctag>")
    text = text[start:] if start >= 0 else f"<doctag>{text}"
    return text if "</doctag>" in text else f"{text}</doctag>"


def load_doctags(text: str) -> Any:
    """The ``DoclingDocument`` docling-core makes of one page's DocTags."""
    try:
        from docling_core.types.doc import DoclingDocument
        from docling_core.types.doc.document import DocTagsDocument
    except ImportError as exc:  # the docling extra is not installed
        raise MissingExtra("the granite-docling recipe", "docling", "docling-core") from exc
    pages = DocTagsDocument.from_doctags_and_image_pairs([text], None)
    try:
        return DoclingDocument.load_from_doctags(pages)
    except Exception as exc:
        message = f"docling-core could not read the DocTags: {exc}"
        raise ParseError(message, reason=MALFORMED) from exc


def doc_blocks(doc: Any, figures: FigureSet, table_format: str) -> tuple[Block, ...]:
    """One block per item of the document in reading order, furniture included."""
    from docling_core.types.doc import ContentLayer

    blocks = []
    for item, _level in doc.iterate_items(included_content_layers=set(ContentLayer)):
        label = str(getattr(item, "label", "text"))
        mapped = LABELS.get(label, BlockLabel.TEXT)
        prov = item.prov[0].bbox if getattr(item, "prov", None) else None
        box = unit_box((prov.l, prov.t, prov.r, prov.b), 1.0, 1.0) if prov else None
        if mapped is BlockLabel.FIGURE:
            if box is None:
                continue  # a picture without a box has nothing to crop
            text = figures.add(box, "image")
        elif label in ("table", "document_index"):
            text = convert_tables(item.export_to_html(doc=doc), table_format)
        else:
            text = _item_text(label, item)
        if not text:
            continue
        source = label if label != mapped else None
        blocks.append(Block(mapped, text, box, source_label=source))
    return tuple(blocks)


def _item_text(label: str, item: Any) -> str:
    text = str(getattr(item, "text", "") or "").strip()
    if not text:
        return ""
    if label == "title":
        return ensure_heading(text, 1)
    if label == "section_header":
        return ensure_heading(text, 1 + int(getattr(item, "level", 1) or 1))
    if label == "formula":
        return f"$$\n{text}\n$$"
    if label == "code":
        return f"```\n{text}\n```"
    return text
