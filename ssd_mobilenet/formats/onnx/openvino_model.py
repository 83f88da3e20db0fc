"""An `.onnx` file of `migrate export --onnx` read by OpenVINO so that it computes what ONNX Runtime does.

OpenVINO's CPU plugin turns each `Divide` into a multiplication by the divisor's reciprocal
(its `ConvertDivide` pass): two roundings where IEEE division has one, a float32 step off for about
a third of the quotients. The file's score conversion ends in a division
(`ssd_mobilenet.postprocessing.tensorflow_sigmoid`, TensorFlow's sigmoid step by step), so near a
score of 1, where a trained detector's boxes tie, those steps would turn ties into orders and keep
other boxes than the TF1 graph. The pass skips a `Divide` that carries the runtime attribute
`nonconvertable_divide_0` (OpenVINO's `ov::disable_divide_conversion`); `read_model` sets it on
every one. Its snippets (chains of elementwise ops compiled into one kernel) fuse multiplies into
the following adds, one rounding where TensorFlow has two: scores below 0.9 moved a float32 step
(75 of 32,000 logits in tests/ssd_mobilenet/formats/test_ties.py), so `CONFIG` turns them off, at
19.5 against 20.1 ms a 300x300 photo for the plain model (Zen 3, 2 threads: within the noise).
Its NMS suppresses a box whose IoU equals the limit, where TF1's (and ONNX Runtime's) suppresses
only above it: `read_model` gives its `NonMaxSuppression` the file's limit as
`iou_limit.inclusive_limit` makes it.
Imports no TensorFlow.
"""

from __future__ import annotations

import numpy as np

from ssd_mobilenet.formats.iou_limit import inclusive_limit

# The runtime attribute OpenVINO's ConvertDivide pass checks for (its key, spelled as OpenVINO spells it).
KEEP_DIVISION = "nonconvertable_divide_0"
# The CPU plugin's options: float32 throughout (on CPUs with bfloat16 units its default is
# bfloat16) and no snippets (module docstring).
CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "SNIPPETS_MODE": "DISABLE"}
# NonMaxSuppression's inputs: boxes, scores, max boxes per class, IoU limit, score limit.
IOU_THRESHOLD_INPUT = 3


def read_model(core, model):
    """`core.read_model(model)` (a path, or the file's bytes) with every `Divide` kept a division
    and every `NonMaxSuppression` suppressing above its IoU limit only (module docstring)."""
    from openvino import op as openvino_op

    read = core.read_model(model)
    for op in read.get_ops():
        if op.get_type_name() == "Divide":
            op.get_rt_info()[KEEP_DIVISION] = True
        elif op.get_type_name() == "NonMaxSuppression":
            limit = op.input(IOU_THRESHOLD_INPUT)
            constant = limit.get_source_output().get_node()
            if constant.get_type_name() != "Constant":
                raise ValueError(f"{op.get_friendly_name()}: its IoU limit is not a constant")
            above = inclusive_limit(constant.get_data())
            limit.replace_source_output(openvino_op.Constant(np.asarray(above, np.float32)).output(0))
    return read


def compile_model(core, model, threads: int | None = None):
    """The file (a path or its bytes) compiled for OpenVINO's CPU plugin with `CONFIG`, its
    divisions kept (`read_model`), on `threads` inference threads (None: OpenVINO's default)."""
    options = dict(CONFIG, **({"INFERENCE_NUM_THREADS": int(threads)} if threads else {}))
    return core.compile_model(read_model(core, model), "CPU", options)
