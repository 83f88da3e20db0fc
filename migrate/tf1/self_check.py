"""The proof `convert` runs before it writes anything: the TF1 graph against the converted model.

Two checks, both against the source's own TF1 graph (frozen with the source's weights, its ops
checked against `op_allowlist` first, Grappler off as in `verify`):

- Stages: generated images at the graph's input size and at another size go through both
  sides; every stage `verify` compares (the preprocessed image, every feature extractor
  layer, box encodings, class logits, decoded boxes) and the detections must agree
  (`parity.compare_tensor`, `parity.compare_detections`, same tolerances). The preprocessing
  order (`normalize_before_resize`) changes the image by rounding only; a nonzero difference
  there that the other order removes exactly fails the check too.
- Post-processing, independent of the weights (`check_postprocessing`): a model with trained
  weights on generated images often detects nothing above its threshold, so end-to-end
  outputs alone would pass a wrong post-processing. The TF1 graph is fed crafted box
  encodings and class logits in place of its own (`concat`, `concat_1`) and its detections
  are compared with the TF2 post-processing of the same values: many detections in many
  classes, exact ties, scores spread across every plausible threshold, boxes across the
  image border and outside it, classes that fill the per-class cap and images that fill the
  total cap.

A mismatch names the first divergent stage and the inferred config fields most likely behind
it (`suspects`): for post-processing, the single changes of the graph-version traits that
make the TF2 side agree, else the fields that decide what differs.
"""

from __future__ import annotations

import time

import numpy as np

from migrate.tf1 import frozen_graph
from migrate.tf1.inference_graph import inference_graph_of
from migrate.tf1.parity import DEFAULT_ATOL, DEFAULT_RTOL, MIXED_TOLERANCES, compare_detections, summarise
from migrate.tf1.side_by_side import compare_batches, tf2_side
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import CheckFailedError

CHECK_BATCH_SIZES = ((1, None), (2, (257, 311)))  # (images, size): None is the graph's input size
CRAFTED_SEED = 20171117

# What each stage depends on, for naming the fields most likely behind a divergence there.
_STAGE_FIELDS = (
    ("Preprocessor", ("resize_method", "image_height", "image_width", "normalize_before_resize")),
    ("FeatureExtractor/MobilenetV1/Conv2d_0", ("use_explicit_padding", "pad_to_multiple", "base_batch_norm_epsilon",
                                               "fused_batch_norm")),
    ("FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_", ("pad_extra_layers_to_even", "batch_norm_epsilon",
                                                           "use_depthwise", "fused_batch_norm")),
    ("FeatureExtractor/MobilenetV1/fpn/", ("fpn_min_level", "fpn_max_level", "fpn_additional_layer_depth",
                                           "use_depthwise", "use_explicit_padding", "batch_norm_epsilon",
                                           "fused_batch_norm")),
    ("FeatureExtractor/MobilenetV1/MaxPool2d_", ("pad_to_multiple", "use_explicit_padding")),
    ("FeatureExtractor/MobilenetV1/", ("base_batch_norm_epsilon", "fused_batch_norm", "use_explicit_padding",
                                       "depth_multiplier")),
    ("concat_1", ("interpolated_anchor_after_unit_ratio", "box_predictor_kernel_size", "box_predictor_use_depthwise",
                  "box_predictor_batch_norm_epsilon", "box_predictor_num_layers_before_predictor",
                  "share_prediction_tower", "box_predictor_batch_norm")),
    ("concat", ("interpolated_anchor_after_unit_ratio", "box_predictor_kernel_size", "box_predictor_use_depthwise",
                "box_predictor_batch_norm_epsilon", "box_predictor_num_layers_before_predictor",
                "share_prediction_tower", "box_predictor_batch_norm")),
    ("Postprocessor/Decode", ("box_coder_scales", "interpolated_anchor_after_unit_ratio", "aspect_ratios", "scales",
                              "anchor_specs", "base_anchor_height", "base_anchor_width", "anchor_strides",
                              "anchor_offsets", "anchor_min_level", "anchor_max_level", "anchor_scale",
                              "scales_per_octave")),
)
# Post-processing fields with few values: each other value is tried on the TF2 side to see
# whether it explains a mismatch.
_DISCRETE_ALTERNATIVES = {
    "add_background_class": (True, False),
    "background_slice": ("logits", "scores"),
    "nms_variant": ("clip_before_nms", "clip_after_sort"),
    "score_converter": ("SIGMOID", "SOFTMAX", "IDENTITY"),
}


