"""Where a cold process's memory goes, on both sides: docs/cold_memory.md.

    .venv/bin/python scripts/cold_memory.py [--src TF1_DIR] [--photos DIR] [--sides tf1_session,saved_model,...]
        [--settings default,grappler_off,...] [--out FILE | --publish]

Converts the model (the 2018 zoo fixture from ../shared without --src, as scripts/bench.py does),
exports the SavedModel with its weights as constants (bench's `saved_model_constants`), and runs each
side cold over the photos (../shared/photos without --photos) in a fresh process per side and
setting (`migrate.bench.cold_memory`): its memory at each stage, then its peak under each
setting that switches one part of TensorFlow off. It prints the page, and writes it to --out's file
or, with --publish, to docs/cold_memory.md (`migrate.bench.publish`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import PHOTOS, source_and_conversion  # noqa: E402  (scripts/bench.py)

SIDES = ("tf1_session", "saved_model", "saved_model_constants", "detector", "detector_constants")


def _mib(value) -> str:
    return "-" if value is None else f"{value / 2 ** 20:.0f}"


def stage_table(stages: dict) -> list:
    """Markdown lines: one table per side, one row per stage."""
    lines = []
    for side, rows in stages.items():
        lines += [f"### `{side}`", "",
                  "| stage | RSS | peak | files | anonymous | malloc in use | malloc kept free | threads |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['stage']} | {_mib(r['rss'])} | {_mib(r['peak'])} | {_mib(r['file'])} | "
                  f"{_mib(r['anonymous'])} | {_mib(r['malloc_in_use'])} | {_mib(r['malloc_free'])} | {r['threads']} |"
                  for r in rows]
        lines.append("")
    return lines


def main() -> int:
    from migrate.bench import cold_memory
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", help="a TF1 model directory with frozen_inference_graph.pb")
    p.add_argument("--photos", default=PHOTOS)
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--settings", default=",".join(cold_memory.SETTINGS))
    from migrate.bench import publish
    published = os.path.join(publish.DOCS, "cold_memory.md")
    publish.add_options(p, published, "write the page to this file")
    args = p.parse_args()
    sides, settings = args.sides.split(","), args.settings.split(",")
    problems = [f"--sides {s}: not one of {','.join(SIDES)}" for s in sides if s not in SIDES] + \
        [f"--settings {s}: not one of {','.join(cold_memory.SETTINGS)}" for s in settings
         if s not in cold_memory.SETTINGS] + \
        ([] if os.path.isdir(args.photos) else [f"{args.photos}: no such folder"]) + \
        ([] if "default" in settings else ["--settings: needs default (the stages and every difference)"])
    if problems:
        print(f"error: {problems[0]}", file=sys.stderr)
        return 2
    from migrate.bench.sides import EXPORTED_SIDES, export_sides
    from migrate.bench.tables import _machine
    from ssd_mobilenet.memory import onednn_on
    progress = lambda msg: print(f"[cold_memory] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="ssd-cold-memory-") as tmp:
        src, converted = source_and_conversion(args.src, tmp, progress)
        exported = export_sides(converted, os.path.join(tmp, "exported"),
                                [s for s in sides if s in EXPORTED_SIDES])
        measured = {}
        for setting in settings:
            for side in sides:
                progress(f"{side}, {setting}")
                measured[setting, side] = cold_memory.measure_stages(side, src, converted, args.photos,
                                                                     exported.get(side), setting)
    default = {side: measured["default", side] for side in sides}
    peak = lambda setting, side: max(r["peak"] for r in measured[setting, side])  # noqa: E731
    attribution = ["| setting | " + " | ".join(f"`{s}` peak MiB (change)" for s in sides) + " |",
                   "|---|" + "---|" * len(sides)]
    for setting in settings:
        cells = []
        for side in sides:
            change = peak(setting, side) - peak("default", side)
            cells.append(_mib(peak(setting, side)) + ("" if setting == "default" else f" ({change / 2 ** 20:+.0f})"))
        attribution.append(f"| {cold_memory.SETTINGS[setting][0]} | " + " | ".join(cells) + " |")
    command = ("python scripts/cold_memory.py" + (f" --src {args.src}" if args.src else "")
               + ("" if args.photos == PHOTOS else f" --photos {args.photos}")
               + ("" if args.sides == ",".join(SIDES) else f" --sides {args.sides}")
               + ("" if args.settings == ",".join(cold_memory.SETTINGS) else f" --settings {args.settings}")
               + publish.option(args))
    text = "\n".join([
        "# Where a cold process's memory goes", "",
        "Generated by one run of (from the repository root):", "", "```bash", command, "```", "",
        f"Machine: {_machine()}; TensorFlow's oneDNN kernels: {'on' if onednn_on() else 'off'} by default; the "
        f"photos of {'`../shared/photos`' if args.photos == PHOTOS else args.photos}, one per call. Each side and "
        "setting is one fresh process in the environment a user's process has (TensorFlow's own allocator; "
        "`migrate.bench.cold_memory`); the sides are bench's ([benchmarks](benchmarks.md)). What the "
        "figures say, and what was changed because of them: [cold start](cold_start.md).", "",
        "## Stage by stage", "",
        "MiB. `files`: resident pages of mapped files (the shared libraries); `anonymous`: the rest (the C "
        "heap, thread stacks, TensorFlow's and oneDNN's buffers); `malloc in use` / `malloc kept free`: glibc's "
        "bytes handed out and the freed bytes it keeps resident; `after malloc_trim(0)`: what of the heap "
        "glibc gives back when asked.", "",
        *stage_table(default),
        "## One part of TensorFlow at a time", "",
        "The peak (MiB) with one part switched off, the same for every side; in brackets the change from the "
        "default. These settings size each part's share: they are not levers a user of the model has.", "",
        *attribution, ""])
    print(text)
    out = publish.destination(args, published)
    if out is not None:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
