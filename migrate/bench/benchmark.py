"""Benchmark: the TF1 frozen graph against the converted TF2 model, side by side on this machine.

Sides (`SIDES`), each a runner `run(images uint8 [N, H, W, 3]) -> dict of outputs`:
  tf1_session        the frozen graph in a `tf.compat.v1.Session` (default config): the baseline
  tf1_wrap_function  the same graph through `tf.compat.v1.wrap_function` (TF2 without this toolkit)
  saved_model        CONVERTED/saved_model as `convert` wrote it (default: the fast variant),
                     `tf.saved_model.load(...).signatures["serving_default"]`, plain TF
  saved_model_constants the same call on the default SavedModel exported with its weights as graph
                     constants (faster warm calls on oneDNN, slower start, more memory)
  saved_model_exact  the same call on the `--exact` SavedModel (op for op the graph)
  saved_model_mixed  the same call on the `--precision mixed_bfloat16` SavedModel (CPUs;
                     `mixed_float16` on GPUs)
  (the last two are exported from CONVERTED's checkpoint into a temporary directory first,
  in a process of their own, as `convert` writes them)
  detector           `ssd_mobilenet.load(...)`: the default SavedModel behind the library's detector (batch
                     norm folded, batch in slices, weights as variables; no Keras model built)
  detector_constants `ssd_mobilenet.load(..., freeze_weights=True)`: the Keras model traced with every
                     weight a graph constant (faster warm calls, slower start, more memory)
  detector_exact     `ssd_mobilenet.load(..., fold_batch_norm=False, slice_size=None)`: op for op the graph
  detector_xla       `ssd_mobilenet.load(..., jit_compile=True)`
  detector_mixed     `precision="mixed_bfloat16"` on CPUs, `"mixed_float16"` on GPUs
  tflite             the `.tflite` file `migrate export` writes by default (float32, per-class NMS,
                     uint8 input [1, H, W, 3] of any size, resized in the file with the TF1 graph's
                     kernel) on LiteRT's `Interpreter(num_threads=N)` (ai-edge-litert) (its default
                     op resolver applies the XNNPACK delegate), through the signature
                     (`ssd_mobilenet.formats.tflite.runner.ModelFile.detect`)
  tflite_int8        the same with the `export --int8` file (calibrated on generated images)
  onnx               the `.onnx` file `migrate export --onnx` writes (float32, uint8 input of any size,
                     TF1's NMS in one or two NonMaxSuppression) on ONNX Runtime's CPU provider with N
                     intra-op threads
  onnx_int8          the same with the `export --onnx --int8` file (QDQ, calibrated on generated images)
  openvino           the `onnx` side's file on OpenVINO's CPU plugin, float32, N threads
  openvino_int8      the `onnx_int8` side's file on OpenVINO, as `predict --runtime openvino` runs it
  opencv             the `onnx` side's file on OpenCV's DNN module (`readNetFromONNX`), N threads
  (the TFLite files are exported first as the SavedModels above; they are named with --sides,
  not in the default set, and run at batch 1 only, at every size of the run: at larger batches
  the rows have no TFLite entry, and the report lists those cells)

Latency: every side runs in ONE worker process, interleaved (round r times every side once,
in an order rotated every round), so machine noise hits all sides alike; the ratio is
median(side) / median(tf1_session), with a 95% interval from resampling the rounds in pairs
(`ratio_interval`). Memory: each side in its own fresh process
(`migrate.common.measure.measure_isolated`): the TensorFlow allocator's transient peak per batch
(peak - resident before the runs) and the process's peak RSS. The TFLite sides' process never
imports TensorFlow (`migrate.bench.litert_memory`; LiteRT's interpreter has its own arena, so no
allocator peak): its RSS is what a LiteRT deployment holds. Their latency is still interleaved
with the TF1 session's, in the one latency process (which has TensorFlow loaded for the other
sides). Ready time: seconds from loading the model to the end of its first call, in that fresh
process. Cold start (with `photos`): every side's fresh process over a folder of photos, as a user's
process runs it, from its start to its first detections and to its exit, and its peak RSS
(`migrate.bench.cold_start`), in the environment a user's process has. Model size: the bytes on disk of
what a side loads (frozen graph, SavedModel directory, .tflite file). Every other worker gets
the same environment (`TF_CPU_ALLOCATOR_USE_BFC=true`, threads, oneDNN setting, weight
cache), so a ratio is the migration's effect, not an environment flag's. `onednn` runs the latency
worker once per oneDNN setting to show that lever for both sides.

The figures (this machine, the last run) are in docs/benchmarks.md, written by `write_markdown`
(`scripts/bench.py` reruns it); docstrings here say what is measured and why, not what it gave.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from migrate.bench.cold_start import measure_cold
from migrate.bench.inputs import _check_frozen_graph, _frozen_graph, check_tflite
from migrate.bench.peak import add_shares
from migrate.bench.sides import BASELINE, DEFAULT_SIDES, EXPORTED_SIDES, FILE_EXPORTS, FILE_SIDES, SIDES, applies, \
    exported_path
from migrate.bench.statistics import _report
from migrate.bench.workers import _measure, _run_export_process, _run_peak_process
from migrate.common import measure
from ssd_mobilenet import converted_dir
from ssd_mobilenet.errors import InputError


def bench(src: str, converted: str, sizes=((480, 640),), batches=(1, 8), sides=DEFAULT_SIDES, repeats=10, warmup=2,
          memory=True, memory_repeats=2, onednn=None, env=None, weight_cache=False, memory_growth=False,
          memory_limit_mb=None, trace_dir=None, progress=None, tflite_threads=None, photos=None,
          cold_runs=3) -> dict:
    """Runs the benchmark; returns a JSON-able report (see `format_table` for the columns).

    Args:
      src: TF1 model directory (or its frozen_inference_graph.pb).
      converted: a directory written by `migrate convert`.
      sizes: [(H, W)] input image sizes; batches: batch sizes.
      sides: which of `SIDES` (the baseline `tf1_session` is always included; default
        `DEFAULT_SIDES`, every side but the TFLite ones).
      repeats, warmup: interleaved timed rounds (at the largest batch; smaller ones get more,
        see `rounds`) and untimed runs per side per batch.
      memory: also measure allocator and RSS peaks, one fresh process per side.
      onednn: None (TensorFlow's default for this CPU), "0", "1", or "both" (latency measured
        under each setting; memory under the default).
      env: extra environment variables for every worker (e.g. thread settings).
      weight_cache: every worker with oneDNN's filter cache (`ssd_mobilenet.memory.WEIGHT_CACHE_ENV`).
      memory_growth, memory_limit_mb: `ssd_mobilenet.memory.configure` in the latency worker;
        a limit also caps the CPU allocator of the memory workers (on GPUs those run with
        memory growth, as `migrate.common.measure` sets it).
      trace_dir: write a profiler trace of each side to `trace_dir/<side>`.
      tflite_threads: the TFLite interpreter's `num_threads` (default `os.cpu_count()`), given
        to it explicitly (its own default is one thread).
      photos: a folder of photos (or a list of files and folders): each side also starts cold
        over them, `cold_runs` interleaved rounds of fresh processes (`migrate.bench.cold_start`:
        time to the first detections, the folder's wall time, peak RSS), in the report's "cold".
    Raises:
      InputError: a missing model directory or frozen graph, an unknown side, memory
        growth together with a memory limit, or TFLite sides the run cannot measure
        (`check_tflite`: batch 1 not requested).
    """
    say = progress or (lambda msg: None)
    _check_frozen_graph(src)
    if not converted_dir.is_converted(converted):
        raise InputError(converted_dir.not_converted(converted))
    if photos is not None:
        from migrate.common import images
        if cold_runs < 1:
            raise InputError(f"--cold-runs {cold_runs}: need >= 1")
        try:
            images.list_images(photos)
        except InputError as e:
            raise InputError(f"--photos {e}") from None
    if repeats < 1 or warmup < 0:
        raise InputError(f"--repeats {repeats} / --warmup {warmup}: need >= 1 timed run and warm-up >= 0")
    if memory_limit_mb is not None and memory_limit_mb <= 0:
        raise InputError(f"--memory-limit {memory_limit_mb}: must be a positive number of MiB")
    if memory_growth and memory_limit_mb is not None:
        raise InputError("--memory-growth and --memory-limit exclude each other; choose one")
    unknown = [s for s in sides if s not in SIDES]
    if unknown:
        import difflib
        close = difflib.get_close_matches(unknown[0], SIDES, n=1)
        # All of them would be ~250 columns; `bench --help` lists them.
        raise InputError(f"--sides {unknown[0]}: no such side" + (f" (did you mean {close[0]}?)" if close else
                                                                  "; `bench --help` lists them"))
    sides = [BASELINE] + [s for s in sides if s != BASELINE]
    tflite_sides = [s for s in sides if s in FILE_SIDES]  # every file side: one image per call
    tflite_size, tflite = None, None
    if tflite_sides:
        model_size, any_size, aware = check_tflite(converted, tflite_sides, sizes, batches)
        tflite_size = None if any_size else model_size  # None: the files take photos of any size
        tflite_threads = os.cpu_count() if tflite_threads is None else tflite_threads
        if tflite_threads < 1:
            raise InputError(f"--threads {tflite_threads}: must be >= 1")
        tflite = {"threads": tflite_threads, "model_size": list(model_size), "any_size": any_size,
                  "quantization_aware": aware, "batch": 1,
                  "not_measured": [f"{h}x{w}/b{b}" for h, w in sizes for b in batches
                                   if not applies(FILE_SIDES[0], (h, w), b, tflite_size)]}
    settings = {None: [None], "both": ["0", "1"]}.get(onednn, [onednn])
    base_env = {**measure.BASE_ENV, **(env or {})}
    if weight_cache:
        from ssd_mobilenet.memory import WEIGHT_CACHE_ENV
        base_env[WEIGHT_CACHE_ENV] = "1"
    if memory_limit_mb is not None:
        base_env["TF_CPU_BFC_MEM_LIMIT_IN_MB"] = str(int(memory_limit_mb))
    request = {"sides": sides, "src": os.path.abspath(src), "converted": os.path.abspath(converted),
               "sizes": [list(s) for s in sizes], "batches": list(batches), "warmup": warmup, "repeats": repeats,
               "memory_growth": memory_growth, "memory_limit_mb": memory_limit_mb,
               "trace_dir": os.path.abspath(trace_dir) if trace_dir else None,
               "tflite_size": list(tflite_size) if tflite_size else None, "tflite_threads": tflite_threads}
    exported = [s for s in sides if s in EXPORTED_SIDES or s in FILE_EXPORTS]
    export_dir = tempfile.mkdtemp(prefix="migrate-bench-export-") if exported else None
    try:
        if exported:
            say(f"exporting {', '.join(exported)} from {converted}")
            _run_export_process(request["converted"], export_dir, exported, base_env)
            request["exported"] = {side: exported_path(export_dir, side) for side in exported}
        files = _file_bytes(sides, src, converted, request.get("exported", {}))
        latency, memory_results, onednn_on = _measure(request, sides, sizes, batches, settings, base_env, memory,
                                                      memory_repeats, say)
        cold = None
        if photos is not None:
            # The file sides whose files take photos of any size (the default export's).
            cold_sides = [s for s in sides if s not in FILE_SIDES or tflite_size is None]
            # As users run the sides: the run's own settings, not the allocator statistics' BFC
            # allocator (unless a memory limit needs it).
            cold_env = {k: v for k, v in base_env.items() if k not in measure.BASE_ENV}
            if memory_limit_mb is not None:
                cold_env["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
            cold = measure_cold(cold_sides, request["src"], request["converted"], photos,
                                exported=request.get("exported"), threads=tflite_threads, runs=cold_runs,
                                env=cold_env, progress=say)
    finally:
        if export_dir:
            shutil.rmtree(export_dir, ignore_errors=True)
    report = _report(latency, memory_results, sides, sizes, batches, repeats, warmup, base_env, tflite, files,
                     onednn_on)
    report["cold"] = cold
    say("measuring this machine's peak (a plain matrix product in float32, bfloat16 and int8)")
    measured = _run_peak_process(request["converted"], tflite_threads or os.cpu_count(), base_env)
    add_shares(report, measured["peak"], measured["multiply_adds"])
    return report


def _file_bytes(sides, src, converted, exported) -> dict:
    """{side: bytes on disk of the model it loads}: the frozen graph for the TF1 sides, the
    SavedModel directory or `.tflite` file for the others; the `detector*` sides (the converted
    checkpoint, restored into Keras) are left out."""
    def size(path):
        if os.path.isfile(path):
            return os.path.getsize(path)
        return sum(os.path.getsize(os.path.join(root, f)) for root, _, names in os.walk(path) for f in names)
    out = {}
    for side in sides:
        if side.startswith("tf1_"):
            out[side] = size(_frozen_graph(src))
        elif side in exported:
            out[side] = size(exported[side])
        elif side == "saved_model" and os.path.isdir(os.path.join(converted, "saved_model")):
            out[side] = size(os.path.join(converted, "saved_model"))
    return out
