"""An earlier OCR's invisible text, taken off a page before ours goes on.

A scan that went through OCR before (a copier's, Tesseract's sandwich, OCRmyPDF's) carries
its text in render mode 3 (or 7): not painted, yet extracted and searched. A page we read
again gets our text layer; keeping theirs too would make every word come out twice, the
old reading (often worse) first. So the text-showing operators drawn invisibly go, on the
page and in the forms it draws directly (OCRmyPDF puts its layer in a form); everything
painted stays, and so does every image stream. The content streams that held such text
are written anew: the only bytes of the input that change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pikepdf

#: Text render modes that paint nothing (3: invisible; 7: add to the clip path only).
_INVISIBLE = frozenset({3, 7})
_SHOW = frozenset({"Tj", "TJ"})
#: These show text after moving to the next line; the move must stay.
_NEXT_LINE_SHOW = frozenset({"'", '"'})

Instruction = pikepdf.ContentStreamInstruction | pikepdf.ContentStreamInlineImage


def strip_invisible_text(pdf: pikepdf.Pdf, page: pikepdf.Page) -> int:
    """Remove the invisible text of ``page`` and of the forms it draws; the number of
    text-showing operators removed."""
    removed = _strip_stream_owner(pdf, page.obj, pikepdf.parse_content_stream(page), page=page)
    resources = page.obj.get("/Resources")
    xobjects = resources.get("/XObject") if isinstance(resources, pikepdf.Dictionary) else None
    if isinstance(xobjects, pikepdf.Dictionary):
        for _, xobject in xobjects.items():
            if isinstance(xobject, pikepdf.Stream) and xobject.get("/Subtype") == "/Form":
                removed += _strip_stream_owner(pdf, xobject, pikepdf.parse_content_stream(xobject))
    return removed


def _strip_stream_owner(
    pdf: pikepdf.Pdf,
    owner: pikepdf.Object,
    instructions: Iterable[Instruction],
    *,
    page: pikepdf.Page | None = None,
) -> int:
    kept, removed = without_invisible_text(instructions)
    if not removed:
        return 0
    data = pikepdf.unparse_content_stream(kept)
    if page is not None:
        page.obj.Contents = pdf.make_stream(data)
    else:
        assert isinstance(owner, pikepdf.Stream)
        owner.write(data)  # a form keeps its dictionary (BBox, Matrix, Resources)
    return removed


def without_invisible_text(
    instructions: Iterable[Instruction],
) -> tuple[list[Instruction], int]:
    """The content stream ``instructions`` without the text shown in an invisible render
    mode, and how many showing operators were dropped. ``Tr`` is graphics state: ``q`` and
    ``Q`` save and restore it."""
    kept: list[Instruction] = []
    mode, removed = 0, 0
    saved: list[int] = []
    for instruction in instructions:
        operands, operator = _split(instruction)
        name = str(operator)
        if name == "q":
            saved.append(mode)
        elif name == "Q":
            mode = saved.pop() if saved else 0
        elif name == "Tr" and operands:
            mode = _int(operands[0], mode)
        elif mode in _INVISIBLE and (name in _SHOW or name in _NEXT_LINE_SHOW):
            removed += 1
            if name == '"' and len(operands) >= 2:  # its spacings stay set, as it set them
                kept.append(pikepdf.ContentStreamInstruction([operands[0]], pikepdf.Operator("Tw")))
                kept.append(pikepdf.ContentStreamInstruction([operands[1]], pikepdf.Operator("Tc")))
            if name in _NEXT_LINE_SHOW:
                kept.append(pikepdf.ContentStreamInstruction([], pikepdf.Operator("T*")))
            continue
        kept.append(instruction)
    return kept, removed


def _split(instruction: Instruction) -> tuple[list[Any], pikepdf.Operator]:
    if isinstance(instruction, pikepdf.ContentStreamInlineImage):
        return [], pikepdf.Operator("INLINE IMAGE")
    return list(instruction.operands), instruction.operator


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return default
