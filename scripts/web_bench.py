"""The web page's figures (docs/benchmarks_web.md, .json): in-browser latency per 300x300 photo on
one thread and on several, against the TF1 session in the same run, and the page's download size
(its folder, and what one visit fetches), beside other pages' (--page: candidates, older exports).

    .venv/bin/python scripts/web_bench.py [--src TF1_DIR] [--photo PHOTO] [--repeats 30] [--name benchmarks_web]
        [--page NAME=FOLDER ...] [--note TEXT] [--out DIR | --publish]

Without --src it takes the 2018 zoo graph from ../shared (as scripts/bench.py), else the built-in
default model; without --photo the first 300x300 photo of ../shared/photos, else a generated one.
It converts the model and exports its page (`migrate export --web`) into a temporary folder, then
runs `migrate.bench.web.measure` in Debian's headless Chromium (scripts/setup_env.sh installs it).
It prints the page, and writes NAME.md and NAME.json into --out's folder or, with --publish, into
docs/ (`migrate.bench.publish`).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "scripts"))


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _photo(asked, tmp: str) -> str:
    if asked:
        return asked
    from bench import SHARED
    from PIL import Image
    for path in sorted(glob.glob(os.path.join(SHARED, "photos", "*.jpg"))):
        with Image.open(path) as image:
            if image.size == (300, 300):
                return path
    import numpy as np
    path = os.path.join(tmp, "generated.jpg")
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (300, 300, 3), dtype=np.uint8)).save(path, quality=90)
    return path


def _size(size: int) -> str:
    mib = 2 ** 20
    return f"{size / mib:.2f} MiB" if size >= mib / 10 else f"{size / 1024:.1f} KiB"


def markdown(report: dict) -> str:
    tf1 = report["tf1_session"]
    photo = report["photo"]
    mib = 2 ** 20
    lines = [
        "# Benchmarks: the web page (`export --web`)",
        "",
        f"Written by `scripts/web_bench.py` on {report['date']}: {report['cpu']}, {report['cores']} cores, "
        f"{report['chromium']}; load average {report['load'][0]:.1f} before the run, {report['load'][1]:.1f} "
        f"after it. {report['note']}",
        "",
        f"One photo, {photo['name']} ({photo['height']}x{photo['width']}), batch 1, {report['repeats']} interleaved "
        f"rounds after {report['warmup']} warm-up runs. A page's time is its own (`performance.now()`): the "
        "model's call on the uint8 photo (the file resizes it, as the graph does), and with the JPEG decoding; "
        "the TF1 session runs the decoded photo in a Python process (TensorFlow's default threads).",
        "",
        "| page | side | median ms | p10-p90 ms | x TF1 session | with decoding, median ms |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
        f"| | TF1 session | {tf1['median_ms']:.1f} | {tf1['p10_ms']:.1f}-{tf1['p90_ms']:.1f} | 1.00 | |",
    ]
    for label, b in report["browser"].items():
        isolation = "cross-origin isolated" if b["cross_origin_isolated"] else "not isolated"
        side = label.split(", ", 1)[1]
        lines.append(f"| {b['page']} | {b['runtime']}, {side} ({isolation}) | {b['median_ms']:.1f} | "
                     f"{b['p10_ms']:.1f}-{b['p90_ms']:.1f} | {report['ratios'][label]:.2f} | "
                     f"{b['total']['median_ms']:.1f} |")
    lines += ["", "Download (gzip-compressed, as a server that compresses sends them): what one visit of the page "
              "fetches on each side (one WebAssembly build of its runtime), and the whole folder:", "",
              "| page | side | one visit: files | MiB gzip | the folder: files | MiB | MiB gzip |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, visit in report["visit"].items():
        name, side = label.split(", ", 1)
        folder = report["download"][name]
        lines.append(f"| {name} | {side} | {visit['files']} | {visit['gzip_bytes'] / mib:.2f} | {folder['files']} | "
                     f"{folder['bytes'] / mib:.1f} | {folder['gzip_bytes'] / mib:.1f} |")
    for name, folder in report["download"].items():
        lines += ["", f"`{name}`'s files:", ""]
        fetched = set().union(*(v["names"] for k, v in report["visit"].items() if k.split(", ")[0] == name))
        lines += [f"- `{file}`: {_size(size)}" + (" (fetched)" if file in fetched else "")
                  for file, size in sorted(folder["by_file"].items(), key=lambda kv: -kv[1])]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", help="a TF1 model directory with frozen_inference_graph.pb")
    p.add_argument("--photo", help="the photo (default: a 300x300 one of ../shared/photos)")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--note", default="", help="a sentence about the run (e.g. the machine was shared)")
    from migrate.bench import publish
    publish.add_options(p, publish.DOCS, "write NAME.md and NAME.json into this folder")
    p.add_argument("--name", default="benchmarks_web")
    p.add_argument("--page", action="append", default=[], metavar="NAME=FOLDER",
                   help="another page folder to measure beside the exported one (a candidate: an older export, a "
                        "prototype with the page's window.detect)")
    args = p.parse_args()
    from bench import source_and_conversion

    from migrate.bench import web
    from migrate.export.web import export_web

    def say(msg):
        print(f"[web_bench] {msg}", file=sys.stderr, flush=True)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="web-bench-") as tmp:
        src, converted = source_and_conversion(args.src, tmp, say)
        folder = os.path.join(tmp, "page")
        say("exporting the page")
        export_web(converted, folder)
        pages = {"export": folder, **dict(page.split("=", 1) for page in args.page)}
        report = web.measure(src, pages, _photo(args.photo, tmp), warmup=args.warmup, repeats=args.repeats,
                             progress=say)
    report.update(date=datetime.date.today().isoformat(), cpu=_cpu(), cores=os.cpu_count(), note=args.note,
                  load=[load_before, os.getloadavg()[0]])
    print(markdown(report))
    out_dir = publish.destination(args, publish.DOCS)
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, f"{args.name}.json"), "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
        with open(os.path.join(out_dir, f"{args.name}.md"), "w", encoding="utf-8") as f:
            f.write(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
