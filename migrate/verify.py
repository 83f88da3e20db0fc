"""`verify`: does a converted model compute what its TF1 source computes, and at what cost?

Parity (in this process): the TF1 graph runs in a `tf.compat.v1.Session` with Grappler off
(`FrozenGraphRunner(exact_arithmetic=True)`: the graph computes exactly what its ops say, no
batch norm folded into the convolutions), the converted model in the requested mode, on the
same uint8 images. Compared in graph order, each by its TF1 scope: the preprocessed image, every feature
extractor layer, the box encodings (`concat`), the class logits (`concat_1`), the decoded boxes
(`Postprocessor/Decode`); then the detections, image by image. The first tensor outside
tolerance is the `first_divergence`.

Cost (each side in its own fresh subprocess, `migrate.common.measure`): TensorFlow allocator peak,
process peak RSS and latency per batch size. The TF1 side is measured as a user runs it: the
frozen inference graph in a session with the default config.

Tolerance: `|tf2 - tf1| <= atol + rtol * max|tf1|` element-wise on every tensor (the range of
the tensor, see `compare_tensor`), `atol + rtol` on boxes and scores (range 1); detection counts
and classes are compared exactly whatever the tolerance.

Mixed precision (`precision="mixed_bfloat16"` or `"mixed_float16"`: the TF2 side computes in 16
bits on the batch-norm-folded network) cannot meet that: every tensor is still compared and
listed, judged at `MIXED_TOLERANCES[precision]` (measured, see there), and detections are
matched by class and IoU (`match_detections`) instead of compared in order. The report says
which `criterion` was applied.

The deployed artifact (`mode="saved_model"`): `CONVERTED/saved_model` loaded with plain
`tf.saved_model.load`, called as its clients call it. A SavedModel has no stages to compare:
its detections are compared with the TF1 graph's (exactly in float32, by class and IoU when
it was written in a mixed precision, which the conversion report records) and it is measured
like the other modes.

Memory levers (`memory_growth`, `memory_limit_mb`) go to both measurement processes, which
apply them with `ssd_mobilenet.runtime.configure` before their first op; `trace_dir` gets a
TensorBoard profiler trace of two TF2 runs (`ssd_mobilenet.runtime.trace`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import tempfile

import numpy as np

import migrate
from migrate import convert as convert_lib
from migrate.common import outputs
from migrate.tf1 import config_inference, frozen_graph, graph_traits, op_allowlist, sources
from ssd_mobilenet.model import PRECISIONS

DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5
DEFAULT_BATCH = 4
MODES = ("eager", "function", "xla", "saved_model")
SAVED_MODEL = "saved_model"
# Mixed precision: per tensor the float32 rule `|tf2 - tf1| <= atol + rtol * max|tf1|` at a
# looser rtol, and the score margin of `match_detections`. Measured on the 2018 zoo graph with
# synthetic weights (the test fixture), generated images, Detector: a faithful conversion's
# worst stage is 1.6e-2 of the tensor's range in bfloat16 (8 mantissa bits: 2^-9 = 2e-3 per
# rounding, accumulated over 13 blocks), 3.4e-3 in float16 (11 bits); one weight scaled by 1.5
# (Conv2d_7_pointwise) shows 0.32 there, one batch norm dropped (Conv2d_5_pointwise) 0.46.
# rtol sits ~3x over the faithful worst and >6x under the broken ones. Score margin: matched
# scores differed by up to 0.038 (bfloat16) and 0.015 (float16), neighbouring boxes of near
# equal score included. atol only matters for tensors whose range is ~0.
MIXED_TOLERANCES = {"mixed_bfloat16": {"atol": 1e-3, "rtol": 5e-2, "score_margin": 0.05},
                    "mixed_float16": {"atol": 1e-3, "rtol": 1e-2, "score_margin": 0.02}}
MATCH_IOU = 0.5
NMS_FLIP_BAND = 0.1
TF1_COLOUR, TF2_COLOUR = (255, 64, 0), (0, 128, 255)  # --png: TF1 red-orange, TF2 blue


class VerifyInputError(ValueError):
    """Bad input for verify; the message names the file and the problem."""


@dataclasses.dataclass
class VerifyReport:
    """What `verify` found. `to_json()` gives the `--json` document."""
    passed: bool
    first_divergence: dict   # None when every tensor and detection agrees
    tensors: list            # per tensor in graph order: name, tf1_tensor, shape, max_abs_err, max_rel_err, ok
    detections: list         # per image: num_tf1, num_tf2, classes_equal, max_box_err, max_score_err, ok
    tf1: dict                # peak_memory_bytes, peak_rss_bytes, latency_ms, device, mode, ...
    tf2: dict
    tolerances: dict
    versions: dict
    images: list             # names (paths, or `generated:HxW#i`)
    src: str
    converted: str
    mode: str
    notes: list = dataclasses.field(default_factory=list)
    precision: str = "float32"   # the TF2 side's compute precision
    postprocessing: dict = None  # `self_check.check_postprocessing`: both post-processings on crafted values
    memory: dict = None          # memory_growth, memory_limit_mb applied in both measurement processes
    trace_dir: str = None        # where the profiler trace of the TF2 side went

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


# ---- inputs -----------------------------------------------------------------------------------

def _is_converted(path: str) -> bool:
    return os.path.isfile(os.path.join(path, convert_lib.REPORT)) and os.path.isfile(
        os.path.join(path, "model_config.json"))


def _source_of(converted: str) -> str:
    """The TF1 source a converted directory was made from, per its `conversion_report.json`."""
    report_path = os.path.join(converted, convert_lib.REPORT)
    try:
        with open(report_path, encoding="utf-8") as f:
            src = json.load(f)["source"]["path"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise VerifyInputError(f"{report_path}: unreadable conversion report ({e})") from None
    if not os.path.exists(src) and not os.path.exists(src + ".index"):
        raise VerifyInputError(f"{report_path}: its source {src} does not exist (name SRC explicitly)")
    return src


def resolve_paths(src=None, converted=None, progress=None):
    """(src, converted) per the CLI rules: a lone converted directory names its source in
    `conversion_report.json`; CONVERTED defaults to where `convert` writes; nothing given
    means the built-in default model (`migrate.default_model`, its TF1 side built on first use)."""
    if src is None and converted is None:
        from migrate import default_model
        converted = default_model.converted_dir()
        if not os.path.isdir(converted):
            raise VerifyInputError(f"{converted}: the built-in model is not converted yet "
                                   "(run `python -m migrate convert` first)")
        src = default_model.ensure_tf1_model(progress)
    elif converted is None and os.path.isdir(src) and _is_converted(src):
        src, converted = None, src
    if src is None:
        src = _source_of(converted)
    if not os.path.exists(src) and not os.path.exists(src + ".index"):
        raise VerifyInputError(f"{src}: no such file or directory")
    converted = os.path.abspath(converted or convert_lib.default_out(src))
    if not os.path.isdir(converted):
        raise VerifyInputError(f"{converted}: no converted model (run `python -m migrate convert {src}` first)")
    if not os.path.isfile(os.path.join(converted, "model_config.json")):
        raise VerifyInputError(f"{converted}: not a converted model directory (no model_config.json)")
    return src, converted


def generated_images(config, batch: int) -> list:
    """A fixed set of [(names, uint8 [N, H, W, 3])]: the model size at batch 1, 257x311 at batch
    `batch`, 480x640 at batch 1. Blocky colour fields with noise, so that edges and flat areas
    both occur (pure noise would hide errors that only show on structure)."""
    rng = np.random.default_rng(20180128)
    batches = []
    for n, h, w in [(1, config.image_height, config.image_width), (batch, 257, 311), (1, 480, 640)]:
        blocks = rng.integers(0, 256, (n, h // 16 + 1, w // 16 + 1, 3))
        images = np.repeat(np.repeat(blocks, 16, axis=1), 16, axis=2)[:, :h, :w]
        images = np.clip(images + rng.integers(-24, 25, images.shape), 0, 255).astype(np.uint8)
        batches.append(([f"generated:{h}x{w}#{i}" for i in range(n)], images))
    return batches


def file_images(paths, batch: int) -> list:
    """[(names, uint8 [N, H, W, 3])]: the images of `paths`, same-size images batched up to `batch`."""
    from migrate.common import images as images_lib
    by_size = {}
    for path in images_lib.list_images(paths):
        image = images_lib.read_image(path)
        by_size.setdefault(image.shape, []).append((path, image))
    batches = []
    for group in by_size.values():
        for start in range(0, len(group), batch):
            chunk = group[start:start + batch]
            batches.append(([p for p, _ in chunk], np.stack([im for _, im in chunk])))
    return batches


def tf1_inference_graph(src: str, stage_nodes, allow_ops=(), image_size=None):
    """(frozen inference GraphDef, where it came from): the TF1 model at `src` ready to run.

    A frozen graph is used as is; a checkpoint's `.meta` or a TF1 SavedModel has its variables
    replaced by the checkpoint's values; a checkpoint without a graph is built by
    `migrate.tf1_builder` from the config its weights imply. Only the subgraph computing the
    detections and `stage_nodes` is kept, and its ops are checked against
    `op_allowlist.SSD_INFERENCE_OPS` before anything runs.
    """
    return inference_graph_of(sources.open_source(src), stage_nodes, allow_ops, image_size=image_size)


def inference_graph_of(source, stage_nodes, allow_ops=(), image_size=None, config=None):
    """`tf1_inference_graph` of an opened `sources.Source`; `config` (default: inferred from
    the source) builds the graph of a source without one."""
    if source.graph_def is None:
        from migrate.tf1 import builder
        if config is None:
            config, _ = config_inference.infer_config(source, trust_weights=True, image_size=image_size)
        try:
            graph_def = builder.frozen_graph_def(config, source.weights)
        except ValueError as e:
            raise VerifyInputError(f"{source.weights_from}: {e}") from None
        graph_from = f"{source.weights_from} (graph built by migrate.tf1_builder)"
    else:
        graph_def, graph_from = source.graph_def, source.graph_from
    names = {n.name for n in graph_def.node}
    if graph_traits.is_tflite_export(graph_def):
        raise VerifyInputError(f"{graph_from}: {graph_traits.TFLITE_REFUSAL}")
    missing = [n for n in ("image_tensor",) + frozen_graph.DETECTION_OUTPUTS if n not in names]
    if missing:
        raise VerifyInputError(f"{graph_from}: not an SSD inference graph (no {', '.join(missing)} node)")
    outputs = list(frozen_graph.DETECTION_OUTPUTS) + [n for n in stage_nodes if n in names]
    try:
        frozen = frozen_graph.freeze_inference_graph(graph_def, source.weights or {}, outputs)
    except frozen_graph.GraphFreezeError as e:
        raise VerifyInputError(f"{graph_from}: {e} (weights from {source.weights_from})") from None
    refused = op_allowlist.disallowed_ops(frozen, allow_ops)
    if refused:
        raise VerifyInputError(f"{graph_from}: ops outside the SSD inference op set: {', '.join(refused)} "
                               f"(not run; --allow-ops {','.join(refused)} runs them anyway)")
    return frozen, graph_from


# ---- comparison -------------------------------------------------------------------------------

def compare_tensor(ours, ref, atol: float, rtol: float) -> dict:
    """Errors of `ours` against the TF1 `ref`.

    ok when every element has `|ours - ref| <= atol + rtol * max|ref|`: rounding differences
    in a conv output scale with the magnitude of the sums it accumulates, i.e. with the
    tensor's range, not with each element's own value (a near-zero element of a ReLU6 map
    carries the same absolute error as a large one). `max_rel_err` is the max abs error
    relative to that range, `max|ref|`.
    """
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        if ours.size != ref.size:
            return {"shape": list(ref.shape), "tf2_shape": list(ours.shape), "max_abs_err": None,
                    "max_rel_err": None, "ok": False, "note": f"shape {list(ours.shape)} vs TF1 {list(ref.shape)}"}
        ref = ref.reshape(ours.shape)  # e.g. TF1 [N, A, 1, 4] before its Squeeze
    if not (np.all(np.isfinite(ours)) and np.all(np.isfinite(ref))):
        return {"shape": list(ours.shape), "max_abs_err": None, "max_rel_err": None, "ok": False,
                "note": "non-finite values"}
    err = float(np.abs(ours - ref).max()) if ref.size else 0.0
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    return {"shape": list(ours.shape), "max_abs_err": err, "max_rel_err": err / scale if scale else 0.0,
            "ok": err <= atol + rtol * scale}


def compare_detections(ours: dict, ref: dict, index: int, atol: float, rtol: float, score_threshold=None) -> dict:
    """Image `index` of two detection dicts (TF1 layout). Counts and classes must be equal; boxes
    and scores within tolerance. Two detections whose scores are within tolerance may come in
    either order (a tie): they are matched by class, score and box, and the swap is reported."""
    n1, n2 = int(ref["num_detections"][index]), int(ours["num_detections"][index])
    s1, s2 = ref["detection_scores"][index], ours["detection_scores"][index]
    c1, c2 = ref["detection_classes"][index], ours["detection_classes"][index]
    b1, b2 = ref["detection_boxes"][index], ours["detection_boxes"][index]
    out = {"num_tf1": n1, "num_tf2": n2, "classes_equal": False, "max_box_err": None,
           "max_score_err": None, "ties_swapped": 0, "ok": False, "note": None}
    if n1 != n2:
        out["note"] = f"{n1} detections in TF1, {n2} in TF2"
        longer, count = (s1, n1) if n1 > n2 else (s2, n2)
        extra = longer[min(n1, n2):count]
        if score_threshold is not None and extra.size and np.all(np.abs(extra - score_threshold) <= atol):
            out["note"] += f" (the extra scores {extra.tolist()} sit at the score threshold {score_threshold})"
        return out

    def close(a, b):  # boxes and scores live in [0, 1]: their scale is 1
        return bool(np.all(np.abs(a - b) <= atol + rtol))

    used, pairs, unmatched = set(), [], []
    for i in range(n1):
        candidates = [i] + [j for j in range(n2) if j != i]
        match = next((j for j in candidates if j not in used and c2[j] == c1[i]
                      and close(s2[j], s1[i]) and close(b2[j], b1[i])), None)
        if match is None:
            unmatched.append(i)
        else:
            used.add(match)
            pairs.append((i, match))
    if pairs:
        out["max_box_err"] = float(max(np.abs(b2[j] - b1[i]).max() for i, j in pairs))
        out["max_score_err"] = float(max(abs(float(s2[j]) - float(s1[i])) for i, j in pairs))
    out["classes_equal"] = not unmatched and sorted(c1[:n1].tolist()) == sorted(c2[:n2].tolist())
    out["ties_swapped"] = sum(1 for i, j in pairs if i != j)
    out["ok"] = not unmatched
    if unmatched:
        i = unmatched[0]
        out["note"] = (f"{len(unmatched)} TF1 detections without a TF2 counterpart, e.g. #{i}: class "
                       f"{int(c1[i])} score {float(s1[i]):.6f} box {np.round(b1[i], 5).tolist()}; "
                       f"TF2 #{i}: class {int(c2[i])} score {float(s2[i]):.6f} box {np.round(b2[i], 5).tolist()}")
    elif out["ties_swapped"]:
        out["note"] = f"{out['ties_swapped']} detections with scores equal within tolerance came in another order"
    return out


def _iou(boxes_a, boxes_b):
    """IoU of every box in [K, 4] with every box in [M, 4] ([ymin, xmin, ymax, xmax]) -> [K, M]."""
    a, b = np.asarray(boxes_a, np.float64)[:, None], np.asarray(boxes_b, np.float64)[None]
    h = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    w = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    area = lambda x: np.clip(x[..., 2] - x[..., 0], 0, None) * np.clip(x[..., 3] - x[..., 1], 0, None)
    union = area(a) + area(b) - h * w
    return np.where(union > 0, h * w / np.where(union > 0, union, 1), 0.0)


def match_detections(ours: dict, ref: dict, index: int, score_threshold: float, score_margin: float,
                     max_detections: int, nms_iou: float, iou: float = MATCH_IOU,
                     nms_band: float = NMS_FLIP_BAND) -> dict:
    """Image `index` of two detection dicts (TF1 layout), matched one to one by class and box
    (IoU >= `iou`), pairs of highest IoU first: with dense detections a box overlaps its
    neighbours by up to the NMS threshold, and its own counterpart (IoU ~0.99) must win.

    A detection left without a counterpart fails the image when it scores at least
    `floor + score_margin` and is not an NMS flip. `floor`: the score threshold, or the lowest
    score kept when a side returned `max_detections` (the list was cut there): nearer the
    floor, rounding alone moves a detection across it. NMS flip: the other side holds a
    detection of its class scoring at least as high (less the margin) that overlaps it with an
    IoU >= `nms_iou - nms_band` (`suppressor_iou`): that one suppresses it there, or nearly
    does, and which of two boxes overlapping at about the NMS threshold survives is decided
    by rounding (in chains: what a flipped box suppresses flips in turn). So every confident
    detection is either matched or covered by one of its class on the other side.
    Scores of matched pairs are reported (`max_score_err`), not judged: the logits they come
    from are judged as the tensor `concat_1`.
    """
    n1, n2 = int(ref["num_detections"][index]), int(ours["num_detections"][index])
    s1, s2 = ref["detection_scores"][index][:n1], ours["detection_scores"][index][:n2]
    c1, c2 = ref["detection_classes"][index][:n1], ours["detection_classes"][index][:n2]
    b1, b2 = ref["detection_boxes"][index][:n1], ours["detection_boxes"][index][:n2]
    ious = _iou(b1, b2) if n1 and n2 else np.zeros((n1, n2))
    candidates = sorted(((ious[i, j], i, j) for i in range(n1) for j in range(n2)
                         if c1[i] == c2[j] and ious[i, j] >= iou), reverse=True)
    used1, used2, pairs = set(), set(), []
    for _, i, j in candidates:
        if i not in used1 and j not in used2:
            used1.add(i)
            used2.add(j)
            pairs.append((i, j))
    floor = float(score_threshold)
    for n, scores in ((n1, s1), (n2, s2)):
        if n and n >= max_detections:
            floor = max(floor, float(scores.min()))
    must = floor + score_margin

    def unmatched(used, scores, classes, boxes, other_scores, other_classes, other_boxes):
        cross = _iou(boxes, other_boxes) if len(scores) and len(other_scores) else np.zeros((len(scores), 0))
        out = []
        for k in (k for k in range(len(scores)) if k not in used):
            near = [cross[k, m] for m in range(len(other_scores))
                    if other_classes[m] == classes[k] and other_scores[m] >= scores[k] - score_margin]
            suppressor = float(max(near, default=0.0))
            flip = suppressor >= nms_iou - nms_band
            out.append({"index": k, "class": int(classes[k]), "score": float(scores[k]),
                        "box": np.round(boxes[k], 5).tolist(), "suppressor_iou": suppressor, "nms_flip": flip,
                        "excused": bool(float(scores[k]) < must or flip)})
        return out
    unmatched1 = unmatched(used1, s1, c1, b1, s2, c2, b2)
    unmatched2 = unmatched(used2, s2, c2, b2, s1, c1, b1)
    failing = [("TF1", d) for d in unmatched1 if not d["excused"]] + [("TF2", d) for d in unmatched2
                                                                    if not d["excused"]]
    out = {"num_tf1": n1, "num_tf2": n2, "matched": len(pairs),
           "matched_fraction": len(pairs) / max(n1, n2) if max(n1, n2) else 1.0,
           "min_iou": float(min(ious[i, j] for i, j in pairs)) if pairs else None,
           "max_box_err": float(max(np.abs(b2[j] - b1[i]).max() for i, j in pairs)) if pairs else None,
           "max_score_err": float(max(abs(float(s2[j]) - float(s1[i])) for i, j in pairs)) if pairs else None,
           "must_match_from_score": must, "nms_flips": sum(d["nms_flip"] for d in unmatched1 + unmatched2),
           "unmatched_tf1": unmatched1, "unmatched_tf2": unmatched2, "ok": not failing, "note": None}
    if failing:
        side, d = failing[0]
        out["note"] = (f"{len(failing)} detections scoring >= {must:.3f} without a counterpart, e.g. {side} "
                       f"#{d['index']}: class {d['class']} score {d['score']:.4f} box {d['box']}")
    elif unmatched1 or unmatched2:
        out["note"] = (f"{len(unmatched1)} TF1 and {len(unmatched2)} TF2 detections without a counterpart, "
                       f"each below {must:.3f} or an NMS flip")
    return out


# ---- the two sides as runners (also the measurement factories) ---------------------------------

def _configure_memory(memory_growth: bool, memory_limit_mb) -> None:
    """`runtime.configure` in a measurement worker, before its first TensorFlow op."""
    if memory_growth or memory_limit_mb is not None:
        from ssd_mobilenet import runtime
        runtime.configure(memory_growth=memory_growth, memory_limit_mb=memory_limit_mb)


def tf1_session_runner(graph_pb: str, memory_growth: bool = False, memory_limit_mb=None):
    """Measurement factory: the frozen TF1 graph in a session with the default config,
    after `runtime.configure(memory_growth, memory_limit_mb)`."""
    _configure_memory(memory_growth, memory_limit_mb)
    runner = frozen_graph.FrozenGraphRunner(sources.read_graph_def(graph_pb))
    fetches = {k: f"{k}:0" for k in frozen_graph.DETECTION_OUTPUTS}
    return lambda images: runner.run(images, fetches)


def _detector(model, mode: str, precision: str = "float32"):
    """The TF2 detections function. "eager": the Keras model op for op (mixed precision on the
    batch-norm-folded copy, `fold_batch_norm(model, precision)`, the only network that computes
    in 16 bits); "function" and "xla": the `Detector` that `ssd_mobilenet.load` gives (batch norm
    folded, quantization-aware kernels rounded once), so parity and cost are those of what users run."""
    from ssd_mobilenet import detector as detector_lib
    from ssd_mobilenet.model import fold_batch_norm
    if mode == "eager":
        return model.detect if precision == "float32" else fold_batch_norm(model, precision).detect
    return detector_lib.Detector(model, jit_compile=(mode == "xla"), precision=precision, fold_batch_norm=True)


def saved_model_detector(converted: str):
    """uint8 images -> detections of `CONVERTED/saved_model` loaded with plain `tf.saved_model.load`
    (its `serving_default` signature, as TF Serving calls it)."""
    import tensorflow as tf
    serve = tf.saved_model.load(os.path.join(converted, "saved_model")).signatures["serving_default"]
    return lambda images: serve(input_tensor=tf.constant(images))


def saved_model_precision(converted: str) -> str:
    """The compute precision `convert` wrote `CONVERTED/saved_model` in (its report), float32 for
    reports from before the precision was recorded."""
    try:
        with open(os.path.join(converted, "conversion_report.json"), encoding="utf-8") as f:
            return json.load(f).get("saved_model", {}).get("precision", "float32")
    except (OSError, ValueError):
        return "float32"


def tf2_runner(converted: str, mode: str = "function", precision: str = "float32", memory_growth: bool = False,
               memory_limit_mb=None):
    """Measurement factory: the converted model in `mode` (eager Keras, Detector, XLA Detector,
    or the SavedModel through plain TensorFlow) at `precision`, after
    `runtime.configure(memory_growth, memory_limit_mb)`."""
    _configure_memory(memory_growth, memory_limit_mb)
    if mode == SAVED_MODEL:
        run = saved_model_detector(converted)
        return lambda images: {k: v for k, v in run(images).items() if k in frozen_graph.DETECTION_OUTPUTS}
    from ssd_mobilenet import detector as detector_lib
    run = _detector(detector_lib.load_model(converted), mode, precision)
    return lambda images: {k: v for k, v in run(images).items() if k in frozen_graph.DETECTION_OUTPUTS}


# ---- verify -----------------------------------------------------------------------------------

def compare_batches(runner, resolved: dict, network, detect, batches, config, atol: float, rtol: float,
                    mixed: dict = None, say=None):
    """Runs both sides on every batch of uint8 images and compares them.

    Args:
      runner: `frozen_graph.FrozenGraphRunner` over the TF1 inference graph.
      resolved: {stage: (keras key, TF1 tensor name)} (`FrozenGraphRunner.resolve`).
      network: uint8 images -> {keras key: tensor} of every stage (None: detections only);
        detect: uint8 images -> detections.
      batches: [(names, uint8 [N, H, W, 3])].
      mixed: `MIXED_TOLERANCES[precision]` to match detections by class and IoU; None: exact.
    Returns:
      (per_stage {stage: [compare_tensor result per batch]}, detections [per image: {"image", ...}],
      drawn [(name, image, TF1 boxes, TF2 boxes)]).
    """
    import tensorflow as tf
    per_stage = {s: [] for s in resolved}
    detections, drawn = [], []
    for names, imgs in batches:
        if say:
            say(f"comparing {imgs.shape[0]} image(s) of {imgs.shape[1]}x{imgs.shape[2]}")
        ref = runner.run(imgs, {**{s: t for s, (_, t) in resolved.items()},
                                **{k: f"{k}:0" for k in frozen_graph.DETECTION_OUTPUTS}})
        ours = {k: np.asarray(v, np.float32) for k, v in network(tf.constant(imgs)).items()} if network else {}
        for stage, (key, _) in (resolved.items() if network else ()):
            per_stage[stage].append(compare_tensor(ours[key], ref[stage], atol, rtol))
        det = {k: np.asarray(v) for k, v in detect(imgs).items()}
        for i, name in enumerate(names):
            if mixed:
                result = match_detections(det, ref, i, config.score_threshold, mixed["score_margin"],
                                          config.max_total_detections, config.iou_threshold)
            else:
                result = compare_detections(det, ref, i, atol, rtol, config.score_threshold)
            detections.append({"image": name, **result})
            n1, n2 = int(ref["num_detections"][i]), int(det["num_detections"][i])
            drawn.append((name, imgs[i], ref["detection_boxes"][i][:n1], det["detection_boxes"][i][:n2]))
    return per_stage, detections, drawn


def _measurement_batches(batches, batch: int) -> list:
    """Batch 1 and batch `batch` of the largest image (repeated), so latencies compare by batch size."""
    _, images = max(batches, key=lambda b: b[1].shape[1] * b[1].shape[2])
    one = images[:1]
    return [one] if batch == 1 else [one, np.repeat(one, batch, axis=0)]


def _tf2_side(model, mode: str, precision: str = "float32"):
    """(detect, stages_of, notes): the TF2 detections function of `mode` and a function
    uint8 images -> {keras key: tensor} of every compared stage, computed by the network the
    detections come from (in function and xla modes the Detector's, which may be a copy with
    batch norm folded into the convolutions) and compiled as the Detector compiles it: in xla
    mode the network after preprocessing, which the Detector keeps outside XLA (XLA's legacy
    resize differs from TensorFlow's)."""
    import tensorflow as tf
    detect = _detector(model, mode, precision)
    net = detect.__self__ if mode == "eager" else detect.model  # eager: the bound `detect` of the model run
    notes = (["TF2 side: the Detector's network with batch norm folded into the convolutions"]
             if getattr(net, "batch_norm_folded", False) else [])
    if precision != "float32":
        notes.append(f"TF2 side computes in {precision} (weights float32, layer outputs cast to float32 to compare)")
    endpoint_model = net.endpoint_model()

    def network_stages(pre):
        out = {k: tf.cast(v, tf.float32) for k, v in endpoint_model(pre).items()}
        out["decoded_boxes"] = net.decode(tf.cast(out["box_encodings"], tf.float32))
        return out

    compiled = network_stages if mode == "eager" else tf.function(network_stages, jit_compile=(mode == "xla"))

    def stages_of(images):
        pre = net.preprocess(images)
        return {**compiled(pre), "Preprocessor": pre}

    if mode == "eager":
        return detect, stages_of, notes
    from ssd_mobilenet.detector import INPUT_SIGNATURE
    return detect, tf.function(stages_of, input_signature=INPUT_SIGNATURE), notes


def _summarise(resolved: dict, per_stage: dict) -> list:
    """Per stage in graph order: the worst of its per-batch comparisons."""
    tensors = []
    for stage, (key, tensor) in resolved.items():
        results = per_stage[stage]
        errs = [r["max_abs_err"] for r in results if r["max_abs_err"] is not None]
        rels = [r["max_rel_err"] for r in results if r["max_rel_err"] is not None]
        entry = {"name": stage, "tf1_tensor": tensor, "tf2": key, "shape": results[0]["shape"],
                 "max_abs_err": max(errs) if len(errs) == len(results) else None,
                 "max_rel_err": max(rels) if len(rels) == len(results) else None,
                 "ok": all(r["ok"] for r in results)}
        notes = [r["note"] for r in results if r.get("note")]
        if notes:
            entry["note"] = notes[0]
        tensors.append(entry)
    return tensors


def _first_divergence(tensors: list, detections: list, postprocessing: dict = None,
                      detections_stage: str = "Postprocessor"):
    """The first tensor outside tolerance, else `Postprocessor` when its check on crafted values
    differs, else `detections_stage` when only the detections differ, else None."""
    first = next((t for t in tensors if not t["ok"]), None)
    if first is not None:
        return {k: first.get(k) for k in ("name", "tf1_tensor", "max_abs_err", "max_rel_err", "note")}
    if postprocessing is not None and not postprocessing["ok"]:
        return {"name": "Postprocessor", "tf1_tensor": "detection_* (fed crafted concat, concat_1)",
                "max_abs_err": None, "max_rel_err": None,
                "note": f"{postprocessing['note']}; likely {', '.join(postprocessing['suspects'])}"}
    bad = next((d for d in detections if not d["ok"]), None)
    if bad is not None:
        return {"name": detections_stage, "tf1_tensor": "detection_*", "max_abs_err": None, "max_rel_err": None,
                "note": f"{bad['image']}: {bad['note']}"}
    return None


def _tolerances(atol: float, rtol: float, precision: str) -> dict:
    """The report's `tolerances`: the values and the criterion applied."""
    out = {"atol": atol, "rtol": rtol, "precision": precision,
           "tf1_reference": "the graph as written: a session with Grappler off"}
    if precision == "float32":
        out.update(criterion="exact", rule="|tf2 - tf1| <= atol + rtol * max|tf1| per tensor; "
                   "boxes and scores atol + rtol; detection counts and classes exact")
    else:
        margin = MIXED_TOLERANCES[precision]["score_margin"]
        out.update(criterion="mixed_precision", score_margin=margin, match_iou=MATCH_IOU, nms_flip_band=NMS_FLIP_BAND,
                   rule=f"|tf2 - tf1| <= atol + rtol * max|tf1| per tensor (the {precision} tolerance); "
                   f"detections matched one to one by class and IoU >= {MATCH_IOU}; every detection scoring >= "
                   f"floor + {margin} on either side is matched or an NMS flip (the other side has one of its "
                   f"class scoring at least as high, less {margin}, at IoU >= the NMS threshold - "
                   f"{NMS_FLIP_BAND}); floor: the score threshold, or the lowest score kept when the list is full")
    return out


def _trace(detect, images, trace_dir: str) -> None:
    """A profiler trace of two runs of `detect` (already warm from the parity run)."""
    from ssd_mobilenet import runtime
    try:
        with runtime.trace(trace_dir):
            for _ in range(2):
                [np.asarray(v) for v in detect(images).values()]
    except runtime.RuntimeConfigError as e:
        raise VerifyInputError(f"--trace {trace_dir}: {e}") from None


def _measure_one(factory: str, kwargs: dict, images_npz: str, memory: dict, warmup: int, repeats: int, side: str):
    """`measure_isolated` with the memory settings applied in the worker (`runtime.configure`).
    A worker that fails while memory settings are in force is reported as bad input naming
    them and the worker's most telling line: under a small CPU limit the first allocation
    beyond it fails (OOM, or a graph constant that cannot be materialised)."""
    from migrate.common.measure import MeasureError, measure_isolated
    try:
        return measure_isolated(factory, {**kwargs, **memory}, images_npz, warmup=warmup, repeats=repeats)
    except MeasureError as e:
        if not memory["memory_growth"] and memory["memory_limit_mb"] is None:
            raise
        lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()]
        cause = next((ln for key in ("RuntimeConfigError", "OOM when allocating", "Error:", "Cannot parse tensor")
                      for ln in lines if key in ln), lines[-1] if lines else "no error output")
        settings = ("--memory-growth" if memory["memory_growth"] else
                    f"--memory-limit {memory['memory_limit_mb']} MiB")
        raise VerifyInputError(f"{side} measurement failed under {settings}: {cause[:300]}") from None


