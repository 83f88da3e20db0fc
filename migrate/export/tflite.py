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

import numpy as np
import tensorflow as tf

from migrate.common import console
from migrate.export.drift import DRIFT_IMAGES, drift_notes, drift_of
from migrate.export.inputs import ExportInputError, calibration_images, carried, converted_config, load_converted
from ssd_mobilenet import atomic_write
from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet.export import tflite as tflite_lib


def quantization_drift(model, tflite_bytes: bytes, names, images, input_type: str) -> dict:
    """The int8 file's detections against the converted (float32) model's on `images`, each as
    the file takes it (`tflite.file_input`: the image itself for a file that resizes photos,
    else prepared at the model's size) and the model gets the same pixels, on LiteRT's interpreter.

    Returns:
      dict: overall `agreement` at `REPORT_MIN_SCORE`, plus per_image [(name, agreement)].
    """
    from ssd_mobilenet.litert import model_file
    detect = detector_lib.Detector(model, fold_batch_norm=True)
    file = model_file.ModelFile.from_bytes(tflite_bytes, name="the converted int8 file")

    def pair(image):
        feed = file.feed(image)
        # The float model on the same pixels: the photo itself, or the fixed-size file's uint8
        # frame; a float32-input file's scaled frame is the model's preprocessing of the image.
        pixels = feed if feed.dtype == np.uint8 else np.asarray(image)[None]
        return {k: v.numpy() for k, v in detect(pixels).items()}, file.run(feed)
    return drift_of(names, (pair(image) for image in images))


def _convert(model, nms, input_type, max_detections, images, notes, entry) -> tuple:
    """(file bytes, the NMS mode it has): per-class falls back to regular when the converter
    would need Flex ops for it (the issue's rule), with a note. `entry`: what the metadata carries."""
    try:
        return tflite_lib.convert(model, nms=nms, input_type=input_type, max_detections=max_detections,
                                  representative_images=images, carried=entry), nms
    except tflite_lib.NeedsFlexOps as e:
        if nms != tflite_lib.PER_CLASS:
            raise
        notes.append(f"per-class NMS needs Flex ops with TensorFlow {tf.__version__}'s converter ({e}); "
                     f"fell back to --nms {tflite_lib.REGULAR}")
        return tflite_lib.convert(model, nms=tflite_lib.REGULAR, input_type=input_type, max_detections=max_detections,
                                  representative_images=images, carried=entry), tflite_lib.REGULAR


def export(converted: str, tflite: str, nms: str = tflite_lib.PER_CLASS, input_type: str = tflite_lib.UINT8,
           max_detections: int | None = None, int8: bool = False, calibration=None, force: bool = False,
           progress=None, warn=None, labels: str | None = None) -> dict:
    """Writes the TFLite file of `converted` to `tflite`.

    Args:
      converted: a directory written by `migrate convert`.
      tflite: the `.tflite` file to write.
      nms: `ssd_mobilenet.export.tflite.convert`'s.
      input_type: `ssd_mobilenet.export.tflite.convert`'s.
      max_detections: `ssd_mobilenet.export.tflite.convert`'s.
      int8: post-training int8 quantization, calibrated on `calibration` (image files and
        folders) or, when None, on generated images (`tflite.generated_images`). The file is then
        compared with the float model on (up to `DRIFT_IMAGES` of) those images, and `warn` is
        called for each image whose confident detections (score >= `REPORT_MIN_SCORE`) the
        quantized file does not all reproduce (same class, IoU >= `MATCH_IOU`).
      force: replace an existing `tflite`.
      labels: the label map the file's metadata carries (a file or `coco`; default: the one
        `converted` carries; `inputs.carried`), for `predict` on the file.
    Returns:
      dict: notes (what the file differs in from the converted model), int8, drift
      (`quantization_drift`, or None), out, bytes, nms, input, max_detections, operators (the file's op names), seconds.
    Raises:
      ExportInputError: bad input, one line naming the path or option; nothing is written.
    """
    say = progress or (lambda msg: None)
    warn = warn or (lambda msg: None)
    start = time.perf_counter()
    atomic_write.check_output(tflite, force, is_dir=False, flag="--tflite", error=ExportInputError)
    if nms not in tflite_lib.NMS_MODES:
        raise ExportInputError(f"--nms {nms}: one of {', '.join(tflite_lib.NMS_MODES)}")
    if input_type not in tflite_lib.INPUT_TYPES:
        raise ExportInputError(f"--input {input_type}: one of {', '.join(tflite_lib.INPUT_TYPES)}")
    if max_detections is not None and max_detections < 1:
        raise ExportInputError(f"--max-detections {max_detections}: must be >= 1")
    if calibration is not None and not int8:
        raise ExportInputError("--calibration: calibrates the --int8 quantization; add --int8")
    aware = bool(converted_config(converted).weight_bits)
    if aware:
        _check_quantization_aware(converted, nms, input_type, int8)  # before the weights are loaded
    entry = carried(converted, labels)
    model = load_converted(converted)
    max_detections = max_detections or model.config.max_total_detections
    names, images = calibration_images(calibration, model.config) if int8 else ([], None)
    say(f"converting to TFLite: {nms} NMS, {input_type} input, {max_detections} detections")
    if int8 or aware:
        say(f"int8 calibrated on {len(images)} images" if int8 else "int8 on the checkpoint's quantization ranges")
    notes = []
    with console.native_stderr_quieted():
        data, nms = _convert(model, nms, input_type, max_detections, images, notes, entry)
    notes += [tflite_lib.DIFFERENCES[nms]] if nms in tflite_lib.DIFFERENCES else []
    drift = None
    if aware:
        # The file against the converted model (its FakeQuant ops in float32) on generated images.
        names, images = calibration_images(None, model.config)
        notes.append("quantization-aware: int8 convolutions on the checkpoint's FakeQuant ranges (weights "
                     "re-annotated symmetric per channel, the input on a [-1, 1] grid: "
                     "ssd_mobilenet/export/tflite_integer.py); `verify --tflite` matches it with the TF1 graph")
    compared_on = "calibration images" if int8 else "generated images"
    if int8 or aware:
        say(f"comparing the int8 file with the converted model on {compared_on}")
        with console.native_stderr_quieted():
            drift = quantization_drift(model, data, names[:DRIFT_IMAGES], images[:DRIFT_IMAGES], input_type)
    if drift is not None:
        # A quantization-aware file differs on every image by design (its integer input and weights):
        # the totals say by how much; per-image warnings are for post-training quantization.
        notes += drift_notes(drift, compared_on, "the float model", None if aware else warn)
    atomic_write.write_bytes(tflite, data)
    return {"notes": notes, "int8": int8 or aware, "quantization_aware": aware, "drift": drift,
            "out": os.path.abspath(tflite), "bytes": len(data), "nms": nms, "input": input_type,
            "max_detections": max_detections, "operators": tflite_lib.operator_names(data),
            "seconds": time.perf_counter() - start}


def _check_quantization_aware(converted: str, nms: str, input_type: str, int8: bool) -> None:
    """A quantization-aware model's file is its integer file: refuse the options it does not take."""
    if int8:
        # Its file is int8 on the ranges its checkpoint holds, without calibration.
        raise ExportInputError("--int8: a quantization-aware model exports as int8 without it")
    if nms != tflite_lib.PER_CLASS or input_type != tflite_lib.UINT8:
        flag = f"--nms {nms}" if nms != tflite_lib.PER_CLASS else f"--input {input_type}"
        raise ExportInputError(f"{flag}: not for a quantization-aware model (uint8 input, per-class NMS)")


