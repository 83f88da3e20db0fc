"""Reruns the benchmark behind docs/benchmarks.md in one go.

    .venv/bin/python scripts/bench.py [--src TF1_DIR | --model ssd|fpn_640|ppn_300] [--batch 1,8,32]
        [--size 480x640] [--repeats 10] [--onednn 0|1|both] [--weight-cache]
        [--sides tf1_session,saved_model,...] [--photos DIR] [--cold-runs 3] [--no-cold]
        [--out DIR | --publish] [--name NAME] [--verbose]

Without --src it takes the 2018 zoo graph from ../shared (built into a full TF1 model directory
with synthetic weights by ../shared/tools/make_zoo_fixture.py) when present, else the built-in
default model (`migrate.convert.default_model`). `--model fpn_640` / `ppn_300` take the zoo's FPN 640 or PPN
300 COCO config from ../shared/zoo/sample_configs instead, built by the project's TF1 builder with
synthetic weights (`migrate.bench.zoo_models`). It converts the model into a temporary directory,
runs the benchmark of `python -m migrate bench` with every side but the TFLite ones (or `--sides`) and
prints its tables. The TFLite sides (`--sides ...,tflite,tflite_int8`) run on LiteRT at batch 1 only
(at every `--size`: the exported file resizes photos itself), which `--batch` must then include; their
memory is measured in a process that never imports TensorFlow.

It writes nothing unless told where (`migrate.bench.publish`): `--out DIR` writes NAME.md,
NAME.json and, where matplotlib is installed, NAME.png into DIR; `--publish` writes them into docs/,
replacing the published figures. NAME is benchmarks, or benchmarks_fpn_640 / benchmarks_ppn_300 with
`--model`, unless --name says otherwise (`--name benchmarks_eigen` for the run on Eigen's kernels,
`--onednn 0`); the FPN and PPN runs' rows also go into the "FPN and PPN" section of the folder's
benchmarks.md, which a run of the plain model keeps. TensorFlow's log lines show only with --verbose.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from ssd_mobilenet.errors import InputError

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
    from migrate.convert import conversion
    if src is None and model is not None:
        from migrate.bench import zoo_models
        progress(f"building {model}: {zoo_models.MODELS[model][0]}")
        src = zoo_models.make(model, SHARED, os.path.join(tmp, model))
    elif src is None and os.path.isfile(MAKE_FIXTURE) and os.path.isdir(ZOO_2018):
        src = os.path.join(tmp, "zoo_2018")
        subprocess.run([sys.executable, MAKE_FIXTURE, ZOO_2018, src], check=True, capture_output=True)
    elif src is None:
        from migrate.convert import default_model
        src = default_model.ensure_tf1_model()
    converted = os.path.join(tmp, "converted")
    progress(f"converting {src}")
    conversion.convert(src, converted)
    return src, converted


def parse_args(argv=None) -> tuple:
    """(the options, the files' default name); exits 2 on options that exclude each other."""
    from migrate.bench import publish, zoo_models
    from migrate.commands.common import COLUMNS, add_verbose
    # The usage argparse prints with an error, wrapped within the project's 100 columns.
    width = min(shutil.get_terminal_size().columns - 2, COLUMNS)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(
        prog, width=width))
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
    publish.add_options(p, publish.DOCS, "write NAME.md, NAME.json and NAME.png into this folder")
    p.add_argument("--name", help="the files' name: NAME.md, NAME.json, NAME.png (default: benchmarks, with "
                                  "--model fpn_640 or ppn_300 benchmarks_MODEL; e.g. benchmarks_eigen with --onednn 0)")
    add_verbose(p)
    args = p.parse_args(argv)
    if args.src is not None and args.model is not None:
        print("error: --src and --model exclude each other: --model builds the TF1 model that --src names",
              file=sys.stderr)
        sys.exit(2)
    default_name = "benchmarks" if args.model in (None, zoo_models.DEFAULT) else f"benchmarks_{args.model}"
    args.name = args.name or default_name
    return args, default_name


