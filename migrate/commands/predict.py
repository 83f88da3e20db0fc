"""`migrate predict`: a model over image files and folders -> JSON lines
(`migrate.predict.prediction`), on the runtime `migrate.predict.runtimes` gives the model, or as a
Beam pipeline (`--engine beam`, `migrate.predict.beam`).

The command knows no runtime by name: `runtimes.runtime_kind(model)` says which options the
model's runtime takes (the others are refused here, each with the line that says what it is
for) and which console context keeps its lines quiet. A model file's runtime imports no
TensorFlow, and neither does this module.
"""

from __future__ import annotations

import sys

from migrate.commands.common import (EXIT_FAIL, EXIT_OK, add_labels, add_verbose, bad_input, labels_problem, missing,
                                     progress, tensorflow_missing, warn_precision)
from migrate.common.console import shown


def add_parser(sub) -> None:
    # The runtime options' dests are the runtimes' keywords (`_RUNTIME_OPTIONS`).
    p = sub.add_parser("predict", help="run a converted model, a .tflite or an .onnx file over image files and folders "
                       "-> JSON lines")
    p.add_argument("converted", metavar="MODEL", help="a directory written by `convert` (run by TensorFlow), or a "
                   ".tflite or .onnx file written by `export` (run by LiteRT or ONNX Runtime, without TensorFlow)")
    p.add_argument("images", nargs="+", help="JPEG/PNG files and folders (searched recursively)")
    p.add_argument("--out", metavar="FILE", help="JSON lines file, one line per image; `-`: JSON lines on stdout "
                   "(default: JSON lines on stdout when it is a file or a pipe, one summary line per image when it "
                   "is a terminal)")
    p.add_argument("--png", metavar="DIR", help="also write each image with its boxes drawn, as PNG, into DIR")
    p.add_argument("--force", action="store_true", help="replace an existing --out / non-empty --png DIR")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--batch", dest="batch_size", type=int, metavar="N", help="images per model call (default 8)")
    size.add_argument("--max-memory", dest="max_memory_mb", type=float, metavar="MiB",
                      help="the largest batch whose measured allocator peak stays under MiB")
    add_labels(p, "a label per detection (default: the label map MODEL carries)")
    p.add_argument("--min-score", type=float, default=0.0, help="leave out detections scoring below (default 0)")
    p.add_argument("--png-min-score", type=float, default=0.5, help="draw boxes scoring at least (default 0.5)")
    p.add_argument("--memory-growth", action="store_true", help="allocate GPU memory as needed")
    p.add_argument("--memory-limit", dest="memory_limit_mb", type=int, metavar="MiB",
                   help="cap each GPU's memory (no GPU: the CPU allocator's) at MiB")
    p.add_argument("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32",
                   help="the network's compute precision (outputs stay float32; default float32)")
    p.add_argument("--jit", dest="jit_compile", action="store_true",
                   help="compile the network with XLA (pays on GPUs)")
    p.add_argument("--weight-cache", action="store_true",
                   help="CPU: oneDNN convolutions cache their reordered filters (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1; "
                        "for inference-only processes)")
    p.add_argument("--trace", dest="trace_dir", metavar="DIR",
                   help="write a TensorBoard profiler trace of a few batches")
    p.add_argument("--threads", type=int, metavar="N", help="a .tflite or .onnx MODEL: LiteRT's interpreter or "
                   "ONNX Runtime's (OpenVINO's) threads (default: the CPU count)")
    p.add_argument("--runtime", choices=("onnxruntime", "openvino"), help="an .onnx MODEL: run it on ONNX Runtime "
                   "(the default) or OpenVINO (the `openvino` extra; faster for some int8 files, docs/guides/deploy.md)")
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
    add_verbose(p)


