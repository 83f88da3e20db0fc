"""Peak memory on photos as users run them: `predict` over a folder of photos with each model
(a `.tflite` or `.onnx` file, or a converted directory), and the TF1 frozen graph's session over
the same photos, each in a fresh process, side by side as ratios.

`bench` measures memory on generated frames of the sizes it is given, all alike. A folder of
photos of many sizes costs more: a file that resizes photos itself holds the largest one at full
size, in float32, before its resize. This runs the command users run, on their photos:

    measure(frozen_graph, [model, ...], photos) -> report
    python -m migrate.bench.photo_memory tf1 GRAPH PHOTOS RESULT.json        (a worker)
    python -m migrate.bench.photo_memory predict MODEL PHOTOS RESULT.json    (a worker)

The `tf1` worker decodes each photo with TensorFlow (`migrate.common.images.read_image`) and runs
the graph's session on it, one photo per call, as a TF1 client does. The `predict` worker is
`migrate predict MODEL PHOTOS --quiet` in that process (`migrate.cli.main`), its JSON lines going
to a file as they would to a terminal or a pipe; for a model file it imports no TensorFlow, and the
worker reports whether TensorFlow was imported. Each process runs in the environment a user's
process has (`measure.USER_ENV`: TensorFlow's own allocator). Measured per process:

  peak_rss_bytes         its `VmHWM` (`measure._peak_rss_bytes`), read when it has finished
  first_detections_s     from just before it was started to the first photo's detections (for
                         `predict`, its first JSON line, which comes with its first batch)
  wall_s                 from just before it was started to its exit
  seconds                inside the process, from its work's start (after its imports) to its end

Nothing is pickled: requests are arguments, results JSON files (`measure.run_worker`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from migrate.bench.litert_memory import tensorflow_imported
from migrate.common import measure
from ssd_mobilenet.detections import DETECTION_OUTPUTS

TF1_SIDE = "tf1_session"


def _run_worker(args: list, env: dict | None, timeout: float | None) -> dict:
    """The worker's result, with its `first_detections_s` and `wall_s` from just before it started."""
    start = time.time()
    result = measure.run_worker("migrate.bench.photo_memory", args, env, timeout, f"{args[0]} {args[1]}",
                                base=measure.USER_ENV)
    result["measured"].update(first_detections_s=result.pop("first_detections_time") - start,
                              wall_s=time.time() - start)
    return result


def measure_photos(frozen_graph: str, models, photos: str, env: dict | None = None, timeout: float | None = None,
                   progress=None, rotate: int = 0) -> dict:
    """Each side's fresh-process peak memory and times over the photos in `photos` (a folder).

    Args:
      frozen_graph: the TF1 `frozen_inference_graph.pb` (the reference side).
      models: what `predict` runs, each a side: `.tflite` / `.onnx` files, converted directories.
      env: extra environment variables for every worker (both kinds get the same).
      rotate: the processes run in the order of the sides (the TF1 session first) rotated by this
        many places: a caller that repeats the measurement rotates it, so that no side always runs
        right after the same one (the rows keep the sides' order).
    Raises:
      RunError: a worker failed (its exit code and stderr tail) or timed out.
    Returns:
      {"photos": [{"path", "height", "width"}], "rows": [{"side", "model", "peak_rss_bytes",
      "rss_bytes", "rss_ratio" (x the TF1 session's peak), "first_detections_s", "wall_s" (and their
      "_ratio"s to the TF1 session's), "seconds", "tensorflow_imported", "runtime"}], "env": {...}},
      the TF1 session's row first.
    """
    say = progress or (lambda msg: None)
    sides = [None] + list(models)  # None: the TF1 session
    results = {}
    shift = rotate % len(sides)
    for i in list(range(len(sides)))[shift:] + list(range(len(sides)))[:shift]:
        if sides[i] is None:
            say(f"{TF1_SIDE}: {frozen_graph} over {photos}")
            results[i] = _run_worker(["tf1", frozen_graph, photos], env, timeout)
        else:
            say(f"predict {sides[i]} over {photos}")
            results[i] = _run_worker(["predict", sides[i], photos], env, timeout)
    tf1 = results[0]
    rows = [{"side": TF1_SIDE, "model": frozen_graph, **tf1["measured"], "runtime": tf1["runtime"]}]
    for i, model in enumerate(models, 1):
        rows.append({"side": _side_name(model), "model": model, **results[i]["measured"],
                     "runtime": results[i]["runtime"]})
    for row in rows:
        row["rss_ratio"] = row["peak_rss_bytes"] / rows[0]["peak_rss_bytes"]
        for key in ("first_detections_s", "wall_s"):
            row[key + "_ratio"] = row[key] / rows[0][key]
    return {"photos": tf1["photos"], "rows": rows, "env": {**measure.USER_ENV, **(env or {})}}