def _measure_sides(graph_def, converted: str, mode: str, precision: str, memory: dict, batches, batch: int,
                   warmup: int, repeats: int, say):
    """(tf1 result, tf2 result) of `measure.measure_isolated`, one fresh process per side, the
    TF1 graph in a session with the default config (as a user runs it), each applying the
    same `memory` settings (`runtime.configure`) before its first op."""
    with tempfile.TemporaryDirectory(prefix="migrate-verify-") as tmp:
        graph_pb = os.path.join(tmp, "tf1_inference_graph.pb")
        with open(graph_pb, "wb") as f:
            f.write(graph_def.SerializeToString())
        measure_batches = _measurement_batches(batches, batch)
        images_npz = os.path.join(tmp, "images.npz")
        np.savez(images_npz, **{f"batch_{i:03d}": b for i, b in enumerate(measure_batches)})
        sizes = " and ".join(str(len(b)) for b in measure_batches)
        say(f"measuring TF1 (session, default config) in a fresh process: batch {sizes}, {repeats} runs each")
        tf1 = _measure_one("migrate.verify:tf1_session_runner", {"graph_pb": graph_pb}, images_npz, memory,
                           warmup, repeats, "TF1")
        say(f"measuring TF2 ({mode}, {precision}) in a fresh process: batch {sizes}, {repeats} runs each")
        tf2 = _measure_one("migrate.verify:tf2_runner", {"converted": converted, "mode": mode, "precision": precision},
                           images_npz, memory, warmup, repeats, "TF2")
    return tf1, tf2


