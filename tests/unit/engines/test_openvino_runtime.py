"""The OpenVINO runtime under the embedded engine: several threads and a fork never hang it.

OpenVINO's synchronous ``infer`` on a compiled model with several streams waits on the
streams executor's threads; a forked child has none, so it waited for good (the former
settings, ``NUM_STREAMS`` = pages at once). Each page read at once now has its own
one-stream compiled model, lent to one thread at a time. These tests fork the pytest
process, hence Linux only; a hang is caught by the child's deadline, not by luck.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ocrflow.engines import runtime
from ocrflow.engines.embedded import EmbeddedEngine
from ocrflow.engines.ppocr import bundled_model_files
from ocrflow.render.jobs import encode_image
from ocrflow.types import PageRequest

pytestmark = [
    pytest.mark.skipif(not runtime.openvino_installed(), reason="the openvino extra is absent"),
    pytest.mark.skipif(sys.platform != "linux", reason="forks the test process"),
    # Python 3.12+ warns on every fork of a process with threads: forking one is the point.
    pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning"),
]


def _line(width: int, seed: int) -> np.ndarray:
    """A recogniser input: one normalised 48 px line of ``width`` columns."""
    return np.random.default_rng(seed).uniform(-1, 1, (1, 3, 48, width)).astype(np.float32)


def _in_child(check: Callable[[], bool], deadline_s: float = 60.0) -> int:
    """Run ``check`` in a forked child; its exit status (-1 when it hung and was killed)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's result is its exit status
        code = 1
        try:
            code = 0 if check() else 1
        finally:
            os._exit(code)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -1


@pytest.mark.timeout(180)
def test_a_forked_child_reads_with_the_parents_session() -> None:
    session = runtime.OpenVinoSession(bundled_model_files()["rec"], 1, slots=2)
    line = _line(320, 0)
    expected = session(line)
    # -1 here was the former two-stream model: the child's infer never returned.
    assert _in_child(lambda: np.array_equal(session(line), expected)) == 0


@pytest.mark.timeout(180)
def test_a_model_lent_out_at_the_fork_does_not_block_the_child() -> None:
    session = runtime.OpenVinoSession(bundled_model_files()["rec"], 1, slots=1)
    line = _line(96, 1)
    expected = session(line)
    held = session._borrow(line.shape)  # a parent thread is mid-page at the fork
    try:
        assert _in_child(lambda: np.array_equal(session(line), expected)) == 0
    finally:
        session._give_back(held)
    assert np.array_equal(session(line), expected)