# `--out -`: the JSON lines on stdout, also when it is a terminal.
STDOUT = "-"
# predict's options for a runtime, each with its keyword there (`migrate.predict.runtimes.Kind.options`), in
# the order a refusal names the first one given.
_RUNTIME_OPTIONS = {"--batch": "batch_size", "--max-memory": "max_memory_mb", "--memory-growth": "memory_growth",
                    "--memory-limit": "memory_limit_mb", "--jit": "jit_compile", "--weight-cache": "weight_cache",
                    "--trace": "trace_dir", "--precision": "precision", "--threads": "threads",
                    "--runtime": "runtime"}
# Those the engine hands on to its workers' runtimes (--batch sizes the engine's own batches).
_ENGINE_RUNTIME_OPTIONS = ("--threads", "--precision", "--runtime")
# predict's options an engine takes no part in: refused with --engine.
_NOT_ENGINE_OPTIONS = {"--png": "png", "--max-memory": "max_memory_mb", "--memory-growth": "memory_growth",
                       "--memory-limit": "memory_limit_mb", "--jit": "jit_compile", "--weight-cache": "weight_cache",
                       "--trace": "trace_dir"}


def missing_path(args):
    if missing(args.converted):
        return f"{args.converted}: no such directory, .tflite or .onnx file (convert's or export's output)"
    for path in args.images:
        if args.engine and ("://" in path or any(c in path for c in "*?[")):
            continue  # a pattern or URL for the engine's file systems (`migrate.predict.beam.sources`)
        if missing(path):
            return f"{path}: no such file or folder"
    return labels_problem(args.labels)


def run(args) -> int:
    from migrate.predict.runtimes import KINDS, runtime_kind
    if runtime_kind(args.converted) is KINDS["tensorflow"]:  # also for an engine's workers
        problem = tensorflow_missing(KINDS["tensorflow"].model)
        if problem:
            return bad_input(problem)
    if args.engine or args.workers is not None or args.pipeline_options:
        return _run_engine(args)  # the driver imports no TensorFlow; the workers do
    from migrate.predict import prediction
    from migrate.predict.runtimes import runtime_kind
    kind = runtime_kind(args.converted)
    problem = _refused(args, kind, _RUNTIME_OPTIONS) or _out_of_range(args)
    if problem:
        return bad_input(problem)
    # A person at a terminal gets a line per image, not JSON; `--out -` asks for the JSON there.
    terminal = args.out is None and sys.stdout.isatty()
    out = None if args.out == STDOUT else args.out
    with kind.console(verbose=args.verbose):
        summary = prediction.run(args.converted, args.images, out=out, png_dir=args.png, force=args.force,
                                 labels=args.labels, min_score=args.min_score, png_min_score=args.png_min_score,
                                 terminal=terminal, progress=progress(args.quiet, wrap=True),
                                 **{name: getattr(args, name) for name in kind.options})
        code = _summary(args, summary, shown(out) if out else None)
        warn_precision(args.precision)
        return code


def _given(args, name) -> bool:
    """Whether the command line set the runtime option `name` (--precision: to other than its default)."""
    value = getattr(args, name)
    return value not in (None, False) and not (name == "precision" and value == "float32")


def _refused(args, kind, flags, engine=False):
    """The message for the first of `flags` given that the runtime of `kind` does not take, else
    None: what the option is for, and how that runtime does without it."""
    for flag in flags:
        name = _RUNTIME_OPTIONS[flag]
        if name in kind.options or not _given(args, name):
            continue
        # The line names the option and the runtime that runs MODEL, not MODEL (the command line has it).
        if flag == "--threads":  # the model files' runtimes' option (LiteRT's, ONNX Runtime's threads)
            how = ("the local runner shares the cores among its workers" if engine
                   else f"{kind.name} takes its threads from the environment")
            return f"--threads: for .tflite and .onnx files; {how}"
        if flag == "--runtime":
            return f"--runtime: for .onnx files; {kind.model} runs on {kind.name}"
        return f"{flag}: sets up TensorFlow; {kind.model} runs on {kind.name}" + ("" if engine else ", one image per call")
    return None


