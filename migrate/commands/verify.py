"""`migrate verify`: a conversion against its TF1 graph, tensor by tensor, and the cost of both
(`migrate.verify.verification`)."""

from __future__ import annotations

from migrate.commands.common import (EXIT_FAIL, EXIT_OK, add_verbose, missing, missing_inputs, op_list, progress,
                                     tensorflow_command, warn)
from migrate.verify.paths import looks_tf1
from ssd_mobilenet import converted_dir


def add_parser(sub) -> None:
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
                   help="the TF2 side is this .onnx file of `migrate export --onnx` (run by ONNX Runtime, or "
                        "OpenVINO with --runtime openvino, one image at a time): detections compared with the TF1 "
                        "graph's exactly")
    p.add_argument("--runtime", choices=("onnxruntime", "openvino"),
                   help="with --onnx: run the file on ONNX Runtime (the default) or OpenVINO, as `predict --runtime`")
    p.add_argument("--threads", type=int, metavar="N",
                   help="the TFLite interpreter's or ONNX Runtime's (OpenVINO's) threads (with --tflite or --onnx; "
                        "default: the CPU count)")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    add_verbose(p)


def missing_path(args):
    # CONVERTED derived from SRC, and the built-in model, are left to the run.
    if missing(args.src, prefix=True):
        return f"{args.src}: no such file or directory"
    if args.src and args.converted and converted_dir.is_converted(args.src) and looks_tf1(args.converted):
        # The converted directory first and a TF1 model second: the two swapped.
        return f"SRC comes first: `verify {args.converted} {args.src}`"
    if missing(args.converted):
        return f"{args.converted}: no such folder (`python -m migrate convert SRC` writes it)"
    if missing(args.tflite):
        return f"{args.tflite}: no such file (--tflite)"
    if missing(args.onnx):
        return f"{args.onnx}: no such file (--onnx)"
    return missing_inputs(args.images)


@tensorflow_command
def run(args) -> int:
    from migrate.verify import verification
    from migrate.verify.report import format_report
    report = verification.verify(args.src, args.converted, images=args.images, batch=args.batch, mode=args.mode,
                                 atol=args.atol, rtol=args.rtol, allow_ops=op_list(args.allow_ops), png_dir=args.png,
                                 json_path=args.json, force=args.force, measure=not args.no_measure,
                                 repeats=args.repeats, precision=args.precision, memory_growth=args.memory_growth,
                                 memory_limit_mb=args.memory_limit, trace_dir=args.trace, progress=progress(args.quiet, wrap=True),
                                 tflite=args.tflite, threads=args.threads, onnx=args.onnx, runtime=args.runtime,
                                 warn=warn)
    print(format_report(report))
    # The precision that ran (a SavedModel's own when --precision was not given), for `warn_precision`.
    args.precision = report.precision
    return EXIT_OK if report.passed else EXIT_FAIL
