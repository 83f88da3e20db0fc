"""`export --onnx`: a converted model directory -> one `.onnx` file (`ssd_mobilenet.export.onnx`).

`export_onnx(converted, out, ...)` is the command as a library function. Bad input (no converted
model, an unreadable checkpoint, an existing OUT without `force`, an option that does not apply
to ONNX) raises `export.ExportInputError` with one line naming the path or option, before
anything is written; the file is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import time

from migrate.export import DRIFT_IMAGES, ExportInputError, _calibration_images, drift_notes, drift_of, load_converted
from ssd_mobilenet import atomic_write


def quantization_drift(float_bytes: bytes, int8_bytes: bytes, names, feeds) -> dict:
    """The int8 file's detections against the float file's on the same inputs, on ONNX Runtime:
    `export.agreement` overall, plus per_image [(name, agreement)]. (The float file's detections
    are the converted model's: tests/onnx.)"""
    import onnxruntime as ort

    from ssd_mobilenet.onnx_file import OUTPUT_KEYS, session_options
    sessions = [ort.InferenceSession(data, sess_options=session_options(None), providers=["CPUExecutionProvider"])
                for data in (float_bytes, int8_bytes)]
    name = sessions[0].get_inputs()[0].name
    return drift_of(names, ([dict(zip(OUTPUT_KEYS, s.run(list(OUTPUT_KEYS), {name: feed}))) for s in sessions]
                            for feed in feeds))


def export_onnx(converted: str, out: str, input_type: str = "uint8", max_detections: int | None = None,
                int8: bool = False, calibration=None, force: bool = False, verbose: bool = False, progress=None,
                warn=None) -> dict:
    """Writes the ONNX file of `converted` to `out`.

    Args:
      input_type: "uint8" (a photo of any size, resized and scaled inside the file) or "float32"
        (the scaled image at the model's size, fixed: for TensorRT, which refuses uint8 inputs).
      max_detections: rows of the outputs (default: the model's `max_total_detections`).
      int8: QDQ int8 convolutions (`ssd_mobilenet.export.onnx_integer`), calibrated on
        `calibration` (image files and folders) or, when None, generated images, then compared with
        the float file on (up to `DRIFT_IMAGES` of) them; `warn` is called for each image whose
        detections scoring >= `REPORT_MIN_SCORE` the int8 file does not all keep.
      verbose: show tf2onnx's log.
    Returns:
      dict: out, bytes, input, max_detections, opset, operators (the file's op types), int8, drift
      (`quantization_drift` or None), notes, seconds.
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
            import onnxruntime.quantization  # noqa: F401  (`onnx_integer.quantize`, `quantization_drift`)
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
    names, images = [], []
    if int8:
        names, images = _calibration_images(calibration, model.config)
    say(f"converting to ONNX (opset {onnx_lib.OPSET}, {input_type} input, {max_detections} detections"
        + (f", int8 calibrated on {len(images)} images)" if int8 else ")"))
    proto = onnx_lib.convert(model, input_type, max_detections, verbose=verbose)
    drift, notes = None, []
    if int8:
        from ssd_mobilenet.export import onnx_integer
        feeds = [onnx_integer.file_input(image, model.config, input_type, onnx_lib.any_size(model.config, input_type))
                 for image in images]
        float_bytes = proto.SerializeToString()
        proto = onnx_integer.quantize(proto, feeds)
        compared_on = "calibration images" if calibration is not None else "generated images"
        say(f"comparing the int8 file with the float file on {compared_on}")
        drift = quantization_drift(float_bytes, proto.SerializeToString(), names[:DRIFT_IMAGES], feeds[:DRIFT_IMAGES])
        notes += drift_notes(drift, compared_on, "the float file", warn)
    data = proto.SerializeToString()
    atomic_write.write_bytes(out, data)
    return {"out": os.path.abspath(out), "bytes": len(data), "input": input_type, "max_detections": max_detections,
            "opset": onnx_lib.OPSET, "operators": onnx_lib.operator_names(proto), "int8": int8, "drift": drift,
            "notes": notes, "seconds": time.perf_counter() - start}
