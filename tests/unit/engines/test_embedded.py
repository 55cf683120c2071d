"""The embedded engine on real corpus scans: accuracy, rotation, inputs, protocol."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pytest
from PIL import Image

from ocrflow.engines.base import Engine
from ocrflow.engines.embedded import EmbeddedEngine, OcrText, decode_page_image
from ocrflow.errors import EngineRejected
from ocrflow.types import PageImage, PageRequest

PHOTOTEST_TRUTH = "tesseract__phototest.gold.txt"
#: Measured CER on phototest at 1288 px is 0.000 in all four orientations; 0.03 allows
#: for a few characters of drift between onnxruntime builds.
MAX_PHOTOTEST_CER = 0.03


def cer(hypothesis: str, reference: str) -> float:
    """Character error rate after collapsing whitespace (a small copy of bench's CER)."""
    hyp, ref = " ".join(hypothesis.split()), " ".join(reference.split())
    row = list(range(len(ref) + 1))
    for i, char_h in enumerate(hyp, 1):
        previous, row[0] = row[0], i
        for j, char_r in enumerate(ref, 1):
            previous, row[j] = (
                row[j],
                min(row[j] + 1, row[j - 1] + 1, previous + (char_h != char_r)),
            )
    return row[-1] / max(len(ref), 1)


def word_f1(hypothesis: str, reference: str) -> float:
    """Bag-of-words F1 (order-free): cheap on a full page, unlike the CER above."""
    hyp, ref = Counter(hypothesis.split()), Counter(reference.split())
    matched = sum((hyp & ref).values())
    return 2 * matched / (sum(hyp.values()) + sum(ref.values()))


def fit(image: Image.Image, target: int = 1288) -> Image.Image:
    """The page as the product renders it: RGB, longest side ``target``."""
    scale = target / max(image.size)
    size = (round(image.width * scale), round(image.height * scale))
    return image.convert("RGB").resize(size, Image.Resampling.BICUBIC)


def render_pdf(path: Path, target: int = 1288) -> Image.Image:
    document = pdfium.PdfDocument(str(path))
    try:
        page = document[0]
        return page.render(scale=target / max(page.get_size())).to_pil().convert("RGB")
    finally:
        document.close()


@pytest.fixture(scope="module")
def engine() -> EmbeddedEngine:
    return EmbeddedEngine()


@pytest.fixture(scope="module")
def phototest(corpus: Path) -> Image.Image:
    with Image.open(corpus / "images" / "tesseract__phototest.tif") as image:
        return fit(image)


@pytest.fixture(scope="module")
def phototest_truth(corpus: Path) -> str:
    return (corpus / "groundtruth" / PHOTOTEST_TRUTH).read_text(encoding="utf-8")


def test_engine_honours_the_protocol() -> None:
    engine = EmbeddedEngine(max_parallel=2)
    assert isinstance(engine, Engine)
    assert (engine.name, engine.image_encoding) == ("embedded", "raw")


def test_import_and_construction_load_nothing() -> None:
    code = (
        "import sys; from ocrflow.engines.embedded import EmbeddedEngine; EmbeddedEngine();"
        "assert not {'rapidocr', 'onnxruntime', 'cv2'} & set(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_models_load_offline_and_quietly() -> None:
    """No network at all, and nothing on stderr (rapidocr logs at INFO by default)."""
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = socket.socket.connect_ex = refuse\n"
        "from PIL import Image\n"
        "from ocrflow.engines.embedded import EmbeddedEngine\n"
        "print(repr(EmbeddedEngine().recognize(Image.new('RGB', (64, 64), 'white')).text))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert (done.stdout, done.stderr) == ("''\n", "")


def test_upright_phototest_is_read_accurately(
    engine: EmbeddedEngine, phototest: Image.Image, phototest_truth: str
) -> None:
    result = engine.recognize(phototest)
    assert result.rotation == 0
    assert cer(result.text, phototest_truth) < MAX_PHOTOTEST_CER
    assert result.mean_confidence > 0.9
    # Two paragraphs, as in the gold text, with line breaks kept inside them.
    assert result.text.count("\n\n") == 1
    assert result.text.startswith("This is a lot of 12 point text to test the\nocr code")


@pytest.mark.parametrize(
    ("name", "rotation"),
    [("tesseract__phototest-rotated-L.png", 90), ("tesseract__phototest-rotated-180.png", 180)],
)
def test_rotated_scans_are_read_upright(
    engine: EmbeddedEngine, corpus: Path, phototest_truth: str, name: str, rotation: int
) -> None:
    with Image.open(corpus / "images" / name) as image:
        result = engine.recognize(fit(image))
    assert result.rotation == rotation
    assert cer(result.text, phototest_truth) < MAX_PHOTOTEST_CER


def test_lines_read_to_check_a_turn_are_not_read_again(
    engine: EmbeddedEngine, corpus: Path, phototest_truth: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ocrflow.engines import ppocr

    reads: Counter[tuple[int, tuple[int, ...], bytes]] = Counter()
    read = ppocr.LineModel.read

    def counting(model: ppocr.LineModel, lines: list[Any], batch: int) -> Any:
        reads.update((id(model), line.shape, line.tobytes()) for line in lines)
        return read(model, lines, batch)

    monkeypatch.setattr(ppocr.LineModel, "read", counting)
    with Image.open(corpus / "images" / "tesseract__phototest-rotated-180.png") as image:
        result = engine.recognize(fit(image))
    assert result.rotation == 180
    assert cer(result.text, phototest_truth) < MAX_PHOTOTEST_CER
    # The check read the longest lines both ways; the page's reading reused them.
    assert len(reads) > len(result.boxes)
    assert max(reads.values()) == 1


def test_a_page_turned_clockwise_needs_270(
    engine: EmbeddedEngine, phototest: Image.Image, phototest_truth: str
) -> None:
    result = engine.recognize(phototest.rotate(-90, expand=True))  # PIL turns anticlockwise
    assert result.rotation == 270
    assert cer(result.text, phototest_truth) < MAX_PHOTOTEST_CER


@pytest.mark.parametrize(
    ("name", "rotation"),
    [("docling__ocr_test_rotated_90.pdf", 90), ("docling__ocr_test_rotated_180.pdf", 180)],
)
def test_rotated_pdf_pages_are_read_upright(
    engine: EmbeddedEngine, corpus: Path, name: str, rotation: int
) -> None:
    result = engine.recognize(render_pdf(corpus / "pdfs" / name))
    assert result.rotation == rotation
    assert " ".join(result.text.split()).startswith("Docling bundles PDF document conversion")


def test_two_column_brochure_reads_column_one_then_column_two(
    engine: EmbeddedEngine, corpus: Path
) -> None:
    with Image.open(corpus / "images" / "ocrmypdf__linn.png") as image:
        result = engine.recognize(fit(image))
    truth = (corpus / "groundtruth" / "ocrmypdf__linn.txt").read_text(encoding="utf-8")
    assert word_f1(result.text, truth) > 0.9  # measured 0.936 (CER 0.012); Tesseract 0.938
    text = " ".join(result.text.split())
    landmarks = [
        "The LinnSequencer is a state-of-the-art",  # full width, top
        "To record a sequence, simply press",  # column 1, top
        "SINGLE STEP func-",  # column 1, bottom
        "simply use LOCATE",  # column 2, top
        "attention to your music.",  # column 2, bottom
        "Two TRIGGER OUTPUTS",  # full width, bottom
    ]
    positions = [text.find(landmark) for landmark in landmarks]
    assert -1 not in positions and positions == sorted(positions)


def test_blank_page_gives_empty_text(engine: EmbeddedEngine) -> None:
    result = engine.recognize(Image.new("RGB", (900, 1288), "white"))
    assert result == OcrText(text="", timings=result.timings)
    assert result.mean_confidence == 0.0


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_infer_reads_raw_pixels(
    engine: EmbeddedEngine, phototest: Image.Image, phototest_truth: str, mode: str
) -> None:
    pixels = phototest.convert(mode)
    image = PageImage(pixels.tobytes(), pixels.width, pixels.height, "raw", mode)
    reply = asyncio.run(engine.infer(PageRequest(image=image)))
    assert cer(reply.text, phototest_truth) < MAX_PHOTOTEST_CER
    assert (reply.engine, reply.rotation) == ("rapidocr", 0)
    assert reply.attributes["boxes"] == 8
    assert reply.attributes["mean_confidence"] > 0.9


def test_encoded_png_decodes_like_raw_pixels(phototest: Image.Image) -> None:
    buffer = io.BytesIO()
    phototest.save(buffer, "PNG")
    encoded = PageImage(buffer.getvalue(), phototest.width, phototest.height, "png")
    raw = PageImage(phototest.tobytes(), phototest.width, phototest.height, "raw", "RGB")
    assert (decode_page_image(encoded) == decode_page_image(raw)).all()


@pytest.mark.parametrize(
    "image",
    [
        PageImage(b"\x00" * 10, 4, 4, "raw", "RGB"),
        PageImage(b"\x00" * 48, 4, 4, "raw", "CMYK"),
        PageImage(b"not a png", 4, 4, "png"),
    ],
)
def test_unreadable_images_are_rejected(image: PageImage) -> None:
    with pytest.raises(EngineRejected):
        decode_page_image(image)


def test_a_timed_out_call_keeps_its_slot_until_its_thread_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker thread cannot be stopped; a page that times out must not let another page
    start beside it, or ``max_parallel`` would not bound the CPU."""
    engine = EmbeddedEngine(max_parallel=1)
    release, started, running, most = threading.Event(), threading.Event(), [], []

    def slow_read(pixels: object) -> OcrText:
        running.append(pixels)
        most.append(len(running))
        started.set()
        release.wait(10)
        running.pop()
        return OcrText(text="read")

    monkeypatch.setattr(engine, "_read_image", slow_read)
    request = PageRequest(image=PageImage(b"\xff" * 12, 2, 2, "raw", "RGB"))

    async def scenario() -> str:
        timed_out = asyncio.create_task(asyncio.wait_for(engine.infer(request), 0.05))
        await asyncio.to_thread(started.wait, 10)  # the first page is being read
        second = asyncio.create_task(engine.infer(request))
        asyncio.get_running_loop().call_later(0.3, release.set)
        with pytest.raises(TimeoutError):
            await timed_out
        return (await second).text

    assert asyncio.run(scenario()) == "read"
    assert most == [1, 1]


def test_an_embedded_session_loads_the_models_before_the_first_page() -> None:
    """``open_engine`` starts the load in the background: it overlaps the rendering of the
    first pages instead of delaying the first one."""
    from ocrflow.config import EngineOptions
    from ocrflow.readers.session import open_engine

    async def opened() -> bool:
        async with open_engine(EngineOptions(kind="embedded"), log_dir=None) as session:
            engine = session.engine
            assert isinstance(engine, EmbeddedEngine)
            for _ in range(600):  # no page is sent: only the preload can load them
                if engine._models is not None:
                    break
                await asyncio.sleep(0.1)
            loaded = engine._models is not None
            reply = await engine.infer(_white_page())
            assert reply.text == ""
        # Closing waits for a load in progress and drops the models.
        return loaded and engine._models is None

    assert asyncio.run(opened())


def _white_page() -> PageRequest:
    data = Image.new("RGB", (64, 48), "white").tobytes()
    image = PageImage(data=data, encoding="raw", mode="RGB", width=64, height=48)
    return PageRequest(image=image)


def test_closing_at_once_waits_for_the_load_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of text-layer pages closes the engine before the load thread has even taken its
    lock (here: 0.3 s late); the close waits for the load, so that the process never exits
    while the runtime compiles (the runtime then aborts it)."""
    loaded = EmbeddedEngine._loaded

    def late(self: EmbeddedEngine) -> Any:
        threading.Event().wait(0.3)
        return loaded(self)

    monkeypatch.setattr(EmbeddedEngine, "_loaded", late)
    engine = EmbeddedEngine(threads=1)
    engine.preload()
    asyncio.run(engine.aclose())
    assert not [t for t in threading.enumerate() if t.name == "ocrflow-embedded-load"]
    assert engine._models is None


def test_closing_frees_the_models_in_a_thread_of_their_own() -> None:
    """The models' destructors join the runtime's threads: ``aclose`` hands them to a thread
    named ``RELEASE_THREAD``, where the last reference goes, and returns without them."""
    import weakref

    from ocrflow.engines.embedded import RELEASE_THREAD

    engine = EmbeddedEngine(threads=1)
    freed_in: list[str] = []
    weakref.finalize(
        engine._loaded().detector, lambda: freed_in.append(threading.current_thread().name)
    )
    asyncio.run(engine.aclose())
    assert engine._models is None
    for thread in threading.enumerate():
        if thread.name == RELEASE_THREAD:
            thread.join(timeout=60)
    assert freed_in == [RELEASE_THREAD]
