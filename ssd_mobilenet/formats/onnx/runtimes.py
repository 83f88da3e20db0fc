"""Which runtime runs an `.onnx` file of `migrate export --onnx`: ONNX Runtime (`runner.OnnxFile`)
or OpenVINO (`openvino_model.OpenVinoFile`), chosen by name or, by default, by the file and the CPU.

The default is ONNX Runtime, except for an int8 file on a CPU with int8 dot products
(`hardware.has_int8_dot_products`: VNNI, AMX) where OpenVINO is installed: there OpenVINO runs
the plain model's int8 file in 12.3 against ONNX Runtime's 17.8 ms a 300x300 photo (Xeon Ice
Lake, 2 threads, interleaved), with the same agreement with the float file (docs/benchmarks_onnx.md).
A float file stays on ONNX Runtime: both give the TF1 graph's detections, and ONNX Runtime is the
smaller install. `predict`, `verify --onnx` and `bench`'s `onnx_int8` side all open files here,
so each measures what the others run. Imports no TensorFlow.
"""

from __future__ import annotations

import importlib.util

from ssd_mobilenet import hardware
from ssd_mobilenet.errors import InputError
from ssd_mobilenet.formats.onnx.file_format import read_metadata

ONNX_RUNTIME, OPENVINO = "onnxruntime", "openvino"
# The runtimes by the name a command line gives (`predict --runtime`), as lines name them.
RUNTIMES = {ONNX_RUNTIME: "ONNX Runtime", OPENVINO: "OpenVINO"}


def default_runtime(path: str, cpuinfo: str | None = None) -> str:
    """`OPENVINO` for an int8 file (its metadata says so) on a CPU with int8 dot products
    (`cpuinfo`, a /proc/cpuinfo text; default this machine's) where OpenVINO is installed;
    `ONNX_RUNTIME` otherwise (also for a file it cannot read: that runtime says what is wrong)."""
    meta = read_metadata(path) or {}
    if (meta.get("int8") and hardware.has_int8_dot_products(cpuinfo)
            and importlib.util.find_spec("openvino") is not None):
        return OPENVINO
    return ONNX_RUNTIME


def open_file(path: str, threads: int | None = None, runtime: str | None = None):
    """The file at `path` on `runtime` (a `RUNTIMES` key; None: `default_runtime(path)`) with
    `threads` threads: an `OnnxFile` (or its `OpenVinoFile` kind), whose `runtime` names it.
    Raises:
      InputError: an unknown runtime, or what the runtime's file class raises.
    """
    runtime = runtime or default_runtime(path)
    if runtime == OPENVINO:
        from ssd_mobilenet.formats.onnx.openvino_model import OpenVinoFile
        return OpenVinoFile(path, threads=threads)
    if runtime == ONNX_RUNTIME:
        from ssd_mobilenet.formats.onnx.runner import OnnxFile
        return OnnxFile(path, threads=threads)
    raise InputError(f"--runtime {runtime}: one of {', '.join(RUNTIMES)}")