def stage_suspects(stage: str) -> tuple:
    """The config fields a divergence first seen at `stage` most likely comes from."""
    return next((fields for prefix, fields in _STAGE_FIELDS if stage.startswith(prefix)), ())


# ---- crafted head outputs -----------------------------------------------------------------------

def _logits_for(scores: np.ndarray, background: np.ndarray, config) -> np.ndarray:
    """Class logits [N, A, slots] whose converted class scores are about `scores` [N, A, C].

    Inverts the config's converter and logit scale (the values only need variety: whatever
    the graph computes from them, both sides compute it from the same values)."""
    s = np.clip(scores.astype(np.float64), 1e-30, 1 - 1e-7)
    if config.score_converter == "SIGMOID":
        classes = np.log(s) - np.log1p(-s)
    elif config.score_converter == "SOFTMAX":
        # A row's probabilities sum to 1: classes keep their proportions, background the rest.
        total = s.sum(-1, keepdims=True)
        p = s * np.minimum(1.0, 0.9 / total)
        background = np.log(np.clip(1.0 - p.sum(-1, keepdims=True), 1e-30, None))[..., 0]
        classes = np.log(p)
    else:
        classes = s
    if config.add_background_class:
        classes = np.concatenate([background[..., None], classes], axis=-1)
    return (classes * config.logit_scale).astype(np.float32)


def _encode(boxes: np.ndarray, anchors: np.ndarray, config) -> np.ndarray:
    """faster_rcnn_box_coder's codes [..., 4] that decode to `boxes` [..., 4] on `anchors` [A, 4]
    ([ymin, xmin, ymax, xmax] both); to float32 rounding."""
    ha, wa = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ya, xa = anchors[:, 0] + ha / 2, anchors[:, 1] + wa / 2
    h, w = boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]
    y, x = boxes[..., 0] + h / 2, boxes[..., 1] + w / 2
    sy, sx, sh, sw = config.box_coder_scales
    return np.stack([sy * (y - ya) / ha, sx * (x - xa) / wa, sh * np.log(h / ha), sw * np.log(w / wa)], axis=-1)


def _grid_boxes(count: int, rng) -> np.ndarray:
    """`count` boxes [count, 4] that do not overlap: cells of a square grid over the image,
    shrunk to 60%, in random order."""
    g = int(np.ceil(np.sqrt(max(count, 1))))
    cells = np.stack(np.meshgrid(np.arange(g), np.arange(g), indexing="ij"), -1).reshape(-1, 2)[:count] / g
    boxes = np.concatenate([cells + 0.2 / g, cells + 0.8 / g], axis=-1)
    return boxes[rng.permutation(len(boxes))]


