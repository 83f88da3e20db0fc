"""Cold start on photos: each side as a user's process runs it, from its start to its first
detections and to its exit over a folder of photos, and its peak memory, against the TF1 session.

`bench`'s latency and memory rows are warm or per batch: a model loaded once, then timed. A user's
process pays the start too: the runtime's import, loading the model, the first call's graph
optimisation and kernel creation, then the photos. Here each side runs in a fresh
`python -m migrate.bench.cold_start REQUEST.json RESULT.json` process
(`measure.run_worker`) in the environment a user's process has (`measure.USER_ENV`: TensorFlow's
own allocator, not the BFC allocator bench's other rows need for their statistics), the same for
every side, which builds the side's runner
(`sides.runner`, as bench's other rows) and runs every photo of the folder, one per call at its own
size, as a TF1 client runs its session, decoded by the runtime's own decoder (TensorFlow's for the
TensorFlow sides; the model files' sides never import TensorFlow). Measured:

  first_detections_s   from just before the process is started to the first photo's detections
  wall_s               from just before the process is started to its exit (its teardown too)
  peak_rss_bytes       the process's peak resident memory (`VmHWM`, read at the end)

The rounds are interleaved (round r runs every side once, in an order rotated every round), so
machine noise reaches every side alike; `x TF1` is the median over the rounds of each round's
ratio to the TF1 session's run, with the lowest and highest round.

    measure_cold(sides, src, converted, photos, ...) -> report
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

from migrate.common import measure

BASELINE = "tf1_session"
METRICS = ("first_detections_s", "wall_s", "peak_rss_bytes")


def measure_cold(sides, src: str, converted: str, photos, exported: dict | None = None, threads: int | None = None,
                 runs: int = 3, env: dict | None = None, timeout: float | None = None, progress=None) -> dict:
    """Each side's cold start over `photos` in `runs` interleaved rounds of fresh processes.

    Args:
      sides: bench's sides (`sides.SIDES`); the TF1 session is measured too, first in the list.
      src, converted: the TF1 model directory and the converted directory.
      photos: image files and folders (`images.list_images`).
      exported: {side: its SavedModel directory or model file} for the sides bench exported.
      threads: the model files' runtimes' threads (`sides.runner`).
      env: extra environment variables for every process (on top of `measure.USER_ENV`).
    Returns:
      {"photos": [{"path", "height", "width"}], "runs": runs, "env": {...},
       "rows": [{"side", "runs": [{metric: value}], metric: median, metric + "_ratio": median of the
       rounds' ratios to the TF1 session, metric + "_ratio_range": [lowest, highest]}]}, the TF1
      session's row first.
    Raises:
      RunError: a process failed or timed out.
    """
    from migrate.common import images
    say = progress or (lambda msg: None)
    sides = [BASELINE] + [s for s in sides if s != BASELINE]
    paths = images.list_images(photos)
    measured = {side: [] for side in sides}
    seen = None
    with tempfile.TemporaryDirectory(prefix="migrate-cold-") as tmp:
        for r in range(runs):
            order = sides[r % len(sides):] + sides[:r % len(sides)]
            for side in order:
                say(f"cold start {r + 1}/{runs}: {side} over {len(paths)} photos")
                request = {"side": side, "src": os.path.abspath(src), "converted": os.path.abspath(converted),
                           "exported": (exported or {}).get(side), "threads": threads, "photos": paths}
                request_path = os.path.join(tmp, "request.json")
                with open(request_path, "w", encoding="utf-8") as f:
                    json.dump(request, f)
                start = time.time()
                result = measure.run_worker("migrate.bench.cold_start", [request_path], env, timeout,
                                            f"cold start of {side}", base=measure.USER_ENV)
                wall = time.time() - start
                measured[side].append({"first_detections_s": result["first_detections_time"] - start,
                                       "wall_s": wall, "peak_rss_bytes": result["peak_rss_bytes"],
                                       "tensorflow_imported": result["tensorflow_imported"]})
                seen = seen or result["photos"]
    rows = []
    for side in sides:
        row = {"side": side, "runs": measured[side]}
        for metric in METRICS:
            row[metric] = statistics.median(run[metric] for run in measured[side])
            ratios = [run[metric] / base[metric] for run, base in zip(measured[side], measured[BASELINE])]
            row[metric + "_ratio"] = statistics.median(ratios)
            row[metric + "_ratio_range"] = [min(ratios), max(ratios)]
        row["tensorflow_imported"] = any(run["tensorflow_imported"] for run in measured[side])
        rows.append(row)
    return {"photos": seen, "runs": runs, "rows": rows, "env": {**measure.USER_ENV, **(env or {})}}


def markdown(report: dict) -> str:
    """The report as a Markdown table, one row per side."""
    sizes = [f"{p['width']}x{p['height']}" for p in report["photos"]]
    ratio = lambda row, metric: "{:.2f} ({:.2f}-{:.2f})".format(row[metric + "_ratio"],  # noqa: E731
                                                                 *row[metric + "_ratio_range"])
    lines = [f"{len(sizes)} photos ({', '.join(sizes)} pixels, width x height), one photo per call, each side a "
             f"fresh process, {report['runs']} interleaved rounds (medians; in brackets the lowest and highest "
             "round's ratio):", "",
             "| side | first detections s | x TF1 | folder wall s | x TF1 | peak RSS MiB | x TF1 | TensorFlow imported |",
             "|---|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        lines.append(f"| {row['side']} | {row['first_detections_s']:.1f} | {ratio(row, 'first_detections_s')} | "
                     f"{row['wall_s']:.1f} | {ratio(row, 'wall_s')} | {row['peak_rss_bytes'] / 2 ** 20:.0f} | "
                     f"{ratio(row, 'peak_rss_bytes')} | {'yes' if row['tensorflow_imported'] else 'no'} |")
    return "\n".join(lines) + "\n"


def _worker(request: dict) -> dict:
    from migrate.bench import sides as sides_lib
    from migrate.bench.litert_memory import tensorflow_imported
    side = request["side"]
    if side in sides_lib.FILE_SIDES:
        from ssd_mobilenet.formats.images import read_image  # the model files' runtimes: no TensorFlow
    else:
        from migrate.common.images import read_image
    run = sides_lib.runner(side, request["src"], request["converted"], request["exported"], request["threads"])
    first, first_peak, photos = None, None, []
    for path in request["photos"]:
        image = read_image(path)
        run(image[None])
        if first is None:
            first, first_peak = time.time(), measure._peak_rss_bytes()
        photos.append({"path": path, "height": int(image.shape[0]), "width": int(image.shape[1])})
    return {"first_detections_time": first, "first_peak_rss_bytes": first_peak, "end_time": time.time(),
            **measure.rss_now(), "photos": photos,
            "tensorflow_imported": tensorflow_imported()}


def main(argv=None) -> int:
    """`python -m migrate.bench.cold_start REQUEST.json RESULT.json` (started by `measure_cold`)."""
    return measure.serve_request(_worker, argv)


if __name__ == "__main__":
    sys.exit(main())
