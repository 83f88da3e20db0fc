"""`convert`: TF1 source -> TF2 artifacts, written to a temporary directory and renamed into place.

Output directory:
  saved_model/            TF2 SavedModel, `serving_default`: `input_tensor` uint8 [None, None, None, 3]
                          -> the TF2 OD API output dict (float32); the loaded object is callable on
                          the image tensor too (`ssd_mobilenet.formats.saved_model.writer`: the fast
                          variant by default, the op-for-op one with `saved_model="exact"`)
  checkpoint/             TF2 checkpoint of the Keras model
  model_config.json       the full SSDConfig (incl. the graph-version traits)
  pipeline.config         the config used, inferred fields filled in
  source_pipeline.config  the source's pipeline.config as it was (its training settings), when it has one
  label_map.pbtxt         the class names: `--labels`, else the label map the pipeline.config names
                          (`kept_label_map`), when there is one
  synthetic_weights.txt   when the source is marked as holding seeded synthetic weights
  conversion_report.json  sources with sha256, versions, config, name map, ignored variables, timings
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time

import tensorflow as tf

import ssd_mobilenet
from migrate.tf1 import assign as assign_lib
from migrate.tf1 import config_inference, sources
from ssd_mobilenet import atomic_write, converted_dir
from ssd_mobilenet import label_map as label_maps
from ssd_mobilenet.config import pipeline_text
from ssd_mobilenet.config.pipeline_writer import to_pipeline_config
from ssd_mobilenet.converted_dir import file_sha256
from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet.formats.saved_model import writer as saved_model_lib
from ssd_mobilenet.model import PRECISIONS, SSDMobileNetV1
from ssd_mobilenet.errors import ConfigError, InputError, OutputExistsError

REPORT = "conversion_report.json"
SOURCE_PIPELINE_CONFIG = "source_pipeline.config"


def source_dir(src: str) -> str:
    """The folder of a TF1 source: `src` itself, or the folder of the file (or prefix) it names."""
    src = os.path.abspath(src.rstrip("/"))
    return src if os.path.isdir(src) else os.path.dirname(src)


def default_out(src: str) -> str:
    return source_dir(src) + "_tf2"


# Fields only a graph shows (no pipeline.config records them): without a graph, assumed.
GRAPH_ONLY_FIELDS = ("nms_variant", "fused_batch_norm", "pad_extra_layers_to_even",
                     "interpolated_anchor_after_unit_ratio", "background_slice", "base_batch_norm_epsilon",
                     "normalize_before_resize")
# Fields a pipeline.config states and a graph shows too: without either, assumed.
CONFIG_OR_GRAPH_FIELDS = ("image_height", "image_width", "resize_method", "add_background_class", "score_converter",
                          "logit_scale", "score_threshold", "iou_threshold", "max_detections_per_class",
                          "max_total_detections", "box_coder_scales", "use_explicit_padding", "pad_to_multiple",
                          "batch_norm_epsilon", "aspect_ratios", "scales", "min_scale", "max_scale",
                          "interpolated_scale_aspect_ratio", "base_anchor_height", "base_anchor_width",
                          "anchor_strides", "anchor_offsets", "reduce_boxes_in_lowest_layer", "anchor_generator_type",
                          "anchor_min_level", "anchor_max_level", "anchor_scale", "scales_per_octave")


IMAGE_SIZE_FIELDS = ("image_height", "image_width")


def assumed_fields(source, config, image_size=None) -> dict:
    """{field: value} of the config that neither a graph, a pipeline.config nor `--image-size`
    (`image_size`) stated."""
    if source.graph_def is not None:
        return {}
    fields = GRAPH_ONLY_FIELDS + (() if source.pipeline_config is not None else CONFIG_OR_GRAPH_FIELDS)
    return {k: getattr(config, k) for k in fields if not (image_size is not None and k in IMAGE_SIZE_FIELDS)}


def _unchecked(source, config, check: bool, say, image_size=None):
    """The report's `check` when nothing is checked (--no-check, no graph, a TFLite export graph),
    or None when the check runs. Without a graph the assumed fields are said (--no-check or not):
    the console's one statement of their values."""
    from migrate.tf1 import graph_traits
    if source.graph_def is None:
        assumed = assumed_fields(source, config, image_size)
        # Values as model_config.json's float32 fields read (0.6, not 0.6000000238418579); the
        # image size has a line of its own among the notes (`config_inference.infer_config`).
        say(f"no graph to check the conversion against ({source.weights_from} alone): assumed "
            + ", ".join(f"{k}={config_inference._show(v)}" for k, v in assumed.items()
                        if k not in IMAGE_SIZE_FIELDS))
        return {"ran": False,
                "reason": "--no-check" if not check else "no graph: a checkpoint alone has nothing to check against",
                "assumed": {k: list(v) if isinstance(v, tuple) else v for k, v in assumed.items()}}
    if not check:
        return {"ran": False, "reason": "--no-check"}
    if graph_traits.is_tflite_export(source.graph_def):
        return {"ran": False, "reason": f"{source.graph_from}: {graph_traits.TFLITE_REFUSAL}"}
    return None


