"""`migrate bench`: latency and memory of the TF1 graph vs the converted model, side by side
(`migrate.bench.benchmark`), and its table, JSON, Markdown and plot."""

from __future__ import annotations

import os

from migrate.commands.common import EXIT_OK, add_verbose, bad_input, missing, progress, tensorflow_command, wrapped
from ssd_mobilenet import converted_dir


def add_parser(sub) -> None:
    from migrate.bench.sides import DEFAULT_SIDES, ONNX_SIDES, SIDES, TFLITE_SIDES
    p = sub.add_parser("bench", help="latency and memory of the TF1 graph vs the converted model, side by side")
    p.add_argument("src", help="the TF1 model directory (with frozen_inference_graph.pb)")
    p.add_argument("converted", help="the converted directory")
    p.add_argument("--batch", default="1,8", help="batch sizes, comma separated (default 1,8)")
    p.add_argument("--size", default="480x640", help="image sizes HxW, comma separated (default 480x640)")
    p.add_argument("--sides", default=",".join(DEFAULT_SIDES),
                   help=f"what to measure, comma separated, of {','.join(SIDES)} (default all but "
                        f"{','.join(TFLITE_SIDES + ONNX_SIDES)}: those run on LiteRT, ONNX Runtime, OpenVINO or "
                        "OpenCV at batch 1, at any --size)")
    p.add_argument("--repeats", type=int, default=10,
                   help="interleaved timed rounds at the largest batch; smaller batches get up to 4x (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs per side per batch (default 2)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-side fresh-process memory runs")
    p.add_argument("--photos", metavar="DIR", help="also start each side cold over these photos in fresh processes: "
                   "time to the first detections, the folder's wall time, peak RSS")
    p.add_argument("--cold-runs", type=int, default=3, metavar="N",
                   help="--photos: interleaved rounds of fresh processes per side (default 3)")
    p.add_argument("--onednn", choices=("0", "1", "both"),
                   help="TF_ENABLE_ONEDNN_OPTS for every side (both: latency under each; default: TensorFlow's)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="intra- and inter-op threads for every TensorFlow side (TF_NUM_INTRAOP/INTEROP_THREADS; "
                        "default: TensorFlow's) and the TFLite interpreter's, ONNX Runtime's, OpenVINO's and "
                        "OpenCV's threads (default: the logical cores)")
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
    add_verbose(p)


def missing_path(args):
    if missing(args.src):
        return f"{args.src}: no frozen_inference_graph.pb (bench's TF1 side runs it)"
    if missing(args.converted):
        return converted_dir.not_converted(args.converted)
    return None


@tensorflow_command
def run(args) -> int:
    from migrate.bench import benchmark, plot, tables
    from migrate.bench.inputs import parse_batches, parse_sizes
    from migrate.bench.sides import DEFAULT_SIDES
    for path in (args.json, args.markdown, args.plot):
        if path and os.path.exists(path) and not args.force:
            return bad_input(f"{path}: exists (use --force to replace it)")
    if args.plot:  # refused before the run, not after minutes of measuring
        plot.check_plot(args.plot, len(parse_batches(args.batch)))
    env = {}
    if args.threads:
        env = {"TF_NUM_INTRAOP_THREADS": str(args.threads), "TF_NUM_INTEROP_THREADS": str(args.threads)}
    # A side that fails to run (a worker that dies: out of memory under a limit) is a RunError.
    report = benchmark.bench(args.src, args.converted, sizes=parse_sizes(args.size), batches=parse_batches(args.batch),
                             sides=[s.strip() for s in args.sides.split(",") if s.strip()], repeats=args.repeats,
                             warmup=args.warmup, memory=not args.no_memory, onednn=args.onednn, env=env,
                             weight_cache=args.weight_cache, memory_growth=args.memory_growth,
                             memory_limit_mb=args.memory_limit, trace_dir=args.trace, progress=progress(args.quiet, wrap=True),
                             tflite_threads=args.threads, photos=args.photos, cold_runs=args.cold_runs)
    print_report(report)
    if args.json:
        tables.write_json(report, args.json, force=True)
    if args.markdown:
        command = (f"python -m migrate bench {args.src} {args.converted} --batch {args.batch} --size {args.size} "
                   f"--repeats {args.repeats}" + (f" --onednn {args.onednn}" if args.onednn else "")
                   + (f" --threads {args.threads}" if args.threads else "")
                   + (" --weight-cache" if args.weight_cache else "")
                   + (f" --sides {args.sides}" if args.sides != ",".join(DEFAULT_SIDES) else "")
                   + (" --no-memory" if args.no_memory else "")
                   + (f" --photos {args.photos} --cold-runs {args.cold_runs}" if args.photos else "")
                   + f" --markdown {args.markdown}")
        tables.write_markdown(report, args.markdown, command, force=True)
    if args.plot:
        plot.write_plot(report, args.plot, force=True)
    return EXIT_OK


def print_report(report: dict) -> None:
    """The report's tables on stdout, within `COLUMNS`: latency and memory, the TFLite sides'
    settings (wrapped), the cold rows (scripts/bench.py prints the same)."""
    from migrate.bench import tables
    print(tables.format_table(report))
    if report.get("tflite"):
        print(wrapped(tables.tflite_settings(report)))
    if report.get("cold"):
        print(tables.cold_table(report))
