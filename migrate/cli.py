"""`python -m migrate ...`: a thin command line over the library. `main(argv) -> exit code`."""

from __future__ import annotations

import argparse
import os
import sys

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def _parser():
    p = argparse.ArgumentParser(prog="python -m migrate", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="convert a TF1 OD API SSD MobileNet v1 to a native TF2 model")
    c.add_argument("src", nargs="?", help="TF1 model directory, or a checkpoint / frozen graph / pipeline.config "
                   "in one (default: the built-in model, built under checkpoints/ on first use)")
    c.add_argument("--out", help="output directory (default: <SRC>_tf2)")
    c.add_argument("--force", action="store_true", help="replace an existing non-empty --out")
    c.add_argument("--trust-weights", action="store_true",
                   help="when pipeline.config and the weights disagree, take the weights' values")
    c.add_argument("--image-size", nargs=2, type=int, metavar=("H", "W"),
                   help="input size when neither a graph nor a pipeline.config says it")
    c.add_argument("--use-moving-averages", action="store_true",
                   help="take ExponentialMovingAverage shadows where the checkpoint has them")
    c.add_argument("--no-check", action="store_true",
                   help="write without checking the conversion against the source's TF1 graph")
    c.add_argument("--allow-ops", default="", metavar="OP,...",
                   help="let the check run these op types although they are not in the SSD inference op set")
    c.add_argument("--exact", action="store_true",
                   help="write the SavedModel op for op as the TF1 graph is written (default: the fast one, batch "
                        "norm folded and weights as constants)")
    c.add_argument("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32",
                   help="the SavedModel's compute precision: mixed_bfloat16 for CPUs with bfloat16 units, "
                        "mixed_float16 for GPUs (outputs stay float32; default float32)")
    c.add_argument("--quiet", action="store_true")
    _add_verbose(c)
    _add_predict_parser(sub)
    _add_verify_parser(sub)
    _add_bench_parser(sub)
    _add_evaluate_parser(sub)
    _add_train_parser(sub)
    _add_shapes_parser(sub)
    _add_export_parser(sub)
    return p


def _add_export_parser(sub):
    p = sub.add_parser("export", help="write a converted model as a TFLite or an ONNX file")
    p.add_argument("converted", help="a directory written by `convert`")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--tflite", metavar="OUT", help="the .tflite file to write")
    out.add_argument("--onnx", metavar="OUT", help="the .onnx file to write (opset 13; ONNX Runtime, OpenVINO, "
                     "TensorRT), the converted model's detections")
    p.add_argument("--input", choices=("uint8", "float32"), default="uint8",
                   help="uint8: a photo of any size, resized and scaled inside the file (default); float32: "
                        "already scaled to [-1, 1) at the model's size, as export_tflite_ssd_graph.py's graphs take "
                        "it (with --onnx: for TensorRT, which refuses uint8 inputs)")
    p.add_argument("--nms", choices=("per-class", "regular", "fast"),
                   help="per-class: the TF graph's post-processing in builtin ops, the converted model's detections "
                        "(default); regular / fast: the TFLite_Detection_PostProcess custom op with regular or fast "
                        "(class-agnostic) NMS, for runtimes that expect its four outputs (--tflite only)")
    p.add_argument("--max-detections", type=int, metavar="N",
                   help="detections per image (default: the model's max_total_detections)")
    p.add_argument("--int8", action="store_true",
                   help="post-training int8 quantization of the network (float32 outputs; --onnx: QDQ "
                        "convolutions), with a report of how far its detections drift from the float model's; "
                        "a quantization-aware model's file is int8 on its checkpoint's ranges without it")
    p.add_argument("--calibration", nargs="+", metavar="IMAGES",
                   help="JPEG/PNG files and folders to calibrate --int8 on (default: generated images)")
    p.add_argument("--force", action="store_true", help="replace an existing OUT")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    _add_verbose(p)


# export's options for the .tflite file only: refused with --onnx.
_TFLITE_EXPORT_OPTIONS = {"--nms": "nms"}


def _export(args) -> int:
    from migrate import export
    if args.onnx:
        return _export_onnx(args)
    try:
        result = export.export(args.converted, args.tflite, nms=args.nms or "per-class", input_type=args.input,
                               max_detections=args.max_detections, int8=args.int8, calibration=args.calibration,
                               force=args.force, progress=_progress(args.quiet),
                               warn=lambda msg: print(msg, file=sys.stderr))
    except export.ExportInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for note in result["notes"]:
        print(f"[migrate] {note}", file=sys.stderr)
    print(f"exported {result['nms']} NMS, {result['input']} input, {'int8' if result['int8'] else 'float32'}, "
          f"{result['max_detections']} detections, "
          f"{len(result['operators'])} operator types, {result['bytes']} bytes -> {result['out']}")
    return EXIT_OK


