"""The TF2 side of `verify --tflite` and `verify --onnx`: a `.tflite` file written by `migrate
export`, run by LiteRT's interpreter (`ssd_mobilenet.formats.tflite.runner.ModelFile`) through its
`serving_default` signature, or an `.onnx` file, run by ONNX Runtime
(`ssd_mobilenet.formats.onnx.runner.OnnxFile`), against the TF1 graph. Both have `feed(photo)`,
`run(input)` and `exact_for_any_size`; a float32 ONNX file is judged EXACT (the TF graph's
post-processing), an int8 (QDQ) one by AGREEMENT.

What the file is comes from the file (`ModelFile`): per-class NMS or the
`TFLite_Detection_PostProcess` custom op (regular or fast, its `use_regular_nms` option), float32
or int8 (any int8 tensor: the quantized network), uint8 or float32 input, whether it resizes
photos itself, and its model's input size (which must be the converted model's).

The path users run: each verify image goes to the file as `ModelFile.detect` feeds it, and the
TF1 graph gets the same photo. A file that resizes photos itself (the default export) or takes
the scaled float32 image (prepared by the graph's preprocessing in numpy, bit for bit) gets
the photo at its own size, and the TF1 graph the same photo, which it resizes itself: the
comparison covers the resize and the scaling too. A uint8 file of a fixed size gets the photo
resized outside and rounded to uint8 (what a client of such a file does), and the TF1 graph gets
those rounded pixels, so that rounding is not charged to the file.

How it is judged:
- float32, per-class NMS: the TF graph's post-processing in builtin ops, so the TF1 graph's
  detections exactly (`parity.compare_detections`): counts and classes exact, boxes and scores
  within `atol + rtol` (the project's 1e-5; measured on the 2018 zoo conversion, 6 images:
  boxes within 3.3e-7, scores within 7.2e-7, TFLite's float32 kernels rounding otherwise than
  TensorFlow's).
- int8, or the custom op: detections differ by design (quantized activations; the op's NMS on
  unclipped boxes, fast NMS class-agnostic), so they are matched one to one by class and IoU
  (`migrate.export.drift.agreement`, the TF1 detections scoring >= `drift.REPORT_MIN_SCORE` against
  all of the file's). The custom op's boxes are clipped to [0, 1] first, as the graph clips
  its boxes: the op does not (`tflite.DIFFERENCES`), and unclipped boxes would be charged to
  IoU. Rates are the report; an image fails when its rate is below `AGREEMENT_MIN_RATE`.
"""

from __future__ import annotations

import os

import numpy as np

from migrate.verify.report import RUNTIMES
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError

# The agreement an int8 or custom-op file must reach on every image (matched / TF1 detections
# scoring >= drift.REPORT_MIN_SCORE): a check for gross errors (another model's weights, a
# broken quantization), not parity. Measured on the 2018 zoo graph with the fixture's synthetic
# weights (dense detections, all 100 per image scoring >= 0.5, most boxes reaching outside the
# image), the generated verify images, per image: files of its conversion 0.85-0.92 (regular),
# 0.84-0.88 (fast), 0.94-0.97 (int8); files of the same config with other synthetic weights
# (the TF1 builder's, seed 1) 0.20-0.22 (regular), 0.18-0.21 (fast). The floor sits between.
AGREEMENT_MIN_RATE = 0.5

EXACT, AGREEMENT = "exact", "agreement"


def open_onnx_file(path: str, config, threads: int | None = None, runtime: str = "onnx"):
    """(the `.onnx` file at `path` on ONNX Runtime (`runtime` "onnx") or OpenVINO ("openvino")
    with `threads` threads, its info dict, as `open_file`'s) for `verify --onnx`. Raises
    InputError as `open_file`."""
    from ssd_mobilenet.formats.onnx import runtimes
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file (--onnx)")
    named = {"onnx": runtimes.ONNX_RUNTIME, "openvino": runtimes.OPENVINO}[runtime]
    file = runtimes.open_file(path, threads=threads, runtime=named)
    size = [config.image_height, config.image_width]
    if list(file.image_size) != size:
        h, w = file.image_size
        raise InputError(f"{path}: takes {h}x{w} images, the converted model {size[0]}x{size[1]}")
    meta = file.metadata
    int8 = bool(meta.get("int8"))
    info = {"file": os.path.abspath(path), "bytes": os.path.getsize(path), "nms": "per-class",
            "input_type": meta.get("input"), "input_mode": file.input_mode, "int8": int8, "input_size": size,
            "max_detections": meta.get("max_detections"), "operators": None, "kind": file.kind,
            "criterion": AGREEMENT if int8 else EXACT, "threads": file.threads, "runtime": runtime}
    return file, info


