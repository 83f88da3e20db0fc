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
`OpenVinoFile(path)` is the file on OpenVINO as `runner.OnnxFile` is on ONNX Runtime
(`predict --runtime openvino`: `runtimes`). An int8 file's detections are judged by their
agreement with the float model's, not bit for bit, so it compiles with OpenVINO's snippets
(`INT8_CONFIG`): 12.3 against 14.3 ms a 300x300 photo for the plain model's int8 file (Xeon Ice
Lake, 2 threads), the same agreement on the shared photos; and with its threads not pinned to
cores, as `predict` shares its machine: the same median, a 90th percentile of 17.4-18.7 against
22.4-26.3 ms with them pinned (OpenVINO's default) on that shared 2-core machine.
Imports no TensorFlow.
"""

from __future__ import annotations

import os

import numpy as np

from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError
from ssd_mobilenet.formats.file_runner import first_line, thread_count
from ssd_mobilenet.formats.iou_limit import inclusive_limit
from ssd_mobilenet.formats.onnx.file_format import METADATA_NAME, read_metadata
from ssd_mobilenet.formats.onnx.runner import OnnxFile

# The runtime attribute OpenVINO's ConvertDivide pass checks for (its key, spelled as OpenVINO spells it).
KEEP_DIVISION = "nonconvertable_divide_0"
# The CPU plugin's options: float32 throughout (on CPUs with bfloat16 units its default is
# bfloat16) and no snippets (module docstring).
CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "SNIPPETS_MODE": "DISABLE"}
# An int8 file's: float32 where it computes in float (bfloat16 would round its scores to 8 bits),
# snippets on, threads not pinned (module docstring).
INT8_CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False}
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


def compile_model(core, model, threads: int | None = None, config: dict = CONFIG):
    """The file (a path or its bytes, or a model `read_model` gave) compiled for OpenVINO's CPU
    plugin with `config`, its divisions kept (`read_model`), on `threads` inference threads
    (None: OpenVINO's default)."""
    options = dict(config, **({"INFERENCE_NUM_THREADS": int(threads)} if threads else {}))
    read = model if hasattr(model, "get_ops") else read_model(core, model)
    return core.compile_model(read, "CPU", options)


class OpenVinoFile(OnnxFile):
    """An `.onnx` file of `migrate export --onnx` compiled by OpenVINO's CPU plugin: `OnnxFile`'s
    contract, checks, `kind`, `feed` and `detect`, on OpenVINO (`CONFIG`, or `INT8_CONFIG` for an
    int8 file) with `threads` inference threads (default: the CPU count).
    Raises:
      InputError: OpenVINO not installed, no such file, a file that is not ONNX, or not this
        project's, or that OpenVINO cannot read.
    """

    runtime = "OpenVINO"

    def __init__(self, path: str, threads: int | None = None):
        try:
            import openvino
        except ImportError:
            raise InputError("OpenVINO is not installed: pip install 'ssd-mobilenet-migrate[openvino]'") from None
        self.path = path
        if not os.path.isfile(path):
            raise InputError(f"{path}: no such file")
        # Checked first: OpenVINO tries its other frontends (TensorFlow's among them, which logs)
        # on a file its ONNX one cannot parse.
        if read_metadata(path) is None:
            raise InputError(f"{path}: not from `migrate export` (no {METADATA_NAME} metadata)")
        self.threads = thread_count(threads)
        core = openvino.Core()
        try:
            model = read_model(core, path)
        except (RuntimeError, ValueError) as e:
            # Its message starts with the C++ sources' places ("Exception from src/..."); the reason follows.
            lines = [line for line in str(e).splitlines()
                     if line.strip() and not line.startswith(("Exception", "Check"))]
            raise InputError(f"{path}: OpenVINO cannot read it: {lines[0] if lines else first_line(e)}") from None
        entry = (model.get_rt_info(["framework", METADATA_NAME]).astype(str)
                 if model.has_rt_info(["framework", METADATA_NAME]) else None)
        self._take_contract([o.get_any_name() for o in model.outputs], entry,
                            [i.get_any_name() for i in model.inputs])
        config = INT8_CONFIG if self.metadata.get("int8") else CONFIG
        self.compiled = compile_model(core, model, self.threads, config)
        self._request = self.compiled.create_infer_request()
        self._outputs = {key: self.compiled.output(key) for key in DETECTION_OUTPUTS}

    def run(self, feed: np.ndarray) -> dict:
        """The file's input [1, ...] as `feed` gives it -> the four outputs (numpy, [1, D, ...])."""
        result = self._request.infer({0: feed})
        return {key: np.array(result[output]) for key, output in self._outputs.items()}
