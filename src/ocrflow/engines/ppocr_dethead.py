"""The detector's last layers rewritten at a quarter of the input's resolution (OpenVINO).

PP-OCR's DB detector ends in two transposed convolutions with 2×2 kernels and a stride of 2,
a ReLU between them, each doubling the map's size, then a sigmoid at full resolution. OpenVINO
runs those transposed convolutions in f32 on maps of up to a million pixels: about a fifth of
the detector's time on a page (its per-layer profile). A 2×2 transposed convolution of stride
2 has no overlap: each input pixel makes its own 2×2 block of outputs, so it is a 1×1
convolution to four times the channels followed by a depth-to-space. The two of them are
therefore one 1×1 convolution (to the 4 × C channels of the half-resolution map, 2×2 blocks
of them), the ReLU, and one 1×1 convolution to the 16 pixels of each 4×4 block, all at a
quarter of the resolution, then a depth-to-space of block 4. The arithmetic is the same (in
f32 the two graphs give identical maps); the convolutions now run like the rest of the
network (bf16 where the CPU has it), and the detector takes about four fifths of its time.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def quarter_resolution_head(model: Any) -> Any:
    """A copy of the OpenVINO detector ``model`` whose two final 2×2 transposed convolutions
    run as 1×1 convolutions at a quarter of the resolution (see the module docstring);
    ``ValueError`` when the model does not end that way."""
    import openvino as ov
    import openvino.opset13 as ops

    sigmoid = _source(model.get_results()[0], 0)
    if sigmoid.get_type_name() != "Sigmoid":
        raise ValueError(f"the detector ends in {sigmoid.get_type_name()}, not Sigmoid")
    second, second_bias = _biased(_source(sigmoid, 0))
    relu = _source(second, 0)
    if relu.get_type_name() != "Relu":
        raise ValueError(f"the detector's upsampling has {relu.get_type_name()}, not Relu")
    first, first_bias = _biased(_source(relu, 0))
    w1 = _kernel(first)  # (in, mid, 2, 2)
    w2 = _kernel(second)  # (mid, 1, 2, 2)
    if w2.shape[:2] != (w1.shape[1], 1):
        raise ValueError(f"the detector's upsampling kernels are {w1.shape} and {w2.shape}")
    mid = w1.shape[1]
    b1 = _bias(first_bias, mid)
    b2 = _bias(second_bias, 1)

    # First 1x1 convolution: channel block (2a + b) holds the half-resolution pixel (a, b)
    # of each quarter-resolution pixel.
    k1 = np.concatenate([w1[:, :, a, b].T for a in (0, 1) for b in (0, 1)])[..., None, None]
    bias1 = np.tile(b1, 4).reshape(1, 4 * mid, 1, 1)
    # Second: output channel (2a + c) * 4 + (2b + d) is the full-resolution pixel of row
    # 2a + c, column 2b + d in the 4x4 block: the order depth-to-space (depth first) reads.
    k2 = np.zeros((16, 4 * mid, 1, 1), np.float32)
    for a, b, c, d in np.ndindex(2, 2, 2, 2):
        block = (2 * a + b) * mid
        k2[(2 * a + c) * 4 + (2 * b + d), block : block + mid, 0, 0] = w2[:, 0, c, d]
    bias2 = np.full((1, 16, 1, 1), b2[0], np.float32)

    ones, zeros = [1, 1], [0, 0]
    features = first.input_value(0)
    half = ops.relu(
        ops.add(ops.convolution(features, ops.constant(k1), ones, zeros, zeros, ones), bias1)
    )
    blocks = ops.add(ops.convolution(half, ops.constant(k2), ones, zeros, zeros, ones), bias2)
    probability = ops.sigmoid(ops.depth_to_space(blocks, "depth_first", 4))
    return ov.Model([probability.output(0)], model.get_parameters(), "det-quarter-head")


def _source(node: Any, port: int) -> Any:
    """The node feeding ``node``'s input ``port``, past any Identity."""
    found = node.input_value(port).get_node()
    while found.get_type_name() == "Identity":
        found = found.input_value(0).get_node()
    return found


def _biased(node: Any) -> tuple[Any, Any]:
    """(the transposed convolution, its bias constant) of ``node``, an Add of the two."""
    if node.get_type_name() != "Add":
        raise ValueError(f"the detector's upsampling has {node.get_type_name()}, not Add")
    convolution, bias = _source(node, 0), _source(node, 1)
    if bias.get_type_name() != "Constant":
        raise ValueError("the detector's upsampling bias is not a constant")
    return convolution, bias


def _kernel(node: Any) -> np.ndarray:
    """The (in, out, 2, 2) kernel of ``node``, a 2×2 transposed convolution of stride 2."""
    if node.get_type_name() != "ConvolutionBackpropData" or len(node.inputs()) != 2:
        raise ValueError(f"the detector's upsampling has {node.get_type_name()}")
    attributes = node.get_attributes()
    plain = (
        list(attributes["strides"]) == [2, 2]
        and list(attributes["dilations"]) == [1, 1]
        and list(attributes["pads_begin"]) == [0, 0]
        and list(attributes["pads_end"]) == [0, 0]
        and list(attributes["output_padding"]) == [0, 0]
    )
    kernel = _source(node, 1)
    if not plain or kernel.get_type_name() != "Constant":
        raise ValueError("the detector's upsampling is not a plain 2×2 stride-2 one")
    weights = kernel.get_data().astype(np.float32)
    if weights.ndim != 4 or weights.shape[2:] != (2, 2):
        raise ValueError(f"the detector's upsampling kernel is {weights.shape}")
    return weights


def _bias(constant: Any, channels: int) -> np.ndarray:
    values = constant.get_data().astype(np.float32).reshape(-1)
    if values.size != channels:
        raise ValueError(f"the detector's upsampling bias has {values.size} values")
    return values