def open_file(path: str, config, threads: int | None = None):
    """(`ModelFile` of `path` on LiteRT with `threads` threads, its info dict) for `verify --tflite`
    and bench's TFLite sides, checked against the converted model's `config` (its input size).

    The info dict: file (absolute path), bytes, nms ("per-class", "regular", "fast"), input_type
    ("uint8", "float32"), input_mode, int8 (bool), input_size [h, w], max_detections (D of the
    outputs), operators (sorted op names), kind (one line saying all that), criterion (EXACT or
    AGREEMENT), threads.
    Raises:
      InputError: no such file, not a TFLite file, a file LiteRT cannot load, a file
        without the export's signature, or another input size than the model's.
    """
    from migrate.common import console
    from ssd_mobilenet.formats.tflite import file_format as tflite_format
    from ssd_mobilenet.formats.tflite import runner as tflite_runner
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file (--tflite)")
    with console.native_stderr_quieted():  # the interpreter's "Created ... XNNPACK delegate" line
        file = tflite_runner.ModelFile(path, threads=threads)
    size = [config.image_height, config.image_width]
    if file.image_size != size:
        h, w = file.image_size
        raise InputError(f"{path}: takes {h}x{w} images, the converted model {size[0]}x{size[1]}")
    info = {"file": file.path, "bytes": file.bytes, "nms": file.nms, "input_type": file.input_type,
            "input_mode": file.input_mode, "int8": file.int8, "input_size": size,
            "max_detections": file.max_detections, "operators": file.operators, "kind": file.kind,
            "criterion": EXACT if file.nms == tflite_format.NMS_PER_CLASS and not file.int8 else AGREEMENT,
            "threads": file.threads, "runtime": "litert"}
    return file, info


def compare_file(runner, file, info: dict, batches, config, atol: float, rtol: float, say=None):
    """Runs the TF1 graph and the file on the same photos, image by image, and compares them.

    Args:
      runner: `frozen_graph.FrozenGraphRunner` over the TF1 inference graph.
      file, info: `open_file(...)`.
      batches: [(names, uint8 [N, H, W, 3])], any sizes, fed as the module docstring says.
    Returns:
      (detections [per image: {"image", ...}: `compare_detections`' fields for EXACT,
      `drift.agreement`'s plus num_tf1, num_tf2, ok, note for AGREEMENT],
      drawn [(name, pixels [h, w, 3], TF1 detections, file detections)], each
      `side_by_side.drawn_detections`,
      agreement over all images (`drift.agreement`) or None for EXACT).
    """
    from migrate.export import drift
    from migrate.tf1.parity import compare_detections
    from migrate.tf1.side_by_side import drawn_detections
    from ssd_mobilenet.formats.tflite import file_format as tflite_format
    fetches = {k: f"{k}:0" for k in DETECTION_OUTPUTS}
    detections, drawn, refs, ours_all = [], [], [], []
    for names, images in batches:
        if say:
            how = ("" if file.exact_for_any_size else
                   f", resized to {config.image_height}x{config.image_width} and rounded to uint8 first")
            say(f"comparing {len(names)} image(s) of {images.shape[1]}x{images.shape[2]} one at a time{how}")
        for name, image in zip(names, images):
            feed = file.feed(image)
            pixels = image[None] if file.exact_for_any_size else feed
            ref = runner.run(pixels, fetches)
            ours = file.run(feed)
            n1, n2 = int(ref["num_detections"][0]), int(ours["num_detections"][0])
            drawn.append((name, pixels[0], drawn_detections(ref, 0), drawn_detections(ours, 0)))
            if info["criterion"] == EXACT:
                detections.append({"image": name, **compare_detections(ours, ref, 0, atol, rtol,
                                                                        config.score_threshold)})
                continue
            if info["nms"] != tflite_format.NMS_PER_CLASS:
                ours = dict(ours, detection_boxes=np.clip(ours["detection_boxes"], 0.0, 1.0))
            refs.append(ref)
            ours_all.append(ours)
            a = drift.agreement(ref, ours)
            ok = a["rate"] >= AGREEMENT_MIN_RATE
            detections.append({"image": name, "num_tf1": n1, "num_tf2": n2, **a, "ok": ok,
                               "note": None if ok else (
                                   f"{a['matched']} of {a['reference']} TF1 detections scoring >= "
                                   f"{drift.REPORT_MIN_SCORE} found in the file (same class, IoU >= "
                                   f"{drift.MATCH_IOU}), rate {a['rate']:.3f} < {AGREEMENT_MIN_RATE}")})
    if info["criterion"] == EXACT:
        return detections, drawn, None
    joined = [{k: np.concatenate([d[k] for d in side]) for k in DETECTION_OUTPUTS} for side in (refs, ours_all)]
    return detections, drawn, drift.agreement(*joined)


def tolerances(info: dict, atol: float, rtol: float) -> dict:
    """The report's `tolerances` for a file: the exact rule, or the agreement rule and its figures."""
    from migrate.export import drift
    if info["criterion"] == EXACT:
        return {"atol": atol, "rtol": rtol, "precision": "float32", "criterion": EXACT,
                "tf1_reference": "the graph as written: a session with Grappler off, fed the file's pixels",
                "rule": "detection counts and classes exact; boxes and scores "
                        f"|{RUNTIMES[info.get('runtime', 'litert')].mode} - tf1| <= atol + rtol"}
    from ssd_mobilenet.formats.tflite import file_format as tflite_format
    clip = ("" if info["nms"] == tflite_format.NMS_PER_CLASS
            else "the file's boxes clipped to [0, 1] (the op does not clip); ")
    return {"atol": None, "rtol": None, "precision": "int8" if info["int8"] else "float32", "criterion": AGREEMENT,
            "min_score": drift.REPORT_MIN_SCORE, "match_iou": drift.MATCH_IOU, "min_rate": AGREEMENT_MIN_RATE,
            "tf1_reference": "the graph as written: a session with Grappler off, fed the file's pixels",
            "rule": f"{clip}TF1 detections scoring >= {drift.REPORT_MIN_SCORE} matched one to one in the file "
                    f"by class and IoU >= {drift.MATCH_IOU}; each image's rate >= {AGREEMENT_MIN_RATE}"}