def crafted_head_outputs(config, anchors: np.ndarray, seed: int = CRAFTED_SEED):
    """(box encodings [2, A, 4], class logits [2, A, slots]) float32 that exercise post-processing.

    Made in box and score space, then encoded on the model's `anchors` [A, 4] and turned into
    logits through the config's converter:
    - image 0, dense: random boxes of many sizes (IoUs across any NMS threshold), some across
      the image border and some far outside it (empty once clipped); each class scores on up to
      1.6x `max_detections_per_class` anchors (scores up to 0.8), and the first two classes score
      0.95..1 and 0.9..0.95 on 1.6x the cap of non-overlapping boxes each, so NMS keeps them and
      both caps bind;
    - image 1, clustered: every anchor decodes to one of a few non-overlapping boxes (jittered
      by 1%: within a cluster NMS keeps one per class), each (cluster, class) scoring at a
      level log-uniform from 1e-9 to 1, so that fewer detections than the total cap survive
      and any threshold between splits them;
    - both: exact ties of a score within and across classes;
    - image 0: border pairs that NMS on clipped and on unclipped boxes treat differently;
      image 1: two scores a hair above and below the score threshold.
    """
    rng = np.random.default_rng(seed)
    a, c = len(anchors), config.num_classes
    cap, total = config.max_detections_per_class, config.max_total_detections
    # Image 0.
    centre = rng.uniform(-0.1, 1.1, (a, 2))
    size = 10.0 ** rng.uniform(np.log10(0.02), np.log10(0.6), (a, 2))
    far = rng.random(a) < 0.05
    centre[far] = rng.choice([-0.6, 1.6], (int(far.sum()), 2))
    dense = np.concatenate([centre - size / 2, centre + size / 2], axis=-1)
    dominant = rng.choice(a, size=min(a, int(3.2 * cap)), replace=False)
    dense[dominant] = _grid_boxes(len(dominant), rng)
    # A softmax's classes share each row: a floor on every class keeps a lone candidate's score
    # from normalising to ~1 (the 2017 graphs softmax the class columns alone).
    floor = 1.0 / (4 * c) if config.score_converter == "SOFTMAX" else 1e-12
    scores0 = np.full((a, c), floor)
    for k in range(c):
        if k < 2:  # each on its own half of the non-overlapping boxes, at the top scores, class 0 first
            own = dominant[k::2]
            scores0[own, k] = rng.uniform(0.95, 1.0, len(own)) if k == 0 else rng.uniform(0.9, 0.95, len(own))
            continue
        idx = rng.choice(a, size=min(a, int(rng.integers(0, int(1.6 * cap) + 1))), replace=False)
        scores0[idx, k] = rng.uniform(0.0, 0.8, idx.size)
    # Image 1.
    k_clusters = int(np.clip(total // (2 * c), 1, 12))
    clusters = _grid_boxes(k_clusters, rng)
    member = np.arange(a) % k_clusters
    clustered = clusters[member] * (1.0 + rng.uniform(-0.01, 0.01, (a, 4)))
    levels = 10.0 ** rng.uniform(-9, 0, (k_clusters, c))
    scores1 = levels[member] * rng.uniform(0.3, 1.0, (a, c))
    scores = np.stack([scores0, scores1])
    for image in range(2):
        # Exact ties: copies of a candidate's score at other anchors of its class and of others.
        cand = np.argwhere(scores[image] > 1e-9)
        if len(cand):
            for anchor, k in cand[rng.choice(len(cand), size=min(len(cand) // 4, 24), replace=False)]:
                scores[image, rng.integers(0, a), k] = scores[image, anchor, k]
                scores[image, anchor, rng.integers(0, c)] = scores[image, anchor, k]
    # Border pairs (image 0, the top scores of class 0): the same box inside the image and
    # stretched beyond its top edge, IoU half the NMS threshold unclipped and 1 once clipped,
    # so NMS on clipped boxes (clip_before_nms) keeps one of them and on unclipped both.
    free = np.setdiff1d(np.arange(a), dominant)
    pairs = free[rng.choice(len(free), size=min(len(free) // 2 * 2, 8), replace=False)].reshape(-1, 2)
    t = min(max(config.iou_threshold, 0.05), 0.95)
    for j, (inside, stretched) in enumerate(pairs):
        x0 = 0.1 + 0.2 * j
        dense[inside] = [0.0, x0, 0.3, x0 + 0.15]
        dense[stretched] = [-0.3 * (2.0 / t - 1.0), x0, 0.3, x0 + 0.15]
        scores[0, [stretched, inside], 0] = [0.999 - 0.002 * j, 0.998 - 0.002 * j]
    # Threshold probes (image 1, two anchors with boxes of their own in the clusters' margin):
    # scores a hair above and below the threshold, as whole rows (a softmax's row sums to 1
    # over the classes, background ~0), so a graph whose threshold differs from the config's
    # in either direction keeps another count.
    probes = rng.choice(a, size=min(a, 2), replace=False)
    for i, anchor in enumerate(probes):
        clustered[anchor] = [0.005, 0.3 + 0.1 * i, 0.045, 0.34 + 0.1 * i]
    codes = _encode(np.stack([dense, clustered]), np.asarray(anchors, np.float64), config)
    logits = _logits_for(scores, rng.normal(0.0, 2.0, (2, a)), config)
    thr = config.score_threshold
    for anchor, target in zip(probes, (thr * 1.001, thr * 0.999)):
        target = float(np.clip(target, 1e-7, 1 - 1e-3))
        k = int(rng.integers(0, c))
        if config.score_converter == "SOFTMAX":
            p = np.full(c, (1.0 - target) / max(c - 1, 1))
            p[k] = target
            row = np.log(np.concatenate([[1e-9] if config.add_background_class else [], p]))
        else:
            row = np.full(c, np.log(1e-12) if config.score_converter == "SIGMOID" else 0.0)
            row[k] = np.log(target) - np.log1p(-target) if config.score_converter == "SIGMOID" else target
            if config.add_background_class:
                row = np.concatenate([[0.0], row])
        logits[1, anchor] = (row * config.logit_scale).astype(np.float32)
    return codes.astype(np.float32), logits


# ---- the post-processing check ------------------------------------------------------------------

def _tf2_postprocess(model, config, codes, logits) -> dict:
    import tensorflow as tf

    from ssd_mobilenet import postprocessing
    out = postprocessing.postprocess(model.decode(tf.constant(codes)), tf.constant(logits), config)
    return {k: np.asarray(out[k]) for k in DETECTION_OUTPUTS}


def _compare_all(ours: dict, ref: dict, atol: float, rtol: float, threshold) -> list:
    return [{"image": f"crafted#{i}", **compare_detections(ours, ref, i, atol, rtol, threshold)}
            for i in range(len(ref["num_detections"]))]


def check_postprocessing(runner, model, config, atol: float, rtol: float, seed: int = CRAFTED_SEED) -> dict:
    """The TF1 graph's post-processing against the TF2 one on the same crafted head outputs.

    The TF1 graph is fed `image_tensor` zeros at the model's input size (its anchors depend on
    the feature map sizes) and the crafted values at `concat:0` / `concat_1:0` in place of
    what its network computes. Returns {"ran", "detections": [per crafted image, as
    `parity.compare_detections`], "ok", "suspects": [fields], "note"}.
    """
    heads = {"concat": runner.head_tensors["concat:0"], "concat_1": runner.head_tensors["concat_1:0"]}
    shapes = runner.run(np.zeros((2, config.image_height, config.image_width, 3), np.uint8), heads)
    codes, logits = crafted_head_outputs(config, np.asarray(model.anchors), seed)
    if logits.shape[-1] != shapes["concat_1"].shape[-1]:
        return {"ran": True, "ok": False, "detections": [], "suspects": ["num_classes", "add_background_class"],
                "note": f"class logits have {shapes['concat_1'].shape[-1]} columns in the TF1 graph, "
                        f"{logits.shape[-1]} in the converted model"}
    ref = runner.run(np.zeros((2, config.image_height, config.image_width, 3), np.uint8),
                     {k: f"{k}:0" for k in DETECTION_OUTPUTS},
                     feeds={heads["concat"]: codes.reshape(shapes["concat"].shape), heads["concat_1"]: logits})
    ours = _tf2_postprocess(model, config, codes, logits)
    detections = _compare_all(ours, ref, atol, rtol, config.score_threshold)
    ok = all(d["ok"] for d in detections)
    out = {"ran": True, "ok": ok, "detections": detections, "suspects": [], "note": None,
           "num_tf1": [d["num_tf1"] for d in detections]}
    if not ok:
        out["suspects"] = _postprocessing_suspects(model, config, codes, logits, ref, ours, detections, atol, rtol)
        bad = next(d for d in detections if not d["ok"])
        out["note"] = f"{bad['image']}: {bad['note']}"
    return out


def _postprocessing_suspects(model, config, codes, logits, ref, ours, detections, atol, rtol) -> list:
    """Fields behind a post-processing mismatch: first the single other values of the discrete
    graph-version fields that make the TF2 side agree; else the fields the symptom points to."""
    from ssd_mobilenet.errors import ConfigError
    explained = []
    for field, values in _DISCRETE_ALTERNATIVES.items():
        for value in values:
            if value == getattr(config, field):
                continue
            try:
                other = config.replace(**{field: value})
            except ConfigError:
                continue
            if other.num_class_slots != config.num_class_slots:
                # The same logits columns read with or without a background column.
                other = other.replace(num_classes=config.num_class_slots - (1 if other.add_background_class else 0))
            if other.num_classes < 1:
                continue
            if all(d["ok"] for d in _compare_all(_tf2_postprocess(model, other, codes, logits), ref, atol, rtol,
                                                 other.score_threshold)):
                explained.append(f"{field} (the graph computes as with {value})")
    if explained:
        return explained
    # Symptoms: the same boxes with other scores point at the score conversion; other boxes
    # or counts at what selects them.
    i = next(k for k, d in enumerate(detections) if not d["ok"])
    n1, n2 = int(ref["num_detections"][i]), int(ours["num_detections"][i])
    b1, b2 = ref["detection_boxes"][i][:n1], ours["detection_boxes"][i][:n2]
    if n1 == n2 and np.array_equal(np.sort(ref["detection_classes"][i][:n1]), np.sort(ours["detection_classes"][i][:n2])) \
            and np.allclose(np.sort(ref["detection_scores"][i][:n1]), np.sort(ours["detection_scores"][i][:n2]),
                            rtol=rtol, atol=atol):
        # The same classes and scores at other boxes: the crafted codes were decoded otherwise
        # (against other anchors, or another box coder).
        return list(stage_suspects("Postprocessor/Decode"))
    same_box = [bool(n2) and float(np.abs(b2 - b).max(-1).min()) <= 1e-5 for b in b1]
    score_fields = ["score_converter", "logit_scale", "background_slice"]
    selection = ["score_threshold", "iou_threshold", "max_detections_per_class", "max_total_detections",
                 "nms_variant"]
    if n1 and sum(same_box) >= 0.5 * n1:
        return score_fields + selection
    return selection + score_fields


# ---- the preprocessing order --------------------------------------------------------------------

def _preprocessing_order_failure(runner, resolved: dict, per_stage: dict, batches: list, config):
    """(stage, detail, suspects) when the other `normalize_before_resize` reproduces the graph's
    preprocessed image exactly and the config's does not, else None.

    Scaling before or after the resize gives the same image up to float32 rounding (~2.4e-7 for
    BILINEAR, 0 for NEAREST_NEIGHBOR), far inside the tolerances, so the stage comparison passes
    either way; but the check's eager TF2 side runs the graph's own kernels on the same inputs,
    so the right order gives 0.0 there. Only an exact match of the other order counts as evidence
    (the wrong one would shift detections at score and IoU margins).
    """
    from ssd_mobilenet import preprocessing
    if "Preprocessor" not in resolved or not any(r["max_abs_err"] for r in per_stage["Preprocessor"]):
        return None
    other = config.replace(normalize_before_resize=not config.normalize_before_resize)
    tensor = resolved["Preprocessor"][1]
    for _, images in batches:
        ref = runner.run(images, {"image": tensor})["image"]
        if not np.array_equal(np.asarray(preprocessing.preprocess(images, other)), ref):
            return None
    worst = max(r["max_abs_err"] for r in per_stage["Preprocessor"])
    return ("Preprocessor", f"max abs error {worst:.3g} where normalize_before_resize="
            f"{other.normalize_before_resize} gives the graph's image exactly",
            [f"normalize_before_resize (the graph computes as with {other.normalize_before_resize})"])


# ---- the whole check ----------------------------------------------------------------------------

def _first_failure(tensors: list, detections: list, postprocessing: dict):
    """(stage, detail, suspects) of the first thing that differs, or None."""
    bad = next((t for t in tensors if not t["ok"]), None)
    if bad is not None:
        detail = (bad.get("note") or f"max abs error {bad['max_abs_err']:.3g} "
                  f"(max rel err {bad['max_rel_err']:.3g})")
        return bad["name"], detail, list(stage_suspects(bad["name"]))
    if not postprocessing["ok"]:
        return "Postprocessor", postprocessing["note"], postprocessing["suspects"]
    bad = next((d for d in detections if not d["ok"]), None)
    if bad is not None:
        return "Postprocessor", f"{bad['image']}: {bad['note']}", ["score_threshold", "nms_variant"]
    return None


def _check_deployed(runner, deployed, batches, config, tf1_outputs: list) -> list:
    """The written SavedModel's detections on the check's images against the TF1 graph's:
    exact in float32 (as `verify`), by class and IoU in a mixed precision (`verify --mode
    saved_model`'s comparison: detections only).

    A quantization-aware model's SavedModel is matched by class and IoU too: its FakeQuant steps
    turn float32 rounding into a whole step where a value sits at a step boundary, and which
    side of it the folded network lands on varies between processes (on the quantized zoo
    graph, box coordinate 0.62967 or 0.63053 from the same SavedModel; the graph in a session
    with default optimisations gave the other one each time). The checkpoint's stages are
    still compared exactly, so the conversion itself is held to 1e-5.
    """
    serve, precision = deployed
    criterion = "mixed_bfloat16" if config.weight_bits and precision == "float32" else precision
    _, detections, _ = compare_batches(runner, {}, None, serve, batches, config, DEFAULT_ATOL, DEFAULT_RTOL,
                                       MIXED_TOLERANCES.get(criterion), tf1_outputs=tf1_outputs)
    return detections


def checked_stages(model) -> tuple:
    """({stage: its TF1 tensor candidates}, the graph's node names they need): the stages the check
    compares, the decoded boxes among them; the inference graph is cut to those nodes."""
    stages = frozen_graph.endpoint_candidates(model)
    stages[frozen_graph.DECODED_BOXES[0]] = frozen_graph.DECODED_BOXES[1]
    return stages, [c.split(":")[0] for _, candidates in stages.values() for c in candidates]


def check_conversion(source, model, config, allow_ops=(), progress=None, deployed=None) -> dict:
    """Runs the checks; returns the report's `check` section. Raises `CheckFailedError` on a mismatch.

    Args:
      source: the opened `sources.Source`, which holds a graph (the caller skips sources without).
      model: the converted Keras model (as written), config: its `SSDConfig`.
      allow_ops: op types to run although outside the SSD inference op set.
      deployed: (write, precision): `write()` writes the SavedModel and returns its uint8 images
        -> detections function. It is called once the stages and post-processing have passed
        (a conversion that fails there never pays for the SavedModel), and its detections on
        the same images are checked against the graph's too (the report's `saved_model`; the
        stages are the Keras model's).
    Raises:
      CheckFailedError: the first divergent stage, what differs there and the fields likely behind it.
      InputError: the graph cannot run (ops outside the allowlist, no image_tensor).
    """
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    stages, stage_nodes = checked_stages(model)
    graph_def, graph_from = inference_graph_of(source, stage_nodes, allow_ops, config=config)
    runner = frozen_graph.FrozenGraphRunner(graph_def, exact_arithmetic=True)
    try:
        resolved = runner.resolve(stages)
        detect, network, _ = tf2_side(model, "eager")
        rng = np.random.default_rng(CRAFTED_SEED)
        batches = []
        for n, size in CHECK_BATCH_SIZES:
            h, w = size or (config.image_height, config.image_width)
            batches.append(([f"generated:{h}x{w}#{i}" for i in range(n)],
                            rng.integers(0, 256, (n, h, w, 3)).astype(np.uint8)))
        say("checking every stage against the TF1 graph on generated images: "
            + ", ".join(f"{b[1].shape[1]}x{b[1].shape[2]}" for b in batches))
        atol, rtol = DEFAULT_ATOL, DEFAULT_RTOL
        tf1_outputs = []  # the graph's outputs per batch, read again for the SavedModel's detections
        per_stage, detections, _ = compare_batches(runner, resolved, network, detect, batches, config, atol, rtol,
                                                   tf1_outputs=tf1_outputs)
        say("checking post-processing on crafted box encodings and class logits")
        postprocessing = check_postprocessing(runner, model, config, atol, rtol)
        order_failure = _preprocessing_order_failure(runner, resolved, per_stage, batches, config)
        tensors = summarise(resolved, per_stage)
        failure = order_failure or _first_failure(tensors, detections, postprocessing)
        saved_model, writing = None, 0.0
        if deployed is not None and failure is None:
            write, precision = deployed
            t = time.perf_counter()
            serve = write()
            writing = time.perf_counter() - t  # the export's, not the check's
            say(f"checking the SavedModel as written ({precision}) on the same images")
            saved_model = _check_deployed(runner, (serve, precision), batches, config, tf1_outputs)
    finally:
        runner.close()
    report = {
        "ran": True, "graph": graph_from, "tolerances": {"atol": atol, "rtol": rtol},
        "images": [d["image"] for d in detections], "tensors": tensors, "detections": detections,
        "postprocessing": postprocessing, "not_compared": [s for s in stages if s not in resolved],
        "seconds": round(time.perf_counter() - t0 - writing, 2),
    }
    if saved_model is not None:
        report["saved_model"] = {"precision": deployed[1], "detections": saved_model}
        bad = next((d for d in saved_model if not d["ok"]), None)
        if failure is None and bad is not None:
            failure = ("the SavedModel", f"{bad['image']}: {bad['note']}", [])
    report["passed"] = failure is None
    if failure is not None:
        stage, detail, suspects = failure
        report["first_divergence"] = {"name": stage, "detail": detail, "suspects": suspects}
        likely = f"; likely {', '.join(suspects)}" if suspects else ""
        raise CheckFailedError(f"{graph_from}: the conversion differs first at {stage}: {detail}{likely}; nothing "
                               "written (--no-check writes it)")
    worst = max((t["max_abs_err"] for t in tensors if t["max_abs_err"] is not None), default=0.0)
    say(f"check passed in {report['seconds']:.1f} s: {len(tensors)} stages on {len(detections)} images (largest "
        f"error {worst:.3g})")
    say(f"check passed: post-processing on {len(postprocessing['detections'])} crafted images "
        f"({', '.join(str(n) for n in postprocessing['num_tf1'])} detections)")
    if saved_model is not None:
        say(f"check passed: the SavedModel as written ({deployed[1]}) agrees with the TF1 graph's detections on "
            f"the {len(saved_model)} images")
    return report