def _side_name(model: str) -> str:
    """How a row names a model: the file's name, or "saved_model" for a converted directory."""
    return os.path.basename(model) if os.path.isfile(model) else "saved_model"


def markdown(report: dict) -> str:
    """The report as a Markdown table, one row per side, with the photos it ran on."""
    sizes = [f"{p['width']}x{p['height']}" for p in report["photos"]]
    lines = [f"{len(sizes)} photos ({', '.join(sizes)} pixels, width x height), one process per side:", "",
             "| side | runtime | peak RSS MiB | x TF1 | steady RSS MiB | first detections s | x TF1 | wall s | x TF1 "
             "| TensorFlow imported |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        lines.append(f"| {row['side']} | {row['runtime']} | {row['peak_rss_bytes'] / 2 ** 20:.1f} | "
                     f"{row['rss_ratio']:.3f} | {row['rss_bytes'] / 2 ** 20:.1f} | {row['first_detections_s']:.1f} | "
                     f"{row['first_detections_s_ratio']:.2f} | {row['wall_s']:.1f} | {row['wall_s_ratio']:.2f} | "
                     f"{'yes' if row['tensorflow_imported'] else 'no'} |")
    return "\n".join(lines) + "\n"


def _tf1_worker(frozen_graph: str, photos: str) -> dict:
    import tensorflow as tf

    from migrate.common import images
    from migrate.tf1 import frozen_graph as frozen_graph_lib
    from migrate.tf1.sources import read_graph_def
    start = time.perf_counter()
    runner = frozen_graph_lib.FrozenGraphRunner(read_graph_def(frozen_graph))
    fetches = {key: f"{key}:0" for key in DETECTION_OUTPUTS}
    seen, first = [], None
    for path in images.list_images(photos):
        image = images.read_image(path)
        runner.run(image[None], fetches)
        first = first or time.time()
        seen.append({"path": path, "height": int(image.shape[0]), "width": int(image.shape[1])})
    return {"photos": seen, "runtime": f"TensorFlow {tf.__version__} (tf.compat.v1.Session)",
            "first_detections_time": first, "measured": _measured(time.perf_counter() - start)}


class _TimedLines:
    """A text sink for `predict`'s JSON lines (its stdout) that notes when the first one came."""

    def __init__(self, f):
        self.f, self.first = f, None

    def write(self, text: str) -> int:
        self.first = self.first or time.time()
        return self.f.write(text)

    def flush(self) -> None:
        self.f.flush()

    def isatty(self) -> bool:
        return False  # a file, as `predict --out` writes: no terminal layout


def _predict_worker(model: str, photos: str, out_dir: str) -> dict:
    import contextlib

    from migrate.cli import main
    start = time.perf_counter()
    with open(os.path.join(out_dir, "detections.jsonl"), "w", encoding="utf-8") as f:
        lines = _TimedLines(f)
        with contextlib.redirect_stdout(lines):
            code = main(["predict", model, photos, "--quiet"])
    if code != 0:
        raise SystemExit(f"predict {model} {photos}: exit {code}")
    from migrate.predict.runtimes import runtime_kind
    runtime = runtime_kind(model).name
    if "tensorflow" in sys.modules:
        runtime += f" {sys.modules['tensorflow'].__version__}"
    return {"runtime": runtime, "first_detections_time": lines.first,
            "measured": _measured(time.perf_counter() - start)}


def _measured(seconds: float) -> dict:
    return {**measure.rss_now(), "seconds": seconds,
            "tensorflow_imported": tensorflow_imported()}


def main(argv=None) -> int:
    kind, model, photos, result_path = (sys.argv[1:] if argv is None else argv)
    if kind == "tf1":
        result = _tf1_worker(model, photos)
    else:
        with tempfile.TemporaryDirectory(prefix="migrate-photo-memory-out-") as out_dir:
            result = _predict_worker(model, photos, out_dir)
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    if kind != "tf1":
        from migrate.cli import before_exit
        before_exit()  # as `python -m migrate` exits
    return 0


if __name__ == "__main__":
    sys.exit(main())
