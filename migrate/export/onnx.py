"""`export --onnx`: a converted model directory -> one `.onnx` file (`ssd_mobilenet.export.onnx`;
a quantization-aware model's is int8 QDQ on its checkpoint's ranges).

`export_onnx(converted, out, ...)` is the command as a library function. Bad input (no converted
model, an unreadable checkpoint, an existing OUT without `force`, an option that does not apply
to ONNX) raises `inputs.ExportInputError` with one line naming the path or option, before
anything is written; the file is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import time

from migrate.export.drift import DRIFT_IMAGES, drift_notes, drift_of
from migrate.export.inputs import ExportInputError, calibration_images, carried, converted_config, load_converted
from ssd_mobilenet import atomic_write
from ssd_mobilenet.detections import DETECTION_OUTPUTS


def quantization_drift(float_bytes: bytes, int8_bytes: bytes, names, feeds) -> dict:
    """The int8 file's detections against the float file's on the same inputs, on ONNX Runtime:
    `drift.agreement` overall, plus per_image [(name, agreement)]. (The float file's detections
    are the converted model's: tests/onnx.)"""
    from ssd_mobilenet.onnx_file import import_onnxruntime, session_options
    ort = import_onnxruntime()
    sessions = [ort.InferenceSession(data, sess_options=session_options(None), providers=["CPUExecutionProvider"])
                for data in (float_bytes, int8_bytes)]
    name = sessions[0].get_inputs()[0].name
    return drift_of(names, ([dict(zip(DETECTION_OUTPUTS, s.run(list(DETECTION_OUTPUTS), {name: feed})))
                             for s in sessions] for feed in feeds))


def aware_drift(model, onnx_bytes: bytes, names, images, input_type: str) -> dict:
    """A quantization-aware model's file against the converted model (its FakeQuant ops in
    float32) on `images`, the model fed the same pixels (as `tflite.quantization_drift` does for
    the integer `.tflite` file), on ONNX Runtime: `drift_of`'s dict."""
    import numpy as np

    from ssd_mobilenet import detector
    from ssd_mobilenet.export import network
    from ssd_mobilenet.onnx_file import import_onnxruntime, session_options
    ort = import_onnxruntime()
    detect = detector.Detector(model, fold_batch_norm=True)
    session = ort.InferenceSession(onnx_bytes, sess_options=session_options(None), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def pair(image):
        feed = network.file_input(image, model.config, input_type)
        # A float32 feed is the model's preprocessing of the photo: the model gets the photo.
        pixels = feed if feed.dtype == np.uint8 else np.asarray(image)[None]
        return ({k: v.numpy() for k, v in detect(pixels).items()},
                dict(zip(DETECTION_OUTPUTS, session.run(list(DETECTION_OUTPUTS), {name: feed}))))
    return drift_of(names, (pair(image) for image in images))


def export_onnx(converted: str, out: str, input_type: str = "uint8", max_detections: int | None = None,
                int8: bool = False, calibration=None, force: bool = False, verbose: bool = False, progress=None,
                warn=None, labels: str | None = None) -> dict:
    """Writes the ONNX file of `converted` to `out`.

    Args:
      input_type: "uint8" (a photo of any size, resized and scaled inside the file) or "float32"
        (the scaled image at the model's size, fixed: for TensorRT, which refuses uint8 inputs).
      max_detections: rows of the outputs (default: the model's `max_total_detections`).
      int8: QDQ int8 convolutions (`ssd_mobilenet.export.onnx_integer`), calibrated on
        `calibration` (image files and folders) or, when None, generated images, then compared with
        the float file on (up to `DRIFT_IMAGES` of) them; `warn` is called for each image whose
        detections scoring >= `REPORT_MIN_SCORE` the int8 file does not all keep. Refused for a
        quantization-aware model, whose file is always int8 on its checkpoint's ranges
        (`ssd_mobilenet.export.onnx_aware`; compared with the converted model on generated images).
      verbose: show tf2onnx's log.
      labels: the label map the file's metadata carries (a file or `coco`; default: the one
        `converted` carries; `inputs.carried`), for `predict` on the file.
    Returns:
      dict: out, bytes, input, max_detections, opset, operators (the file's op types), int8,
      quantization_aware, drift (`quantization_drift`, `aware_drift` or None), notes, seconds.
    Raises:
      ExportInputError: bad input, one line naming the path or option; nothing is written.
    """
    say = progress or (lambda msg: None)
    warn = warn or (lambda msg: None)
    start = time.perf_counter()
    atomic_write.check_output(out, force, is_dir=False, flag="--onnx", error=ExportInputError)
    if max_detections is not None and max_detections < 1:
        raise ExportInputError(f"--max-detections {max_detections}: must be >= 1")
    if calibration is not None and not int8:
        raise ExportInputError("--calibration: calibrates the --int8 quantization; add --int8")
    try:  # every package the export imports, here, so that a missing one is this one line
        import tf2onnx  # noqa: F401  (imported by `onnx_lib.convert`)

        from ssd_mobilenet.export import onnx as onnx_lib
        if int8:
            from ssd_mobilenet.onnx_file import import_onnxruntime
            import_onnxruntime()  # its telemetry off before the quantization tools load it
            import onnxruntime.quantization  # noqa: F401  (`onnx_integer.quantize`, `quantization_drift`)
    except ImportError as e:
        raise ExportInputError(f"--onnx: {(e.name or 'tf2onnx').split('.')[0]} is not installed: pip install "
                               "'ssd-mobilenet-migrate[onnx-export]'") from None
    if input_type not in onnx_lib.INPUT_TYPES:
        raise ExportInputError(f"--input {input_type}: one of {', '.join(onnx_lib.INPUT_TYPES)}")
    config = converted_config(converted)  # the options the model does not take, before its weights are loaded
    aware = bool(config.weight_bits)
    if aware and int8:
        # Its ONNX file is int8 QDQ on the ranges its checkpoint holds, without calibration.
        raise ExportInputError("--int8: a quantization-aware model exports as int8 without it")
    if aware:
        from ssd_mobilenet.export import onnx_aware
        try:
            onnx_aware.check_bits(config)
        except ValueError as e:
            raise ExportInputError(f"{converted}: {e}") from None
    entry = carried(converted, labels)
    model = load_converted(converted)
    max_detections = max_detections or model.config.max_total_detections
    names, images = [], []
    if int8:
        names, images = calibration_images(calibration, model.config)
    say(f"converting to ONNX: opset {onnx_lib.OPSET}, {input_type} input, {max_detections} detections")
    if int8 or aware:
        say(f"int8 QDQ calibrated on {len(images)} images" if int8 else
            "int8 QDQ on the checkpoint's quantization ranges")
    proto = onnx_lib.convert(model, input_type, max_detections, verbose=verbose, carried=entry)
    drift, notes = None, []
    if aware:
        notes.append("quantization-aware: QDQ int8 convolutions on the checkpoint's FakeQuant ranges (the integer "
                     ".tflite file's weights, uint8 activations on TF1's grid, which TensorRT refuses: "
                     "ssd_mobilenet/export/onnx_aware.py); `verify --onnx` matches it with the TF1 graph")
        names, images = calibration_images(None, model.config)
        say("comparing the int8 file with the converted model on generated images")
        drift = aware_drift(model, proto.SerializeToString(), names[:DRIFT_IMAGES], images[:DRIFT_IMAGES],
                            input_type)
        # It differs on every image by design (integer input and weights): the totals say by how much.
        notes += drift_notes(drift, "generated images", "the float model", None)
    if int8:
        from ssd_mobilenet.export import network, onnx_integer
        feeds = [network.file_input(image, model.config, input_type) for image in images]
        float_bytes = proto.SerializeToString()
        proto = onnx_integer.quantize(proto, feeds)
        compared_on = "calibration images" if calibration is not None else "generated images"
        say(f"comparing the int8 file with the float file on {compared_on}")
        drift = quantization_drift(float_bytes, proto.SerializeToString(), names[:DRIFT_IMAGES], feeds[:DRIFT_IMAGES])
        notes += drift_notes(drift, compared_on, "the float file", warn)
    data = proto.SerializeToString()
    atomic_write.write_bytes(out, data)
    return {"out": os.path.abspath(out), "bytes": len(data), "input": input_type, "max_detections": max_detections,
            "opset": onnx_lib.OPSET, "operators": onnx_lib.operator_names(proto), "int8": int8 or aware,
            "quantization_aware": aware, "drift": drift, "notes": notes, "seconds": time.perf_counter() - start}