def _side_summary(result: dict, mode: str) -> dict:
    if result is None:
        return {"measured": False, "mode": mode, "device": None, "peak_memory_bytes": None,
                "peak_rss_bytes": None, "latency_ms": None}
    return {"measured": True, "mode": mode, "device": result["device"],
            "peak_memory_bytes": result["peak_memory_bytes"],
            "baseline_memory_bytes": result["baseline_memory_bytes"],
            "transient_peak_bytes": result["transient_peak_bytes"],
            "peak_rss_bytes": result["peak_rss_bytes"],
            "latency_ms": {f"batch_{b['shape'][0]}": {"median": b["latency_ms"]["median"],
                                                      "p90": b["latency_ms"]["p90"],
                                                      "image_size": b["shape"][1:3]}
                           for b in result["batches"]},
            "build_s": result["build_s"], "env": result["env"]}


def _check_outputs(json_path, png_dir, force):
    if json_path and os.path.isdir(json_path):
        raise VerifyInputError(f"{json_path}: is a directory, not a JSON file path")
    if png_dir and os.path.exists(png_dir) and not os.path.isdir(png_dir):
        raise VerifyInputError(f"{png_dir}: exists and is not a directory")
    if json_path and os.path.exists(json_path) and not force:
        raise VerifyInputError(f"{json_path}: exists (use --force to replace it)")
    if png_dir and os.path.exists(png_dir) and (not os.path.isdir(png_dir) or os.listdir(png_dir)) and not force:
        raise VerifyInputError(f"{png_dir}: exists and is not empty (use --force to replace it)")


