"""Benchmark: the TF1 frozen graph against the converted TF2 model, side by side on this machine.

Sides (`SIDES`), each a runner `run(images uint8 [N, H, W, 3]) -> dict of outputs`:
  tf1_session        the frozen graph in a `tf.compat.v1.Session` (default config): the baseline
  tf1_wrap_function  the same graph through `tf.compat.v1.wrap_function` (TF2 without this toolkit)
  saved_model        CONVERTED/saved_model as `convert` wrote it (default: the fast variant),
                     `tf.saved_model.load(...).signatures["serving_default"]`, plain TF
  saved_model_exact  the same call on the `--exact` SavedModel (op for op the graph)
  saved_model_mixed  the same call on the `--precision mixed_bfloat16` SavedModel (CPUs;
                     `mixed_float16` on GPUs)
  (the last two are exported from CONVERTED's checkpoint into a temporary directory first,
  in a process of their own, as `convert` writes them)
  detector           `ssd_mobilenet.load(...)`: batch norm folded, batch in slices (float32)
  detector_frozen    `ssd_mobilenet.load(..., freeze_weights=True)`: weights as graph constants
                     whatever the model
  detector_exact     `ssd_mobilenet.load(..., fold_batch_norm=False, slice_size=None)`: op for op the graph
  detector_xla       `ssd_mobilenet.load(..., jit_compile=True)`
  detector_mixed     `precision="mixed_bfloat16"` on CPUs, `"mixed_float16"` on GPUs

Latency: every side runs in ONE worker process, interleaved (round r times every side once,
in an order rotated every round), so machine noise hits all sides alike; the ratio is
median(side) / median(tf1_session), with a 95% interval from resampling the rounds in pairs
(`ratio_interval`). Memory: each side in its own fresh process
(`migrate.common.measure.measure_isolated`): the TensorFlow allocator's transient peak per batch
(peak - resident before the runs) and the process's peak RSS. Both kinds of worker get
the same environment (`TF_CPU_ALLOCATOR_USE_BFC=true`, threads, oneDNN setting, weight
cache), so a ratio is the migration's effect, not an environment flag's. `onednn` runs the latency
worker once per oneDNN setting to show that lever for both sides.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from migrate.common import measure, outputs

SIDES = ("tf1_session", "tf1_wrap_function", "saved_model", "saved_model_exact", "saved_model_mixed", "detector",
         "detector_frozen", "detector_exact", "detector_xla", "detector_mixed")
# Sides whose SavedModel bench exports first: (variant, precision; None: `mixed_precision()`).
EXPORTED_SIDES = {"saved_model_exact": ("exact", "float32"), "saved_model_mixed": ("fast", None)}
BASELINE = "tf1_session"
DETECTION_OUTPUTS = ("detection_boxes", "detection_scores", "detection_classes", "num_detections")


class BenchInputError(ValueError):
    """A benchmark input (model directory, size or batch list, output file) is unusable."""


def parse_sizes(text: str) -> list:
    """"300x300,480x640" -> [(300, 300), (480, 640)] (H x W)."""
    sizes = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise BenchInputError(f"--size {text!r}: expected HxW[,HxW...] with positive integers")
        sizes.append((int(parts[0]), int(parts[1])))
    return sizes


def parse_batches(text: str) -> list:
    """"1,8,32" -> [1, 8, 32]."""
    try:
        batches = [int(b) for b in text.split(",")]
    except ValueError:
        batches = []
    if not batches or min(batches) < 1:
        raise BenchInputError(f"--batch {text!r}: expected positive integers separated by commas")
    return batches


def runner(side: str, src: str, converted: str, saved_model: str = None):
    """The runner of `side` (see the module docstring) for a TF1 model dir and a converted dir;
    `saved_model`: the SavedModel directory of a `saved_model*` side (default CONVERTED's)."""
    import numpy as np
    import tensorflow as tf

    if side in ("tf1_session", "tf1_wrap_function"):
        graph_def = tf.compat.v1.GraphDef()
        with open(_frozen_graph(src), "rb") as f:
            graph_def.ParseFromString(f.read())
        if side == "tf1_session":
            from migrate.tf1.frozen_graph import FrozenGraphRunner
            session = FrozenGraphRunner(graph_def)
            fetches = {k: f"{k}:0" for k in DETECTION_OUTPUTS}
            return lambda images: session.run(images, fetches)
        wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
        pruned = wrapped.prune("image_tensor:0", [f"{k}:0" for k in DETECTION_OUTPUTS])
        return lambda images: dict(zip(DETECTION_OUTPUTS, (np.asarray(t) for t in pruned(tf.constant(images)))))
    if side.startswith("saved_model"):
        serve = tf.saved_model.load(saved_model or os.path.join(converted, "saved_model")).signatures["serving_default"]
        return lambda images: {k: v.numpy() for k, v in serve(input_tensor=tf.constant(images)).items()}
    import warnings

    import ssd_mobilenet
    options = {"detector": {}, "detector_frozen": {"freeze_weights": True},
               "detector_exact": {"fold_batch_norm": False, "slice_size": None},
               "detector_xla": {"jit_compile": True}, "detector_mixed": {"precision": mixed_precision()}}
    if side not in options:
        raise BenchInputError(f"unknown side {side!r}; one of {', '.join(SIDES)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the jit_compile-on-CPU warning: measuring it is the point
        detector = ssd_mobilenet.load(converted, **options[side])
    return lambda images: {k: v.numpy() for k, v in detector(images).items()}


def export_sides(converted: str, out_dir: str, sides) -> dict:
    """{side: SavedModel dir} of the `EXPORTED_SIDES` among `sides`, written under `out_dir` from
    CONVERTED's checkpoint (`ssd_mobilenet.export`), as `convert --exact / --precision` writes them."""
    from ssd_mobilenet import detector, export
    model = detector.load_model(converted)
    paths = {}
    for side in sides:
        if side in EXPORTED_SIDES:
            variant, precision = EXPORTED_SIDES[side]
            paths[side] = os.path.join(out_dir, side)
            export.export_saved_model(model, paths[side], variant, precision or mixed_precision())
    return paths


def _export_worker(converted: str, out_dir: str, sides_csv: str) -> None:
    from migrate.common import console
    console.quiet_worker()
    export_sides(converted, out_dir, sides_csv.split(","))


def mixed_precision() -> str:
    """The mixed policy that has hardware behind it here: float16 on GPUs, bfloat16 on CPUs."""
    import tensorflow as tf
    return "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"


def _frozen_graph(src: str) -> str:
    path = src if os.path.isfile(src) else os.path.join(src, "frozen_inference_graph.pb")
    if not os.path.isfile(path):
        raise BenchInputError(f"{src}: no frozen_inference_graph.pb (the TF1 side needs the frozen graph)")
    return path


def _check_frozen_graph(src: str) -> None:
    """Before any worker starts: the TF1 side's graph exists and is one a session can run."""
    from migrate.tf1 import graph_traits
    from migrate.tf1.sources import read_graph_def
    path = _frozen_graph(src)
    if graph_traits.is_tflite_export(read_graph_def(path)):
        raise BenchInputError(f"{path}: {graph_traits.TFLITE_REFUSAL}")


def _images(size, batch, seed=0):
    import numpy as np
    return np.random.default_rng(seed + batch).integers(0, 256, (batch, size[0], size[1], 3), dtype=np.uint8)


# A batch smaller than the run's largest gets up to this many times the rounds (`rounds`).
MAX_ROUNDS_FACTOR = 4


def rounds(repeats: int, batch: int, batches) -> int:
    """Timed rounds for `batch`: `repeats` times the largest batch over `batch`, at most
    `MAX_ROUNDS_FACTOR` times. Small batches cost little per round and their ratios are the
    noisiest (a few ms against scheduler and cache noise), so they get more rounds: at
    `--batch 1,8,32 --repeats 15`, 60, 60 and 15."""
    return repeats * max(1, min(MAX_ROUNDS_FACTOR, max(batches) // batch))


def interleaved_latency(sides, src, converted, sizes, batches, warmup=2, repeats=10, trace_dir=None,
                        progress=None, saved_models=None) -> dict:
    """{side: {"HxW/bN": [ms per run]}} with all sides timed interleaved in this process
    (`rounds(repeats, batch, batches)` rounds per batch).

    `trace_dir`: afterwards, a profiler trace of two runs of each side at the first size and
    batch goes to `trace_dir/<side>`.
    """
    say = progress or (lambda msg: None)
    runners = {}
    for side in sides:
        say(f"building {side}")
        runners[side] = runner(side, src, converted, (saved_models or {}).get(side))
    times = {side: {} for side in sides}
    for size in sizes:
        for batch in batches:
            key = f"{size[0]}x{size[1]}/b{batch}"
            images = _images(size, batch)
            say(f"latency {key}")
            for side in sides:
                for _ in range(warmup):
                    runners[side](images)
                times[side][key] = []
            for r in range(rounds(repeats, batch, batches)):
                order = sides[r % len(sides):] + sides[:r % len(sides)]
                for side in order:
                    t = time.perf_counter()
                    runners[side](images)
                    times[side][key].append((time.perf_counter() - t) * 1000.0)
    if trace_dir:
        from ssd_mobilenet import runtime
        images = _images(sizes[0], batches[0])
        for side in sides:
            say(f"trace {side}")
            with runtime.trace(os.path.join(trace_dir, side)):
                for _ in range(2):
                    runners[side](images)
    return times


def _latency_worker(request_path, result_path):
    with open(request_path, encoding="utf-8") as f:
        req = json.load(f)
    if req.get("memory_growth") or req.get("memory_limit_mb"):
        from ssd_mobilenet import runtime
        runtime.configure(memory_growth=req.get("memory_growth", False), memory_limit_mb=req.get("memory_limit_mb"))
    times = interleaved_latency(req["sides"], req["src"], req["converted"], [tuple(s) for s in req["sizes"]],
                                req["batches"], req["warmup"], req["repeats"], trace_dir=req.get("trace_dir"),
                                progress=lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True),
                                saved_models=req.get("saved_models"))
    with open(result_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(times, f)
    os.replace(result_path + ".tmp", result_path)


def _run_latency_process(request: dict, env: dict, progress) -> dict:
    with tempfile.TemporaryDirectory(prefix="migrate-bench-") as tmp:
        req, res = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(req, "w", encoding="utf-8") as f:
            json.dump(request, f)
        proc = subprocess.Popen([sys.executable, "-m", "migrate.bench", req, res], env=_worker_env(env),
                                stderr=subprocess.PIPE, text=True)
        tail = []
        for line in proc.stderr:
            tail = (tail + [line.rstrip()])[-15:]
            if line.startswith("[bench]"):
                progress(line[len("[bench] "):].rstrip())
        if proc.wait() != 0 or not os.path.isfile(res):
            raise RuntimeError("latency worker failed:\n" + "\n".join(tail))
        with open(res, encoding="utf-8") as f:
            return json.load(f)


def _stats(values):
    import numpy as np
    v = np.asarray(values, dtype=np.float64)
    return {"median": float(np.median(v)), "p90": float(np.percentile(v, 90)),
            "spread": float((np.percentile(v, 90) - np.percentile(v, 10)) / np.median(v))}


RATIO_INTERVAL = 0.95
_BOOTSTRAP_RESAMPLES = 2000


def ratio_interval(side_ms, base_ms, seed=0) -> list:
    """[lo, hi]: the 95% bootstrap interval of median(side_ms) / median(base_ms).

    `side_ms[r]` and `base_ms[r]` are round r's times (interleaved in one process), so rounds
    are resampled as pairs: noise that slowed both sides in one round stays paired, as it does
    in the measured ratio. The percentile interval of the resampled ratios; with a handful of
    rounds it is wide, which is the point: a target "met" by a few percent inside it is not
    settled by this run.
    """
    import numpy as np
    side, base = np.asarray(side_ms, np.float64), np.asarray(base_ms, np.float64)
    if side.shape != base.shape or side.size == 0:
        raise ValueError(f"paired rounds needed: {side.size} vs {base.size} times")
    picks = np.random.default_rng(seed).integers(0, side.size, (_BOOTSTRAP_RESAMPLES, side.size))
    ratios = np.median(side[picks], axis=1) / np.median(base[picks], axis=1)
    tail = (1.0 - RATIO_INTERVAL) / 2 * 100
    return [float(np.percentile(ratios, tail)), float(np.percentile(ratios, 100 - tail))]


def bench(src: str, converted: str, sizes=((480, 640),), batches=(1, 8), sides=SIDES, repeats=10, warmup=2,
          memory=True, memory_repeats=2, onednn=None, env=None, weight_cache=False, memory_growth=False,
          memory_limit_mb=None, trace_dir=None, progress=None) -> dict:
    """Runs the benchmark; returns a JSON-able report (see `format_table` for the columns).

    Args:
      src: TF1 model directory (or its frozen_inference_graph.pb).
      converted: a directory written by `migrate convert`.
      sizes: [(H, W)] input image sizes; batches: batch sizes.
      sides: which of `SIDES` (the baseline `tf1_session` is always included).
      repeats, warmup: interleaved timed rounds (at the largest batch; smaller ones get more,
        see `rounds`) and untimed runs per side per batch.
      memory: also measure allocator and RSS peaks, one fresh process per side.
      onednn: None (TensorFlow's default for this CPU), "0", "1", or "both" (latency measured
        under each setting; memory under the default).
      env: extra environment variables for every worker (e.g. thread settings).
      weight_cache: every worker with oneDNN's filter cache (`ssd_mobilenet.runtime.WEIGHT_CACHE_ENV`).
      memory_growth, memory_limit_mb: `ssd_mobilenet.runtime.configure` in the latency worker;
        a limit also caps the CPU allocator of the memory workers (on GPUs those run with
        memory growth, as `migrate.common.measure` sets it).
      trace_dir: write a profiler trace of each side to `trace_dir/<side>`.
    Raises:
      BenchInputError: a missing model directory or frozen graph, an unknown side, or
        memory growth together with a memory limit.
    """
    say = progress or (lambda msg: None)
    _check_frozen_graph(src)
    if not os.path.isfile(os.path.join(converted, "model_config.json")):
        raise BenchInputError(f"{converted}: not a converted model directory (no model_config.json)")
    if repeats < 1 or warmup < 0:
        raise BenchInputError(f"--repeats {repeats} / --warmup {warmup}: need >= 1 timed run and warm-up >= 0")
    if memory_limit_mb is not None and memory_limit_mb <= 0:
        raise BenchInputError(f"--memory-limit {memory_limit_mb}: must be a positive number of MiB")
    if memory_growth and memory_limit_mb is not None:
        raise BenchInputError("--memory-growth and --memory-limit exclude each other; choose one")
    unknown = [s for s in sides if s not in SIDES]
    if unknown:
        raise BenchInputError(f"unknown side(s) {', '.join(unknown)}; choose from {', '.join(SIDES)}")
    sides = [BASELINE] + [s for s in sides if s != BASELINE]
    settings = {None: [None], "both": ["0", "1"]}.get(onednn, [onednn])
    base_env = {**measure.BASE_ENV, **(env or {})}
    if weight_cache:
        from ssd_mobilenet.runtime import WEIGHT_CACHE_ENV
        base_env[WEIGHT_CACHE_ENV] = "1"
    if memory_limit_mb is not None:
        base_env["TF_CPU_BFC_MEM_LIMIT_IN_MB"] = str(int(memory_limit_mb))
    request = {"sides": sides, "src": os.path.abspath(src), "converted": os.path.abspath(converted),
               "sizes": [list(s) for s in sizes], "batches": list(batches), "warmup": warmup, "repeats": repeats,
               "memory_growth": memory_growth, "memory_limit_mb": memory_limit_mb,
               "trace_dir": os.path.abspath(trace_dir) if trace_dir else None}
    exported = [s for s in sides if s in EXPORTED_SIDES]
    export_dir = tempfile.mkdtemp(prefix="migrate-bench-export-") if exported else None
    try:
        if exported:
            say(f"exporting {', '.join(exported)} from {converted}")
            _run_export_process(request["converted"], export_dir, exported, base_env)
            request["saved_models"] = {side: os.path.join(export_dir, side) for side in exported}
        latency, memory_results = _measure(request, sides, sizes, batches, settings, base_env, memory, memory_repeats,
                                           say)
    finally:
        if export_dir:
            shutil.rmtree(export_dir, ignore_errors=True)
    return _report(latency, memory_results, sides, sizes, batches, repeats, warmup, base_env)


def _worker_env(env: dict) -> dict:
    """This process's environment with `env` and this checkout first on PYTHONPATH, for a worker."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return {**os.environ, **env, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}


def _run_export_process(converted: str, out_dir: str, sides, env: dict) -> None:
    proc = subprocess.run([sys.executable, "-c", "import sys; from migrate.bench import _export_worker; "
                           "_export_worker(*sys.argv[1:])", converted, out_dir, ",".join(sides)],
                          env=_worker_env(env), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("export worker failed:\n" + "\n".join(proc.stderr.splitlines()[-15:]))


def _measure(request, sides, sizes, batches, settings, base_env, memory, memory_repeats, say):
    """(latency {oneDNN label: times}, memory {side: measure result}) of every side."""
    latency = {}
    for setting in settings:
        label = "default" if setting is None else setting
        worker_env = dict(base_env) if setting is None else {**base_env, "TF_ENABLE_ONEDNN_OPTS": setting}
        say(f"interleaved latency, oneDNN {label}")
        latency[label] = _run_latency_process(request, worker_env, say)
    memory_results = {}
    if memory:
        images = [_images(size, b) for size in sizes for b in batches]
        for side in sides:
            say(f"memory: {side} in a fresh process")
            memory_results[side] = measure.measure_isolated(
                "migrate.bench:runner", {"side": side, "src": request["src"], "converted": request["converted"],
                                         "saved_model": request.get("saved_models", {}).get(side)},
                images, warmup=1, repeats=memory_repeats, env=base_env)
    return latency, memory_results


def _report(latency, memory_results, sides, sizes, batches, repeats, warmup, base_env) -> dict:
    import tensorflow as tf
    rows = []
    for label, times in latency.items():
        for size in sizes:
            for i, batch in enumerate(batches):
                key = f"{size[0]}x{size[1]}/b{batch}"
                base = _stats(times[BASELINE][key])
                base_mem = memory_results.get(BASELINE)
                for side in sides:
                    st = _stats(times[side][key])
                    row = {"side": side, "onednn": label, "size": list(size), "batch": batch,
                           "rounds": len(times[side][key]), "latency_ms": st, "images_per_s": batch * 1000.0 / st["median"],
                           "latency_ratio": st["median"] / base["median"],
                           "latency_ratio_ci95": ratio_interval(times[side][key], times[BASELINE][key])}
                    mem = memory_results.get(side)
                    if mem is not None and label == next(iter(latency)):
                        j = sizes.index(size) * len(batches) + i
                        row["alloc_transient_bytes"] = _transient(mem, j)
                        row["peak_rss_bytes"] = mem["peak_rss_bytes"]
                        row["rss_bytes"] = mem.get("rss_bytes")
                        if base_mem is not None:
                            row["alloc_ratio"] = _ratio(row["alloc_transient_bytes"], _transient(base_mem, j))
                            row["rss_ratio"] = _ratio(mem["peak_rss_bytes"], base_mem["peak_rss_bytes"])
                            row["steady_rss_ratio"] = _ratio(mem.get("rss_bytes"), base_mem.get("rss_bytes"))
                    rows.append(row)
    return {"rows": rows, "sizes": [list(s) for s in sizes], "batches": list(batches), "sides": sides,
            "repeats": repeats, "warmup": warmup, "env": base_env, "onednn": [str(s) for s in latency],
            "device": "GPU" if tf.config.list_physical_devices("GPU") else "CPU", "tensorflow": tf.__version__,
            "cpu_count": os.cpu_count(), "memory": memory_results}


def _transient(result, index):
    b = result["batches"][index]
    if b["peak_memory_bytes"] is None or b["baseline_memory_bytes"] is None:
        return None
    return b["peak_memory_bytes"] - b["baseline_memory_bytes"]


def _ratio(a, b):
    return None if a is None or not b else a / b


def format_table(report: dict, markdown: bool = False) -> str:
    """The report as a table: one row per side, size, batch (and oneDNN setting)."""
    head = ["side", "oneDNN", "size", "batch", "median ms", "p90 ms", "img/s", "latency x TF1 (95%)",
            "alloc peak MiB", "alloc x TF1", "peak RSS MiB", "RSS x TF1", "steady RSS MiB", "x TF1"]
    mib = lambda b: "-" if b is None else f"{b / 2**20:.1f}"
    ratio = lambda r: "-" if r is None else f"{r:.2f}"
    lines = []
    for r in report["rows"]:
        latency = ratio(r["latency_ratio"])
        if r["side"] != BASELINE and r.get("latency_ratio_ci95"):
            latency += " ({:.2f}-{:.2f})".format(*r["latency_ratio_ci95"])
        lines.append([r["side"], r["onednn"], f"{r['size'][0]}x{r['size'][1]}", str(r["batch"]),
                      f"{r['latency_ms']['median']:.1f}", f"{r['latency_ms']['p90']:.1f}", f"{r['images_per_s']:.1f}",
                      latency, mib(r.get("alloc_transient_bytes")), ratio(r.get("alloc_ratio")),
                      mib(r.get("peak_rss_bytes")), ratio(r.get("rss_ratio")), mib(r.get("rss_bytes")),
                      ratio(r.get("steady_rss_ratio"))])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(out + ["| " + " | ".join(line) + " |" for line in lines])
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = lambda cells: "  ".join(c.rjust(w) if i > 0 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head)] + [fmt(line) for line in lines])


def write_json(report: dict, path: str, force: bool = False) -> None:
    """Writes `report` to `path` atomically; refuses to replace an existing file without `force`."""
    if os.path.exists(path) and not force:
        raise BenchInputError(f"{path}: exists (use --force to replace it)")
    outputs.write_text(path, json.dumps(report, indent=1))


# The targets (issue 19), per side: (side, batch, key, limit, what). The SavedModel is judged
# as users deploy it (plain `tf.saved_model.load`), and `ssd_mobilenet.load()` as the library
# runs it, both without process-wide levers; the mixed-precision SavedModel where the CPU has
# bfloat16 units (or a GPU float16 ones).
TARGETS = (
    ("saved_model", 1, "latency_ratio", 0.8, "latency"),
    ("saved_model", 8, "latency_ratio", 0.8, "latency"),
    ("saved_model", 8, "alloc_ratio", 0.6, "allocator transient peak"),
    ("saved_model", 8, "steady_rss_ratio", 1.0, "steady-state process RSS"),
    ("detector", 1, "latency_ratio", 0.8, "latency"),
    ("detector", 8, "latency_ratio", 0.8, "latency"),
    ("saved_model_mixed", 1, "latency_ratio", 0.5, "latency"),
    ("saved_model_mixed", 8, "latency_ratio", 0.5, "latency"),
)


def targets(report: dict, size=(480, 640)) -> list:
    """`TARGETS` checked on `report` at `size`: [(text, measured, passed)], for the sides and
    batches the report has.

    `passed` judges the median ratio; `measured` adds the latency ratio's 95% interval and says
    when that interval reaches across the limit (the run does not settle it either way)."""
    rows = [r for r in report["rows"] if tuple(r["size"]) == tuple(size) and r["onednn"] == report["onednn"][0]]
    out = []
    for side, batch, key, limit, what in TARGETS:
        row = next((r for r in rows if r["side"] == side and r["batch"] == batch and r.get(key) is not None), None)
        if row is None:
            continue
        measured = f"{row[key]:.2f}x"
        interval = row.get(key + "_ci95")
        if interval:
            measured += f", 95% interval {interval[0]:.2f}-{interval[1]:.2f}x"
            if interval[0] <= limit < interval[1]:
                measured += f", which reaches across {limit}x"
        out.append((f"`{side}` {what} at batch {batch}, {size[0]}x{size[1]}: <= {limit}x TF1", measured,
                    row[key] <= limit))
    return out


def scaling(report: dict) -> list:
    """One Markdown line per side and size: per-image latency and allocator peak from the smallest
    to the largest batch (peak memory should grow no faster than the batch)."""
    lines = []
    first = report["onednn"][0]
    b0, b1 = min(report["batches"]), max(report["batches"])
    if b0 == b1:
        return ["(one batch size measured)"]
    for size in report["sizes"]:
        for side in report["sides"]:
            rows = {r["batch"]: r for r in report["rows"]
                    if r["side"] == side and r["size"] == size and r["onednn"] == first}
            lo, hi = rows[b0], rows[b1]
            text = (f"- `{side}` {size[0]}x{size[1]}: {lo['latency_ms']['median'] / b0:.1f} -> "
                    f"{hi['latency_ms']['median'] / b1:.1f} ms per image from batch {b0} to {b1}")
            if lo.get("alloc_transient_bytes") and hi.get("alloc_transient_bytes"):
                growth = hi["alloc_transient_bytes"] / lo["alloc_transient_bytes"]
                text += (f"; allocator peak {lo['alloc_transient_bytes'] / 2**20:.1f} -> "
                         f"{hi['alloc_transient_bytes'] / 2**20:.1f} MiB, x{growth:.1f} for x{b1 // b0} the images")
            lines.append(text)
    return lines


def _machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical cores"


def write_markdown(report: dict, path: str, command: str, force: bool = False, plot: str = None) -> None:
    """docs/benchmarks.md: how it was run, the table, the targets, scaling and the notes (atomic write).
    `plot`: a PNG written by `write_plot`, shown under the scaling section (path relative to `path`)."""
    if os.path.exists(path) and not force:
        raise BenchInputError(f"{path}: exists (use --force to replace it)")
    spreads = [r["latency_ms"]["spread"] for r in report["rows"]]
    per_batch = ", ".join(f"{rounds(report['repeats'], b, report['batches'])} at batch {b}" for b in report["batches"])
    lines = ["# Benchmarks: TF1 frozen graph vs the converted TF2 model", "",
             "Generated by one run of (from the repository root, after `python -m migrate convert SRC --out CONVERTED`):",
             "", "```bash", command, "```", "",
             f"Machine: {_machine()}; device {report['device']}; TensorFlow {report['tensorflow']}; "
             f"environment of every worker: `{' '.join(f'{k}={v}' for k, v in sorted(report['env'].items()))}`; "
             f"interleaved rounds per batch: {per_batch} (`--repeats` {report['repeats']}, up to "
             f"{MAX_ROUNDS_FACTOR}x for smaller batches), after "
             f"{report['warmup']} warm-up runs per side.", "",
             "Latency: all sides in one process, interleaved, so machine noise hits them alike; `latency x TF1` is "
             "median / median of `tf1_session` at the same size, batch and oneDNN setting, with in brackets its 95% "
             "interval from resampling the rounds in pairs (bootstrap). Memory: each side in "
             "its own fresh process; `alloc peak` is the TensorFlow allocator's transient peak during the runs "
             "(peak minus what was resident before: weights, graph constants), `peak RSS` the process's peak and "
             "`steady RSS` its resident memory after the last run (what a serving process holds between "
             "requests).", "",
             "## Targets", ""]
    for text, measured, passed in targets(report):
        lines.append(f"- {text}: **{measured}** {'(met)' if passed else '(NOT met)'}")
    lines += ["", "## Results", "", format_table(report, markdown=True), "", "## Scaling with the batch", ""]
    lines += scaling(report)
    if plot:
        lines += ["", f"![latency per image and allocator transient peak against the batch size]({plot})"]
    lines += ["",
              "`spread` of the latency samples ((p90 - p10) / median) per row is in the `--json` report; "
              f"in this run it was {min(spreads):.0%} to {max(spreads):.0%} (median {sorted(spreads)[len(spreads) // 2]:.0%}). "
              "On a machine shared with other jobs it runs to tens of percent: compare ratios, not times, "
              "and rerun on a quiet machine before drawing conclusions from a few percent.", "",
              "## Sides", ""]
    lines += [f"- `{name}`: {text}" for name, text in _SIDE_TEXT.items() if name in report["sides"]]
    lines += ["", _NOTES]
    outputs.write_text(path, "\n".join(lines) + "\n")


PLOT_EXTRA = "pip install 'ssd-mobilenet-migrate[plot]'"


def plot_available() -> bool:
    """Whether matplotlib (the optional `plot` extra) can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def check_plot(path: str, num_batches: int) -> None:
    """Raises BenchInputError when a plot to `path` cannot be drawn: no matplotlib (the
    optional `plot` extra), or fewer than two batch sizes to plot against."""
    if not plot_available():
        raise BenchInputError(f"{path}: plotting needs matplotlib ({PLOT_EXTRA})")
    if num_batches < 2:
        raise BenchInputError(f"{path}: a plot against the batch size needs at least two batch sizes "
                              "(--batch 1,8,...)")


def write_plot(report: dict, path: str, force: bool = False) -> None:
    """A PNG of latency per image and allocator transient peak against the batch size, one line
    per side, at the report's first image size and oneDNN setting (atomic write).

    Raises:
      BenchInputError: matplotlib is not installed (the optional `plot` extra), `path` exists
        without `force`, or the report has fewer than two batch sizes.
    """
    check_plot(path, len(report["batches"]))
    if os.path.exists(path) and not force:
        raise BenchInputError(f"{path}: exists (use --force to replace it)")
    import io

    import matplotlib.ticker
    from matplotlib.figure import Figure  # not pyplot: no display backend, no global state touched

    size, label = report["sizes"][0], report["onednn"][0]
    rows = [r for r in report["rows"] if r["size"] == size and r["onednn"] == label]
    fig = Figure(figsize=(10, 4), dpi=100)
    latency, memory = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for side in report["sides"]:
        mine = sorted((r for r in rows if r["side"] == side), key=lambda r: r["batch"])
        batches = [r["batch"] for r in mine]
        style = {"marker": "o", "linewidth": 2.5 if side == BASELINE else 1.5}
        latency.plot(batches, [r["latency_ms"]["median"] / r["batch"] for r in mine], label=side, **style)
        mem = [(r["batch"], r["alloc_transient_bytes"] / 2**20) for r in mine if r.get("alloc_transient_bytes")]
        if mem:
            memory.plot(*zip(*mem), label=side, **style)
    for ax, title in ((latency, "median latency per image (ms)"), (memory, "allocator transient peak (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(report["batches"], [str(b) for b in report["batches"]])
        ax.set_xlabel("batch size")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())  # 20, not 2x10^1
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    latency.legend(fontsize=7)
    fig.suptitle(f"TF1 session vs converted TF2 model, {size[0]}x{size[1]}, {report['device']}, "
                 f"TensorFlow {report['tensorflow']}")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    outputs.write_bytes(path, buffer.getvalue())


_SIDE_TEXT = {
    "tf1_session": "the frozen graph in `tf.compat.v1.Session` with its default config (Grappler folds batch norm "
                   "into the convolutions and fuses conv + bias + ReLU6): the baseline.",
    "tf1_wrap_function": "the same graph imported into `tf.compat.v1.wrap_function` and pruned to the four outputs: "
                         "what a TF2 user runs without this toolkit.",
    "saved_model": "`tf.saved_model.load(CONVERTED/saved_model).signatures['serving_default']`, plain TensorFlow: "
                   "the SavedModel `convert` writes by default (batch norm folded, heads merged, early layers in "
                   "slices, every weight a graph constant).",
    "saved_model_exact": "the same call on the SavedModel `convert --exact` writes: op for op the TF1 graph, weights "
                         "as variables.",
    "saved_model_mixed": "the same call on the SavedModel `convert --precision mixed_bfloat16` writes (CPUs; "
                         "`mixed_float16` on GPUs); detections agree by IoU and class, not to 1e-5.",
    "detector": "`ssd_mobilenet.load(CONVERTED)`: batch norm folded into the convolutions at load, "
                "preprocessing and the early layers in slices of 2 images, two slices in flight at once, each "
                "feature map's box and class heads as one conv, weights as variables.",
    "detector_frozen": "`ssd_mobilenet.load(CONVERTED, freeze_weights=True)`: the same with every weight a graph "
                       "constant (faster at small batches, several times the weights' size in process memory).",
    "detector_exact": "`ssd_mobilenet.load(CONVERTED, fold_batch_norm=False, slice_size=None)`: op for op the TF1 "
                      "graph as written (the reference of the parity tests).",
    "detector_xla": "`ssd_mobilenet.load(CONVERTED, jit_compile=True)`.",
    "detector_mixed": "`ssd_mobilenet.load(CONVERTED, precision='mixed_bfloat16')` on CPUs "
                      "(`'mixed_float16'` on GPUs); detections agree by IoU and class, not to 1e-5.",
}

_NOTES = """## What made the difference

- **Batch norm folded at load** (`ssd_mobilenet.model.fold_batch_norm`): for inference BN is a per-channel
  affine constant; folding it into the convolution weights removes two passes over every activation and
  lets Grappler fuse conv + bias + ReLU6 (and depthwise conv + bias + ReLU6) into one kernel each. The TF1
  session does the same to a frozen graph, so the folded model rounds like the TF1 session (measured on
  the zoo fixture: box codes within 3.2e-6, detections within 3e-7 of it, same classes and counts);
  `fold_batch_norm=False` keeps the graph-as-written arithmetic the parity tests hold to 1e-5.
- **Preprocessing on uint8**: the legacy resize kernels read uint8 directly (bit-identical), so no float32
  copy of the full-size batch is made.
- **Post-processing**: per-class NMS is TensorFlow's NonMaxSuppressionV4 kernel on all anchors with the
  excluded ones masked, one op per class unrolled as in the TF1 graph (independent ops the executor runs
  in parallel; a `map_fn` over classes ran them one after the other and cost 0.03-0.07x of the TF1
  latency), instead of the TF1 graph's per-class gather / slice / pad sequence; boxes and scores are
  gathered for the kept detections only; each class's scores come from one transpose and unstack
  (337 nodes instead of 694 with a strided slice per class; 1-5% of the stage). Profiled at batch 1
  (480x640, 30 runs, summed over both threads): 2.0 ms of NMS ops here against 7.2 ms in the TF1
  session's post-processing. The synthetic zoo fixture is a hard case: 4435 class scores above its
  0.3 threshold in 82 classes for one random image, where a trained detector has a few.
- **Early layers in slices** (`slice_size=2`): preprocessing and the high-resolution layers up to
  `Conv2d_5_pointwise` run two images at a time, then the rest of the network on the whole batch. The
  allocator holds one slice's large activations instead of the batch's (the batch-8 transient peak
  falls well under the TF1 graph's), and those activations stay in cache, which makes batches faster too.
  Other split points and slice sizes (frozen weights, batch 8, 24 interleaved rounds, 2026-11-23): up to
  Conv2d_3, 5 or 11 in slices of 2, or up to Conv2d_5 in slices of 1, all read 0.80-0.82x of the TF1
  session: no better choice than the default.
- **Two slices in flight** (`concurrent_slices=2`): the slice loop runs two slices at once, so each core
  works on its own slice more of the time instead of the two sharing every op of one (one op over the
  batch kept them 78% busy: one intra-op thread ran the frozen detector's batch of 8 in 263 ms, two in
  169 ms). Interleaved with one slice at a time (30 rounds, batch 8, frozen weights): 0.95x (95% interval
  0.91-0.97). Allocator transient peak at batch 8: 42.3 MiB instead of 34.9 (default), 50.6 instead of
  28.9 (frozen weights); RSS unchanged. Splitting the batch into two graph branches instead gave the same
  0.94-0.95x but a copy of the frozen constants per branch (RSS 1706 MB instead of 1124 MB), and
  splitting only the late layers' batch gave nothing (0.99x).
- **Box and class heads merged** (inference copy only): each feature map's two 1x1 convs are one conv
  whose output channels (box codes, then class logits, then zeros up to a multiple of 16) are split
  after it. The box head's small conv cost about as much as the class head's at batch 1 (0.37 vs 1.0 ms
  at 10x10x1024); the merged one 0.97 ms. Detections unchanged (boxes within 6e-8).
- **Weights as constants** (`freeze_weights=True`, `detector_frozen`): oneDNN reorders a constant filter
  into its blocked layout once and caches it; a variable's filter is reordered on every call. The
  function is traced with each weight a Const node made where it is used (Keras `StatelessScope`; the
  early layers' inside the slice loop and in the one-slice branch, since a constant passed into a loop
  or branch reaches the conv through an Enter or Switch node and is not cached). One interleaved run
  with the TF1 session and the default detector: batch 1 0.82x of the TF1 session instead of 0.90-0.92x,
  batch 8 0.80x instead of 0.83x. Batch-1 ratios move between runs on this
  shared machine: on 2026-11-23, runs of 20-25 rounds of this side against the TF1 session alone read 0.77-0.88x
  (5 runs), with 3 sides 0.83-0.84x, with 5 sides 0.82x, with 6 sides 0.86-0.88x; under the profiler
  the TF1 session's runs took 24.7-44.4 ms (every op slower together in the slow ones), this side's
  22.3-22.6 ms. Not the default: the constants sit in process memory several times over and
  Grappler's transient copies stay in the C heap (steady RSS 1102 MB vs 700 MB).
- **Where batch 1 stands** (profiled 2026-11-23, 480x640, 30 runs each, op time summed over both
  threads, frozen weights vs the TF1 session): pointwise convs equal (the same oneDNN kernels),
  depthwise convs 0.4-0.6x (fused with bias and ReLU6; the TF1 graph keeps a separate batch norm
  there), box predictors 3.2 vs 4.1 ms, preprocessing 0.5 vs 1.2 ms, NMS 2.0 vs 7.2 ms. The TF1
  session, the default and the frozen detector alone, 150 interleaved rounds, two runs: frozen
  0.805x and 0.835x of the TF1 session, default 0.83x and 0.87x. A batch-1-only function without the batch loops (`map_fn`, the slice `tf.cond`) was
  0.98x of the default: the loops are not where the rest is.
- **oneDNN weight cache** (`--weight-cache`, `runtime.configure(onednn_weight_cache=True)`, i.e.
  `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` for every side, the TF1 session included): each oneDNN
  convolution caches its reordered filter at the first call. The TF1 frozen graph's filters are
  constants, which oneDNN caches anyway; the detector's are variables, and the depthwise convs
  fused with bias and ReLU6 reordered their filter on every call even as constants (profiled at
  batch 1, layers 6-11: 0.13-0.21 ms per depthwise conv with the cache against 0.22-0.30 without). Same
  outputs bit for bit (tested). Interleaved runs of the TF1 session, the default and the frozen
  detector on 2026-11-23 (150 rounds at batch 1, 30 at batch 8, two runs per setting):
  batch 1 default 0.89x / 0.89x without the cache, 0.78x / 0.79x with it; frozen 0.83x / 0.85x
  without, 0.77x / 0.77x with; batch 8 default 0.84x / 0.84x without, 0.84x / 0.81x with; frozen
  0.80x / 0.80x without, 0.83x / 0.78x with (no gain at batch 8: a filter reorder is small next
  to 8 images). It costs a second copy of the weights (allocator resident 30 -> 60 MiB) and, for
  the default detector, a higher transient peak at batch 8 (57-63 MiB instead of 47-49; the frozen
  detector's stays lower). A process-wide promise that no weight changes after its first use:
  for inference processes only, so it is not the default.
- **One slice runs without the loop**: a batch no larger than `slice_size` takes a `tf.cond` branch
  without the slice loop's TensorArray and concatenation. With frozen weights at batch 1 it then runs as
  fast as no slicing at all (0.82x vs 0.81x of the TF1 session, within the noise; 0.83-0.86x with the loop).

## Levers

- `ssd_mobilenet.runtime.configure(memory_growth=..., memory_limit_mb=...)` before any TensorFlow op:
  GPU memory growth or a per-GPU logical device limit; on a CPU-only machine the limit goes to the BFC CPU
  allocator (`TF_CPU_ALLOCATOR_USE_BFC=true`, `TF_CPU_BFC_MEM_LIMIT_IN_MB`), which then fails an
  allocation beyond it with an OOM error.
- `precision="mixed_bfloat16"` (CPUs with bfloat16 units) / `"mixed_float16"` (GPUs).
- `jit_compile=True` (XLA): on this CPU it is many times slower (see `detector_xla`), so it is not the
  default and `load` warns when no GPU is visible; it is meant for GPUs.
- `runtime.configure(onednn_weight_cache=True)` / `--weight-cache` (bench: every side): oneDNN caches
  reordered filters (see above); inference-only processes.
- oneDNN (`TF_ENABLE_ONEDNN_OPTS=1`): TensorFlow turns it on by default on CPUs with AVX-512 VNNI / BF16
  (as here: "oneDNN custom operations are on") and leaves it off on CPUs without AVX-512, where
  setting it made the TF1 network ~25% faster at batch 8. `--onednn both` measures every side under
  each setting, so its effect shows for both sides alike.
- `ssd_mobilenet.runtime.max_batch_size(detector, budget_bytes, image_size)` / `predict --max-memory MB`.
- `ssd_mobilenet.runtime.trace(logdir)` / `--trace DIR`: a TensorBoard profiler trace.

## NMS alternatives weighed

- `tf.image.combined_non_max_suppression` (per-class NMS and the global sort in one kernel; measured on
  the 2018 zoo fixture at 480x640, batch 8, with clipped boxes and empty boxes masked as that graph
  does): the same detections on random images, in about half the post-processing time (~19 ms vs
  ~35 ms for the batch, a few percent of the total). Not adopted: with tied scores (a sigmoid
  saturates to exactly 1.0 for logits above ~17, common in trained models) it orders the detections
  differently from the TF1 graph, which sorts ties class-major (checked: 30 anchors per image set to
  score 1.0 gave different classes and boxes in the first rows). It also clips only after NMS
  (`clip_boxes`), where the 2018 graph clips before, and it returns boxes, not the anchor indices that
  `detection_anchor_indices` and `detection_multiclass_scores` are gathered by.
- `tf.image.non_max_suppression_padded`: one class per call (class-agnostic); per class it would still
  need the loop over classes that the NonMaxSuppressionV4 kernel already runs.
- `official.vision` (tf-models-official) batched per-class NMS in its detection generator: not
  added: the package pins `tensorflow~=2.20` and brings ~1.2 GB of dependencies, and exactness against
  the TF1 tie order would need the same proof.
"""


if __name__ == "__main__":
    from migrate.common import console
    console.quiet_worker()  # started by a command without --verbose: no TensorFlow notices in the stderr tail
    _latency_worker(*sys.argv[1:3])
