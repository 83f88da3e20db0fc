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

from migrate.common import box_matching, console
from ssd_mobilenet import atomic_write
from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet.export import tflite as tflite_lib
from ssd_mobilenet.image_io import error_message


# Detections a user would show: the floor of the agreement the command reports.
REPORT_MIN_SCORE = 0.5
MATCH_IOU = 0.5


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


# How many of the calibration images the int8 file is compared on with the float model.
DRIFT_IMAGES = 16


def _calibration_images(paths, config) -> tuple:
    """(names, uint8 [H, W, 3] images): the files of `paths`, or generated ones when None."""
    if paths is None:
        images = tflite_lib.generated_images(config)
        return [f"generated:{i}" for i in range(len(images))], list(images)
    from migrate.common import images as images_lib
    try:
        files = images_lib.list_images(paths)
        if not files:
            raise ExportInputError(f"{' '.join(paths)}: no JPEG or PNG images for --calibration")
        return files, [images_lib.read_image(f) for f in files]
    except images_lib.ImageError as e:
        raise ExportInputError(str(e)) from None


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


def drift_of(names, pairs) -> dict:
    """`agreement` over all images of the (float reference, int8 file) output pairs (numpy, the
    four outputs [1, D, ...] each), one pair per name, plus per_image [(name, agreement)]."""
    refs, ours, per_image = [], [], []
    for name, (ref, out) in zip(names, pairs):
        per_image.append((name, agreement(ref, out)))
        refs.append(ref)
        ours.append(out)
    joined = [{k: np.concatenate([d[k] for d in side]) for k in tflite_lib.OUTPUT_KEYS} for side in (refs, ours)]
    return dict(agreement(*joined), per_image=per_image)


def drift_notes(drift: dict, compared_on: str, reference: str, warn=None) -> list:
    """The export's notes on `drift` (`drift_of`'s) measured on `compared_on` ("generated
    images") against `reference` ("the float model"); `warn` (None: no warnings) is called for
    each image whose detections scoring >= `REPORT_MIN_SCORE` the int8 file does not all keep."""
    if not drift["reference"]:
        return [f"int8: {reference} has no detections scoring >= {REPORT_MIN_SCORE} on the "
                f"{len(drift['per_image'])} {compared_on} to compare the quantized file's with"]
    for name, a in drift["per_image"] if warn else []:
        if a["matched"] < a["reference"]:
            warn(f"warning: int8 drift on {name}: {a['matched']} of {a['reference']} detections scoring >= "
                 f"{REPORT_MIN_SCORE} kept (same class, IoU >= {MATCH_IOU})")
    return [f"int8: {drift['matched']} of {drift['reference']} detections scoring >= {REPORT_MIN_SCORE} "
            f"on {len(drift['per_image'])} {compared_on} kept (same class, IoU >= {MATCH_IOU}), "
            f"mean IoU {drift['mean_iou']:.3f}, scores within {drift['max_score_diff']:.3f}"]


def _convert(model, nms, input_type, max_detections, images, notes) -> tuple:
    """(file bytes, the NMS mode it has): per-class falls back to regular when the converter
    would need Flex ops for it (the issue's rule), with a note."""
    try:
        return tflite_lib.convert(model, nms=nms, input_type=input_type, max_detections=max_detections,
                                  representative_images=images), nms
    except tflite_lib.NeedsFlexOps as e:
        if nms != tflite_lib.PER_CLASS:
            raise
        notes.append(f"per-class NMS needs Flex ops with TensorFlow {tf.__version__}'s converter ({e}); "
                     f"fell back to --nms {tflite_lib.REGULAR}")
        return tflite_lib.convert(model, nms=tflite_lib.REGULAR, input_type=input_type,
                                  max_detections=max_detections, representative_images=images), tflite_lib.REGULAR


def export(converted: str, tflite: str, nms: str = tflite_lib.PER_CLASS, input_type: str = tflite_lib.UINT8,
           max_detections: int | None = None, int8: bool = False, calibration=None, force: bool = False,
           progress=None, warn=None) -> dict:
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
    model = load_converted(converted)
    aware = bool(model.config.weight_bits)
    if aware:
        _check_quantization_aware(converted, nms, input_type, int8)
    max_detections = max_detections or model.config.max_total_detections
    names, images = _calibration_images(calibration, model.config) if int8 else ([], None)
    say(f"converting to TFLite: {nms} NMS, {input_type} input, {max_detections} detections")
    if int8 or aware:
        say(f"int8 calibrated on {len(images)} images" if int8 else "int8 on the checkpoint's quantization ranges")
    notes = []
    with console.native_stderr_quieted():
        data, nms = _convert(model, nms, input_type, max_detections, images, notes)
    notes += [tflite_lib.DIFFERENCES[nms]] if nms in tflite_lib.DIFFERENCES else []
    drift = None
    if aware:
        # The file against the converted model (its FakeQuant ops in float32) on generated images.
        names, images = _calibration_images(None, model.config)
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
        raise ExportInputError(f"{converted}: a quantization-aware model is exported as integers on the ranges its "
                               "checkpoint holds, without --int8 (no calibration)")
    if nms != tflite_lib.PER_CLASS or input_type != tflite_lib.UINT8:
        flag = f"--nms {nms}" if nms != tflite_lib.PER_CLASS else f"--input {input_type}"
        raise ExportInputError(f"{flag}: a quantization-aware model's integer file takes the uint8 photo and runs "
                               "the per-class NMS")


def agreement(ref: dict, ours: dict, min_score: float = REPORT_MIN_SCORE, iou: float = MATCH_IOU) -> dict:
    """How many of `ref`'s detections scoring >= `min_score` `ours` also has: one to one, same
    class, IoU >= `iou`, pairs of highest IoU first (a counterpart may score anything).

    Args:
      ref, ours: detection dicts (numpy, [N, D, ...], the signature's four keys), same images.
    Returns:
      dict: reference (detections counted), matched, rate (matched / reference, 1.0 when there
      are none), mean_iou of the matched pairs (1.0 when none), max_score_diff of the pairs.
    """
    total = matched = 0
    ious, score_diffs = [], []
    for i in range(len(ref["num_detections"])):
        n1, n2 = int(ref["num_detections"][i]), int(ours["num_detections"][i])
        keep = np.flatnonzero(ref["detection_scores"][i, :n1] >= min_score)
        total += len(keep)
        if not len(keep) or not n2:
            continue
        b1, c1, s1 = (ref["detection_boxes"][i, keep], ref["detection_classes"][i, keep],
                      ref["detection_scores"][i, keep])
        b2, c2, s2 = (ours["detection_boxes"][i, :n2], ours["detection_classes"][i, :n2],
                      ours["detection_scores"][i, :n2])
        pairs = box_matching.pair_by_class(b1, c1, b2, c2, iou)
        ious.extend(value for _, _, value in pairs)
        score_diffs.extend(abs(float(s1[a]) - float(s2[b])) for a, b, _ in pairs)
        matched += len(pairs)
    return {"reference": total, "matched": matched, "rate": matched / total if total else 1.0,
            "mean_iou": float(np.mean(ious)) if ious else 1.0,
            "max_score_diff": float(max(score_diffs, default=0.0))}
