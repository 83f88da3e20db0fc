"""The runtimes an `.onnx` file of `migrate export --onnx` runs on: ONNX Runtime (`runner.OnnxFile`,
the default) or OpenVINO (`openvino_model.OpenVinoFile`), by the name a command line gives
(`predict --runtime`, `bench`'s `openvino_int8` side). Imports no TensorFlow.

Neither is the faster one for every file. Interleaved in one process on a 2-core Xeon (Ice Lake,
AVX-512 with VNNI), 480x640 photos, 2 threads (docs/benchmarks_onnx.md): the int8 files of the
plain model 13.2 ms on OpenVINO against 18.1 on ONNX Runtime, of PPN 28.7 against 29.3, of FPN 640
471 against 366; the float files give the TF1 graph's detections on both. So ONNX Runtime, the
smaller install, stays the default, and a user whose file runs faster on OpenVINO names it.
"""

from __future__ import annotations

from ssd_mobilenet.errors import InputError

ONNX_RUNTIME, OPENVINO = "onnxruntime", "openvino"
# The runtimes by the name a command line gives, as lines name them.
RUNTIMES = {ONNX_RUNTIME: "ONNX Runtime", OPENVINO: "OpenVINO"}


def open_file(path: str, threads: int | None = None, runtime: str = ONNX_RUNTIME):
    """The file at `path` on `runtime` (a `RUNTIMES` key) with `threads` threads (default: the
    CPU count): an `OnnxFile`, or its `OpenVinoFile` kind, whose `runtime` names it.
    Raises:
      InputError: an unknown runtime, or what the runtime's file class raises.
    """
    if runtime == OPENVINO:
        from ssd_mobilenet.formats.onnx.openvino_model import OpenVinoFile
        return OpenVinoFile(path, threads=threads)
    if runtime == ONNX_RUNTIME:
        from ssd_mobilenet.formats.onnx.runner import OnnxFile
        return OnnxFile(path, threads=threads)
    raise InputError(f"--runtime {runtime}: one of {', '.join(RUNTIMES)}")
