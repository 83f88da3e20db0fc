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
frozen inference graph in a session with the default config. A `.tflite` or `.onnx` file is
measured as `bench` measures it, in a process without TensorFlow
(`migrate.bench.litert_memory`): its peak RSS is the file's own footprint.

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

A TFLite file (`tflite=PATH`, `mode` "tflite"): the file `migrate export` wrote, run by
LiteRT's interpreter with an explicit thread count, is the TF2 side; the TF1 graph comes from
the conversion as above. Its detections only are compared, each verify photo fed as users feed
the file and the same photo to the TF1 graph (exactly for a float32 per-class file, by class and IoU for int8 and custom-op
files), and it is measured at batch 1; `migrate.verify.tflite_file` says why and how.

Memory levers (`memory_growth`, `memory_limit_mb`) go to both measurement processes, which
apply them with `ssd_mobilenet.memory.configure` before their first op; `trace_dir` gets a
TensorBoard profiler trace of two TF2 runs (`ssd_mobilenet.memory.trace`).
"""

from __future__ import annotations

import os
import platform

import migrate
from migrate.common.console import shown
from migrate.tf1 import frozen_graph, sources
from migrate.tf1.inference_graph import inference_graph_of
from migrate.tf1.parity import DEFAULT_ATOL, DEFAULT_RTOL, MIXED_TOLERANCES, summarise
from migrate.tf1.side_by_side import compare_batches, saved_model_detector, tf2_side
from migrate.verify.inputs import (_check_outputs, file_images, generated_images, resolve_paths,
                                   saved_model_precision)
from migrate.verify import same_network
from migrate.verify.measuring import _measure_sides, _side_summary, _trace
from migrate.verify.report import RUNTIMES, VerifyReport, _first_divergence, _tolerances, _write_pngs
from migrate.verify.sides import SAVED_MODEL
from ssd_mobilenet import atomic_write
from ssd_mobilenet.errors import OutputExistsError
from ssd_mobilenet.model import PRECISIONS
from ssd_mobilenet.errors import InputError

DEFAULT_BATCH = 4
MODES = ("eager", "function", "xla", "saved_model")
TFLITE = "tflite"  # the report's mode when the TF2 side is a .tflite file


def verify(src=None, converted=None, images=None, batch: int = None, mode: str = None,
           atol: float = None, rtol: float = None, allow_ops=(), png_dir=None,
           json_path=None, force=False, measure: bool = True, warmup: int = 1, repeats: int = 10,
           precision: str = None, memory_growth: bool = False, memory_limit_mb: int = None,
           trace_dir: str = None, progress=None, tflite: str = None, threads: int = None,
           onnx: str = None, runtime: str = None, warn=None) -> VerifyReport:
    """Verifies a converted model against its TF1 source; returns a `VerifyReport`.

    Args:
      src: the TF1 model (any source `convert` reads that holds a graph, or a checkpoint,
        whose graph is then built by `migrate.tf1.builder`). None: read from `converted`'s
        conversion report, or the built-in default model when both are None.
      converted: the directory `convert` wrote (default: `convert.default_out(src)`).
      images: JPEG/PNG files or folders; None for the generated set (`generated_images`). An
        image that cannot be decoded is skipped with a warning through `warn` (default stderr)
        and listed in the report's `skipped`.
      batch: the larger batch size (same-size images are batched up to it; None: `DEFAULT_BATCH`).
      mode: "eager" (Keras model called eagerly), "function" (the `Detector`, the default), "xla", or
        "saved_model" (`CONVERTED/saved_model` through plain `tf.saved_model.load`, detections
        only, at the precision it was written in).
      atol: tolerance, element-wise `|tf2 - tf1| <= atol + rtol * max|tf1|` (None: 1e-5
        in float32, `MIXED_TOLERANCES[precision]` otherwise).
      rtol: the relative part of that tolerance (None: as for `atol`).
      precision: the TF2 side's compute precision, "float32" or a mixed policy (run on the
        batch-norm-folded network); None: float32, in "saved_model" mode the SavedModel's own.
        Mixed: tensors are judged at the looser tolerance and detections by `match_detections`
        (class and IoU) instead of exactly.
      allow_ops: op types to run although outside `op_allowlist.SSD_INFERENCE_OPS`.
      png_dir: write each image twice side by side, the TF1 graph's detections (score >= 0.5) drawn on
        the left and the TF2 side's on the right, each box in its class's colour with `id N: 87%`.
      json_path: write `report.to_json()` there (atomically).
      force: replace an existing `json_path` / non-empty `png_dir`.
      measure: measure memory and latency of each side in its own subprocess.
      warmup: runs before timing, per batch size.
      repeats: timed runs, per batch size.
      memory_growth: `ssd_mobilenet.memory.configure` in both measurement processes before
        their first op (the parity run in this process is not limited).
      memory_limit_mb: as `memory_growth`, a memory limit.
      trace_dir: write a TensorBoard profiler trace of two TF2 runs of the first batch there.
      progress: callable(str) for progress messages.
      tflite: a `.tflite` file of `migrate export` as the TF2 side instead of the converted model
        (`tflite_file`): `mode`, `batch`, `precision`, the memory levers and `trace_dir` do not
        apply to it and are refused; `atol`, `rtol` only for a float32 per-class file.
      threads: the TFLite interpreter's (or ONNX Runtime's) thread count (None: `os.cpu_count()`),
        always passed.
      onnx: an `.onnx` file of `migrate export --onnx` as the TF2 side, run by ONNX Runtime, as
        `tflite` (judged exactly, as a float32 per-class TFLite file). Not with `tflite`.
      runtime: with `onnx`, "openvino" runs the file on OpenVINO's CPU plugin (`predict --runtime`);
        None or "onnxruntime": ONNX Runtime.
    Raises:
      InputError (ConfigError, OutputExistsError): bad input (nothing is run or written); also
      when a measurement process cannot apply the memory settings or runs out of memory under
      `memory_limit_mb`.
    """
    import tensorflow as tf

    import ssd_mobilenet
    from ssd_mobilenet import detector as detector_lib

    say = progress or (lambda msg: None)
    given_atol, given_rtol = atol, rtol
    if tflite is not None and onnx is not None:
        raise InputError("--onnx: one file at a time (--tflite is given too)")
    if runtime is not None and onnx is None:
        raise InputError(f"--runtime {runtime}: for an --onnx file")
    # `report.RUNTIMES`' key: LiteRT, ONNX Runtime, or OpenVINO (`--runtime openvino`).
    file_runtime = "litert" if onnx is None else "openvino" if runtime == "openvino" else "onnx"
    if onnx is not None:
        tflite = onnx  # the same path through `_verify_tflite`, with ONNX Runtime as the runtime
    if tflite is not None:
        _check_tflite_options(mode, batch, precision, memory_growth, memory_limit_mb, trace_dir, threads,
                              "--onnx" if onnx is not None else "--tflite")
    elif threads is not None:
        raise InputError(f"--threads {threads}: for a --tflite or --onnx file (LiteRT's or ONNX Runtime's)")
    mode = mode or "function"
    batch = DEFAULT_BATCH if batch is None else batch
    if mode not in MODES:
        raise InputError(f"--mode {mode}: one of {', '.join(MODES)}")
    if batch < 1:
        raise InputError(f"--batch {batch}: must be at least 1")
    if repeats < 1:
        raise InputError(f"--repeats {repeats}: must be at least 1")
    if warmup < 0:
        raise InputError(f"warmup {warmup}: must be at least 0")
    if precision is not None and precision not in PRECISIONS:
        raise InputError(f"--precision {precision}: one of {', '.join(PRECISIONS)}")
    if memory_limit_mb is not None and memory_limit_mb <= 0:
        raise InputError(f"--memory-limit {memory_limit_mb}: must be a positive number of MiB")
    if memory_growth and memory_limit_mb is not None:
        # A limited GPU device is allocated as it is used.
        raise InputError("--memory-growth and --memory-limit exclude each other; choose one")
    _check_outputs(json_path, png_dir, force)
    if trace_dir and os.path.exists(trace_dir) and (not os.path.isdir(trace_dir) or os.listdir(trace_dir)) \
            and not force:
        raise OutputExistsError(f"{trace_dir}: exists and is not empty (use --force to add a trace to it)")
    src, converted = resolve_paths(src, converted, say)
    if mode == SAVED_MODEL:
        written = saved_model_precision(converted)
        if precision not in (None, written):
            raise InputError(f"{converted}: its SavedModel was written in {written}, not {precision}")
        precision = written
        if not os.path.isfile(os.path.join(converted, "saved_model", "saved_model.pb")):
            raise InputError(f"{converted}: no saved_model/saved_model.pb")
    precision = precision or "float32"
    mixed = MIXED_TOLERANCES.get(precision)
    atol = (mixed["atol"] if mixed else DEFAULT_ATOL) if atol is None else atol
    rtol = (mixed["rtol"] if mixed else DEFAULT_RTOL) if rtol is None else rtol
    if atol < 0 or rtol < 0:
        raise InputError("tolerances must be >= 0")
    say(f"loading the converted model {shown(converted)}")
    try:
        model = detector_lib.load_model(converted)
    except Exception as e:  # noqa: BLE001 - a corrupt checkpoint or config, reported as bad input
        from ssd_mobilenet.image_io import error_about
        raise InputError(error_about(converted, e, "cannot load it")) from None
    config = model.config
    if tflite is not None:
        return _verify_tflite(src, converted, config, tflite, threads or os.cpu_count() or 1, images, given_atol,
                              given_rtol, allow_ops, png_dir, json_path, measure, warmup, repeats, say, file_runtime,
                              warn)
    stages = frozen_graph.endpoint_candidates(model)
    stages[frozen_graph.DECODED_BOXES[0]] = frozen_graph.DECODED_BOXES[1]
    stage_nodes = [c.split(":")[0] for _, candidates in stages.values() for c in candidates]
    graph_def, graph_from = _tf1_graph(src, converted, config, stage_nodes, allow_ops, say)
    skipped = []
    batches = file_images(images, batch, warn, skipped) if images else generated_images(config, batch)

    runner = _exact_runner(graph_def, graph_from)
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
        detect, network, tf2_notes = tf2_side(model, mode, precision)
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

    tensors = summarise(resolved, per_stage) if network else []
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
        images=names_all, skipped=skipped, src=os.path.abspath(src), converted=converted, mode=mode, notes=notes,
        postprocessing=postprocessing,
        precision=precision, memory=memory, trace_dir=os.path.abspath(trace_dir) if trace_dir else None)
    if png_dir:
        _write_pngs(drawn, png_dir)
    if json_path:
        atomic_write.write_text(json_path, report.to_json())
    return report


def _tf1_graph(src: str, converted: str, config, stage_nodes, allow_ops, say):
    """(frozen inference GraphDef, where it came from) of the TF1 model at `src`, after checking
    that it is the converted model's network (`same_network`: else `InputError` in one line,
    before anything runs); `stage_nodes` are kept in the graph as `inference_graph_of` keeps them."""
    say(f"reading the TF1 model {src}")
    source = sources.open_source(src)
    tf1 = same_network.tf1_config(source, config)
    same_network.check_same_network(tf1, config, converted, src)
    return inference_graph_of(source, stage_nodes, allow_ops, config=tf1)


def _exact_runner(graph_def, graph_from: str):
    """The TF1 graph in a session with Grappler off (`FrozenGraphRunner(exact_arithmetic=True)`), or
    `InputError` naming `graph_from` when it does not import (e.g. an op this TensorFlow lacks)."""
    import tensorflow as tf
    try:
        return frozen_graph.FrozenGraphRunner(graph_def, exact_arithmetic=True)
    except (ValueError, tf.errors.OpError) as e:
        raise InputError(f"{graph_from}: cannot import the graph ({str(e).strip().splitlines()[0][:200]})") \
            from None


def _check_tflite_options(mode, batch, precision, memory_growth, memory_limit_mb, trace_dir, threads,
                          file_flag: str = "--tflite") -> None:
    """Refuses the options that do not apply to a `.tflite` (or `.onnx`) file, naming the first one given."""
    given = [(mode is not None, f"--mode {mode}", "the file is the TF2 side"),
             (batch is not None, f"--batch {batch}", "the file takes one image at a time"),
             (precision is not None, f"--precision {precision}", "the file's precision is its own (read from it)"),
             (memory_growth, "--memory-growth", "TensorFlow's allocator, which the file's runtime does not use"),
             (memory_limit_mb is not None, f"--memory-limit {memory_limit_mb}",
              "TensorFlow's allocator, which the file's runtime does not use"),
             (trace_dir is not None, f"--trace {trace_dir}", "TensorFlow's profiler does not see the file's runtime")]
    for present, flag, why in given:
        if present:
            raise InputError(f"{flag}: does not apply with {file_flag} ({why})")
    if threads is not None and threads < 1:
        raise InputError(f"--threads {threads}: must be at least 1")


def _verify_tflite(src, converted, config, path, threads, images, atol, rtol, allow_ops, png_dir, json_path,
                   measure, warmup, repeats, say, file_runtime: str = "litert", warn=None) -> VerifyReport:
    """`verify` with a `.tflite` file (`file_runtime` "litert") or an `.onnx` file ("onnx") as the
    TF2 side (`tflite_file`); arguments checked by `verify`."""
    import tensorflow as tf

    import ssd_mobilenet
    from migrate.export import drift
    from migrate.verify import tflite_file
    from migrate.verify.measuring import NO_MEMORY_SETTINGS, _measure_tflite_sides
    from ssd_mobilenet.formats.tflite import writer as tflite_lib

    kind = RUNTIMES[file_runtime]
    say(f"reading the {kind.file} {path}")
    if file_runtime in ("onnx", "openvino"):
        file, info = tflite_file.open_onnx_file(path, config, threads, file_runtime)
    else:
        file, info = tflite_file.open_file(path, config, threads)
    if info["criterion"] == tflite_file.AGREEMENT and (atol is not None or rtol is not None):
        raise InputError(f"--atol/--rtol: {path} is judged by agreement (class and IoU)")
    atol = DEFAULT_ATOL if atol is None else atol
    rtol = DEFAULT_RTOL if rtol is None else rtol
    if atol < 0 or rtol < 0:
        raise InputError("tolerances must be >= 0")
    graph_def, graph_from = _tf1_graph(src, converted, config, [], allow_ops, say)
    # The verify image set as in the other modes; each image then goes through on its own.
    skipped = []
    batches = file_images(images, DEFAULT_BATCH, warn, skipped) if images else generated_images(config, DEFAULT_BATCH)
    runner = _exact_runner(graph_def, graph_from)
    say(f"running {shown(info['file'])} on {kind.runtime}, {threads} threads")
    detections, drawn, agreement = tflite_file.compare_file(runner, file, info, batches, config, atol, rtol, say)
    runner.close()
    info = dict(info, threads=threads, agreement=agreement)
    notes = [f"TF1 graph: {graph_from}",
             f"TF2 side: {info['file']} ({info['kind']}) on {kind.runner}, {threads} threads; "
             f"{kind.article} {kind.file} has no stages to compare: detections only, "
             + ("each photo at its own size to both sides (the file resizes and scales it as the graph does)"
                if file.exact_for_any_size else
                f"on the images resized to {config.image_height}x{config.image_width} and rounded to uint8 for "
                "both sides (a fixed-size uint8 file)"),
             *([tflite_lib.DIFFERENCES[info["nms"]]] if info["nms"] in tflite_lib.DIFFERENCES else []),
             "post-processing on crafted inputs not checked: that check is of the converted model's, not the file's"]
    if agreement is not None:
        notes.append(f"agreement: {agreement['matched']} of {agreement['reference']} TF1 detections scoring >= "
                     f"{drift.REPORT_MIN_SCORE} found in the file (same class, IoU >= {drift.MATCH_IOU}), mean IoU "
                     f"{agreement['mean_iou']:.3f}, matched scores within {agreement['max_score_diff']:.3f}")
    first = _first_divergence([], detections, None, f"detections of the {kind.file}")
    if first is None and agreement is not None and agreement["reference"] == 0:
        # An agreement over no detection proves nothing (a model that scores everything below the
        # floor on these images): not a pass, and the line says what would make it one.
        first = {"name": f"detections of the {kind.file}", "tf1_tensor": "detection_*", "max_abs_err": None,
                 "max_rel_err": None,
                 "note": f"nothing compared: no TF1 detection scored >= {drift.REPORT_MIN_SCORE} on these "
                         "images (--images: photos the model detects on)"}
    tf1_result = tflite_result = None
    if measure:
        tf1_result, tflite_result = _measure_tflite_sides(graph_def, info["file"], threads, drawn[0][1][None],
                                                          warmup, repeats, say, file_runtime)
        notes.append(f"{kind.side} side: measured as bench measures it, in a fresh process with {kind.runtime} alone "
                     "(no TensorFlow): its peak RSS is the file's footprint on a device; the TF1 side's process "
                     "holds TensorFlow")
    report = VerifyReport(
        passed=first is None, first_divergence=first, tensors=[], detections=detections,
        tf1=_side_summary(tf1_result, "session (frozen graph, default ConfigProto)"),
        tf2=_side_summary(tflite_result, kind.mode),
        tolerances=tflite_file.tolerances(info, atol, rtol),
        versions={"tensorflow": tf.__version__, "migrate": migrate.__version__,
                  "ssd_mobilenet": ssd_mobilenet.__version__, "python": platform.python_version()},
        images=[d["image"] for d in detections], skipped=skipped, src=os.path.abspath(src), converted=converted,
        mode=kind.mode,
        notes=notes, postprocessing=None, precision="int8" if info["int8"] else "float32",
        memory=dict(NO_MEMORY_SETTINGS), trace_dir=None, tflite=info)
    if png_dir:
        _write_pngs(drawn, png_dir, titles=("TF1 graph", kind.file))
    if json_path:
        atomic_write.write_text(json_path, report.to_json())
    return report