def _check(source, tmp: str, config, check: bool, allow_ops, say, precision: str, write_saved_model,
           image_size=None) -> dict:
    """The report's `check`: `self_check.check_conversion` on the model as written to `tmp` (its
    checkpoint stage by stage, then its SavedModel on detections), or why not. `write_saved_model()`
    writes the SavedModel into `tmp`: after the checkpoint's stages have passed, or at once when
    nothing is checked."""
    from migrate.tf1 import self_check
    from migrate.tf1.side_by_side import saved_model_detector
    unchecked = _unchecked(source, config, check, say, image_size)
    if unchecked is not None:
        write_saved_model()
        return unchecked

    def write():
        write_saved_model()
        return saved_model_detector(tmp)
    # A graph the check cannot run is an InputError: --no-check skips it (docs/guides/troubleshooting.md).
    return self_check.check_conversion(source, detector_lib.load_model(tmp), config, allow_ops, say,
                                       deployed=(write, precision))


# Where a pipeline.config names its label map: the training input's first (the map the model was
# trained with), then the evaluation inputs'.
_LABEL_MAP_READERS = ("train_input_reader", "eval_input_reader")


def named_label_map(source) -> str | None:
    """The `label_map_path` the source's pipeline.config names, or None (no config, none named,
    a config that does not parse: the conversion reports that one)."""
    if source.pipeline_config is None:
        return None
    try:
        root = pipeline_text.parse(source.pipeline_config)
    except ConfigError:
        return None
    for reader in _LABEL_MAP_READERS:
        for message in root.get(reader, []):
            path = message.scalar("label_map_path") if isinstance(message, pipeline_text.TextMessage) else None
            if isinstance(path, str) and path:
                return path
    return None


def _found_label_map(named: str, config_path: str | None) -> str | None:
    """The file `named` (a pipeline.config's `label_map_path`) is, or None: the path as given,
    then relative to the pipeline.config's folder, then its base name beside it (a folder that
    was moved, or a zoo config's `PATH_TO_BE_CONFIGURED/`)."""
    # The folder as the user named it (relative stays relative): the console line shows the path.
    folder = os.path.dirname(config_path) if config_path else None
    candidates = [named] + ([os.path.join(folder, named), os.path.join(folder, os.path.basename(named))]
                            if folder is not None else [])
    return next((p for p in candidates if os.path.isfile(p)), None)


