"""Where each side's time goes inside oneDNN, primitive by primitive (`migrate.bench.kernels`).

    .venv/bin/python scripts/kernels.py [--src TF1_DIR] [--sides tf1_session,saved_model,saved_model_mixed]
        [--batch 1] [--size 480x640] [--calls 10] [--json PATH]

The model is the one scripts/bench.py measures (--src, else the 2018 zoo graph from ../shared built
with synthetic weights, else the built-in default model), converted into a temporary directory; the
exported sides' SavedModels are written as `bench` writes them. Each side then runs in a fresh
process with ONEDNN_VERBOSE=1, and the script prints per side the wall time of a call, oneDNN's
summed time and, per primitive class, data type and implementation, how many ran per call and their
milliseconds, then the reorders. The implementation names the instruction set (`avx512_core_amx`:
AMX tiles; `avx512_core_bf16`: AVX512-BF16; `avx512_core`: neither), so one run on a CPU shows
whether bfloat16 uses its matrix units and whether anything is converted on every call. Where
TensorFlow runs Eigen's kernels instead of oneDNN's (CPUs without AVX-512 VNNI, BF16 or AMX by
default), there is nothing to count: it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from ssd_mobilenet.errors import InputError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "scripts"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", help="a TF1 model directory with frozen_inference_graph.pb")
    p.add_argument("--sides", default="tf1_session,saved_model,saved_model_mixed")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--size", default="480x640")
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--json", help="also write the summaries here")
    from migrate.commands.common import add_verbose
    add_verbose(p)
    args = p.parse_args()
    from migrate.common import console
    with console.tensorflow_output(args.verbose):
        return run(args)


def run(args) -> int:
    """Profiles each side and prints its summary (TensorFlow's output already set by `main`)."""
    from bench import source_and_conversion

    from migrate.bench import kernels
    from migrate.bench.inputs import parse_sizes
    from migrate.bench.sides import export_sides
    from ssd_mobilenet import memory
    if not memory.onednn_on():  # the workers inherit this process's environment
        print(f"error: {kernels.OFF}", file=sys.stderr)
        return 2
    sides = args.sides.split(",")
    try:
        size = parse_sizes(args.size)[0]
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from migrate.commands.common import progress as progress_lines
    progress = progress_lines(False, wrap=True)
    summaries = []
    with tempfile.TemporaryDirectory(prefix="ssd-kernels-") as tmp:
        src, converted = source_and_conversion(args.src, tmp, progress)
        exported = export_sides(converted, os.path.join(tmp, "exported"), sides)
        for side in sides:
            progress(f"{side}: {args.calls} calls with ONEDNN_VERBOSE=1")
            summary = kernels.profile(side, src, converted, size, args.batch, args.calls, exported=exported.get(side))
            summaries.append(summary)
            print(kernels.format_summary(summary), flush=True)
    isa = next((s["isa"] for s in summaries if s["isa"]), None)
    print(f"oneDNN ISA: {isa or 'not reported (oneDNN off)'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summaries, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
