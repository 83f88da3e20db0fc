"""Reruns the benchmark behind docs/benchmarks.md in one go.

    .venv/bin/python scripts/bench.py [--src TF1_DIR | --model ssd|fpn_640|ppn_300] [--batch 1,8,32]
        [--size 480x640] [--repeats 10] [--onednn 0|1|both] [--weight-cache]
        [--sides tf1_session,saved_model,...] [--photos DIR] [--cold-runs 3] [--no-cold]

Without --src it takes the 2018 zoo graph from ../shared (built into a full TF1 model directory
with synthetic weights by ../shared/tools/make_zoo_fixture.py) when present, else the built-in
default model (`migrate.default_model`). `--model fpn_640` / `ppn_300` take the zoo's FPN 640 or PPN
300 COCO config from ../shared/zoo/sample_configs instead, built by the project's TF1 builder with
synthetic weights (`migrate.benchmark.zoo_models`), and write docs/benchmarks_fpn_640.* or
docs/benchmarks_ppn_300.* unless --name says otherwise (and their rows into docs/benchmarks.md's
"FPN and PPN" section, which a run of the plain model keeps). It converts the model into a temporary directory,
runs the benchmark of `python -m migrate bench` with every side but the TFLite ones (or `--sides`), and writes
docs/benchmarks.md and docs/benchmarks.json, and docs/benchmarks.png where matplotlib is installed (replacing them;
`--name benchmarks_eigen` writes docs/benchmarks_eigen.* instead, as for the run on Eigen's kernels, `--onednn 0`).
The TFLite sides (`--sides ...,tflite,tflite_int8`) run on LiteRT at batch 1 only (at every `--size`: the
exported file resizes photos itself), which `--batch` must then include; their memory is measured in a
process that never imports TensorFlow.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
SHARED = os.environ.get("SSD_MIGRATE_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
ZOO_2018 = os.path.join(SHARED, "zoo", "ssd_mobilenet_v1_coco_2018_01_28")
MAKE_FIXTURE = os.path.join(SHARED, "tools", "make_zoo_fixture.py")
PHOTOS = os.path.join(SHARED, "photos")


def source_and_conversion(src, tmp: str, progress, model: str | None = None) -> tuple:
    """(TF1 model dir, its conversion under `tmp`): SRC, else `model` (a `zoo_models.MODELS` name)
    built under `tmp`, else the 2018 zoo fixture built under `tmp` when ../shared is there, else the
    built-in default model."""
    from migrate import convert
    if src is None and model is not None:
        from migrate.benchmark import zoo_models
        progress(f"building {model}: {zoo_models.MODELS[model][0]}")
        src = zoo_models.make(model, SHARED, os.path.join(tmp, model))
    elif src is None and os.path.isfile(MAKE_FIXTURE) and os.path.isdir(ZOO_2018):
        src = os.path.join(tmp, "zoo_2018")
        subprocess.run([sys.executable, MAKE_FIXTURE, ZOO_2018, src], check=True, capture_output=True)
    elif src is None:
        from migrate import default_model
        src = default_model.ensure_tf1_model()
    converted = os.path.join(tmp, "converted")
    progress(f"converting {src}")
    convert.convert(src, converted)
    return src, converted


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from migrate.benchmark import zoo_models
    p.add_argument("--src", help="a TF1 model directory with frozen_inference_graph.pb")
    p.add_argument("--model", choices=sorted(zoo_models.MODELS),
                   help="the zoo model to build from ../shared (default: ssd, the 2018 zoo graph; fpn_640, ppn_300: "
                        "the FPN and PPN zoo configs); not with --src")
    p.add_argument("--batch", default="1,8,32")
    p.add_argument("--size", default="480x640")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--onednn", choices=("0", "1", "both"))
    p.add_argument("--weight-cache", action="store_true",
                   help="every side with oneDNN's filter cache (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1)")
    p.add_argument("--sides", help="comma separated (default: every side of `migrate bench` but tflite, tflite_int8)")
    p.add_argument("--photos", default=PHOTOS if os.path.isdir(PHOTOS) else None,
                   help="photos each side starts cold over (default ../shared/photos when present)")
    p.add_argument("--cold-runs", type=int, default=3)
    p.add_argument("--no-cold", action="store_true", help="no cold start rows")
    p.add_argument("--out-dir", default=os.path.join(REPO, "docs"))
    p.add_argument("--name", help="the files' name: NAME.md, NAME.json, NAME.png (default: benchmarks, with "
                                  "--model fpn_640 or ppn_300 benchmarks_MODEL; e.g. benchmarks_eigen with --onednn 0)")
    args = p.parse_args()
    if args.src is not None and args.model is not None:
        p.error("--src and --model exclude each other: --model builds the TF1 model that --src names")
    default_name = "benchmarks" if args.model in (None, zoo_models.DEFAULT) else f"benchmarks_{args.model}"
    args.name = args.name or default_name
    if args.model is not None and zoo_models.missing(args.model, SHARED):  # before TensorFlow loads
        print(f"error: {zoo_models.missing(args.model, SHARED)}", file=sys.stderr)
        return 2
    from migrate import bench
    progress = lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="ssd-bench-") as tmp:
        src, converted = source_and_conversion(args.src, tmp, progress, args.model)
        try:
            report = bench.bench(src, converted, sizes=bench.parse_sizes(args.size),
                                 batches=bench.parse_batches(args.batch), repeats=args.repeats, onednn=args.onednn,
                                 sides=args.sides.split(",") if args.sides else bench.DEFAULT_SIDES,
                                 weight_cache=args.weight_cache, progress=progress,
                                 photos=None if args.no_cold else args.photos, cold_runs=args.cold_runs)
        except bench.BenchInputError as e:  # e.g. TFLite sides without batch 1 in --batch
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(bench.format_table(report))
        if report.get("tflite"):
            print(bench.tflite_settings(report))
        if report.get("cold"):
            print(bench.cold_table(report))
        os.makedirs(args.out_dir, exist_ok=True)
        bench.write_json(report, os.path.join(args.out_dir, f"{args.name}.json"), force=True)
        command = (f"python scripts/bench.py --batch {args.batch} --size {args.size} --repeats {args.repeats}"
                   + (f" --onednn {args.onednn}" if args.onednn else "")
                   + (" --weight-cache" if args.weight_cache else "")
                   + (f" --sides {args.sides}" if args.sides else "")
                   + ("" if args.src is None else f" --src {args.src}")
                   + ("" if args.model is None else f" --model {args.model}")
                   + ("" if args.name == default_name else f" --name {args.name}")
                   + (" --no-cold" if args.no_cold or not args.photos else
                      ("" if args.photos == PHOTOS else f" --photos {args.photos}")
                      + ("" if args.cold_runs == 3 else f" --cold-runs {args.cold_runs}")))
        plot = None
        if bench.plot_available() and len(report["batches"]) > 1:  # matplotlib: the optional `plot` extra
            plot = f"{args.name}.png"
            bench.write_plot(report, os.path.join(args.out_dir, plot), force=True)
        bench.write_markdown(report, os.path.join(args.out_dir, f"{args.name}.md"), command, force=True, plot=plot)
        # docs/benchmarks.md lists the FPN and PPN pages' rows: after their runs, and again after its own.
        from migrate.benchmark import tables
        tables.refresh_family_section(os.path.join(args.out_dir, "benchmarks.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