def _export_onnx(args) -> int:
    from migrate import export, export_onnx
    given = [flag for flag, name in _TFLITE_EXPORT_OPTIONS.items() if getattr(args, name) not in (None, False)]
    try:
        if given:
            raise export.ExportInputError(f"{given[0]}: applies to --tflite files only, not to --onnx")
        result = export_onnx.export_onnx(args.converted, args.onnx, input_type=args.input,
                                         max_detections=args.max_detections, int8=args.int8,
                                         calibration=args.calibration, force=args.force, verbose=args.verbose,
                                         progress=_progress(args.quiet), warn=lambda msg: print(msg, file=sys.stderr))
    except export.ExportInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for note in result["notes"]:
        print(f"[migrate] {note}", file=sys.stderr)
    print(f"exported ONNX opset {result['opset']}, {result['input']} input, "
          f"{'int8 QDQ' if result['int8'] else 'float32'}, {result['max_detections']} detections, "
          f"{len(result['operators'])} operator types, {result['bytes']} bytes -> {result['out']}")
    return EXIT_OK


def _add_shapes_parser(sub):
    p = sub.add_parser("shapes", help="write the training demo's inputs: generated shape TFRecords, a small TF1 "
                                      "model and its training config")
    p.add_argument("out", metavar="DIR", help="the folder to write (train.record, eval.record, label_map.pbtxt, "
                                              "images/, tf1_model/, train.config)")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty DIR")
    p.add_argument("--quiet", action="store_true")
    _add_verbose(p)


def _add_train_parser(sub):
    p = sub.add_parser("train", help="keep training a converted model in TF2 as the TF1 OD API trained it")
    p.add_argument("converted", help="a directory written by `convert` (its pipeline.config gives the training)")
    p.add_argument("--train", nargs="+", required=True, metavar="RECORDS",
                   help="training TFRecords (files or globs) in the OD API's tf.Example format")
    p.add_argument("--eval", nargs="+", metavar="RECORDS", help="evaluate the trained model on these records")
    p.add_argument("--labels", metavar="FILE",
                   help="label_map.pbtxt; another class count than the model's starts the class heads fresh")
    p.add_argument("--config", metavar="PIPELINE",
                   help="pipeline.config with the training settings (default: the source's, kept by convert)")
    p.add_argument("--steps", type=int, metavar="N", help="optimiser steps to reach (default: num_steps)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--batch", type=int, metavar="N", help="images per optimiser step (default: batch_size)")
    size.add_argument("--max-memory", type=float, metavar="MiB",
                      help="the largest batch whose measured training step peaks under MiB (allocator peak, "
                           "weights included)")
    p.add_argument("--accumulate", type=int, default=1, metavar="K",
                   help="split each step's batch into K micro-batches and accumulate their gradients")
    p.add_argument("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32",
                   help="compute precision of the training steps: mixed_float16 (GPUs; dynamic loss scaling) or "
                        "mixed_bfloat16 (CPUs with bfloat16 units, TPUs); variables, losses and the trained model "
                        "stay float32 (default float32)")
    p.add_argument("--recompute", action="store_true",
                   help="recompute the backbone's activations in the backward pass: less memory, more compute")
    p.add_argument("--freeze-batch-norm", action="store_true",
                   help="batch norm in inference mode, gamma and beta not trained")
    p.add_argument("--devices", metavar="N|all",
                   help="split each batch across N devices (tf.distribute.MirroredStrategy): N GPUs, or without a "
                        "GPU the CPU as N logical devices; 'all': every GPU. With TF_CONFIG set, "
                        "MultiWorkerMirroredStrategy over its workers instead (default: one device)")
    p.add_argument("--checkpoint-every", type=int, default=100, metavar="N")
    p.add_argument("--seed", type=int, default=0, help="shuffling and augmentation seed")
    p.add_argument("--out", help="run directory (default: CONVERTED_trained); an existing run resumes")
    p.add_argument("--force", action="store_true", help="replace --out and start over")
    p.add_argument("--quiet", action="store_true")
    _add_verbose(p)


def _add_evaluate_parser(sub):
    p = sub.add_parser("evaluate", help="COCO detection metrics of a converted or TF1 model on OD API TFRecords")
    p.add_argument("model", help="a directory written by `convert`, or a TF1 model (any form convert reads)")
    p.add_argument("--records", nargs="+", required=True, metavar="RECORDS",
                   help="TFRecord files or glob patterns in the OD API's tf.Example format")
    p.add_argument("--labels", metavar="FILE", help="label_map.pbtxt: the categories, and ids for class texts")
    p.add_argument("--json", metavar="FILE", help="also write the metrics as JSON")
    p.add_argument("--force", action="store_true", help="replace an existing --json file")
    p.add_argument("--allow-ops", default="", metavar="OP,...",
                   help="run a TF1 graph although it holds these op types outside the SSD inference op set")
    p.add_argument("--quiet", action="store_true")
    _add_verbose(p)


