"""The runtimes an `.onnx` file of `migrate export --onnx` runs on: ONNX Runtime (`runner.OnnxFile`,
the default) or OpenVINO (`openvino_model.OpenVinoFile`), by the name a command line gives
(`predict --runtime`, `bench`'s `openvino_int8` side). Imports no TensorFlow.

Interleaved in one process on a 2-core Xeon (Ice Lake, AVX-512 with VNNI), 480x640 photos, 2
threads (docs/measurements.md, "The int8 files' sigmoid"): the int8 files of the plain model 12.3
ms on OpenVINO against 15.0 on ONNX Runtime, of PPN 26.6 against 23.8, of FPN 640 197 against 203.
ONNX Runtime stays the default all the same, and a user who wants OpenVINO's speed names it: the same file's int8
detections differ between the two (OpenVINO's kernels round otherwise: on the shared photos the
plain file kept 674 of the TF1 graph's 700 detections on OpenVINO, 681 on ONNX Runtime), so a
runtime chosen by the CPU and the packages installed would give one file other detections on
another machine; and OpenVINO compiles for 0.8-1.7 s where ONNX Runtime loads in 0.1-0.5 s.
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
