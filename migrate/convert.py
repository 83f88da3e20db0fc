"""`convert`: TF1 source -> TF2 artifacts, written to a temporary directory and renamed into place.

Output directory:
  saved_model/            TF2 SavedModel, `serving_default`: `input_tensor` uint8 [None, None, None, 3]
                          -> the TF2 OD API output dict (float32)
  checkpoint/             TF2 checkpoint of the Keras model
  model_config.json       the full SSDConfig (incl. the graph-version traits)
  pipeline.config         the config used, inferred fields filled in
  conversion_report.json  sources with sha256, versions, config, name map, ignored variables, timings
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import time

import tensorflow as tf

import ssd_mobilenet
from migrate import assign as assign_lib
from migrate import infer, outputs, sources
from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet.model import SSDMobileNetV1

REPORT = "conversion_report.json"


class OutputExistsError(FileExistsError):
    pass


def default_out(src: str) -> str:
    src = os.path.abspath(src.rstrip("/"))
    base = src if os.path.isdir(src) else os.path.dirname(src)
    return base + "_tf2"


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _ServingModule(tf.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        detector = detector_lib.Detector(model)

        @tf.function(input_signature=detector_lib.INPUT_SIGNATURE)
        def serve(input_tensor):
            # The convolutions reject an empty batch; the signature answers it with empty outputs.
            return tf.cond(tf.shape(input_tensor)[0] > 0, lambda: detector.concrete_function(input_tensor),
                           detector.empty_outputs)
        self.serve = serve


def export_saved_model(model, path: str) -> None:
    module = _ServingModule(model)
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve.get_concrete_function()})


def convert(src: str, out: str = None, force: bool = False, trust_weights: bool = False, image_size=None,
            use_moving_averages: bool = False, progress=None) -> dict:
    """Converts a TF1 model; returns the conversion report (also written to `out`).

    Raises:
      sources.SourceError, ssd_mobilenet.ConfigError, infer.MismatchError,
      assign.MappingError, OutputExistsError: with a one-line message naming the file.
    """
    say = progress or (lambda msg: None)
    timings = {}
    t0 = time.perf_counter()
    out = os.path.abspath(out or default_out(src))
    if outputs.covers(out, src):
        # --force replaces the output folder whole: it would delete the model being converted.
        raise OutputExistsError(f"{out}: holds the source {src}; choose another --out")
    if os.path.exists(out) and not os.path.isdir(out):
        raise OutputExistsError(f"{out}: is a file (--out takes a folder)")
    if os.path.exists(out) and os.listdir(out) and not force:
        raise OutputExistsError(f"{out}: exists and is not empty (use --force to replace it)")
    say(f"reading {src}")
    source = sources.open_source(src)
    config, notes = infer.infer_config(source, trust_weights=trust_weights, image_size=image_size)
    timings["read_s"] = time.perf_counter() - t0
    say("building the Keras model")
    t = time.perf_counter()
    model = SSDMobileNetV1(config)
    try:
        names, ignored = assign_lib.assign(source.weights, model, use_moving_averages=use_moving_averages)
    except assign_lib.MappingError as e:
        raise assign_lib.MappingError(f"{source.weights_from}: {e}") from None
    timings["assign_s"] = time.perf_counter() - t
    tmp = outputs.temp_dir_beside(out, prefix=".convert-")
    try:
        say("writing checkpoint and SavedModel")
        t = time.perf_counter()
        detector_lib.save(model, tmp)
        with open(os.path.join(tmp, "pipeline.config"), "w", encoding="utf-8") as f:
            f.write(config.to_pipeline_config())
        export_saved_model(model, os.path.join(tmp, "saved_model"))
        timings["write_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - t0
        report = {
            "source": {"path": os.path.abspath(src),
                       "files": {os.path.abspath(p): _sha256(p) for p in dict.fromkeys(source.files)},
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
            "timings": {k: round(v, 3) for k, v in timings.items()},
        }
        with open(os.path.join(tmp, REPORT), "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, sort_keys=True)
        outputs.replace_path(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report["out"] = out
    return report
