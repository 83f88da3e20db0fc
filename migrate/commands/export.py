"""`migrate export`: a converted model as a TFLite file (`migrate.export.tflite`), an ONNX file
(`migrate.export.onnx`) or a web page folder (`migrate.export.web`)."""

from __future__ import annotations

import sys

from migrate.commands.common import (EXIT_OK, add_labels, add_verbose, bad_input, labels_problem, missing,
                                     missing_inputs, print_wrapped, progress, tensorflow_command, warn)
from migrate.common.console import shown


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write a converted model as a TFLite file, an ONNX file or a web page")
    p.add_argument("converted", help="a directory written by `convert`")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--tflite", metavar="OUT", help="the .tflite file to write")
    out.add_argument("--onnx", metavar="OUT", help="the .onnx file to write (opset 13; ONNX Runtime, OpenVINO, "
                     "TensorRT), the converted model's detections")
    out.add_argument("--web", metavar="DIR", help="a static web page folder (the page, the .tflite file of "
                     "float16 weights on LiteRT.js, the label map): any static file server serves it; detections "
                     "in the browser, their agreement with the converted model's reported as --int8's")
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
                        "convolutions, uint8 activations for CPUs, or symmetric int8 ones for TensorRT with "
                        "--input float32), with a report of how far its detections drift from the float model's; "
                        "a quantization-aware model's file is int8 on its checkpoint's ranges without it")
    p.add_argument("--float32", action="store_true",
                   help="--web: the float32 file, the TF1 graph's detections (twice the download of the "
                        "default float16 weights)")
    p.add_argument("--calibration", nargs="+", metavar="IMAGES",
                   help="JPEG/PNG files and folders to calibrate --int8 on (default: generated images)")
    add_labels(p, "the class names the file's metadata (--web: the page) carries for predict (default: the label "
               "map CONVERTED carries; without one, `id N`)")
    p.add_argument("--example", metavar="PHOTO", help="--web: a photo the page shows with the converted model's "
                   "detections from its first paint, then runs the model on in the browser")
    p.add_argument("--force", action="store_true", help="replace an existing OUT or DIR")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    add_verbose(p)


def missing_path(args):
    if missing(args.converted):
        return f"{args.converted}: no such directory (expected the output of `migrate convert`)"
    problem = labels_problem(args.labels)
    if problem:
        return problem
    if missing(args.example):
        return f"{args.example}: no such file (--example)"
    return missing_inputs(args.calibration)


@tensorflow_command
def run(args) -> int:
    from migrate.export import onnx, pipeline, tflite, web
    form = web.Web if args.web else onnx.Onnx if args.onnx else tflite.TFLite
    problem = pipeline.refusal(form, {"--nms": args.nms, "--int8": args.int8, "--calibration": args.calibration,
                                      "--example": args.example, "--input": args.input, "--float32": args.float32})
    if problem:
        return bad_input(problem)
    say = progress(args.quiet, wrap=True)
    if args.web:
        result = web.export_web(args.converted, args.web, labels=args.labels, max_detections=args.max_detections,
                                example=args.example, force=args.force, verbose=args.verbose, progress=say,
                                float32=args.float32, int8=args.int8, calibration=args.calibration, warn=warn)
    elif args.onnx:
        result = onnx.export_onnx(args.converted, args.onnx, input_type=args.input, max_detections=args.max_detections,
                                  int8=args.int8, calibration=args.calibration, force=args.force, verbose=args.verbose,
                                  progress=say, warn=warn, labels=args.labels)
    else:
        result = tflite.export(args.converted, args.tflite, nms=args.nms or "per-class", input_type=args.input,
                               max_detections=args.max_detections, int8=args.int8, calibration=args.calibration,
                               force=args.force, progress=say, warn=warn, labels=args.labels)
    if args.web:
        _web_result(result)
    elif args.onnx:
        _result(result, f"ONNX opset {result['opset']}, {result['input']} input, "
                        f"{_onnx_precision(result)}")
    else:
        _result(result, f"{result['nms']} NMS, {result['input']} input, {'int8' if result['int8'] else 'float32'}")
    return EXIT_OK


def _onnx_precision(result: dict) -> str:
    """The `.onnx` file's precision as the result line gives it: float32, int8 QDQ, or int8 QDQ
    with the post-training file's activations ("uint8 activations")."""
    if not result["int8"]:
        return "float32"
    return f"int8 QDQ, {result['activations']} activations" if result.get("activations") else "int8 QDQ"


def _result(result: dict, what: str) -> None:
    """The notes (wrapped) on stderr; on stdout what was written where, then its size and operators."""
    for note in result["notes"]:
        print_wrapped(f"[migrate] {note}")
    print(f"exported {what}, {result['max_detections']} detections -> {shown(result['out'])}")
    print(f"    {result['bytes']} bytes, {len(result['operators'])} operator types")


def _web_result(result: dict) -> None:
    """The notes (wrapped, on stderr: a file's agreement with the converted model); on stdout what
    was written where, its precision, files and size, then the runtime the page runs."""
    from migrate.export.web import PRECISIONS
    for note in result["notes"]:
        print_wrapped(f"[migrate] {note}")
    runtime = ", ".join(f"{name} {version}" for name, version in sorted(result["runtime"].items()))
    # Lines within 100 columns (the runtime's names and versions, then a long OUT, wrap on their own).
    print_wrapped(f"exported a web page: {PRECISIONS[result['precision']]}, {result['max_detections']} detections, "
                  f"{len(result['files'])} files, {result['bytes'] / 2 ** 20:.1f} MiB, a visit downloads "
                  f"{result['download_bytes'] / 2 ** 20:.1f} MiB gzip -> {shown(result['out'])}", file=sys.stdout)
    print_wrapped(f"the page runs {runtime}", file=sys.stdout)
