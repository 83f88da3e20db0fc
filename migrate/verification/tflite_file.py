"""The TF2 side of `verify --tflite`: a `.tflite` file written by `migrate export`, run by
`tf.lite.Interpreter` through its `serving_default` signature, against the TF1 graph.

What the file is comes from the file (`inspect_file`): per-class NMS or the
`TFLite_Detection_PostProcess` custom op (regular or fast, its `use_regular_nms` option), float32
or int8 (any int8 tensor: the quantized network), uint8 or float32 input (the signature's input
name), and its input size (the signature's input shape, which must be the converted model's).

Same pixels on both sides: the file takes one image of the model's size, the TF1 graph any
size, which it resizes itself. Each verify image is brought to the model's size once, as
`tflite.model_input` does (the TF graph's own resize, rounded to uint8: what a client feeds the
file), and those pixels go to the TF1 graph (whose resize is then the identity) and to the file
(a float32-input file gets `model_input(pixels, FLOAT32)`, the graph's scaling of the same
pixels), one image at a time, as the file runs. So the comparison is of the network and the
post-processing only: a resize done on one side and not the other is not charged to the file.

How it is judged:
- float32, per-class NMS: the TF graph's post-processing in builtin ops, so the TF1 graph's
  detections exactly (`parity.compare_detections`): counts and classes exact, boxes and scores
  within `atol + rtol` (the project's 1e-5; measured on the 2018 zoo conversion, 6 images:
  boxes within 3.3e-7, scores within 7.2e-7, TFLite's float32 kernels rounding otherwise than
  TensorFlow's).
- int8, or the custom op: detections differ by design (quantized activations; the op's NMS on
  unclipped boxes, fast NMS class-agnostic), so they are matched one to one by class and IoU
  (`migrate.export.agreement`, the TF1 detections scoring >= `export.REPORT_MIN_SCORE` against
  all of the file's). The custom op's boxes are clipped to [0, 1] first, as the graph clips
  its boxes: the op does not (`tflite.DIFFERENCES`), and unclipped boxes would be charged to
  IoU. Rates are the report; an image fails when its rate is below `AGREEMENT_MIN_RATE`.
"""

from __future__ import annotations

import os

import numpy as np

from migrate.tf1.inference_graph import VerifyInputError

# The agreement an int8 or custom-op file must reach on every image (matched / TF1 detections
# scoring >= export.REPORT_MIN_SCORE): a check for gross errors (another model's weights, a
# broken quantization), not parity. Measured on the 2018 zoo graph with the fixture's synthetic
# weights (dense detections, all 100 per image scoring >= 0.5, most boxes reaching outside the
# image), the generated verify images, per image: files of its conversion 0.85-0.92 (regular),
# 0.84-0.88 (fast), 0.94-0.97 (int8); files of the same config with other synthetic weights
# (the TF1 builder's, seed 1) 0.20-0.22 (regular), 0.18-0.21 (fast). The floor sits between.
AGREEMENT_MIN_RATE = 0.5

EXACT, AGREEMENT = "exact", "agreement"


def _first_line(error: Exception) -> str:
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return (lines[0] if lines else type(error).__name__)[:200]


