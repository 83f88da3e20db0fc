"""Cost: each side measured in its own fresh subprocess (`migrate.common.measure`) with the same
memory settings, summarised for the report; and the profiler trace of the TF2 side."""

from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np

from migrate.verify.report import RUNTIMES
from ssd_mobilenet.errors import InputError


# The memory settings of a TFLite file's measurement: none (they reach TensorFlow's allocator only,
# which the interpreter does not use; `verify` refuses them with --tflite).
NO_MEMORY_SETTINGS = {"memory_growth": False, "memory_limit_mb": None}


def _measurement_batches(batches, batch: int) -> list:
    """Batch 1 and batch `batch` of the largest image (repeated), so latencies compare by batch size."""
    _, images = max(batches, key=lambda b: b[1].shape[1] * b[1].shape[2])
    one = images[:1]
    return [one] if batch == 1 else [one, np.repeat(one, batch, axis=0)]


def _measure_one(factory: str, kwargs: dict, images_npz: str, memory: dict, warmup: int, repeats: int, side: str):
    """`measure_isolated` with the memory settings applied in the worker (`memory.configure`).
    A worker that fails while memory settings are in force is reported as bad input naming
    them and the worker's most telling line: under a small CPU limit the first allocation
    beyond it fails (OOM, or a graph constant that cannot be materialised)."""
    from migrate.common.measure import measure_isolated
    from ssd_mobilenet.errors import RunError
    try:
        return measure_isolated(factory, {**kwargs, **memory}, images_npz, warmup=warmup, repeats=repeats)
    except RunError as e:
        if not memory["memory_growth"] and memory["memory_limit_mb"] is None:
            raise
        lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()]
        cause = next((ln for key in ("InputError", "OOM when allocating", "Error:", "Cannot parse tensor")
                      for ln in lines if key in ln), lines[-1] if lines else "no error output")
        settings = ("--memory-growth" if memory["memory_growth"] else
                    f"--memory-limit {memory['memory_limit_mb']} MiB")
        raise InputError(f"{side} measurement failed under {settings}: {cause[:300]}") from None


@contextlib.contextmanager
def _tf1_measured(graph_def, batches, memory: dict, warmup: int, repeats: int, say, what: str):
    """Writes the TF1 graph and the image `batches` into a temporary folder, measures the graph in
    a session with the default config (as a user runs it) in a fresh process, and yields
    (tf1 result, images .npz) for the other side's measurement on the same images."""
    with tempfile.TemporaryDirectory(prefix="migrate-verify-") as tmp:
        graph_pb = os.path.join(tmp, "tf1_inference_graph.pb")
        with open(graph_pb, "wb") as f:
            f.write(graph_def.SerializeToString())
        images_npz = os.path.join(tmp, "images.npz")
        np.savez(images_npz, **{f"batch_{i:03d}": b for i, b in enumerate(batches)})
        say(f"measuring TF1 (session, default config) in a fresh process: {what}")
        yield (_measure_one("migrate.verify.sides:tf1_session_runner", {"graph_pb": graph_pb}, images_npz,
                            memory, warmup, repeats, "TF1"), images_npz)


def _measure_sides(graph_def, converted: str, mode: str, precision: str, memory: dict, batches, batch: int,
                   warmup: int, repeats: int, say):
    """(tf1 result, tf2 result) of `measure.measure_isolated`, one fresh process per side, each
    applying the same `memory` settings (`memory.configure`) before its first op."""
    measure_batches = _measurement_batches(batches, batch)
    runs = f"{repeats} run{'s' if repeats > 1 else ''}"
    what = f"batch {' and '.join(str(len(b)) for b in measure_batches)}, {runs} each"
    with _tf1_measured(graph_def, measure_batches, memory, warmup, repeats, say, what) as (tf1, images_npz):
        say(f"measuring TF2 ({mode}, {precision}) in a fresh process: {what}")
        tf2 = _measure_one("migrate.verify.sides:tf2_runner",
                           {"converted": converted, "mode": mode, "precision": precision},
                           images_npz, memory, warmup, repeats, "TF2")
    return tf1, tf2