def _add_verbose(p):
    p.add_argument("--verbose", action="store_true",
                   help="also show TensorFlow's own log lines and warnings (hidden by default)")


def _add_predict_parser(sub):
    p = sub.add_parser("predict", help="run a converted model or a .tflite file over image files and folders "
                       "-> JSON lines")
    p.add_argument("converted", metavar="MODEL", help="a directory written by `convert` (run by TensorFlow), or a "
                   ".tflite or .onnx file written by `export` (run by LiteRT or ONNX Runtime, without TensorFlow)")
    p.add_argument("images", nargs="+", help="JPEG/PNG files and folders (searched recursively)")
    p.add_argument("--out", metavar="FILE", help="JSON lines file, one line per image (default: JSON lines on stdout)")
    p.add_argument("--png", metavar="DIR", help="also write each image with its boxes drawn, as PNG, into DIR")
    p.add_argument("--force", action="store_true", help="replace an existing --out / non-empty --png DIR")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--batch", type=int, metavar="N", help="images per model call (default 8)")
    size.add_argument("--max-memory", type=float, metavar="MiB",
                      help="the largest batch whose measured allocator peak stays under MiB")
    p.add_argument("--labels", metavar="FILE", help="label_map.pbtxt or a names file (line N = class id N)")
    p.add_argument("--min-score", type=float, default=0.0, help="leave out detections scoring below (default 0)")
    p.add_argument("--png-min-score", type=float, default=0.5, help="draw boxes scoring at least (default 0.5)")
    p.add_argument("--memory-growth", action="store_true", help="allocate GPU memory as needed")
    p.add_argument("--memory-limit", type=int, metavar="MiB",
                   help="cap each GPU's memory (no GPU: the CPU allocator's) at MiB")
    p.add_argument("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32",
                   help="the network's compute precision (outputs stay float32; default float32)")
    p.add_argument("--jit", action="store_true", help="compile the network with XLA (pays on GPUs)")
    p.add_argument("--weight-cache", action="store_true",
                   help="CPU: oneDNN convolutions cache their reordered filters (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1; "
                        "for inference-only processes)")
    p.add_argument("--trace", metavar="DIR", help="write a TensorBoard profiler trace of a few batches")
    p.add_argument("--threads", type=int, metavar="N", help="a .tflite or .onnx MODEL: LiteRT's interpreter or "
                   "ONNX Runtime's threads (default: the CPU count)")
    engine = p.add_argument_group("distributed engine")
    engine.add_argument("--engine", choices=("beam",), help="run as an Apache Beam pipeline (RunInference): on Beam's "
                        "local runner with --workers processes, or on the runner --pipeline-options names; IMAGES "
                        "may be file patterns of Beam's file systems (gs://bucket/*.jpg); needs --out, which is "
                        "written in shards (OUT-00000-of-0000N.jsonl)")
    engine.add_argument("--workers", type=int, metavar="N", help="--engine beam: the local runner's worker "
                        "processes, each with the model loaded once (default 1)")
    engine.add_argument("--pipeline-options", metavar="'--opt=v ...'",
                        help="--engine beam: Beam pipeline options, e.g. '--runner=FlinkRunner "
                             "--flink_master=host:8081' (the model and images must be at paths every worker reads)")
    p.add_argument("--quiet", action="store_true", help="no progress messages (warnings still shown)")
    _add_verbose(p)


# predict's options an engine takes no part in: refused with --engine.
_NOT_ENGINE_OPTIONS = {"--png": "png", "--max-memory": "max_memory", "--memory-growth": "memory_growth",
                       "--memory-limit": "memory_limit", "--jit": "jit", "--weight-cache": "weight_cache",
                       "--trace": "trace"}


# predict's options that set up TensorFlow, and how each is given: refused for a .tflite or .onnx MODEL.
_TENSORFLOW_PREDICT_OPTIONS = {"--batch": "batch", "--max-memory": "max_memory", "--memory-growth": "memory_growth",
                               "--memory-limit": "memory_limit", "--jit": "jit", "--weight-cache": "weight_cache",
                               "--trace": "trace"}