def kept_label_map(source, labels: str | None, num_classes: int) -> tuple:
    """(label map file or None, the console line saying which was kept or why none was): `labels`
    (`--labels`: a file or `coco`) when given, else the file the source's pipeline.config names
    (`named_label_map`, found by `_found_label_map`).

    Raises:
      InputError: the map does not read, or names ids beyond `num_classes`
        (`label_map.fits`).
    """
    if labels is not None:
        path, line = labels, f"label map: {labels} (--labels), kept as {converted_dir.LABEL_MAP_FILE}"
    else:
        named = named_label_map(source)
        if named is None:
            return None, "no label map kept (no pipeline.config names one): give one with `--labels FILE` or `coco`"
        path = _found_label_map(named, source.pipeline_config_from)
        shipped = label_maps.builtin_named(named) if path is None else None
        if shipped is not None and _fits(shipped, num_classes):
            # The zoo's configs name the OD API's COCO map, which their archives leave out.
            return shipped, (f"label map: {shipped}, the package's {os.path.basename(named)} (pipeline.config's "
                             f"label_map_path, not found), kept as {converted_dir.LABEL_MAP_FILE}")
        if path is None:
            return None, (f"label map {named} (pipeline.config's label_map_path) not found: give it with "
                          "`--labels FILE` (or `--labels coco`)")
        line = f"label map: {path} (pipeline.config's label_map_path), kept as {converted_dir.LABEL_MAP_FILE}"
    label_maps.fits(path, label_maps.read(path), num_classes)
    return path, line


def _fits(path: str, num_classes: int) -> bool:
    """Whether the label map `path` (or a shipped one's name) names no id beyond `num_classes`."""
    return not label_maps.coverage(label_maps.read(path), num_classes)[1]


