"""`export --onnx`: a converted model directory -> one `.onnx` file (`ssd_mobilenet.export.onnx`).

`export_onnx(converted, out, ...)` is the command as a library function. Bad input (no converted
model, an unreadable checkpoint, an existing OUT without `force`, an option that does not apply
to ONNX) raises `export.ExportInputError` with one line naming the path or option, before
anything is written; the file is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import time

from migrate.export import ExportInputError, load_converted
from ssd_mobilenet import atomic_write


def export_onnx(converted: str, out: str, input_type: str = "uint8", max_detections: int | None = None,
                force: bool = False, verbose: bool = False, progress=None) -> dict:
    """Writes the ONNX file of `converted` to `out`.

    Args:
      input_type: "uint8" (a photo of any size, resized and scaled inside the file) or "float32"
        (the scaled image at the model's size, fixed: for TensorRT, which refuses uint8 inputs).
      max_detections: rows of the outputs (default: the model's `max_total_detections`).
      verbose: show tf2onnx's log.
    Returns:
      dict: out, bytes, input, max_detections, opset, operators (the file's op types), seconds.
    Raises:
      ExportInputError: bad input, one line naming the path or option; nothing is written.
    """
    say = progress or (lambda msg: None)
    start = time.perf_counter()
    atomic_write.check_output(out, force, is_dir=False, flag="--onnx", error=ExportInputError)
    if max_detections is not None and max_detections < 1:
        raise ExportInputError(f"--max-detections {max_detections}: must be >= 1")
    try:
        from ssd_mobilenet.export import onnx as onnx_lib
    except ImportError as e:
        raise ExportInputError(f"--onnx needs tf2onnx and onnx ({e}): pip install "
                               "'ssd-mobilenet-migrate[onnx-export]'") from None
    if input_type not in onnx_lib.INPUT_TYPES:
        raise ExportInputError(f"--input {input_type}: one of {', '.join(onnx_lib.INPUT_TYPES)}")
    model = load_converted(converted)
    if model.config.weight_bits:
        raise ExportInputError(f"{converted}: a quantization-aware model has no ONNX export yet (its checkpoint's "
                               "ranges would go into QDQ nodes); export it with --tflite")
    max_detections = max_detections or model.config.max_total_detections
    say(f"converting to ONNX (opset {onnx_lib.OPSET}, {input_type} input, {max_detections} detections)")
    proto = onnx_lib.convert(model, input_type, max_detections, verbose=verbose)
    data = proto.SerializeToString()
    atomic_write.write_bytes(out, data)
    return {"out": os.path.abspath(out), "bytes": len(data), "input": input_type, "max_detections": max_detections,
            "opset": onnx_lib.OPSET, "operators": onnx_lib.operator_names(proto),
            "seconds": time.perf_counter() - start}