def _add_verify_parser(sub):
    p = sub.add_parser("verify", help="check a conversion against its TF1 graph, tensor by tensor; measure both")
    p.add_argument("src", nargs="?", help="the TF1 model (as for convert); a converted directory alone names its "
                   "source in conversion_report.json; default: the built-in model")
    p.add_argument("converted", nargs="?", help="the converted directory (default: where convert writes for SRC)")
    p.add_argument("--images", nargs="+", metavar="PATH", help="JPEG/PNG files or folders (default: a generated set "
                   "of several sizes)")
    p.add_argument("--batch", type=int, metavar="N", help="the larger batch size (default 4)")
    p.add_argument("--mode", choices=("eager", "function", "xla", "saved_model"),
                   help="the TF2 side: Keras model eagerly, the Detector tf.function (default), with XLA, or "
                        "saved_model: CONVERTED/saved_model through plain tf.saved_model.load (detections only)")
    p.add_argument("--json", metavar="FILE", help="write the full report as JSON")
    p.add_argument("--png", metavar="DIR", help="draw TF1 (red-orange) and TF2 (blue) boxes on each image")
    p.add_argument("--force", action="store_true", help="replace an existing --json / non-empty --png DIR")
    p.add_argument("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"),
                   help="the TF2 side's compute precision; mixed: looser per-precision tolerance and detections "
                   "matched by class and IoU (default float32: exact criterion; saved_model: as it was written)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default 1e-5; mixed precision: its own)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default 1e-5; mixed precision: its own)")
    p.add_argument("--allow-ops", default="", metavar="OP,...",
                   help="run these op types although they are not in the SSD inference op set")
    p.add_argument("--no-measure", action="store_true", help="skip the memory and latency measurement")
    p.add_argument("--repeats", type=int, default=10, help="timed runs per batch size (default 10)")
    p.add_argument("--memory-growth", action="store_true", help="allocate GPU memory as needed (both measured sides)")
    p.add_argument("--memory-limit", type=int, metavar="MiB",
                   help="cap the device memory of both measured sides at MiB (no GPU: the CPU allocator's)")
    p.add_argument("--trace", metavar="DIR", help="write a TensorBoard profiler trace of two TF2 runs to DIR")
    p.add_argument("--tflite", metavar="FILE",
                   help="the TF2 side is this .tflite file of `migrate export` (run by LiteRT, one "
                        "image at a time): detections compared with the TF1 graph's, exactly for a float32 per-class "
                        "file, by class and IoU for int8 and custom-op files")
    p.add_argument("--onnx", metavar="FILE",
                   help="the TF2 side is this .onnx file of `migrate export --onnx` (run by ONNX Runtime, one image "
                        "at a time): detections compared with the TF1 graph's exactly")
    p.add_argument("--threads", type=int, metavar="N",
                   help="the TFLite interpreter's or ONNX Runtime's threads (with --tflite or --onnx; default: the "
                        "CPU count)")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    _add_verbose(p)


