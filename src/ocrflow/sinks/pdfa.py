"""PDF/A-2b for searchable PDFs (``--pdfa``): the file is marked and given what ISO 19005-2
level B asks of every file, while the input's own objects keep their bytes.

Added, per the rules of veraPDF's PDF/A-2B profile (clauses in brackets):

- XMP metadata in the catalog with ``pdfaid:part`` 2 and ``pdfaid:conformance`` B (6.6.2.1,
  6.6.4). The document information dictionary is read into it first
  (``load_from_docinfo``) and written back from it, so both say the same. pikepdf is not
  made the editor: no ``MetadataDate`` of now, so the same input still gives the same bytes.
- An output intent ``GTS_PDFA1`` with an embedded sRGB profile (6.2.3): DeviceRGB and
  DeviceGray, what scans and our image pages use, are allowed only with one (6.2.4.3). A
  file with an output intent already shares its profile (every intent must use the same
  one); a file with a PDF/A intent keeps it.
- ``LZWDecode`` streams, forbidden (6.1.7.2), decoded and written again with Flate: the only
  streams whose bytes change.
- A header version from 1.4 (metadata streams and output intents) to 1.7 (6.1.2); the
  trailer ``/ID`` comes from the saver (``deterministic_id``; 6.1.3); never encryption
  (6.1.3; an encrypted input gets no PDF/A, see ``searchable_pdf``).

What PDF/A-2b asks of our text layer (``pdf_text_layer``) holds already: the glyph-less font
program is embedded (6.2.11.4.1), its CIDFont has a ``CIDToGIDMap`` stream (6.2.11.3.2), no
code reaches ``.notdef`` (every CID shows glyph 1; 6.2.11.8), ``Identity-H`` frees its
``CIDSystemInfo`` (6.2.11.3.1); a ``CIDSet`` is optional in PDF/A-2 and absent; widths need
not match for text in render mode 3 (6.2.11.5). We add no transparency (no ``/Group``).

Not made conformant, because the input's objects are kept as they are (OCRmyPDF rewrites
the whole file with Ghostscript instead, images included): fonts the input uses without
embedding them, DeviceCMYK without a CMYK intent, JavaScript and other actions, annotations
without appearances, LZW in inline images, XMP properties outside the predefined schemas.
Such a file carries the PDF/A mark without meeting the standard; nothing here checks.
"""

from __future__ import annotations

import functools
import logging
import zlib

import pikepdf
from PIL import ImageCms

log = logging.getLogger(__name__)

#: Filters qpdf decodes fully (its "generalized" level): an LZW chain of these can be
#: rewritten; one with an image codec after LZW cannot without decoding the image.
_GENERAL = frozenset(
    {"/LZWDecode", "/FlateDecode", "/ASCII85Decode", "/ASCIIHexDecode", "/RunLengthDecode"}
)
_SRGB = "sRGB IEC61966-2.1"


@functools.cache
def srgb_profile() -> bytes:
    """An sRGB ICC display profile: LittleCMS's built-in one (through Pillow), no data
    file. LittleCMS stamps it ICC version 4.4; it is stamped 4.2 here, the ISO 15076-1
    version PDF/A-2 names, which its tags (mluc, para, sf32, chrm) all belong to. Its
    profile ID is zero ("not computed"), so no checksum covers the version."""
    data = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    data[8:12] = bytes((4, 0x20, 0, 0))
    return bytes(data)


def make_pdfa(pdf: pikepdf.Pdf) -> None:
    """Give an unencrypted ``pdf`` what PDF/A-2b asks of every file and mark it so (see
    the module's docstring for what is and is not done)."""
    _reencode_lzw(pdf)
    _add_output_intent(pdf)
    with pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=True) as meta:
        meta.load_from_docinfo(pdf.docinfo)
        meta["pdfaid:part"] = "2"
        meta["pdfaid:conformance"] = "B"


def pdfa_versions(pdf: pikepdf.Pdf) -> tuple[str, str]:
    """``Pdf.save``'s ``min_version`` and ``force_version`` (``""``: none), keeping the
    header version within PDF/A-2's 1.4 to 1.7."""
    major, _, minor = pdf.pdf_version.partition(".")
    try:
        newer = (int(major), int(minor)) > (1, 7)
    except ValueError:  # a header qpdf read but we cannot: 1.7 is what we can promise
        newer = True
    return ("", "1.7") if newer else ("1.4", "")


def _add_output_intent(pdf: pikepdf.Pdf) -> None:
    intents = pdf.Root.get("/OutputIntents")
    if not isinstance(intents, pikepdf.Array):
        intents = pdf.Root.OutputIntents = pdf.make_indirect(pikepdf.Array())
    if any(intent.get("/S") == "/GTS_PDFA1" for intent in intents):
        return
    # Every intent with a profile must share the same one (a PDF/X file's, say).
    shared = [intent for intent in intents if "/DestOutputProfile" in intent]
    if shared:
        profile = shared[0].DestOutputProfile
        name = shared[0].get("/OutputConditionIdentifier", pikepdf.String("Custom"))
    else:
        profile = pdf.make_indirect(pikepdf.Stream(pdf, srgb_profile(), N=3))
        name = pikepdf.String(_SRGB)
    intent = pikepdf.Dictionary(
        Type=pikepdf.Name.OutputIntent,
        S=pikepdf.Name.GTS_PDFA1,
        OutputConditionIdentifier=name,
        Info=pikepdf.String(_SRGB if not shared else str(name)),
        DestOutputProfile=profile,
    )
    intents.append(intent)


def _reencode_lzw(pdf: pikepdf.Pdf) -> None:
    kept = 0
    for obj in pdf.objects:
        if not isinstance(obj, pikepdf.Stream):
            continue
        filters = obj.get("/Filter")
        names = [filters] if isinstance(filters, pikepdf.Name) else list(filters or ())
        if "/LZWDecode" not in names:
            continue
        if not all(str(name) in _GENERAL for name in names):
            kept += 1
            continue
        data = obj.read_bytes(pikepdf.StreamDecodeLevel.generalized)
        obj.write(zlib.compress(data, 6), filter=pikepdf.Name.FlateDecode)
    if kept:
        log.warning("%d LZW stream(s) ahead of an image codec kept as they are: not PDF/A", kept)
