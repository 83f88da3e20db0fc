"""The runtimes `predict` runs a model on, behind one small interface:

    runtime = open_runtime(model, ...)   # a converted directory -> TensorFlow; a .tflite file -> LiteRT;
                                         # an .onnx file -> ONNX Runtime
    runtime.batch_size                   # images per model call
    runtime.results(paths)               # one `base.Result` per path, in order; unreadable images as errors
    runtime.read_image(path)             # uint8 [H, W, 3], decoded as the runtime decodes it (for --png)
    runtime.results_of_encoded(items)    # (path, bytes) pairs read elsewhere -> one `base.Result` each
                                         # (an engine's workers, `migrate.engines`)

`tensorflow` imports TensorFlow; `litert`, `onnx` and `base` never do, so that `predict` on a
`.tflite` or `.onnx` file runs where TensorFlow is not installed.
"""

from __future__ import annotations

import os

# What a model file's first bytes say it is: a FlatBuffer with TFLite's identifier at bytes 4..8.
_TFLITE_IDENTIFIER = b"TFL3"
ONNX_SUFFIX = ".onnx"


def file_runtime(model: str) -> str:
    """"onnx" or "litert": the runtime of a model file, by its suffix (`.onnx`) or, for any other
    name, by its content: a TFLite file has its identifier at bytes 4..8; an ONNX file has no magic
    number, but protobuf writes a ModelProto's `ir_version` (field 1, a varint) first: byte 0x08.
    Anything else goes to LiteRT, whose runtime says what the file is not."""
    if model.lower().endswith(ONNX_SUFFIX):
        return "onnx"
    try:
        with open(model, "rb") as f:
            head = f.read(8)
    except OSError:
        return "litert"  # the LiteRT runtime reports the unreadable file
    return "litert" if head[4:8] == _TFLITE_IDENTIFIER or not head.startswith(b"\x08") else "onnx"


# How `predict`'s messages name a model file of each runtime, and the runtime.
FILE_KINDS = {"onnx": ("an .onnx file", "ONNX Runtime"), "litert": ("a .tflite file", "LiteRT")}


def describe_file(model: str) -> tuple:
    """(what the file is, the runtime that runs it) for messages: ("a .tflite file", "LiteRT")."""
    return FILE_KINDS[file_runtime(model)]


def open_runtime(model: str, **options):
    """The runtime for `model`: `OnnxRuntime(model, threads=...)` for an ONNX file,
    `LiteRTRuntime(model, threads=...)` for another file, `TensorFlowRuntime(model, ...)` for a
    directory; `options` are theirs."""
    if os.path.isfile(model):
        if file_runtime(model) == "onnx":
            from migrate.runtimes.onnx import OnnxRuntime
            return OnnxRuntime(model, **options)
        from migrate.runtimes.litert import LiteRTRuntime
        return LiteRTRuntime(model, **options)
    from migrate.runtimes.tensorflow import TensorFlowRuntime
    return TensorFlowRuntime(model, **options)