def convert(src: str, out: str = None, force: bool = False, trust_weights: bool = False, image_size=None,
            use_moving_averages: bool = False, check: bool = True, allow_ops=(),
            saved_model: str = saved_model_lib.FAST_VARIANT, precision: str = "float32", progress=None,
            saved_model_weights: str | None = None, labels: str | None = None) -> dict:
    """Converts a TF1 model; returns the conversion report (also written to `out`).

    `labels`: the label map to keep in `out` (a file or `coco`); None keeps the one the source's
    pipeline.config names where that file is found (`kept_label_map`, which says which in a
    progress line).

    With `check` (default) and a source that holds a graph, the model as written is checked
    against that graph before it is renamed into place (`self_check.check_conversion`: every
    stage on generated images, post-processing on crafted values); `allow_ops` lets the graph
    run ops outside the SSD inference set. The report's `check` records what was checked and
    the errors, or why nothing was (and, without a graph, every field assumed).

    `saved_model`: "fast" (batch norm folded, heads merged: what serving should run)
    or "exact" (the network op for op as the TF1 graph is written); `precision` ("float32",
    "mixed_bfloat16", "mixed_float16"; fast only) its compute precision; `saved_model_weights`
    ("constants", "variables"; fast only; None: the variant's) how it holds the weights. The
    report's `saved_model` records them (`ssd_mobilenet.formats.saved_model.writer`).

    Raises:
      InputError (ConfigError, OutputExistsError): bad input, with a one-line message naming the
        file.
      CheckFailedError: the converted model differs from the graph; nothing is written.
    """
    say = progress or (lambda msg: None)
    if saved_model not in saved_model_lib.VARIANTS:
        raise InputError(f"saved_model must be one of {', '.join(saved_model_lib.VARIANTS)}, "
                                f"got {saved_model!r}")
    if precision not in PRECISIONS:
        raise InputError(f"--precision {precision}: one of {', '.join(PRECISIONS)}")
    if saved_model == saved_model_lib.EXACT_VARIANT and precision != "float32":
        raise InputError(f"--exact with --precision {precision}: the op-for-op model computes in float32")
    if saved_model == saved_model_lib.EXACT_VARIANT and saved_model_weights is not None:
        raise InputError("--exact with --constant-weights: the op-for-op model keeps its weights as variables")
    timings = {}
    t0 = time.perf_counter()
    named = out or default_out(src)  # as the user gave it, for the console's lines
    out = os.path.abspath(named)
    if atomic_write.covers(out, src):
        # --force replaces the output folder whole: it would delete the model being converted.
        raise OutputExistsError(f"{named}: holds the source; choose another --out")
    if os.path.exists(out) and not os.path.isdir(out):
        raise OutputExistsError(f"{named}: is a file (--out takes a folder)")
    if os.path.exists(out) and os.listdir(out) and not force:
        raise OutputExistsError(f"{named}: exists and is not empty (use --force to replace it)")
    say(f"reading {src}")
    source = sources.open_source(src)
    config, notes = config_inference.infer_config(source, trust_weights=trust_weights, image_size=image_size)
    kept, line = kept_label_map(source, labels, config.num_classes)
    say(line)
    timings["read_s"] = time.perf_counter() - t0
    say("building the Keras model")
    t = time.perf_counter()
    model = SSDMobileNetV1(config)
    try:
        names, ignored = assign_lib.assign(source.weights, model, use_moving_averages=use_moving_averages)
    except InputError as e:
        raise InputError(f"{source.weights_from}: {e}") from None
    timings["assign_s"] = time.perf_counter() - t
    tmp = atomic_write.temp_dir_beside(out, prefix=".convert-")
    try:
        say("writing the checkpoint")
        t = time.perf_counter()
        detector_lib.save(model, tmp)
        with open(os.path.join(tmp, "pipeline.config"), "w", encoding="utf-8") as f:
            f.write(to_pipeline_config(config))
        if source.pipeline_config is not None:
            # The source's own config, verbatim: its training settings (loss, matcher,
            # train_config) are what `migrate train` continues with.
            with open(os.path.join(tmp, SOURCE_PIPELINE_CONFIG), "w", encoding="utf-8") as f:
                f.write(source.pipeline_config)
        if kept is not None:
            with open(os.path.join(tmp, converted_dir.LABEL_MAP_FILE), "w", encoding="utf-8") as f:
                f.write(label_maps.as_pbtxt(kept))
        if converted_dir.synthetic_weights(source_dir(src)):
            converted_dir.mark_synthetic(tmp)
        timings["write_s"] = time.perf_counter() - t

        def write_saved_model():
            say(f"writing the SavedModel ({saved_model}, {precision})")
            t = time.perf_counter()
            saved_model_lib.export_saved_model(model, os.path.join(tmp, "saved_model"), saved_model, precision,
                                               source=tmp, weights=saved_model_weights)
            timings["saved_model_s"] = time.perf_counter() - t

        t = time.perf_counter()
        # On the checkpoint and the SavedModel as written, reloaded; the SavedModel is written
        # once the checkpoint's stages pass (a failing conversion ends without paying for it).
        check_report = _check(source, tmp, config, check, allow_ops, say, precision, write_saved_model, image_size)
        timings["check_s"] = time.perf_counter() - t - timings["saved_model_s"]
        timings["total_s"] = time.perf_counter() - t0
        report = {
            "source": {"path": os.path.abspath(src),
                       "files": {os.path.abspath(p): file_sha256(p) for p in dict.fromkeys(source.files)},
                       "weights_from": source.weights_from, "graph_from": source.graph_from,
                       "pipeline_config_from": source.pipeline_config_from,
                       "tensorflow_version": source.tensorflow_version,
                       "graph_def_version": source.graph_def_version},
            "versions": {"tensorflow": tf.__version__, "ssd_mobilenet": ssd_mobilenet.__version__,
                         "python": platform.python_version()},
            "config": config.to_dict(),
            "notes": notes,
            "name_map": names,
            "ignored": ignored,
            "use_moving_averages": use_moving_averages,
            "num_weights": len(names),
            "label_map": kept and os.path.abspath(label_maps.resolve(kept)),
            "check": check_report,
            "saved_model": {"variant": saved_model, "precision": precision,
                            "weights": saved_model_lib.weights_kind(saved_model, config, precision,
                                                                    saved_model_weights),
                            "description": saved_model_lib.describe(saved_model, config, precision,
                                                                    saved_model_weights)},
            "timings": {k: round(v, 3) for k, v in timings.items()},
        }
        with open(os.path.join(tmp, REPORT), "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, sort_keys=True)
        atomic_write.replace_path(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report["out"] = out
    return report
