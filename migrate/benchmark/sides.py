"""The sides `bench` measures (`SIDES`, see `migrate.bench`), each a runner
`run(images uint8 [N, H, W, 3]) -> dict of outputs`, and the SavedModels it exports first."""

from __future__ import annotations

import os

from migrate.benchmark.inputs import BenchInputError, _frozen_graph

SIDES = ("tf1_session", "tf1_wrap_function", "saved_model", "saved_model_exact", "saved_model_mixed", "detector",
         "detector_variables", "detector_exact", "detector_xla", "detector_mixed")

# Sides whose SavedModel bench exports first: (variant, precision; None: `mixed_precision()`).
EXPORTED_SIDES = {"saved_model_exact": ("exact", "float32"), "saved_model_mixed": ("fast", None)}

BASELINE = "tf1_session"

DETECTION_OUTPUTS = ("detection_boxes", "detection_scores", "detection_classes", "num_detections")


def runner(side: str, src: str, converted: str, saved_model: str = None):
    """The runner of `side` (see the module docstring) for a TF1 model dir and a converted dir;
    `saved_model`: the SavedModel directory of a `saved_model*` side (default CONVERTED's)."""
    import numpy as np
    import tensorflow as tf

    if side in ("tf1_session", "tf1_wrap_function"):
        graph_def = tf.compat.v1.GraphDef()
        with open(_frozen_graph(src), "rb") as f:
            graph_def.ParseFromString(f.read())
        if side == "tf1_session":
            from migrate.tf1.frozen_graph import FrozenGraphRunner
            session = FrozenGraphRunner(graph_def)
            fetches = {k: f"{k}:0" for k in DETECTION_OUTPUTS}
            return lambda images: session.run(images, fetches)
        wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
        pruned = wrapped.prune("image_tensor:0", [f"{k}:0" for k in DETECTION_OUTPUTS])
        return lambda images: dict(zip(DETECTION_OUTPUTS, (np.asarray(t) for t in pruned(tf.constant(images)))))
    if side.startswith("saved_model"):
        serve = tf.saved_model.load(saved_model or os.path.join(converted, "saved_model")).signatures["serving_default"]
        return lambda images: {k: v.numpy() for k, v in serve(input_tensor=tf.constant(images)).items()}
    import warnings

    import ssd_mobilenet
    options = {"detector": {}, "detector_variables": {"freeze_weights": False},
               "detector_exact": {"fold_batch_norm": False, "slice_size": None},
               "detector_xla": {"jit_compile": True}, "detector_mixed": {"precision": mixed_precision()}}
    if side not in options:
        raise BenchInputError(f"unknown side {side!r}; one of {', '.join(SIDES)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the jit_compile-on-CPU warning: measuring it is the point
        detector = ssd_mobilenet.load(converted, **options[side])
    return lambda images: {k: v.numpy() for k, v in detector(images).items()}


def export_sides(converted: str, out_dir: str, sides) -> dict:
    """{side: SavedModel dir} of the `EXPORTED_SIDES` among `sides`, written under `out_dir` from
    CONVERTED's checkpoint (`ssd_mobilenet.export`), as `convert --exact / --precision` writes them."""
    from ssd_mobilenet import detector, export
    model = detector.load_model(converted)
    paths = {}
    for side in sides:
        if side in EXPORTED_SIDES:
            variant, precision = EXPORTED_SIDES[side]
            paths[side] = os.path.join(out_dir, side)
            export.export_saved_model(model, paths[side], variant, precision or mixed_precision())
    return paths


def _export_worker(converted: str, out_dir: str, sides_csv: str) -> None:
    from migrate.common import console
    console.quiet_worker()
    export_sides(converted, out_dir, sides_csv.split(","))


def mixed_precision() -> str:
    """The mixed policy that has hardware behind it here: float16 on GPUs, bfloat16 on CPUs."""
    import tensorflow as tf
    return "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"