def _verify(args) -> int:
    from migrate import verify
    from migrate.common import images
    from migrate.tf1 import frozen_graph
    try:
        report = verify.verify(args.src, args.converted, images=args.images, batch=args.batch, mode=args.mode,
                               atol=args.atol, rtol=args.rtol,
                               allow_ops=[op.strip() for op in args.allow_ops.split(",") if op.strip()],
                               png_dir=args.png, json_path=args.json, force=args.force,
                               measure=not args.no_measure, repeats=args.repeats, precision=args.precision,
                               memory_growth=args.memory_growth, memory_limit_mb=args.memory_limit,
                               trace_dir=args.trace, progress=_progress(args.quiet), tflite=args.tflite,
                               threads=args.threads, onnx=args.onnx)
    except (verify.VerifyInputError, images.ImageError, frozen_graph.GraphFreezeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(verify.format_report(report))
    # The precision that ran (a SavedModel's own when --precision was not given), for `_warn_precision`.
    args.precision = report.precision
    return EXIT_OK if report.passed else EXIT_FAIL


def _add_bench_parser(sub):
    from migrate.bench import DEFAULT_SIDES, ONNX_SIDES, SIDES, TFLITE_SIDES
    p = sub.add_parser("bench", help="latency and memory of the TF1 graph vs the converted model, side by side")
    p.add_argument("src", help="the TF1 model directory (with frozen_inference_graph.pb)")
    p.add_argument("converted", help="the converted directory")
    p.add_argument("--batch", default="1,8", help="batch sizes, comma separated (default 1,8)")
    p.add_argument("--size", default="480x640", help="image sizes HxW, comma separated (default 480x640)")
    p.add_argument("--sides", default=",".join(DEFAULT_SIDES),
                   help=f"what to measure, comma separated, of {','.join(SIDES)} (default all but "
                        f"{','.join(TFLITE_SIDES + ONNX_SIDES)}: those run on LiteRT, ONNX Runtime or OpenVINO at "
                        "batch 1, at any --size)")
    p.add_argument("--repeats", type=int, default=10,
                   help="interleaved timed rounds at the largest batch; smaller batches get up to 4x (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs per side per batch (default 2)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-side fresh-process memory runs")
    p.add_argument("--onednn", choices=("0", "1", "both"),
                   help="TF_ENABLE_ONEDNN_OPTS for every side (both: latency under each; default: TensorFlow's)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="intra- and inter-op threads for every TensorFlow side (TF_NUM_INTRAOP/INTEROP_THREADS; "
                        "default: TensorFlow's) and the TFLite interpreter's, ONNX Runtime's and OpenVINO's threads "
                        "(default: the logical cores)")
    p.add_argument("--weight-cache", action="store_true",
                   help="CPU: oneDNN convolutions cache their reordered filters (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 "
                        "for every side; for inference-only processes)")
    p.add_argument("--memory-growth", action="store_true", help="allocate GPU memory as needed (every side)")
    p.add_argument("--memory-limit", type=int, metavar="MB",
                   help="cap the device memory of every side at MB (the BFC allocator's limit on a CPU)")
    p.add_argument("--trace", metavar="DIR", help="also write a TensorBoard profiler trace of each side to DIR/SIDE")
    p.add_argument("--json", metavar="FILE", help="write the full report as JSON")
    p.add_argument("--markdown", metavar="FILE",
                   help="write the table and the command as Markdown (docs/benchmarks.md)")
    p.add_argument("--plot", metavar="FILE", help="write latency and memory against the batch size as a PNG "
                   "(needs matplotlib: the optional `plot` extra)")
    p.add_argument("--force", action="store_true", help="replace an existing --json / --markdown / --plot file")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    _add_verbose(p)


def _bench(args) -> int:
    from migrate import bench
    try:
        for path in (args.json, args.markdown, args.plot):
            if path and os.path.exists(path) and not args.force:
                raise bench.BenchInputError(f"{path}: exists (use --force to replace it)")
        if args.plot:  # refused before the run, not after minutes of measuring
            bench.check_plot(args.plot, len(bench.parse_batches(args.batch)))
        env = {}
        if args.threads:
            env = {"TF_NUM_INTRAOP_THREADS": str(args.threads), "TF_NUM_INTEROP_THREADS": str(args.threads)}
        report = bench.bench(args.src, args.converted, sizes=bench.parse_sizes(args.size),
                             batches=bench.parse_batches(args.batch),
                             sides=[s.strip() for s in args.sides.split(",") if s.strip()], repeats=args.repeats,
                             warmup=args.warmup, memory=not args.no_memory, onednn=args.onednn, env=env,
                             weight_cache=args.weight_cache,
                             memory_growth=args.memory_growth, memory_limit_mb=args.memory_limit,
                             trace_dir=args.trace, progress=_progress(args.quiet), tflite_threads=args.threads)
    except bench.BenchInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as e:  # a side that failed to run (measure.MeasureError, an OOM under a limit)
        lines = str(e).strip().splitlines()
        print(f"error: {lines[0] if lines else type(e).__name__}", file=sys.stderr)
        return EXIT_FAIL
    print(bench.format_table(report))
    if report.get("tflite"):
        print(bench.tflite_settings(report))
    if args.json:
        bench.write_json(report, args.json, force=True)
    if args.markdown:
        command = (f"python -m migrate bench {args.src} {args.converted} --batch {args.batch} --size {args.size} "
                   f"--repeats {args.repeats}" + (f" --onednn {args.onednn}" if args.onednn else "")
                   + (f" --threads {args.threads}" if args.threads else "")
                   + (" --weight-cache" if args.weight_cache else "")
                   + (f" --sides {args.sides}" if args.sides != ",".join(bench.DEFAULT_SIDES) else "")
                   + (" --no-memory" if args.no_memory else "") + f" --markdown {args.markdown}")
        bench.write_markdown(report, args.markdown, command, force=True)
    if args.plot:
        bench.write_plot(report, args.plot, force=True)
    return EXIT_OK


def _print_wrapped(text: str) -> None:
    """`text` on stderr, wrapped to the terminal's width (100 columns when it has none), later
    lines indented: notes that name many fields stay readable."""
    import shutil
    import textwrap
    width = shutil.get_terminal_size((100, 24)).columns
    print(textwrap.fill(text, width=max(width, 40), subsequent_indent="    ", break_on_hyphens=False,
                        break_long_words=False), file=sys.stderr, flush=True)


def _progress(quiet, wrap=False):
    if quiet:
        return lambda msg: None
    if wrap:
        return lambda msg: _print_wrapped(f"[migrate] {msg}")
    return lambda msg: print(f"[migrate] {msg}", file=sys.stderr, flush=True)


def _missing_path(args):
    """The message for the first path named on the command line that does not exist, else None.
    Checked before TensorFlow loads (seconds), with the rules and words the commands use later:
    a checkpoint prefix exists as `PREFIX.index`; paths that are only derived (CONVERTED from
    SRC, the built-in model) are left to the command."""
    def missing(path, prefix=False):
        return path is not None and not os.path.exists(path) and not (prefix and os.path.exists(path + ".index"))

    if args.command in ("convert", "verify") and missing(args.src, prefix=True):
        return f"{args.src}: no such file or directory"
    if args.command == "verify" and missing(args.converted):
        return (f"{os.path.abspath(args.converted)}: no converted model "
                f"(run `python -m migrate convert {args.src}` first)")
    if args.command == "verify" and missing(args.tflite):
        return f"{args.tflite}: no such file (--tflite)"
    if args.command == "verify" and missing(args.onnx):
        return f"{args.onnx}: no such file (--onnx)"
    if args.command == "predict" and missing(args.converted):
        return (f"{args.converted}: no such directory, .tflite or .onnx file (expected the output of `migrate "
                "convert` or `migrate export --tflite / --onnx`)")
    if args.command in ("train", "export") and missing(args.converted):
        return f"{args.converted}: no such directory (expected the output of `migrate convert`)"
    if args.command == "evaluate" and missing(args.model, prefix=True):
        return f"{args.model}: no such file or directory"
    if args.command == "bench" and missing(args.src):
        return f"{args.src}: no frozen_inference_graph.pb (the TF1 side needs the frozen graph)"
    if args.command == "bench" and missing(args.converted):
        return f"{args.converted}: not a converted model directory (no model_config.json)"
    for path in [*(getattr(args, "images", None) or ()), *(getattr(args, "calibration", None) or ())]:
        if getattr(args, "engine", None) and ("://" in path or any(c in path for c in "*?[")):
            continue  # a pattern or URL for the engine's file systems (`migrate.engines.beam.sources`)
        if missing(path):
            return f"{path}: no such file or folder"
    return None


def _values_attached(argv) -> list:
    """`--pipeline-options '--runner=X ...'` as `--pipeline-options=--runner=X ...`: argparse
    would take a value that starts with `--` for an option of its own."""
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv[:-1]):
        if arg == "--pipeline-options":
            argv[i:i + 2] = [f"{arg}={argv[i + 1]}"]
            break
    return argv


def main(argv=None) -> int:
    args = _parser().parse_args(_values_attached(argv))
    problem = _missing_path(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from migrate.common import console
    if args.command == "predict" and (args.engine or args.workers is not None or args.pipeline_options):
        return _predict_engine(args)  # the driver imports no TensorFlow; the workers do
    if args.command == "predict" and os.path.isfile(args.converted):
        return _predict_file(args)  # LiteRT or ONNX Runtime; never imports TensorFlow
    with console.tensorflow_output(verbose=args.verbose):
        code = _run(args)
        if code != EXIT_BAD_INPUT:
            _warn_precision(getattr(args, "precision", None))
        return code


def _warn_precision(precision) -> None:
    """One line when the command ran a reduced precision this machine has no units for (after
    the command, so that bad input still gets its single line)."""
    from ssd_mobilenet import hardware
    why = hardware.missing_units(precision) if precision else None
    if why:
        print(f"warning: --precision {precision}: {why}; TensorFlow converts or emulates it here, slower than "
              "float32: it pays off on machines that have them", file=sys.stderr)


def _run(args) -> int:
    from migrate import convert
    from migrate.tf1 import assign, config_inference, self_check, sources
    from ssd_mobilenet.config import ConfigError
    bad_input = (sources.SourceError, ConfigError, config_inference.MismatchError, assign.MappingError,
                 convert.OutputExistsError, convert.CheckRefusedError, convert.ExportOptionError)
    try:
        if args.command == "convert":
            if args.src is None:
                from migrate import default_model
                args.src = default_model.ensure_tf1_model(_progress(args.quiet, wrap=True))
                args.out = args.out or default_model.converted_dir()
            try:
                report = convert.convert(args.src, args.out, force=args.force, trust_weights=args.trust_weights,
                                         image_size=args.image_size, use_moving_averages=args.use_moving_averages,
                                         check=not args.no_check, progress=_progress(args.quiet, wrap=True),
                                         saved_model="exact" if args.exact else "fast", precision=args.precision,
                                         allow_ops=[op.strip() for op in args.allow_ops.split(",") if op.strip()])
            except self_check.CheckFailed as e:
                print(f"error: {e}", file=sys.stderr)
                return EXIT_FAIL
            for note in report["notes"]:
                if args.verbose or not note.startswith(config_inference.EVERY_GRAPH_FIELD):
                    _print_wrapped(f"[migrate] {note}")
            print(f"converted {report['num_weights']} weights ({len(report['ignored'])} ignored) -> {report['out']}")
            return EXIT_OK
        if args.command == "predict":
            return _predict(args)
        if args.command == "verify":
            return _verify(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "evaluate":
            return _evaluate(args)
        if args.command == "train":
            return _train(args)
        if args.command == "shapes":
            return _shapes(args)
        if args.command == "export":
            return _export(args)
    except bad_input as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_FAIL


def _shapes(args) -> int:
    from migrate import shapes
    try:
        out = shapes.write(args.out, force=args.force, progress=_progress(args.quiet))
    except shapes.OutputExistsError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"wrote the shapes demo -> {out}")
    return EXIT_OK


def _predict(args) -> int:
    from migrate import predict
    from migrate.common import images
    from ssd_mobilenet import label_map
    if args.batch is not None and not 1 <= args.batch <= predict.MAX_BATCH:
        print(f"error: --batch {args.batch}: must be 1..{predict.MAX_BATCH}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.threads is not None:
        print(f"error: --threads: LiteRT's or ONNX Runtime's threads, for a .tflite or .onnx MODEL; {args.converted} "
              "is a converted directory (TensorFlow takes its threads from the environment)", file=sys.stderr)
        return EXIT_BAD_INPUT
    from ssd_mobilenet import runtime
    try:
        if (args.memory_growth or args.memory_limit is not None or args.max_memory is not None
                or args.weight_cache):
            # --max-memory measures allocator peaks, which a CPU keeps only with the BFC
            # allocator that `configure` switches on.
            runtime.configure(memory_growth=args.memory_growth, memory_limit_mb=args.memory_limit,
                              onednn_weight_cache=args.weight_cache)
        summary = predict.run(args.converted, args.images, out=args.out, png_dir=args.png, force=args.force,
                              batch_size=args.batch, max_memory_mb=args.max_memory, labels=args.labels,
                              min_score=args.min_score, png_min_score=args.png_min_score, jit_compile=args.jit,
                              precision=args.precision, trace_dir=args.trace, progress=_progress(args.quiet))
    except (images.ImageError, label_map.LabelMapError, predict.ModelDirError, predict.OutputExistsError,
            predict.BudgetError, runtime.RuntimeConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _predict_summary(args, summary)


def _predict_file(args) -> int:
    """`predict` on a model file (`.tflite`: LiteRT; `.onnx`: ONNX Runtime), in this process,
    without TensorFlow; `migrate.runtimes.open_runtime` chooses the runtime."""
    from migrate import predict
    from migrate.common import console, images
    from migrate.runtimes import describe_file
    from ssd_mobilenet import label_map
    kind, runtime = describe_file(args.converted)
    given = [flag for flag, name in _TENSORFLOW_PREDICT_OPTIONS.items() if getattr(args, name) not in (None, False)]
    given += ["--precision"] if args.precision != "float32" else []
    if given:
        print(f"error: {given[0]}: sets up TensorFlow, which does not run {args.converted} ({kind} runs on "
              f"{runtime}, one image per call; --threads sets its threads)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.threads is not None and args.threads < 1:
        print(f"error: --threads {args.threads}: must be >= 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    with console.litert_output(verbose=args.verbose):
        try:
            summary = predict.run(args.converted, args.images, out=args.out, png_dir=args.png, force=args.force,
                                  labels=args.labels, min_score=args.min_score, png_min_score=args.png_min_score,
                                  threads=args.threads, progress=_progress(args.quiet))
        except (images.ImageError, label_map.LabelMapError, predict.ModelDirError, predict.OutputExistsError) as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    return _predict_summary(args, summary)


def _predict_engine(args) -> int:
    """`predict --engine beam`: the pipeline of `migrate.engines.beam`, its workers' stderr
    reduced to the project's lines (`console.only_project_lines`) unless --verbose."""
    from migrate.common import console, images
    from migrate.runtimes.base import MAX_BATCH
    from ssd_mobilenet import label_map
    problem = None
    if not args.engine:
        problem = f"{'--workers' if args.workers is not None else '--pipeline-options'}: needs --engine beam"
    elif args.out is None:
        problem = "--engine beam: needs --out FILE (the pipeline writes its lines in shards named after it)"
    elif args.workers is not None and args.workers < 1:
        problem = f"--workers {args.workers}: must be >= 1"
    elif args.batch is not None and not 1 <= args.batch <= MAX_BATCH:
        problem = f"--batch {args.batch}: must be 1..{MAX_BATCH}"
    elif args.threads is not None and not os.path.isfile(args.converted):
        problem = (f"--threads: LiteRT's or ONNX Runtime's threads, for a .tflite or .onnx MODEL; {args.converted} is "
                   "a converted directory (the local runner gives each worker's TensorFlow its share of the cores)")
    elif args.precision != "float32" and os.path.isfile(args.converted):
        from migrate.runtimes import describe_file
        problem = (f"--precision: sets up TensorFlow, which does not run {args.converted} "
                   f"({describe_file(args.converted)[0]})")
    else:
        given = [flag for flag, name in _NOT_ENGINE_OPTIONS.items() if getattr(args, name) not in (None, False)]
        if given:
            problem = f"{given[0]}: not available with --engine beam (run predict without --engine for it)"
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        with console.only_project_lines(args.verbose):  # its import logs on the root logger
            from migrate.engines import beam
    except ImportError as e:
        print(f"error: --engine beam needs Apache Beam ({e}): pip install 'ssd-mobilenet-migrate[beam]'",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    quiet_env = {} if args.verbose else {"TF_CPP_MIN_LOG_LEVEL": "3", console.QUIET_ENV: "1"}
    restore_logs = beam.quiet_driver_logs(args.verbose)
    try:
        # The workers inherit the environment (quiet TensorFlow) and file descriptor 2.
        with console.environment(quiet_env), console.only_project_lines(args.verbose):
            summary = beam.run(args.converted, args.images, out=args.out, workers=args.workers,
                               pipeline_options_text=args.pipeline_options, force=args.force, batch_size=args.batch,
                               labels=args.labels, min_score=args.min_score, threads=args.threads,
                               precision=args.precision, quiet=args.quiet, progress=_progress(args.quiet))
    except (images.ImageError, label_map.LabelMapError, beam.ModelDirError, beam.OutputExistsError,
            beam.EngineOptionError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except beam.PipelineError as e:
        print(f"error: {e}" + ("" if args.verbose else " (--verbose shows the runner's log)"), file=sys.stderr)
        return EXIT_FAIL
    finally:
        restore_logs()
    args.out = f"{args.out} ({len(summary['shards'])} shard{'s' if len(summary['shards']) != 1 else ''})"
    return _predict_summary(args, summary)


def _predict_summary(args, summary) -> int:
    ok = summary["images"] - summary["failed"]
    _progress(args.quiet)(f"{summary['images']} images ({summary['failed']} unreadable), {summary['detections']} "
                          f"detections in {summary['seconds']:.1f} s, {summary['images_per_s']:.1f} images/s, "
                          f"{summary['runtime']}, batch {summary['batch_size']}"
                          + (f" -> {args.out}" if args.out else ""))
    return EXIT_OK if ok else EXIT_FAIL


def _evaluate(args) -> int:
    from migrate import evaluate
    from ssd_mobilenet import label_map
    from ssd_mobilenet.training import data
    try:
        result = evaluate.evaluate(args.model, args.records, labels=args.labels, json_path=args.json,
                                   force=args.force, progress=_progress(args.quiet),
                                   warn=lambda msg: print(msg, file=sys.stderr),
                                   allow_ops=[op.strip() for op in args.allow_ops.split(",") if op.strip()])
    except (evaluate.OutputExistsError, evaluate.ModelError, data.DataError, label_map.LabelMapError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(evaluate.format_result(result))
    _progress(args.quiet)(f"{result['images']} images ({result['skipped']} records skipped) in "
                          f"{result['seconds']:.1f} s" + (f" -> {args.json}" if args.json else ""))
    return EXIT_OK


def _train(args) -> int:
    from migrate import evaluate, train
    from ssd_mobilenet import label_map
    from ssd_mobilenet.config import ConfigError
    from ssd_mobilenet.training import data
    for flag, value in (("--steps", args.steps), ("--batch", args.batch),
                        ("--checkpoint-every", args.checkpoint_every)):
        if value is not None and value < 1:
            print(f"error: {flag} {value}: must be >= 1", file=sys.stderr)
            return EXIT_BAD_INPUT
    devices = args.devices
    if devices is not None and devices != "all":
        devices = int(devices) if devices.isdigit() else 0
        if devices < 1:
            print(f"error: --devices {args.devices}: must be a number >= 1 or 'all'", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.batch is not None and isinstance(devices, int) and args.batch % (devices * args.accumulate):
        print(f"error: --batch {args.batch} is not a multiple of --devices {devices} x --accumulate {args.accumulate}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.batch is not None and args.batch % args.accumulate:
        print(f"error: --batch {args.batch} is not a multiple of --accumulate {args.accumulate}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.max_memory is not None and not args.max_memory > 0:
        print(f"error: --max-memory {args.max_memory:g}: must be a positive number of MiB", file=sys.stderr)
        return EXIT_BAD_INPUT
    from ssd_mobilenet import runtime
    from ssd_mobilenet.training import memory_budget
    try:
        if args.max_memory is not None and not runtime.devices_initialized():
            # Allocator peaks on a CPU need the BFC allocator, chosen before TensorFlow starts
            # (a process that started it already is refused below when it has no statistics).
            runtime.configure()
        result = train.run(args.converted, args.train, eval_records=args.eval, labels=args.labels, out=args.out,
                           config=args.config, steps=args.steps, batch_size=args.batch, accumulate=args.accumulate,
                           freeze_batch_norm=True if args.freeze_batch_norm else None,
                           checkpoint_every=args.checkpoint_every, force=args.force, seed=args.seed,
                           devices=devices, progress=_progress(args.quiet), precision=args.precision,
                           recompute=args.recompute, max_memory_mb=args.max_memory)
    except (train.TrainInputError, train.OutputExistsError, data.DataError, label_map.LabelMapError,
            ConfigError, memory_budget.BudgetError, runtime.RuntimeConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except train.WorkerLostError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAIL
    if "metrics" in result:
        print(evaluate.format_result(result))
    print(f"trained to step {result['step']} -> {result['model_dir']}")
    return EXIT_OK


def entry_point():
    sys.exit(main())