# A model file's side in bench's runner (`migrate.bench.sides.runner`), by runtime (its
# label: `report.RUNTIMES`): its memory process imports no TensorFlow.
# (`openvino_int8` runs any `.onnx` file on OpenVINO as `predict --runtime openvino` does.)
_FILE_SIDES = {"litert": "tflite", "onnx": "onnx", "openvino": "openvino_int8"}


def _measure_tflite_sides(graph_def, tflite_path: str, threads: int, pixels, warmup: int, repeats: int, say,
                          runtime: str = "litert"):
    """(tf1 result, file result): the TF1 graph (a session with the default config) in a fresh
    process, and the `.tflite` file or, with `runtime` "onnx", the `.onnx` file in a fresh process
    without TensorFlow (`_measure_tflite_side`), on the same uint8 pixels [1, h, w, 3] at the
    model's size: batch 1 only, the file's one shape."""
    what = f"batch 1, {repeats} run{'s' if repeats > 1 else ''}"
    with _tf1_measured(graph_def, [pixels], NO_MEMORY_SETTINGS, warmup, repeats, say, what) as (tf1, _):
        say(f"measuring the {RUNTIMES[runtime].side} file ({threads} threads) in a fresh process without "
            f"TensorFlow: {what}")
        tflite = _measure_tflite_side(tflite_path, threads, [pixels], warmup, repeats, runtime)
    return tf1, tflite


def _measure_tflite_side(tflite_path: str, threads: int, images: list, warmup: int, repeats: int,
                         runtime: str = "litert") -> dict:
    """The file on its runtime alone, measured as `bench` measures its file sides
    (`litert_memory.measure_without_tensorflow`: a fresh process that never imports TensorFlow), so
    that its process peak RSS is the file's footprint on a device (Python, numpy, the runtime, the
    file), not TensorFlow's. `images`: uint8 [1, H, W, 3] arrays, one per cell. No allocator
    figures (None): the runtime allocates from its own arena."""
    from migrate.bench.litert_memory import measure_without_tensorflow
    label = RUNTIMES[runtime].side
    kwargs = {"side": _FILE_SIDES[runtime], "src": None, "converted": None, "exported": tflite_path,
              "threads": threads}
    result = measure_without_tensorflow("migrate.bench.sides:runner", kwargs, images, warmup=warmup,
                                        repeats=repeats)
    if result.get("tensorflow_imported") is not False:
        raise RuntimeError(f"the {label} measurement process imported TensorFlow: its RSS would not be the file's")
    result.update(device=f"CPU ({label})")
    return result


def _side_summary(result: dict, mode: str) -> dict:
    if result is None:
        return {"measured": False, "mode": mode, "device": None, "peak_memory_bytes": None,
                "peak_rss_bytes": None, "latency_ms": None}
    return {"measured": True, "mode": mode, "device": result["device"],
            "peak_memory_bytes": result["peak_memory_bytes"],
            "baseline_memory_bytes": result["baseline_memory_bytes"],
            "transient_peak_bytes": result["transient_peak_bytes"],
            "peak_rss_bytes": result["peak_rss_bytes"],
            "latency_ms": {f"batch_{b['shape'][0]}": {"median": b["latency_ms"]["median"],
                                                      "p90": b["latency_ms"]["p90"],
                                                      "image_size": b["shape"][1:3]}
                           for b in result["batches"]},
            "build_s": result["build_s"], "env": result["env"]}


def _trace(detect, images, trace_dir: str) -> None:
    """A profiler trace of two runs of `detect` (already warm from the parity run)."""
    from ssd_mobilenet import memory
    try:
        with memory.trace(trace_dir):
            for _ in range(2):
                [np.asarray(v) for v in detect(images).values()]
    except InputError as e:
        raise InputError(f"--trace {trace_dir}: {e}") from None