def inspect_file(path: str, config) -> dict:
    """What the `.tflite` file at `path` is, read from the file, checked against the converted
    model's `config` (its input size).

    Returns:
      dict: file (absolute path), bytes, nms ("per-class", "regular", "fast"), input_type
      ("uint8", "float32"), int8 (bool), input_size [h, w], max_detections (D of the outputs),
      operators (sorted op names), kind (one line saying all that), criterion (EXACT or AGREEMENT).
    Raises:
      VerifyInputError: no such file, not a TFLite file, a file the interpreter cannot load or
        run, a file without the export's signature, or another input size than the model's.
    """
    import tensorflow as tf

    from migrate.common import console
    from ssd_mobilenet.export import tflite as tflite_lib
    if not os.path.isfile(path):
        raise VerifyInputError(f"{path}: no such file (--tflite)")
    with open(path, "rb") as f:
        data = f.read()
    # A FlatBuffer file identifier sits at bytes 4..8; TFLite's is "TFL3".
    if data[4:8] != b"TFL3":
        raise VerifyInputError(f"{path}: not a TFLite file (no TFL3 identifier)")
    try:
        # From the bytes first: the interpreter verifies the FlatBuffer there, while a truncated
        # file given by path can crash the process.
        with console.native_stderr_quieted():  # the interpreter's "Created ... XNNPACK delegate" line
            interpreter = tf.lite.Interpreter(model_content=data)
            interpreter.allocate_tensors()
    except (ValueError, RuntimeError) as e:
        raise VerifyInputError(f"{path}: the TFLite interpreter cannot load it ({_first_line(e)})") from None
    signature = interpreter.get_signature_list().get(tflite_lib.SIGNATURE_KEY)
    names = {v: k for k, v in tflite_lib.INPUT_NAMES.items()}
    if (not signature or len(signature["inputs"]) != 1 or signature["inputs"][0] not in names
            or sorted(signature["outputs"]) != sorted(tflite_lib.OUTPUT_KEYS)):
        raise VerifyInputError(f"{path}: no {tflite_lib.SIGNATURE_KEY} signature taking "
                               f"{' or '.join(names)} and returning {', '.join(tflite_lib.OUTPUT_KEYS)} "
                               "(not a file of `migrate export`)")
    input_type = names[signature["inputs"][0]]
    runner = interpreter.get_signature_runner(tflite_lib.SIGNATURE_KEY)
    detail = runner.get_input_details()[signature["inputs"][0]]
    shape = [int(s) for s in detail["shape"]]
    if len(shape) != 4 or shape[0] != 1 or shape[3] != 3 or detail["dtype"] != np.dtype(input_type):
        raise VerifyInputError(f"{path}: input {signature['inputs'][0]} is {detail['dtype'].__name__} {shape}, "
                               f"not {input_type} [1, h, w, 3]")
    size = [config.image_height, config.image_width]
    if shape[1:3] != size:
        raise VerifyInputError(f"{path}: takes {shape[1]}x{shape[2]} images, the converted model "
                               f"{size[0]}x{size[1]} (a file of another model?)")
    operators = tflite_lib.operator_names(data)
    flex = [op for op in operators if op.startswith("Flex")]
    if flex:
        raise VerifyInputError(f"{path}: holds Flex ops ({', '.join(flex)}), which this interpreter cannot run")
    nms = tflite_lib.PER_CLASS
    if tflite_lib.CUSTOM_OP in operators:
        options = tflite_lib.custom_op_options(data)[0][0]
        nms = tflite_lib.REGULAR if options.get("use_regular_nms") else tflite_lib.FAST
    int8 = any(t["dtype"] == np.int8 for t in interpreter.get_tensor_details())
    max_detections = int(runner.get_output_details()["detection_scores"]["shape"][-1])
    kind = f"{nms} NMS, {input_type} input, {'int8' if int8 else 'float32'}, {max_detections} detections"
    return {"file": os.path.abspath(path), "bytes": len(data), "nms": nms, "input_type": input_type, "int8": int8,
            "input_size": size, "max_detections": max_detections, "operators": operators, "kind": kind,
            "criterion": EXACT if nms == tflite_lib.PER_CLASS and not int8 else AGREEMENT}


def open_file(path: str, threads: int):
    """uint8 [1, h, w, 3] pixels at the file's size -> the file's detections (numpy, the signature's
    four outputs, [1, D, ...]): `tf.lite.Interpreter(model_path=path, num_threads=threads)`
    (the builtin op resolver, which holds `TFLite_Detection_PostProcess` and applies XNNPACK), its
    `serving_default` runner. A float32-input file gets the same pixels scaled as the graph scales
    them (`preprocessing.normalize`, what `tflite.model_input` gives at the file's size). The
    runner of `verify --tflite` and of bench's TFLite sides."""
    import warnings

    import tensorflow as tf

    from migrate.common import console
    from ssd_mobilenet import preprocessing
    from ssd_mobilenet.export import tflite as tflite_lib
    with console.native_stderr_quieted(), warnings.catch_warnings():  # "Created ... XNNPACK delegate"
        warnings.simplefilter("ignore")  # "tf.lite.Interpreter is deprecated" (LiteRT): it is what TF ships
        interpreter = tf.lite.Interpreter(model_path=path, num_threads=int(threads))
        runner = interpreter.get_signature_runner(tflite_lib.SIGNATURE_KEY)
    (name,) = runner.get_input_details()
    uint8 = name == tflite_lib.INPUT_NAMES[tflite_lib.UINT8]

    def run(pixels):
        pixels = np.asarray(pixels)
        feed = pixels if uint8 else np.asarray(preprocessing.normalize(pixels.astype(np.float32)), np.float32)
        return {k: np.asarray(v) for k, v in runner(**{name: feed}).items()}

    return run


