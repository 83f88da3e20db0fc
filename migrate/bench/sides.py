"""The sides `bench` measures (`SIDES`, see `migrate.bench.benchmark`), each a runner
`run(images uint8 [N, H, W, 3]) -> dict of outputs`, and the SavedModels and TFLite files it
exports first."""

from __future__ import annotations

import os

from migrate.bench.inputs import _frozen_graph
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError

# The TFLite sides: the file `migrate export` writes by default (per-class NMS, uint8 input of any
# size, resized in the file with the TF1 graph's kernel), float32 and int8 (calibrated on generated
# images, as `export --int8` without --calibration), run by LiteRT's interpreter
# (`ssd_mobilenet.formats.tflite.runner.ModelFile`) with its default op resolver (which applies the
# XNNPACK delegate) and an explicit thread count (the interpreter's own default is one thread). A
# file takes one image per call, so these sides run at batch 1 only, at every size of the run
# (`applies`). Their memory process never imports TensorFlow (`litert_memory`).
TFLITE_SIDES = ("tflite", "tflite_int8")
# The ONNX sides: the file `migrate export --onnx` writes (uint8 input of any size, opset 13, one
# NonMaxSuppression), float32 and `--int8` (QDQ convolutions calibrated on generated images), on
# ONNX Runtime's CPU provider (`migrate.predict.runtimes.onnx.runner`), and the float32 file on OpenVINO's
# CPU plugin in float32 (`openvino_runner`), the int8 file there as `predict --runtime openvino` runs it
# (`openvino_int8`), and the float32 file on OpenCV's DNN module (`opencv_runner`). Like the
# TFLite sides: batch 1 only, memory in a process without TensorFlow.
ONNX_SIDES = ("onnx", "onnx_int8", "openvino", "openvino_int8", "opencv")
# The sides that run a model file, one image per call, without TensorFlow in their memory process.
FILE_SIDES = TFLITE_SIDES + ONNX_SIDES

# Every side `bench` knows; the file sides only when asked for (`DEFAULT_SIDES`): they add an
# export of their files and rows at batch 1 only.
SIDES = ("tf1_session", "tf1_wrap_function", "saved_model", "saved_model_constants", "saved_model_exact",
         "saved_model_mixed", "detector",
         "detector_constants", "detector_exact", "detector_xla", "detector_mixed") + FILE_SIDES
DEFAULT_SIDES = tuple(s for s in SIDES if s not in FILE_SIDES)

# Sides whose SavedModel bench exports first: (variant, precision (None: `mixed_precision()`), weights
# (None: the variant's)).
EXPORTED_SIDES = {"saved_model_constants": ("fast", "float32", "constants"),
                  "saved_model_exact": ("exact", "float32", None), "saved_model_mixed": ("fast", None, None)}
# Sides whose TFLite file bench exports first: whether it is int8.
TFLITE_EXPORTS = {"tflite": False, "tflite_int8": True}
# Sides whose ONNX file bench exports first: whether it is int8.
ONNX_EXPORTS = {"onnx": False, "onnx_int8": True, "openvino": False, "openvino_int8": True, "opencv": False}
FILE_EXPORTS = {**TFLITE_EXPORTS, **ONNX_EXPORTS}

BASELINE = "tf1_session"
# Sides whose every filter is a graph constant beside TensorFlow 2 sides whose filters are variables.
# On oneDNN's kernels TensorFlow caches a convolution's primitive by its shapes, strides, padding,
# data types and fused ops, not by whether its filter is constant, and it lays a variable filter
# out otherwise at batch 1 (`hwio`): in one process the first model to run a shape decides the
# layout for both (docs/measurements.md). `latency_groups` gives them a process of their own there.
CONSTANT_FILTER_SIDES = ("saved_model_constants", "detector_constants")
# The key of a latency report's times ({side: {"HxW/bN": [ms]}}) under which a side measured in
# another process than the first keeps that process's `BASELINE` times: {side: {"HxW/bN": [ms]}}.
OWN_BASELINE = "_own_baseline"
# Sides that compute in the reduced precision (`mixed_precision()`).
MIXED_SIDES = ("saved_model_mixed", "detector_mixed")