def _out_of_range(args):
    from migrate.predict.runtimes.base import MAX_BATCH
    if args.batch_size is not None and not 1 <= args.batch_size <= MAX_BATCH:
        return f"--batch {args.batch_size}: must be 1..{MAX_BATCH}"
    if args.threads is not None and args.threads < 1:
        return f"--threads {args.threads}: must be >= 1"
    return None


def _run_engine(args) -> int:
    """`predict --engine beam`: the pipeline of `migrate.predict.beam`, its workers' stderr
    reduced to the project's lines (`console.only_project_lines`) unless --verbose."""
    from migrate.common import console
    from migrate.predict.runtimes import runtime_kind
    from ssd_mobilenet.errors import RunError
    problem = None
    if not args.engine:
        problem = f"{'--workers' if args.workers is not None else '--pipeline-options'}: needs --engine beam"
    elif args.out in (None, STDOUT):
        problem = "--engine beam: needs --out FILE (the pipeline writes its lines in shards named after it)"
    elif args.workers is not None and args.workers < 1:
        problem = f"--workers {args.workers}: must be >= 1"
    else:
        problem = _out_of_range(args) or _refused(args, runtime_kind(args.converted), _ENGINE_RUNTIME_OPTIONS,
                                                  engine=True)
        given = [flag for flag, name in _NOT_ENGINE_OPTIONS.items() if getattr(args, name) not in (None, False)]
        if not problem and given:
            problem = f"{given[0]}: not available with --engine beam (run predict without --engine for it)"
    if problem:
        return bad_input(problem)
    try:
        with console.only_project_lines(args.verbose):  # its import logs on the root logger
            from migrate.predict import beam
    except ImportError as e:
        return bad_input(f"--engine beam: {(e.name or 'apache_beam').split('.')[0]} is not installed: pip install "
                         "'ssd-mobilenet-migrate[beam]'")
    quiet_env = {} if args.verbose else {"TF_CPP_MIN_LOG_LEVEL": "3", console.QUIET_ENV: "1"}
    restore_logs = beam.quiet_driver_logs(args.verbose)
    try:
        # The workers inherit the environment (quiet TensorFlow) and file descriptor 2.
        with console.environment(quiet_env), console.only_project_lines(args.verbose):
            summary = beam.run(args.converted, args.images, out=args.out, workers=args.workers,
                               pipeline_options_text=args.pipeline_options, force=args.force,
                               batch_size=args.batch_size, labels=args.labels, min_score=args.min_score,
                               threads=args.threads, precision=args.precision, runtime=args.runtime,
                               quiet=args.quiet,
                               progress=progress(args.quiet))
    except RunError as e:
        if args.verbose:
            raise
        raise RunError(f"{e} (--verbose shows the runner's log)") from e  # its line says where the cause is
    finally:
        restore_logs()
    shards = len(summary["shards"])
    return _summary(args, summary, f"{shown(args.out)} ({shards} shard{'s' if shards != 1 else ''})")


def _summary(args, summary, out=None) -> int:
    """The run's last lines: the model's note (`predict.synthetic_note`) when it has one, what it
    did and how fast; on what, and where the lines went (`out`: the file, or the shards, as shown)."""
    say = progress(args.quiet)
    if summary.get("note"):
        say(summary["note"])  # a model of synthetic weights: its detections above mean nothing
    say(f"{summary['images']} images ({summary['failed']} unreadable), {summary['detections']} detections in "
        f"{summary['seconds']:.1f} s, {summary['images_per_s']:.1f} images/s")
    # Wrapped: a long OUT (or Beam's runner and its shards) goes on the next line, within 100 columns.
    progress(args.quiet, wrap=True)(f"{summary['runtime']}, batch {summary['batch_size']}"
                                    + (f" -> {out}" if out else ""))
    return EXIT_OK if summary["images"] - summary["failed"] else EXIT_FAIL