@pytest.mark.timeout(180)
def test_threads_sharing_a_session_get_their_own_results() -> None:
    session = runtime.OpenVinoSession(bundled_model_files()["rec"], 1, slots=2)
    # Widths vary call to call (every line differs): each call changes the input shape.
    lines = [_line(48 + 40 * k, k) for k in range(12)]
    expected = [session(line) for line in lines]
    failures: list[int] = []

    def read(offset: int) -> None:
        for k in range(len(lines)):
            index = (k + offset) % len(lines)
            if not np.array_equal(session(lines[index]), expected[index]):
                failures.append(index)

    workers = [threading.Thread(target=read, args=(n * 3,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers), "a thread hung in infer"
    assert failures == []
    # Four threads, but never more compiled models than pages read at once.
    assert 1 <= session.compiled_models <= 2


def test_a_shape_goes_back_to_the_copy_that_has_run_it() -> None:
    """Each compiled copy prepares kernels and memory for every new input shape: an idle
    copy that has run the shape already is lent first, so the other does not prepare it."""
    session = runtime.OpenVinoSession(bundled_model_files()["rec"], 1, slots=2)
    narrow, wide = _line(96, 1), _line(320, 2)
    copies = [session._borrow(narrow.shape), session._borrow(narrow.shape)]  # build both
    for copy in copies:
        session._give_back(copy)
    expected = {96: session(narrow), 320: session(wide)}
    for _ in range(3):
        assert np.array_equal(session(wide), expected[320])
        assert np.array_equal(session(narrow), expected[96])
    assert session.compiled_models == 2
    assert [sum(line.shape in copy.shapes for copy in copies) for line in (narrow, wide)] == [1, 1]


def test_a_session_gives_each_output_of_a_model_its_own_reduction() -> None:
    """The alphabetic recogniser's two outputs (its classes' probabilities, the features
    its last layer read), from one call; the line padded to its width bucket first."""
    from ocrflow.engines.ppocr_charset import alphabetic_model

    path = bundled_model_files()["rec"]
    session = runtime.OpenVinoSession(
        path, 1, widths=runtime.rec_width_bucket, edit=alphabetic_model
    )
    line = _line(100, 3)
    best, features = session.outputs(line, (lambda out: out.argmax(axis=2), np.copy))
    steps = runtime.rec_width_bucket(100) // 8
    assert best.shape == (1, steps)
    assert features.shape == (1, steps, 120)
    assert np.array_equal(best, session(line, lambda out: out.argmax(axis=2)))
    assert np.array_equal(features, session.outputs(line, (np.copy, np.copy))[1])


def test_recogniser_widths_are_padded_to_a_few_shapes() -> None:
    batch = _line(100, 2)
    padded = runtime.pad_width(batch, runtime.rec_width_bucket(100))
    assert padded.shape == (1, 3, 48, 128)
    assert np.array_equal(padded[..., :100], batch) and not padded[..., 100:].any()
    assert runtime.pad_width(padded, 128) is padded
    # Steps of 32 px up to 256, then about 12.5 % apart; every width has a bucket.
    widest = runtime.REC_WIDTHS[-1]
    buckets = {runtime.rec_width_bucket(width) for width in range(1, widest + 1)}
    assert len(buckets) == len(runtime.REC_WIDTHS) <= 40 and widest > 8000
    assert all(bucket % 32 == 0 for bucket in buckets)
    for width in (33, 200, 257, 700, 1500, 4000, 8100):
        bucket = runtime.rec_width_bucket(width)
        assert width <= bucket <= max(width + 32, width * 1.15)
    assert runtime.rec_width_bucket(10_000) == 10_016


@pytest.mark.timeout(300)
def test_two_pages_at_once_read_as_each_alone(corpus: Path) -> None:
    names = ("tesseract__phototest.tif", "tesseract__eurotext.tif")
    pages = []
    for name in names:
        with Image.open(corpus / "images" / name) as image:
            pages.append(encode_image(image.convert("RGB"), "raw"))
    engine = EmbeddedEngine(threads=1, max_parallel=2, backend="openvino")

    async def read() -> tuple[list[str], list[str]]:
        alone = [(await engine.infer(PageRequest(image=page))).text for page in pages]
        together = await asyncio.wait_for(
            asyncio.gather(*(engine.infer(PageRequest(image=page)) for page in pages * 2)), 240
        )
        return alone, [reply.text for reply in together]

    alone, together = asyncio.run(read())
    assert "quick brown dog" in alone[0]
    assert together == alone * 2


_CONVERT_AT_ONCE = """
import threading
import openvino as ov
from ocrflow.engines import runtime
from ocrflow.engines.ppocr import bundled_model_files
model = ov.Core().read_model(str(bundled_model_files()["det"]))
constants = [n for n in model.get_ops() if n.get_type_name() == "Constant"][:8]
runtime.prime_openvino()
start = threading.Barrier(4)
def convert(k):
    start.wait()
    for constant in constants[k::4]:
        constant.get_data()
threads = [threading.Thread(target=convert, args=(k,)) for k in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def test_threads_converting_model_constants_at_once_never_hang() -> None:
    """OpenVINO's bindings set their numpy bridge up on first use; threads that do so at once
    can wait on each other for ever (``ocrflow run`` hung about once in 50 runs, its model
    loaders side by side). ``prime_openvino`` does it first in one thread. Without it this
    script hung in 6 of 40 fresh processes; 16 of them here, each with a deadline."""
    statuses = []
    for _ in range(4):
        children = [subprocess.Popen([sys.executable, "-c", _CONVERT_AT_ONCE]) for _ in range(4)]
        deadline = time.monotonic() + 45  # one for the four: a hang costs 45 s, not 45 each
        for child in children:
            try:
                statuses.append(child.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                statuses.append("hung")
    assert statuses == [0] * 16