def verify(src=None, converted=None, images=None, batch: int = DEFAULT_BATCH, mode: str = "function",
           atol: float = None, rtol: float = None, allow_ops=(), png_dir=None,
           json_path=None, force=False, measure: bool = True, warmup: int = 1, repeats: int = 10,
           precision: str = None, memory_growth: bool = False, memory_limit_mb: int = None,
           trace_dir: str = None, progress=None) -> VerifyReport:
    """Verifies a converted model against its TF1 source; returns a `VerifyReport`.

    Args:
      src: the TF1 model (any source `convert` reads that holds a graph, or a checkpoint,
        whose graph is then built by `migrate.tf1_builder`). None: read from `converted`'s
        conversion report, or the built-in default model when both are None.
      converted: the directory `convert` wrote (default: `convert.default_out(src)`).
      images: JPEG/PNG files or folders; None for the generated set (`generated_images`).
      batch: the larger batch size (same-size images are batched up to it).
      mode: "eager" (Keras model called eagerly), "function" (the `Detector`), "xla", or
        "saved_model" (`CONVERTED/saved_model` through plain `tf.saved_model.load`, detections
        only, at the precision it was written in).
      atol, rtol: tolerance, element-wise `|tf2 - tf1| <= atol + rtol * max|tf1|` (None: 1e-5
        in float32, `MIXED_TOLERANCES[precision]` otherwise).
      precision: the TF2 side's compute precision, "float32" or a mixed policy (run on the
        batch-norm-folded network); None: float32, in "saved_model" mode the SavedModel's own.
        Mixed: tensors are judged at the looser tolerance and detections by `match_detections`
        (class and IoU) instead of exactly.
      allow_ops: op types to run although outside `op_allowlist.SSD_INFERENCE_OPS`.
      png_dir: write each image with TF1 and TF2 boxes drawn (TF1 red-orange, TF2 blue).
      json_path: write `report.to_json()` there (atomically).
      force: replace an existing `json_path` / non-empty `png_dir`.
      measure: measure memory and latency of each side in its own subprocess.
      warmup, repeats: runs before and during timing, per batch size.
      memory_growth, memory_limit_mb: `ssd_mobilenet.runtime.configure` in both measurement
        processes before their first op (the parity run in this process is not limited).
      trace_dir: write a TensorBoard profiler trace of two TF2 runs of the first batch there.
      progress: callable(str) for progress messages.
    Raises:
      VerifyInputError, sources.SourceError, ConfigError, images.ImageError: bad input
      (nothing is run or written); VerifyInputError also when a measurement process cannot
      apply the memory settings or runs out of memory under `memory_limit_mb`.
    """
    import tensorflow as tf

    import ssd_mobilenet
    from ssd_mobilenet import detector as detector_lib

    say = progress or (lambda msg: None)
    if mode not in MODES:
        raise VerifyInputError(f"--mode {mode}: one of {', '.join(MODES)}")
    if batch < 1:
        raise VerifyInputError(f"--batch {batch}: must be at least 1")
    if repeats < 1:
        raise VerifyInputError(f"--repeats {repeats}: must be at least 1")
    if warmup < 0:
        raise VerifyInputError(f"warmup {warmup}: must be at least 0")
    if precision is not None and precision not in PRECISIONS:
        raise VerifyInputError(f"--precision {precision}: one of {', '.join(PRECISIONS)}")
    if memory_limit_mb is not None and memory_limit_mb <= 0:
        raise VerifyInputError(f"--memory-limit {memory_limit_mb}: must be a positive number of MiB")
    if memory_growth and memory_limit_mb is not None:
        raise VerifyInputError("--memory-growth and --memory-limit exclude each other (a limited GPU device is "
                               "allocated as it is used); choose one")
    _check_outputs(json_path, png_dir, force)
    if trace_dir and os.path.exists(trace_dir) and (not os.path.isdir(trace_dir) or os.listdir(trace_dir)) \
            and not force:
        raise VerifyInputError(f"{trace_dir}: exists and is not empty (use --force to add a trace to it)")
    src, converted = resolve_paths(src, converted, say)
    if mode == SAVED_MODEL:
        written = saved_model_precision(converted)
        if precision not in (None, written):
            raise VerifyInputError(f"{converted}: its SavedModel was written in {written}, not {precision}")
        precision = written
        if not os.path.isfile(os.path.join(converted, "saved_model", "saved_model.pb")):
            raise VerifyInputError(f"{converted}: no saved_model/saved_model.pb")
    precision = precision or "float32"
    mixed = MIXED_TOLERANCES.get(precision)
    atol = (mixed["atol"] if mixed else DEFAULT_ATOL) if atol is None else atol
    rtol = (mixed["rtol"] if mixed else DEFAULT_RTOL) if rtol is None else rtol
    if atol < 0 or rtol < 0:
        raise VerifyInputError("tolerances must be >= 0")
    say(f"loading the converted model {converted}")
    try:
        model = detector_lib.load_model(converted)
    except Exception as e:  # noqa: BLE001 - a corrupt checkpoint or config, reported as bad input
        raise VerifyInputError(f"{converted}: cannot load the converted model ({str(e).splitlines()[0][:200]})") \
            from None
    config = model.config
    stages = frozen_graph.endpoint_candidates(model)
    stages[frozen_graph.DECODED_BOXES[0]] = frozen_graph.DECODED_BOXES[1]
    stage_nodes = [c.split(":")[0] for _, candidates in stages.values() for c in candidates]
    say(f"reading the TF1 model {src}")
    graph_def, graph_from = tf1_inference_graph(src, stage_nodes, allow_ops,
                                                image_size=(config.image_height, config.image_width))
    batches = file_images(images, batch) if images else generated_images(config, batch)

    try:
        runner = frozen_graph.FrozenGraphRunner(graph_def, exact_arithmetic=True)
    except (ValueError, tf.errors.OpError) as e:  # e.g. an op this TensorFlow does not know
        raise VerifyInputError(f"{graph_from}: cannot import the graph ({str(e).strip().splitlines()[0][:200]})") \
            from None
    resolved = runner.resolve(stages)
    notes = [f"TF1 graph: {graph_from}"]
    absent = [s for s in stages if s not in resolved]
    if absent:
        notes.append(f"not in the TF1 graph, not compared: {', '.join(absent)}")
    if mode == SAVED_MODEL:
        say(f"loading {os.path.join(converted, 'saved_model')} with tf.saved_model.load")
        detect, network = saved_model_detector(converted), None
        notes.append(f"TF2 side: {os.path.join(converted, 'saved_model')} (serving_default, {precision}); "
                     "a SavedModel has no stages to compare: detections only")
    else:
        detect, network, tf2_notes = _tf2_side(model, mode, precision)
        notes += tf2_notes

    per_stage, detections, drawn = compare_batches(runner, resolved, network, detect, batches, config, atol, rtol,
                                                   mixed, say)
    names_all = [d["image"] for d in detections]
    say("checking post-processing on crafted box encodings and class logits")
    from migrate.tf1 import self_check
    # Float32 on both sides whatever the network's precision: the exact criterion applies.
    postprocessing = self_check.check_postprocessing(runner, model, config, DEFAULT_ATOL, DEFAULT_RTOL)
    runner.close()
    if trace_dir:
        say(f"tracing two TF2 runs of {batches[0][1].shape[0]} image(s) -> {trace_dir}")
        _trace(detect, batches[0][1], trace_dir)

    tensors = _summarise(resolved, per_stage) if network else []
    first = _first_divergence(tensors, detections, postprocessing,
                              "detections of the SavedModel" if mode == SAVED_MODEL else "Postprocessor")
    memory = {"memory_growth": bool(memory_growth), "memory_limit_mb": memory_limit_mb}
    tf1_result, tf2_result = (_measure_sides(graph_def, converted, mode, precision, memory, batches, batch, warmup,
                                             repeats, say) if measure else (None, None))

    report = VerifyReport(
        passed=first is None, first_divergence=first, tensors=tensors, detections=detections,
        tf1=_side_summary(tf1_result, "session (frozen graph, default ConfigProto)"),
        tf2=_side_summary(tf2_result, mode),
        tolerances=_tolerances(atol, rtol, precision),
        versions={"tensorflow": tf.__version__, "migrate": migrate.__version__,
                  "ssd_mobilenet": ssd_mobilenet.__version__, "python": platform.python_version()},
        images=names_all, src=os.path.abspath(src), converted=converted, mode=mode, notes=notes,
        postprocessing=postprocessing,
        precision=precision, memory=memory, trace_dir=os.path.abspath(trace_dir) if trace_dir else None)
    if png_dir:
        _write_pngs(drawn, png_dir)
    if json_path:
        outputs.write_text(json_path, report.to_json())
    return report