def latency_groups(sides, onednn: bool) -> list:
    """The sides each latency process runs, `BASELINE` first in each: one group, or on oneDNN's
    kernels (`onednn`) the `CONSTANT_FILTER_SIDES` apart from the TensorFlow 2 sides with variable
    filters, each group beside its own TF1 session."""
    constants = [s for s in sides if s in CONSTANT_FILTER_SIDES]
    others = [s for s in sides if s != BASELINE and s not in CONSTANT_FILTER_SIDES]
    if not (onednn and constants and any(s not in FILE_SIDES for s in others)):
        return [[BASELINE] + [s for s in sides if s != BASELINE]]
    return [[BASELINE] + others, [BASELINE] + constants]


def applies(side: str, size, batch: int, tflite_size=None) -> bool:
    """Whether `side` runs at image `size` (H, W) and `batch`: every side does, except the TFLite
    ones, whose files take one image per call (batch 1 only) of any size, or with `tflite_size`
    (H, W) given, of that size only (a file that does not resize photos itself)."""
    if side not in FILE_SIDES:
        return True
    return batch == 1 and (tflite_size is None or tuple(size) == tuple(tflite_size))


def runner(side: str, src: str, converted: str, exported: str = None, threads: int = None):
    """The runner of `side` (see the module docstring) for a TF1 model dir and a converted dir;
    `exported`: the SavedModel directory of a `saved_model*` side (default CONVERTED's), or the
    `.tflite` file of a TFLite side (`export_sides`); `threads`: the TFLite interpreter's thread
    count (default `os.cpu_count()`; TensorFlow's sides take theirs from the environment).
    The file sides' runners import no TensorFlow (their memory process runs without it)."""
    if side in ONNX_SIDES:
        if not exported:
            raise InputError("an ONNX side needs its exported .onnx file")
        if side in ("openvino", "openvino_int8"):
            return openvino_runner(exported, threads or os.cpu_count())
        if side == "opencv":
            return opencv_runner(exported, threads or os.cpu_count())
        from migrate.predict.runtimes import onnx  # imports no TensorFlow
        return onnx.runner(exported, threads or os.cpu_count())  # as `predict` runs it
    if side in TFLITE_SIDES:
        if not exported:
            raise InputError("a TFLite side needs its exported .tflite file")
        from migrate.predict.runtimes import litert  # imports no TensorFlow
        return litert.runner(exported, threads or os.cpu_count())

    import numpy as np
    import tensorflow as tf

    if side in ("tf1_session", "tf1_wrap_function"):
        graph_def = tf.compat.v1.GraphDef()
        with open(_frozen_graph(src), "rb") as f:
            graph_def.ParseFromString(f.read())
        if side == "tf1_session":
            from migrate.tf1.frozen_graph import FrozenGraphRunner
            session = FrozenGraphRunner(graph_def)
            fetches = {k: f"{k}:0" for k in DETECTION_OUTPUTS}
            return lambda images: session.run(images, fetches)
        wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
        pruned = wrapped.prune("image_tensor:0", [f"{k}:0" for k in DETECTION_OUTPUTS])
        return lambda images: dict(zip(DETECTION_OUTPUTS, (np.asarray(t) for t in pruned(tf.constant(images)))))
    if side.startswith("saved_model"):
        serve = tf.saved_model.load(exported or os.path.join(converted, "saved_model")).signatures["serving_default"]
        return lambda images: {k: v.numpy() for k, v in serve(input_tensor=tf.constant(images)).items()}
    import warnings

    import ssd_mobilenet
    options = {"detector": {}, "detector_constants": {"freeze_weights": True},
               "detector_exact": {"fold_batch_norm": False, "slice_size": None},
               "detector_xla": {"jit_compile": True}, "detector_mixed": {"precision": mixed_precision()}}
    if side not in options:
        raise InputError(f"--sides {side}: no such side; `bench --help` lists them")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the jit_compile-on-CPU warning: measuring it is the point
        detector = ssd_mobilenet.load(converted, **options[side])
    return lambda images: {k: v.numpy() for k, v in detector(images).items()}


