"""Measures `predict --engine beam` against `predict` and prints a markdown table for docs/.

    .venv/bin/python scripts/beam_throughput.py [--model DIR_OR_TFLITE] [--generated 200] [--copies 30]
        [--workers 1,2]

Two image sets, written to a temporary folder: `generated` (JPEGs of 480x640, 300x300 and
720x1280, smooth noise) and `photos` (../shared/photos copied `--copies` times, so that the run
is long enough to measure). On each set, each variant runs as a fresh command, as a user runs it:
`predict` (this process's runtime, batch 8) and `predict --engine beam --workers N` (Beam's
local runner, N worker processes, each loading the model once). Each variant also runs on one
image, which gives its fixed cost (interpreter, TensorFlow's import, model loading, the
runner's start); the marginal rate is the other images over the time beyond it. `peak RSS` is
the largest resident set among the command's processes (the driver or one worker), from
getrusage(RUSAGE_CHILDREN) of a process that starts only that command.
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SSD_MIGRATE_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
DEFAULT_MODEL = os.path.join(REPO, "checkpoints", "ssd_mobilenet_v1_coco_synthetic_tf2")
SIZES = ((480, 640), (300, 300), (720, 1280))

# Runs one command and prints its children's peak RSS (KiB on Linux): the command's own
# processes only, since this wrapper starts nothing else.
_WRAPPER = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)")


def generated_set(folder: str, n: int) -> str:
    from PIL import Image
    rng = np.random.default_rng(0)
    os.makedirs(folder)
    for i in range(n):
        h, w = SIZES[i % len(SIZES)]
        small = rng.integers(0, 256, (h // 8, w // 8, 3)).astype(np.uint8)
        Image.fromarray(small).resize((w, h), Image.BILINEAR).save(os.path.join(folder, f"{i:05d}.jpg"), quality=90)
    return folder


def photos_set(folder: str, copies: int) -> str:
    photos = sorted(glob.glob(os.path.join(SHARED, "photos", "*.jpg")))
    if not photos:
        raise SystemExit(f"no photos in {SHARED}/photos")
    os.makedirs(folder)
    for c in range(copies):
        for p in photos:
            shutil.copy(p, os.path.join(folder, f"{c:03d}_{os.path.basename(p)}"))
    return folder


def run(model: str, images: str, workers: int | None, out: str) -> tuple:
    """-> (wall seconds, peak RSS MiB) of one command."""
    cmd = [sys.executable, "-m", "migrate", "predict", model, images, "--out", out, "--quiet"]
    if workers:
        cmd += ["--engine", "beam", "--workers", str(workers)]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    rss_kib, code = done.stdout.split()[-2:]
    if code != "0":
        raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{done.stderr}")
    return wall, int(rss_kib) / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--generated", type=int, default=200)
    p.add_argument("--copies", type=int, default=30)
    p.add_argument("--workers", default="1,2")
    args = p.parse_args()
    variants = [None] + [int(w) for w in args.workers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sets = {"generated": generated_set(os.path.join(tmp, "generated"), args.generated),
                "photos": photos_set(os.path.join(tmp, "photos"), args.copies)}
        for name, folder in sets.items():
            files = sorted(os.listdir(folder))
            one = os.path.join(tmp, f"one_{name}")
            os.makedirs(one)
            shutil.copy(os.path.join(folder, files[0]), one)
            for workers in variants:
                label = "predict" if workers is None else f"--engine beam --workers {workers}"
                out = os.path.join(tmp, "out", f"{name}_{workers}", "r.jsonl")
                fixed, _ = run(args.model, one, workers, out.replace("r.jsonl", "one.jsonl"))
                wall, rss = run(args.model, folder, workers, out)
                n = len(files)
                # Too short a run for the difference to mean anything: no marginal rate.
                marginal = (n - 1) / (wall - fixed) if wall - fixed > 2.0 else float("nan")
                rows.append((name, n, label, wall, n / wall, fixed, marginal, rss))
                print(f"{name} {label}: {wall:.1f} s, {n / wall:.2f} images/s, fixed {fixed:.1f} s, "
                      f"marginal {marginal:.2f} images/s, peak RSS {rss:.0f} MiB", file=sys.stderr, flush=True)
    cpu = platform.processor() or platform.machine()
    print(f"\nModel: `{os.path.relpath(args.model, REPO)}`; {os.cpu_count()} cores ({cpu}).\n")
    print("| set | images | command | wall s | images/s | fixed s (1 image) | marginal images/s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n, label, wall, rate, fixed, marginal, rss in rows:
        print(f"| {name} | {n} | `{label}` | {wall:.1f} | {rate:.2f} | {fixed:.1f} | {marginal:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