def _write_pngs(drawn, png_dir: str) -> None:
    from migrate.common import draw
    tmp = outputs.temp_dir_beside(png_dir, prefix=".verify-png-")
    try:
        for index, (name, image, tf1_boxes, tf2_boxes) in enumerate(drawn):
            stem = os.path.splitext(os.path.basename(name.replace(":", "_").replace("#", "_")))[0]
            draw.draw_detections(image, [(tf1_boxes, TF1_COLOUR), (tf2_boxes, TF2_COLOUR)],
                                 os.path.join(tmp, f"{index:03d}_{stem}.png"))
        outputs.replace_path(tmp, png_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ---- console ----------------------------------------------------------------------------------

def _mib(value):
    return "-" if value is None else f"{value / 2**20:.1f} MiB"


def format_report(report: VerifyReport) -> str:
    """The short table the CLI prints."""
    precision = "" if report.precision == "float32" else f", {report.precision}"
    lines = [f"verify {report.src}", f"    -> {report.converted}  (mode {report.mode}{precision})"]
    worst = max(report.tensors, key=lambda t: t["max_abs_err"] if t["max_abs_err"] is not None else np.inf,
                default=None)
    ok_tensors = sum(t["ok"] for t in report.tensors)
    if not report.tensors:
        lines.append("tensors      not compared (a SavedModel shows its detections only)")
    else:
        lines.append(f"tensors      {ok_tensors}/{len(report.tensors)} within atol {report.tolerances['atol']:g} "
                     f"rtol {report.tolerances['rtol']:g}"
                     + (f"; largest error {worst['max_abs_err']:.3g} at {worst['name']}"
                        if worst and worst["max_abs_err"] is not None else ""))
    ok_images = sum(d["ok"] for d in report.detections)
    total = sum(d["num_tf1"] for d in report.detections)
    if report.tolerances.get("criterion") == "mixed_precision":
        matched = sum(d["matched"] for d in report.detections)
        flips = sum(d["nms_flips"] for d in report.detections)
        lines.append(f"detections   {ok_images}/{len(report.detections)} images agree by class and IoU "
                     f"(score margin {report.tolerances['score_margin']:g}): {matched}/{total} TF1 detections "
                     f"matched, {flips} NMS flips")
    else:
        swaps = sum(d["ties_swapped"] for d in report.detections)
        lines.append(f"detections   {ok_images}/{len(report.detections)} images agree ({total} TF1 detections"
                     + (f", {swaps} tied pairs in another order" if swaps else "") + ")")
    pp = report.postprocessing
    if pp:
        ok_pp = sum(d["ok"] for d in pp["detections"])
        lines.append(f"post-proc.   {ok_pp}/{len(pp['detections'])} crafted images agree "
                     f"({sum(d['num_tf1'] for d in pp['detections'])} TF1 detections from fed box encodings and "
                     "class logits)")
    fd = report.first_divergence
    if fd:
        errs = ("" if fd.get("max_abs_err") is None else
                f": max abs err {fd['max_abs_err']:.3g}, max rel err {fd['max_rel_err']:.3g}")
        lines.append(f"FIRST DIVERGENCE  {fd['name']}{errs}" + (f" ({fd['note']})" if fd.get("note") else ""))
    if report.tf1.get("measured"):
        lines.append("")
        lines.append(f"{'':24}{'TF1':>22}{'TF2':>22}")
        lines.append(f"{'device':24}{report.tf1['device']:>22}{report.tf2['device']:>22}")
        lines.append(f"{'allocator peak':24}{_mib(report.tf1['peak_memory_bytes']):>22}"
                     f"{_mib(report.tf2['peak_memory_bytes']):>22}")
        lines.append(f"{'  of it transient':24}{_mib(report.tf1['transient_peak_bytes']):>22}"
                     f"{_mib(report.tf2['transient_peak_bytes']):>22}")
        lines.append(f"{'process peak RSS':24}{_mib(report.tf1['peak_rss_bytes']):>22}"
                     f"{_mib(report.tf2['peak_rss_bytes']):>22}")
        for key, tf1_lat in report.tf1["latency_ms"].items():
            tf2_lat = report.tf2["latency_ms"][key]
            label = f"{key.replace('_', ' ')} median/p90"
            cells = [f"{lat['median']:.1f} / {lat['p90']:.1f} ms" for lat in (tf1_lat, tf2_lat)]
            lines.append(f"{label:24}{cells[0]:>22}{cells[1]:>22}")
    lines.append("PASSED" if report.passed else "FAILED")
    return "\n".join(lines)
