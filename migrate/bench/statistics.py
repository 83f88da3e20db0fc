"""From times and memory peaks to the report's rows: medians and percentiles, latency ratios
to the baseline with a bootstrap interval over paired rounds, allocator and RSS ratios."""

from __future__ import annotations

import os

from migrate.bench.sides import BASELINE, FILE_SIDES, OWN_BASELINE, mixed_precision
from ssd_mobilenet import hardware


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


def _report(latency, memory_results, sides, sizes, batches, repeats, warmup, base_env, tflite=None,
            file_bytes=None, onednn_on=None) -> dict:
    """The JSON-able report: one row per side, size, batch and oneDNN setting where the side ran
    (the TFLite sides at batch 1 only). `tflite`: {threads, model_size, any_size, batch,
    not_measured: ["HxW/bN"...]} when TFLite sides ran; `file_bytes`: {side: size on disk of
    the model file or directory it runs}; `onednn_on`: {oneDNN label: whether its latency worker's
    TensorFlow ran oneDNN's kernels}."""
    import tensorflow as tf
    rows = []
    for label, times in latency.items():
        for size in sizes:
            for batch in batches:
                key = f"{size[0]}x{size[1]}/b{batch}"
                base_mem = memory_results.get(BASELINE)
                for side in sides:
                    if key not in times[side]:  # a side that does not run here (`sides.applies`)
                        continue
                    # The TF1 session of the side's own latency process (`workers._measure`).
                    base_ms = times.get(OWN_BASELINE, {}).get(side, times[BASELINE])[key]
                    st = _stats(times[side][key])
                    row = {"side": side, "onednn": label, "size": list(size), "batch": batch,
                           "rounds": len(times[side][key]), "latency_ms": st,
                           "images_per_s": batch * 1000.0 / st["median"],
                           "latency_ratio": st["median"] / _stats(base_ms)["median"],
                           "latency_ratio_ci95": ratio_interval(times[side][key], base_ms),
                           "file_bytes": (file_bytes or {}).get(side)}
                    mem = memory_results.get(side)
                    if mem is not None and label == next(iter(latency)):
                        # The TFLite interpreter allocates from its own arena, not TensorFlow's
                        # allocator: no allocator peak to report (None, "n/a" in the tables).
                        row["alloc_transient_bytes"] = None if side in FILE_SIDES else _transient(mem, key)
                        row["peak_rss_bytes"] = mem["peak_rss_bytes"]
                        # From the model files to the first detections, in that fresh process.
                        row["ready_s"] = mem["build_s"] + mem["first_call_s"] if "first_call_s" in mem else None
                        row["rss_bytes"] = mem.get("rss_bytes")
                        if base_mem is not None:
                            # A TFLite process against the baseline's right after the same cells.
                            base_rss = _baseline_rss(base_mem, mem["keys"][-1] if side in FILE_SIDES else None)
                            row["alloc_ratio"] = _ratio(row["alloc_transient_bytes"], _transient(base_mem, key))
                            row["rss_ratio"] = _ratio(mem["peak_rss_bytes"], base_rss[0])
                            row["steady_rss_ratio"] = _ratio(mem.get("rss_bytes"), base_rss[1])
                    rows.append(row)
    mixed = mixed_precision()
    return {"rows": rows, "sizes": [list(s) for s in sizes], "batches": list(batches), "sides": sides,
            "repeats": repeats, "warmup": warmup, "env": base_env, "onednn": [str(s) for s in latency],
            "onednn_on": onednn_on or {},
            "device": "GPU" if tf.config.list_physical_devices("GPU") else "CPU", "tensorflow": tf.__version__,
            "cpu_count": os.cpu_count(), "memory": memory_results, "tflite": tflite, "file_bytes": file_bytes or {},
            # Why this machine has no units for the mixed sides' precision (None: it has them).
            "mixed_precision": mixed, "missing_units": hardware.missing_units(mixed)}


def _baseline_rss(result, key=None) -> tuple:
    """(peak RSS, steady RSS) of the baseline's memory process: over all its runs, or with `key`
    ("HxW/bN", the last of the TFLite sides' cells, which that process runs first and in the same
    order, `workers._measure`) right after that cell. A TFLite process runs those cells only (batch
    1); set against the baseline's peak after every size and batch it would look smaller for what
    the TF1 process ran besides."""
    if key is None:
        return result["peak_rss_bytes"], result.get("rss_bytes")
    b = result["batches"][result["keys"].index(key)]
    return b.get("peak_rss_bytes"), b.get("rss_bytes")


def _transient(result, key):
    """The allocator's transient peak of a memory result at "HxW/bN" (`workers._measure`'s keys)."""
    b = result["batches"][result["keys"].index(key)]
    if b["peak_memory_bytes"] is None or b["baseline_memory_bytes"] is None:
        return None
    return b["peak_memory_bytes"] - b["baseline_memory_bytes"]


def _ratio(a, b):
    return None if a is None or not b else a / b
