"""`export`: a converted model directory -> a deployable file (`--tflite OUT.tflite`).

`export(converted, tflite=OUT, ...)` is the command as a library function; what the file holds
and how each post-processing mode differs from the TF graph is `ssd_mobilenet.export.tflite`'s
docstring. Bad input (no converted model, an unreadable checkpoint, an existing OUT without
`force`, a bad option) raises `ExportInputError` with one line naming the path, before
anything is written; the file is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import time

import tensorflow as tf

from ssd_mobilenet import atomic_write
from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet.export import tflite as tflite_lib
from ssd_mobilenet.image_io import error_message


class ExportInputError(ValueError):
    """A converted directory that cannot be read, an output that may not be written, a bad option."""


def load_converted(converted: str):
    """The Keras model of a converted directory, or `ExportInputError` naming the directory."""
    if not os.path.isdir(converted):
        raise ExportInputError(f"{converted}: no such directory (expected the output of `migrate convert`)")
    if not os.path.isfile(os.path.join(converted, detector_lib.CONFIG_FILE)):
        raise ExportInputError(f"{converted}: not a converted model directory (no {detector_lib.CONFIG_FILE})")
    try:
        return detector_lib.load_model(converted)
    # A truncated tensor data file: the checkpoint reader raises IndexError ("Read less bytes
    # than requested").
    except (OSError, ValueError, IndexError, tf.errors.OpError) as e:
        raise ExportInputError(f"{converted}: cannot load the converted model: {error_message(e)}") from None


def export(converted: str, tflite: str, nms: str = tflite_lib.PER_CLASS, input_type: str = tflite_lib.UINT8,
           max_detections: int | None = None, force: bool = False, progress=None) -> dict:
    """Writes the TFLite file of `converted` to `tflite`.

    Args:
      converted: a directory written by `migrate convert`.
      tflite: the `.tflite` file to write.
      nms, input_type, max_detections: `ssd_mobilenet.export.tflite.convert`'s.
      force: replace an existing `tflite`.
    Returns:
      dict: out, bytes, nms, input, max_detections, operators (the file's op names), seconds.
    Raises:
      ExportInputError: bad input, one line naming the path or option; nothing is written.
    """
    say = progress or (lambda msg: None)
    start = time.perf_counter()
    atomic_write.check_output(tflite, force, is_dir=False, flag="--tflite", error=ExportInputError)
    if nms not in tflite_lib.NMS_MODES:
        raise ExportInputError(f"--nms {nms}: one of {', '.join(tflite_lib.NMS_MODES)}")
    if input_type not in tflite_lib.INPUT_TYPES:
        raise ExportInputError(f"--input {input_type}: one of {', '.join(tflite_lib.INPUT_TYPES)}")
    if max_detections is not None and max_detections < 1:
        raise ExportInputError(f"--max-detections {max_detections}: must be >= 1")
    model = load_converted(converted)
    if model.config.weight_bits:
        raise ExportInputError(f"{converted}: a quantization-aware model (FakeQuant ranges); its TFLite export "
                               "is not supported")
    max_detections = max_detections or model.config.max_total_detections
    say(f"converting to TFLite ({nms} NMS, {input_type} input, {max_detections} detections)")
    data = tflite_lib.convert(model, nms=nms, input_type=input_type, max_detections=max_detections)
    atomic_write.write_bytes(tflite, data)
    return {"out": os.path.abspath(tflite), "bytes": len(data), "nms": nms, "input": input_type,
            "max_detections": max_detections, "operators": tflite_lib.operator_names(data),
            "seconds": time.perf_counter() - start}
