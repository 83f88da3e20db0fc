"""The runtimes `predict` runs a model on, behind one small interface:

    runtime = open_runtime(model, ...)   # a converted directory -> TensorFlow; a .tflite file -> LiteRT;
                                         # an .onnx file -> ONNX Runtime (or OpenVINO)
    runtime.batch_size                   # images per model call
    runtime.results(paths)               # one `base.Result` per path, in order; unreadable images as errors
    runtime.read_image(path)             # uint8 [H, W, 3], decoded as the runtime decodes it (for --png)
    runtime.results_of_encoded(items)    # (path, bytes) pairs read elsewhere -> one `base.Result` each
                                         # (an engine's workers, `migrate.predict.beam`)

`KINDS` says what the command line needs to know of each runtime before it opens one
(`runtime_kind(model)`): its name, the options it takes, the console it needs. A new runtime is
a module here and an entry in `KINDS` (and `file_runtime`, for its files); the command line
takes it as it is.

`tensorflow` imports TensorFlow; `litert`, `onnx`, `base` and this package never do, so that
`predict` on a `.tflite` or `.onnx` file runs where TensorFlow is not installed.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from typing import Callable

from migrate.common import console
from ssd_mobilenet import converted_dir

# What a model file's first bytes say it is: a FlatBuffer with TFLite's identifier at bytes 4..8.
_TFLITE_IDENTIFIER = b"TFL3"
ONNX_SUFFIX = ".onnx"


@dataclass(frozen=True)
class Kind:
    """A runtime as the command line sees it before opening one. These are facts, not attributes
    of the runtime's class, because the class of a converted directory imports TensorFlow: the
    command has to quiet the console before that import, and `predict --engine beam`'s driver
    never makes it."""

    name: str          # the runtime, as messages name it ("ONNX Runtime")
    model: str         # its model, as messages name it ("an .onnx file")
    runtime: str       # "module:Class", imported by `open_runtime` only
    options: tuple     # the class's keyword options that `predict`'s command line sets; it refuses the others
    console: Callable  # `console(verbose)`: the context that keeps the runtime's own lines off the console


KINDS = {
    "tensorflow": Kind("TensorFlow", "a converted directory", "migrate.predict.runtimes.tensorflow:TensorFlowRuntime",
                       ("batch_size", "max_memory_mb", "memory_growth", "memory_limit_mb", "jit_compile",
                        "weight_cache", "trace_dir", "precision"), console.tensorflow_output),
    "litert": Kind("LiteRT", "a .tflite file", "migrate.predict.runtimes.litert:LiteRTRuntime", ("threads",),
                   console.litert_output),
    "onnx": Kind("ONNX Runtime", "an .onnx file", "migrate.predict.runtimes.onnx:OnnxRuntime",
                 ("threads", "runtime"), console.litert_output),
}


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


def runtime_kind(model: str) -> Kind:
    """The `Kind` of the runtime `open_runtime` gives `model`: a file's by `file_runtime`, a
    directory's (or a missing path's) TensorFlow. Imports no runtime."""
    return KINDS[file_runtime(model)] if os.path.isfile(model) else KINDS["tensorflow"]


def model_metadata(model: str) -> dict:
    """What `model` writes beside its weights, read without loading it (no TensorFlow, no
    runtime): a converted directory's `model_config.json`, a `.tflite` or `.onnx` file's metadata
    entry (which also carries its `labels` and `synthetic`, `converted_dir.carried`); {} where
    there is none (a file of an earlier release) or it cannot be read (the runtime then reports
    the model)."""
    try:
        if os.path.isdir(model):
            with open(converted_dir.config_path(model), encoding="utf-8") as f:
                meta = json.load(f)
        elif file_runtime(model) == "onnx":
            from ssd_mobilenet.formats.onnx import file_format as onnx_format
            meta = onnx_format.read_metadata(model)
        else:
            from ssd_mobilenet.formats.tflite import file_format as tflite_format
            with open(model, "rb") as f:
                meta = tflite_format.read_metadata(f.read())
        return meta if isinstance(meta, dict) else {}
    except Exception:  # noqa: BLE001 - whatever a malformed file raises: the runtime reports the model
        return {}


def model_classes(model: str) -> int | None:
    """The class count `model` says it has (`model_metadata`), or None where it says none."""
    try:
        classes = model_metadata(model).get("num_classes")
        return int(classes) if classes else None
    except (TypeError, ValueError):
        return None


def open_runtime(model: str, **options):
    """The runtime for `model` (`runtime_kind`): `TensorFlowRuntime(model, ...)` for a directory,
    `LiteRTRuntime(model, threads=...)` for a `.tflite` file, `OnnxRuntime(model, threads=...,
    runtime=...)` for an ONNX file; `options` are theirs."""
    module, name = runtime_kind(model).runtime.split(":")
    return getattr(importlib.import_module(module), name)(model, **options)
