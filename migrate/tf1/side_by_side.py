"""Both sides on the same images: the converted model's detections and stage functions (eager,
the `Detector`, XLA, or the SavedModel as its clients call it) and `compare_batches`, which runs
them and the TF1 graph's `FrozenGraphRunner` batch by batch and compares them (`parity`)."""

from __future__ import annotations

import os

import numpy as np

from migrate.tf1.parity import compare_detections, compare_tensor, match_detections
from ssd_mobilenet.detections import DETECTION_OUTPUTS


def tf2_detector(model, mode: str, precision: str = "float32"):
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


def compare_batches(runner, resolved: dict, network, detect, batches, config, atol: float, rtol: float,
                    mixed: dict = None, say=None, tf1_outputs: list = None):
    """Runs both sides on every batch of uint8 images and compares them.

    Args:
      runner: `frozen_graph.FrozenGraphRunner` over the TF1 inference graph.
      resolved: {stage: (keras key, TF1 tensor name)} (`FrozenGraphRunner.resolve`).
      network: uint8 images -> {keras key: tensor} of every stage (None: detections only);
        detect: uint8 images -> detections.
      batches: [(names, uint8 [N, H, W, 3])].
      mixed: `MIXED_TOLERANCES[precision]` to match detections by class and IoU; None: exact.
      tf1_outputs: a list that an earlier call on the same `batches` filled (the graph's outputs
        per batch, read instead of running the graph again), or an empty one to fill; None: run.
    Returns:
      (per_stage {stage: [compare_tensor result per batch]}, detections [per image: {"image", ...}],
      drawn [(name, image, TF1 detections, TF2 detections)], each `drawn_detections`).
    """
    import tensorflow as tf
    per_stage = {s: [] for s in resolved}
    detections, drawn = [], []
    for b, (names, imgs) in enumerate(batches):
        if say:
            say(f"comparing {imgs.shape[0]} image(s) of {imgs.shape[1]}x{imgs.shape[2]}")
        if tf1_outputs is not None and b < len(tf1_outputs):
            ref = tf1_outputs[b]
        else:
            ref = runner.run(imgs, {**{s: t for s, (_, t) in resolved.items()},
                                    **{k: f"{k}:0" for k in DETECTION_OUTPUTS}})
            if tf1_outputs is not None:
                tf1_outputs.append(ref)
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
            drawn.append((name, imgs[i], drawn_detections(ref, i), drawn_detections(det, i)))
    return per_stage, detections, drawn


def drawn_detections(outputs: dict, i: int) -> dict:
    """Image `i`'s detections for `--png`: from the detection outputs (`detection_boxes` [N, D, 4],
    `detection_classes` [N, D] float 1-based, `detection_scores` [N, D], `num_detections` [N]) to
    {"boxes" [K, 4] [ymin, xmin, ymax, xmax] normalised, "classes" int [K] 1-based, "scores" [K]}."""
    k = int(outputs["num_detections"][i])
    return {"boxes": np.asarray(outputs["detection_boxes"][i][:k]),
            "classes": np.asarray(outputs["detection_classes"][i][:k]).astype(np.int64),
            "scores": np.asarray(outputs["detection_scores"][i][:k])}


def tf2_side(model, mode: str, precision: str = "float32"):
    """(detect, stages_of, notes): the TF2 detections function of `mode` and a function
    uint8 images -> {keras key: tensor} of every compared stage, computed by the network the
    detections come from (in function and xla modes the Detector's, which may be a copy with
    batch norm folded into the convolutions) and compiled as the Detector compiles it: in xla
    mode the network after preprocessing, which the Detector keeps outside XLA (XLA's legacy
    resize differs from TensorFlow's)."""
    import tensorflow as tf
    detect = tf2_detector(model, mode, precision)
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

    # autograph=False: the network's control flow is tf.cond/tf.while_loop as written (detector.py).
    compiled = network_stages if mode == "eager" else tf.function(network_stages, jit_compile=(mode == "xla"),
                                                                  autograph=False)

    def stages_of(images):
        pre = net.preprocess(images)
        return {**compiled(pre), "Preprocessor": pre}

    if mode == "eager":
        return detect, stages_of, notes
    from ssd_mobilenet.detector import INPUT_SIGNATURE
    return detect, tf.function(stages_of, input_signature=INPUT_SIGNATURE, autograph=False), notes