def openvino_runner(path: str, threads: int):
    """`run(images uint8 [1, H, W, 3]) -> the four outputs` of an `.onnx` file of `migrate export
    --onnx` on OpenVINO's CPU plugin with `threads` inference threads, as `predict --runtime
    openvino` runs it (`ssd_mobilenet.formats.onnx.openvino_model.OpenVinoFile`: a float32 file in
    float32 with its divisions kept, an int8 file with `INT8_CONFIG`). Imports no TensorFlow."""
    from migrate.predict.runtimes import onnx
    return onnx.runner(path, threads, runtime="openvino")


def opencv_runner(path: str, threads: int):
    """`run(images uint8 [1, H, W, 3]) -> the four outputs` of an `.onnx` file of `migrate export
    --onnx` on OpenCV's DNN module (`cv2.dnn.readNetFromONNX`, its default engine: the classic one
    cannot read the file) with `threads` threads (`cv2.setNumThreads`, for the process). Imports no
    TensorFlow."""
    import cv2
    import numpy as np

    cv2.setNumThreads(int(threads))
    net = cv2.dnn.readNetFromONNX(path)
    names = list(DETECTION_OUTPUTS)

    def run(images):
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[0] != 1:
            raise ValueError(f"an OpenCV side takes one image [1, H, W, 3], got {list(images.shape)}")
        net.setInput(images)
        return {key: np.asarray(value) for key, value in zip(names, net.forward(names))}
    return run


def exported_path(out_dir: str, side: str) -> str:
    """Where `export_sides` writes `side`'s SavedModel directory, `.tflite` or `.onnx` file under `out_dir`."""
    suffix = ".tflite" if side in TFLITE_EXPORTS else ".onnx" if side in ONNX_EXPORTS else ""
    return os.path.join(out_dir, side + suffix)


def export_sides(converted: str, out_dir: str, sides) -> dict:
    """{side: SavedModel dir, .tflite or .onnx file} of the `EXPORTED_SIDES` and `FILE_EXPORTS`
    among `sides`, written under `out_dir` from CONVERTED's checkpoint: the SavedModels as
    `convert --exact / --precision` writes them (`ssd_mobilenet.formats.saved_model.writer`), the
    TFLite and ONNX files as `migrate export --tflite / --onnx` does by default (per-class NMS,
    uint8 input; int8 calibrated on `network.generated_images`, as `export --int8` without
    --calibration)."""
    from ssd_mobilenet import atomic_write, detector
    from ssd_mobilenet.formats import network
    from ssd_mobilenet.formats.saved_model import writer as saved_model_lib
    from ssd_mobilenet.formats.tflite import writer as tflite_lib
    model = detector.load_model(converted)
    # The float ONNX model, converted once for the ONNX sides, and its int8 form, once for both int8 sides.
    paths, onnx_float, onnx_int8 = {}, None, None
    for side in sides:
        if side in EXPORTED_SIDES:
            variant, precision, weights = EXPORTED_SIDES[side]
            paths[side] = exported_path(out_dir, side)
            saved_model_lib.export_saved_model(model, paths[side], variant, precision or mixed_precision(),
                                               weights=weights)
        elif side in TFLITE_EXPORTS:
            images = network.generated_images(model.config) if TFLITE_EXPORTS[side] else None
            paths[side] = exported_path(out_dir, side)
            atomic_write.write_bytes(paths[side], tflite_lib.convert(model, representative_images=images))
        elif side in ONNX_EXPORTS:
            from ssd_mobilenet.formats.onnx import writer as onnx_lib
            onnx_float = proto = onnx_float or onnx_lib.convert(model)
            if ONNX_EXPORTS[side]:  # as `export --onnx --int8` without --calibration
                from ssd_mobilenet.formats.onnx import integer as onnx_integer
                if onnx_int8 is None:
                    onnx_int8 = onnx_integer.quantize(proto, [image[None] for image in
                                                              network.generated_images(model.config)])
                proto = onnx_int8
            paths[side] = exported_path(out_dir, side)
            atomic_write.write_bytes(paths[side], proto.SerializeToString())
    return paths


def _export_worker(converted: str, out_dir: str, sides_csv: str) -> None:
    from migrate.common import console
    console.quiet_worker()
    export_sides(converted, out_dir, sides_csv.split(","))


def mixed_precision() -> str:
    """The mixed policy that has hardware behind it here: float16 on GPUs, bfloat16 on CPUs."""
    import tensorflow as tf
    return "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"