def compare_file(runner, run_file, info: dict, batches, config, atol: float, rtol: float, say=None):
    """Runs the TF1 graph and the file on the same pixels, image by image, and compares them.

    Args:
      runner: `frozen_graph.FrozenGraphRunner` over the TF1 inference graph.
      run_file: `open_file(...)`; info: `inspect_file(...)`.
      batches: [(names, uint8 [N, H, W, 3])], any sizes: each image is brought to the model's
        size once (`tflite.model_input`, uint8) and both sides get those pixels.
    Returns:
      (detections [per image: {"image", ...}: `compare_detections`' fields for EXACT,
      `export.agreement`'s plus num_tf1, num_tf2, ok, note for AGREEMENT],
      drawn [(name, pixels [h, w, 3], TF1 boxes, file boxes)],
      agreement over all images (`export.agreement`) or None for EXACT).
    """
    from migrate import export
    from migrate.tf1 import frozen_graph
    from migrate.tf1.parity import compare_detections
    from ssd_mobilenet.export import tflite as tflite_lib
    fetches = {k: f"{k}:0" for k in frozen_graph.DETECTION_OUTPUTS}
    detections, drawn, refs, ours_all = [], [], [], []
    for names, images in batches:
        if say:
            say(f"comparing {len(names)} image(s) of {images.shape[1]}x{images.shape[2]}, brought to "
                f"{config.image_height}x{config.image_width}, one at a time")
        for name, image in zip(names, images):
            pixels = tflite_lib.model_input(image, config, tflite_lib.UINT8)
            ref = runner.run(pixels, fetches)
            ours = run_file(pixels)
            n1, n2 = int(ref["num_detections"][0]), int(ours["num_detections"][0])
            drawn.append((name, pixels[0], ref["detection_boxes"][0][:n1], ours["detection_boxes"][0][:n2]))
            if info["criterion"] == EXACT:
                detections.append({"image": name, **compare_detections(ours, ref, 0, atol, rtol,
                                                                        config.score_threshold)})
                continue
            if info["nms"] != tflite_lib.PER_CLASS:
                ours = dict(ours, detection_boxes=np.clip(ours["detection_boxes"], 0.0, 1.0))
            refs.append(ref)
            ours_all.append(ours)
            a = export.agreement(ref, ours)
            ok = a["rate"] >= AGREEMENT_MIN_RATE
            detections.append({"image": name, "num_tf1": n1, "num_tf2": n2, **a, "ok": ok,
                               "note": None if ok else (
                                   f"{a['matched']} of {a['reference']} TF1 detections scoring >= "
                                   f"{export.REPORT_MIN_SCORE} found in the file (same class, IoU >= "
                                   f"{export.MATCH_IOU}), rate {a['rate']:.3f} < {AGREEMENT_MIN_RATE}")})
    if info["criterion"] == EXACT:
        return detections, drawn, None
    joined = [{k: np.concatenate([d[k] for d in side]) for k in tflite_lib.OUTPUT_KEYS} for side in (refs, ours_all)]
    return detections, drawn, export.agreement(*joined)


def tolerances(info: dict, atol: float, rtol: float) -> dict:
    """The report's `tolerances` for a file: the exact rule, or the agreement rule and its figures."""
    from migrate import export
    if info["criterion"] == EXACT:
        return {"atol": atol, "rtol": rtol, "precision": "float32", "criterion": EXACT,
                "tf1_reference": "the graph as written: a session with Grappler off, fed the file's pixels",
                "rule": "detection counts and classes exact; boxes and scores |tflite - tf1| <= atol + rtol"}
    from ssd_mobilenet.export import tflite as tflite_lib
    clip = "" if info["nms"] == tflite_lib.PER_CLASS else "the file's boxes clipped to [0, 1] (the op does not clip); "
    return {"atol": None, "rtol": None, "precision": "int8" if info["int8"] else "float32", "criterion": AGREEMENT,
            "min_score": export.REPORT_MIN_SCORE, "match_iou": export.MATCH_IOU, "min_rate": AGREEMENT_MIN_RATE,
            "tf1_reference": "the graph as written: a session with Grappler off, fed the file's pixels",
            "rule": f"{clip}TF1 detections scoring >= {export.REPORT_MIN_SCORE} matched one to one in the file "
                    f"by class and IoU >= {export.MATCH_IOU}; each image's rate >= {AGREEMENT_MIN_RATE}"}
