"""A second recogniser that can only say the characters of alphabetic scripts (Latin, Greek,
Cyrillic, with digits, punctuation and symbols): 1,828 of the model's 18,708 characters.

The recogniser ends in a matrix product over every character it knows, and a softmax over
them, at each step of a line: with 18,708 characters (15,910 of them CJK) that is a third of
its time. The same model with that last layer cut down to the alphabetic characters reads
Latin lines in 31 % less recogniser time, 17 % less CPU a page with the lines the whole
model reads again, with the same text on every benchmark page (docs/embedded-engine.md).
A line it may have misread (``needs_whole_recogniser``: unsure, or with the gaps that CJK,
Hangul or Devanagari it cannot say leave) is read again by the whole model, whose reading
is kept when it holds characters the cut-down one cannot say. The cut-down model also gives
back what its last layer read, so that reading again is the whole model's last layer alone
(``head_model``): a sixth of a reading.

OpenVINO only: the cut is an edit of OpenVINO's graph (``reduced_model``); on ONNX Runtime
every line is read by the whole model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: A line read by the cut-down recogniser with a lower confidence is read again by the
#: whole one (measured: 5 % of the lines of the Latin benchmark pages are under 0.95, 3 %
#: under 0.9; a line of CJK alone scores far lower or reads as nothing).
RECHECK_SCORE = 0.9
#: Fewer characters a text height of line than this, and the line is read again too: in a
#: line of mixed scripts the cut-down recogniser drops what it cannot say (read as CTC
#: blanks) and stays confident of the rest ("B.3 常用宏包简介" reads "B.3 " at 0.95). Latin
#: lines (with the 25 % margin) carry 3.3 characters a text height (median; 3 % under 2.0).
MIN_CHARACTERS_PER_HEIGHT = 2.0


def needs_whole_recogniser(text: str, score: float, length: float) -> bool:
    """Whether a line the cut-down recogniser read as ``text`` with confidence ``score``,
    ``length`` text heights long, must be read again by the whole one: low confidence, too
    few characters for its length, or the gaps dropped characters leave (two spaces in a
    row, a space at either end). Measured on 12 pages of a Chinese LaTeX manual: 87 of the
    92 mixed lines read with confidence caught, the 5 others lose a sign or a word."""
    return score < RECHECK_SCORE or looks_cut(text, length)


def looks_cut(text: str, length: float) -> bool:
    """Whether a line read as ``text``, ``length`` text heights long, shows the marks of
    characters the cut-down recogniser dropped: gaps, or too few characters."""
    gapped = "  " in text or text != text.strip()
    return gapped or len(text) < MIN_CHARACTERS_PER_HEIGHT * length


#: Code point ranges kept: Latin (with IPA and spacing modifiers), Greek, Cyrillic;
#: Latin Extended Additional, Greek Extended, general punctuation, super- and subscripts,
#: currency, letter-like symbols, arrows, mathematical and technical symbols, enclosed
#: alphanumerics, box drawing, shapes, dingbats; Latin Extended-C and -D; the Latin
#: ligatures; fullwidth ASCII.
ALPHABETIC_RANGES = (
    (0x0000, 0x0530),
    (0x1E00, 0x2C00),
    (0x2C60, 0x2C80),
    (0xA720, 0xA800),
    (0xFB00, 0xFB07),
    (0xFF01, 0xFF5F),
)


def is_alphabetic(character: str) -> bool:
    """Whether the cut-down recogniser can say ``character``."""
    point = ord(character[0]) if character else 0
    return any(low <= point < high for low, high in ALPHABETIC_RANGES)


def alphabetic_classes(characters: Sequence[str]) -> list[int]:
    """The recogniser's output classes kept: CTC's blank (0), every alphabetic character
    (its index + 1), and the trailing space."""
    kept = [index + 1 for index, character in enumerate(characters) if is_alphabetic(character)]
    return [0, *kept, len(characters) + 1]


def alphabetic_model(model: Any) -> Any:
    """The OpenVINO recogniser ``model`` cut down to its alphabetic characters."""
    from ocrflow.engines.runtime import openvino_metadata

    characters = openvino_metadata(model, "character")
    if not characters:
        raise ValueError("the recogniser carries no character list")
    return reduced_model(model, alphabetic_classes(characters.splitlines()))


def reduced_model(model: Any, classes: Sequence[int]) -> Any:
    """A copy of the OpenVINO recogniser ``model`` whose head (features × a constant
    matrix + a constant bias, then a softmax) scores only ``classes``, with a second
    output: the features its head read, which the whole model's head alone
    (``head_model``) reads again for a sixth of a reading. ``ValueError`` when the model
    does not end that way."""
    import openvino as ov

    head = _Head.of(model)
    outputs = [head.probabilities(head.features, np.asarray(classes)), head.features]
    return ov.Model(outputs, model.get_parameters(), "rec-alphabetic")


def head_model(model: Any) -> Any:
    """The OpenVINO recogniser ``model``'s head alone: a line's features (1, steps,
    features), as ``reduced_model`` gives them, in; the probabilities of every class at
    each step out, as the whole model gives them. ``ValueError`` as ``reduced_model``."""
    import openvino as ov
    import openvino.opset13 as ops

    head = _Head.of(model)
    features = ops.parameter([1, -1, head.weights.shape[0]], np.float32, "features")
    return ov.Model([head.probabilities(features.output(0))], [features], "rec-head")


@dataclass(frozen=True)
class _Head:
    """The recogniser's last layer: ``features`` × ``weights`` + ``bias``, softmax over
    ``axis``."""

    features: Any
    weights: np.ndarray
    bias: np.ndarray
    axis: int

    @classmethod
    def of(cls, model: Any) -> _Head:
        """``model``'s head; ``ValueError`` when it does not end in one."""
        softmax = _skip_identity(model.get_results()[0].input_value(0).get_node())
        if softmax.get_type_name() != "Softmax":
            raise ValueError(f"the recogniser ends in {softmax.get_type_name()}, not Softmax")
        logits, bias = _by_constant(_skip_identity(softmax.input_value(0).get_node()), "Add")
        features, weights = _by_constant(logits.get_node(), "MatMul")
        attributes = logits.get_node().get_attributes()
        if attributes.get("transpose_a") or attributes.get("transpose_b"):
            raise ValueError("the recogniser's matrix product is transposed")
        axis = int(softmax.get_attributes().get("axis", -1))
        return cls(features, weights.get_data(), bias.get_data(), axis)

    def probabilities(self, features: Any, classes: np.ndarray | None = None) -> Any:
        """This layer, over ``classes`` only when given, on ``features`` (a graph output)."""
        import openvino.opset13 as ops

        weights, bias = self.weights, self.bias
        if classes is not None:
            weights, bias = weights[:, classes].copy(), bias[..., classes].copy()
        scores = ops.add(
            ops.matmul(features, ops.constant(weights), False, False), ops.constant(bias)
        )
        return ops.softmax(scores, self.axis).output(0)


def _skip_identity(node: Any) -> Any:
    while node.get_type_name() == "Identity":
        node = node.input_value(0).get_node()
    return node


def _by_constant(node: Any, kind: str) -> tuple[Any, Any]:
    """(the other operand, the constant node) of ``node``, a ``kind`` whose second operand
    is a constant."""
    if node.get_type_name() != kind:
        raise ValueError(f"the recogniser's head has {node.get_type_name()} for {kind}")
    operand, constant = node.input_value(0), node.input_value(1).get_node()
    if constant.get_type_name() != "Constant":
        raise ValueError(f"the recogniser's {kind} is not by a constant")
    return operand, constant