def main() -> int:
    from migrate.bench import zoo_models
    args, default_name = parse_args()
    if args.model is not None and zoo_models.missing(args.model, SHARED):  # before TensorFlow loads
        print(f"error: {zoo_models.missing(args.model, SHARED)}", file=sys.stderr)
        return 2
    from migrate.common import console
    with console.tensorflow_output(args.verbose):
        return run(args, default_name)


def run(args, default_name: str) -> int:
    """Builds and converts the model, measures it, prints the tables and writes the pages where
    `publish.destination` says (TensorFlow's output already set by `main`)."""
    from migrate.bench import benchmark
    from migrate.bench.inputs import parse_batches, parse_sizes
    from migrate.bench.sides import DEFAULT_SIDES
    from migrate.commands.bench import print_report
    from migrate.commands.common import progress
    say = progress(False, wrap=True)
    with tempfile.TemporaryDirectory(prefix="ssd-bench-") as tmp:
        src, converted = source_and_conversion(args.src, tmp, say, args.model)
        try:
            report = benchmark.bench(src, converted, sizes=parse_sizes(args.size),
                                     batches=parse_batches(args.batch), repeats=args.repeats, onednn=args.onednn,
                                     sides=args.sides.split(",") if args.sides else DEFAULT_SIDES,
                                     weight_cache=args.weight_cache, progress=say,
                                     photos=None if args.no_cold else args.photos, cold_runs=args.cold_runs)
        except InputError as e:  # e.g. TFLite sides without batch 1 in --batch
            print(f"error: {e}", file=sys.stderr)
            return 2
    print_report(report)
    write_pages(report, args, default_name, say)
    return 0


def write_pages(report: dict, args, default_name: str, say) -> None:
    """NAME.md, NAME.json (and NAME.png with two batches or more, where matplotlib is installed;
    otherwise an earlier run's NAME.png there is removed) where `publish.destination` says, the
    FPN and PPN section of that folder's benchmarks.md refreshed; nothing, and a line that says
    so, without --out or --publish."""
    from migrate.bench import publish, tables
    from migrate.bench.plot import plot_available, write_plot
    out_dir = publish.destination(args, publish.DOCS)
    if out_dir is None:
        say(f"nothing written: --out DIR, or --publish for docs/, writes {args.name}.md (+ .json, .png)")
        return
    os.makedirs(out_dir, exist_ok=True)
    tables.write_json(report, os.path.join(out_dir, f"{args.name}.json"), force=True)
    command = (f"python scripts/bench.py --batch {args.batch} --size {args.size} --repeats {args.repeats}"
               + (f" --onednn {args.onednn}" if args.onednn else "")
               + (" --weight-cache" if args.weight_cache else "")
               + (f" --sides {args.sides}" if args.sides else "")
               + ("" if args.src is None else f" --src {args.src}")
               + ("" if args.model is None else f" --model {args.model}")
               + ("" if args.name == default_name else f" --name {args.name}")
               + (" --no-cold" if args.no_cold or not args.photos else
                  ("" if args.photos == PHOTOS else f" --photos {args.photos}")
                  + ("" if args.cold_runs == 3 else f" --cold-runs {args.cold_runs}"))
               + publish.option(args))
    plot, plot_path = None, os.path.join(out_dir, f"{args.name}.png")
    if plot_available() and len(report["batches"]) > 1:  # matplotlib: the optional `plot` extra
        plot = os.path.basename(plot_path)
        write_plot(report, plot_path, force=True)
    elif os.path.exists(plot_path):  # an earlier run's plot would outlive the page that showed it
        os.remove(plot_path)
    tables.write_markdown(report, os.path.join(out_dir, f"{args.name}.md"), command, force=True, plot=plot)
    # docs/benchmarks.md lists the FPN and PPN pages' rows: after their runs, and again after its own.
    tables.refresh_family_section(os.path.join(out_dir, "benchmarks.md"))
    if args.publish and args.name == "benchmarks":
        # The README's headline table is the published plain model's run.
        tables.refresh_headline(os.path.join(os.path.dirname(publish.DOCS), "README.md"), report)
    say(f"wrote {os.path.join(out_dir, args.name)}.md (+ .json{', .png' if plot else ''})")


if __name__ == "__main__":
    sys.exit(main())
