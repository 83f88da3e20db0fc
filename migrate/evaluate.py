"""`python -m migrate evaluate MODEL --records ...`: COCO detection metrics of a model on OD API TFRecords.

MODEL is a converted directory (run through `ssd_mobilenet.load`) or a TF1 model in any form
`convert` reads (run as its frozen inference graph in a `tf.compat.v1.Session`, its ops checked
against the SSD inference set first). Each record's image goes to the model at its own size, as
the OD API's evaluation fed it; detections and groundtruth are scaled to the image's pixels and
scored by pycocotools (`ssd_mobilenet.training.coco_metrics`, the OD API's metric names). Every
record counts once, keyed by its position (the OD API keyed by source id and dropped repeats).
Categories: the label map's items (`labels`, else the label map a converted MODEL carries,
`converted_dir.label_map_file`), else the classes in the groundtruth (a class with no groundtruth
has no precision and does not enter the mean either way).
"""

from __future__ import annotations

import json
import time
import warnings

from ssd_mobilenet import atomic_write
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet import converted_dir
from ssd_mobilenet.errors import InputError

PROGRESS_EVERY = 50
# What a class id missing from --labels costs (`label_map.coverage_warning`): the label map's items
# are the categories scored.
UNNAMED = "their detections not scored"


def model_runner(model: str, allow_ops=()):
    """(run(images uint8 [1, H, W, 3]) -> {key: numpy}, description, class count or None) for a
    converted dir or a TF1 model (its count from its class predictor's weights)."""
    if converted_dir.is_converted(model):
        import ssd_mobilenet
        try:
            detector = ssd_mobilenet.load(model)
        except (OSError, ValueError) as e:
            from ssd_mobilenet.image_io import error_about
            raise InputError(error_about(model, e, "cannot load it")) from None
        def run(images):
            out = detector(images)  # once per image, not once per output
            return {k: out[k].numpy() for k in DETECTION_OUTPUTS}
        from migrate.common.console import shown
        # Named by its folder, as "TF1 graph (...)" is: `train --eval` evaluates the model it wrote.
        return run, f"converted model ({shown(model)})", detector.config.num_classes
    from migrate.tf1 import config_inference, sources
    from migrate.tf1.frozen_graph import FrozenGraphRunner
    from migrate.tf1.inference_graph import inference_graph_of
    source = sources.open_source(model)
    frozen, graph_from = inference_graph_of(source, stage_nodes=(), allow_ops=allow_ops)
    session = FrozenGraphRunner(frozen)
    fetches = {k: f"{k}:0" for k in DETECTION_OUTPUTS}
    return ((lambda images: session.run(images, fetches)), f"TF1 graph ({graph_from})",
            config_inference.weight_classes(source.weights))


def evaluate(model: str, records, labels: str = None, json_path: str = None, force: bool = False, allow_ops=(),
             progress=None, warn=None) -> dict:
    """COCO metrics of `model` on the `records` (paths or globs); see the module docstring.

    Returns:
      {"metrics": {name: value}, "images": int, "skipped": int, "model": description, "seconds": float};
      written to `json_path` (atomically; an existing file only with `force`).
    Raises:
      InputError (OutputExistsError): bad input, before anything is written.
    """
    from ssd_mobilenet import label_map as label_maps
    from ssd_mobilenet.training import coco_metrics, data

    say = progress or (lambda msg: None)
    warn = warn or say
    atomic_write.check_output(json_path, force, is_dir=False, flag="--json")
    files = data.record_files(records)
    if labels is None and converted_dir.is_converted(model):
        labels = converted_dir.label_map_file(model)
    names = label_maps.read(labels) if labels else None
    run, description, num_classes = model_runner(model, allow_ops)
    if names is not None:
        missed = label_maps.coverage_warning(labels, names, num_classes, UNNAMED)
        if missed:
            warn(missed)
    say(f"evaluating {description} on {len(files)} record file(s)")
    evaluator = coco_metrics.CocoDetectionEvaluator(
        [{"id": i, "name": n} for i, n in sorted(names.items())] if names else None)
    start, count = time.perf_counter(), 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", data.RecordWarning)
        for example in data.read_examples(files, label_map=labels):
            image = example["image"].numpy()
            h, w = image.shape[:2]
            evaluator.add_groundtruth(count, coco_metrics.to_absolute(example["boxes"].numpy(), h, w),
                                      example["classes"].numpy())
            out = run(image[None])
            n = int(out["num_detections"][0])
            evaluator.add_detections(count, coco_metrics.to_absolute(out["detection_boxes"][0][:n], h, w),
                                     out["detection_scores"][0][:n], out["detection_classes"][0][:n].astype(int))
            count += 1
            if count % PROGRESS_EVERY == 0:
                say(f"{count} images, {count / (time.perf_counter() - start):.1f} images/s")
    skipped = [w for w in caught if issubclass(w.category, data.RecordWarning)]
    for w in skipped:
        warn(f"warning: {w.message}")
    if count == 0:
        raise InputError(f"{', '.join(files)}: no usable record to evaluate")
    metrics = evaluator.evaluate()
    result = {"metrics": dict(metrics), "images": count, "skipped": len(skipped), "model": description,
              "records": files, "seconds": round(time.perf_counter() - start, 3)}
    if json_path is not None:
        atomic_write.write_text(json_path, json.dumps(result, indent=2) + "\n")
    return result


def format_result(result: dict) -> str:
    from ssd_mobilenet.training.coco_metrics import format_table
    return format_table(result["metrics"])
