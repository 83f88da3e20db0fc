"""Peak memory and latency of one model, measured in a fresh Python process.

A process's peak resident memory (`ru_maxrss`) only ever grows and TensorFlow's allocators keep
what they once took, so two models measured in one process colour each other's figures.
`measure_isolated` runs each measurement in its own `python -m migrate.common.measure` subprocess with
the same environment for every side it is asked to measure.

The model to measure is named, not passed: `factory` is `"module:function"`, called in the
worker as `function(**factory_kwargs)` and returning `run(images_uint8) -> outputs` where
`images_uint8` is a uint8 [N, H, W, 3] ndarray and `outputs` a dict of arrays or tensors
(converted to numpy inside the timed region, so asynchronous work is finished when the clock
stops). Data crosses the process boundary as files (JSON request/result, .npz arrays); nothing
is pickled.

The worker, in order: sets the environment (`TF_CPU_ALLOCATOR_USE_BFC=true` before TensorFlow
starts: without it `get_memory_info('CPU:0')` raises "Allocator stats not available" on CPUs
where TensorFlow leaves oneDNN off), enables memory growth on every visible GPU (unless the
factory gets a `memory_limit_mb`: a capped logical device cannot also grow), builds the runner,
and for each batch: `warmup` untimed runs (the first batch's first one, made in any case, timed as
`first_call_s`), `reset_memory_stats(device)`, reads the
allocator's current bytes (the baseline), `repeats` timed runs, reads the allocator peak.

Result (JSON-able dict):
  device                "GPU:0" when a GPU is visible, else "CPU:0" (the allocator measured)
  batches               per input batch: shape [N, H, W, 3], latency_ms {median, p90, all},
                        peak_memory_bytes, baseline_memory_bytes, and the process's peak_rss_bytes /
                        rss_bytes after that batch's runs (the peak so far: the first batch's is
                        what building the runner and running that batch alone took)
  peak_memory_bytes     max allocator peak over the batches (None if the allocator has no stats)
  baseline_memory_bytes allocator current bytes before the timed runs of that batch
  transient_peak_bytes  peak_memory_bytes - baseline_memory_bytes (what the runs themselves took)
  peak_rss_bytes        the worker's peak resident set size, bytes
  rss_bytes             its resident set size after the last run (steady state: what a
                        serving process holds between requests)
  build_s               seconds to build the runner; `env`: the variables set for the worker;
  first_call_s          seconds of the runner's first call (on the first batch: tracing, graph
                        optimisation, kernel and primitive creation on top of a run)
  tensorflow            its version; outputs_npz: the path given, holding `"{batch}/{key}"` arrays
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from ssd_mobilenet.errors import RunError

# Set for every measured process, whatever the side: the allocator that keeps statistics.
BASE_ENV = {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_CPP_MIN_LOG_LEVEL": "2"}
# Set for the processes measured as users run them (`migrate.bench.cold_start`, `migrate.bench.photo_memory`):
# TensorFlow's own allocator, as a user's process has it; only the C++ log quieter.
USER_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def run_worker(module: str, args: list, env: dict | None, timeout: float | None, what: str,
               base: dict = BASE_ENV) -> dict:
    """The JSON result of `python -m MODULE ARGS... RESULT.json` run in a fresh process, with
    `base` (`BASE_ENV`, or `USER_ENV`) and `env` over this process's environment, less the
    variables of `BASE_ENV` that `base` leaves out, and this checkout first on PYTHONPATH (the
    worker imports this package: the same copy the parent uses).

    Raises:
      RunError: naming `what`, the worker timed out, or failed (its exit code and stderr tail).
    """
    with tempfile.TemporaryDirectory(prefix="migrate-worker-") as tmp:
        result_path = os.path.join(tmp, "result.json")
        worker_env = {k: v for k, v in os.environ.items() if k in base or k not in BASE_ENV}
        worker_env.update({**base, **(env or {})})
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        worker_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, worker_env.get("PYTHONPATH")) if p)
        try:
            proc = subprocess.run([sys.executable, "-m", module, *args, result_path], env=worker_env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RunError(f"{what} timed out after {timeout} s") from None
        if proc.returncode != 0 or not os.path.isfile(result_path):
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            raise RunError(f"{what} failed (exit {proc.returncode}):\n{tail}")
        with open(result_path, encoding="utf-8") as f:
            return json.load(f)


def measure_isolated(factory: str, factory_kwargs: dict, images, warmup: int = 1, repeats: int = 5,
                     env: dict = None, outputs_npz: str = None, timeout: float = None) -> dict:
    """Measures `factory`'s runner in a fresh subprocess; returns the result dict (module doc).

    Args:
      factory: "package.module:function" returning `run(images_uint8) -> dict of arrays`.
      factory_kwargs: JSON-serialisable keyword arguments for the factory.
      images: a list of uint8 [N, H, W, 3] arrays (one per batch, each measured separately)
        or the path of an .npz whose arrays (in key order) are those batches.
      warmup, repeats: untimed runs, then timed runs, per batch.
      env: extra environment variables for the worker (on top of `BASE_ENV`); pass the same
        for every side being compared.
      outputs_npz: if given, the last run's outputs of every batch are saved there.
      timeout: seconds before the worker is killed.
    Raises:
      RunError: the worker failed (its stderr tail is in the message).
    """
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="migrate-measure-") as tmp:
        if isinstance(images, (str, os.PathLike)):
            images_npz = os.fspath(images)
        else:
            images_npz = os.path.join(tmp, "images.npz")
            np.savez(images_npz, **{f"batch_{i:03d}": np.asarray(b) for i, b in enumerate(images)})
        request = {"factory": factory, "factory_kwargs": factory_kwargs, "images_npz": images_npz,
                   "warmup": int(warmup), "repeats": int(repeats), "outputs_npz": outputs_npz}
        request_path = os.path.join(tmp, "request.json")
        with open(request_path, "w", encoding="utf-8") as f:
            json.dump(request, f)
        result = run_worker("migrate.common.measure", [request_path], env, timeout, f"measurement of {factory}")
    result["env"] = {**BASE_ENV, **(env or {})}
    return result


def _percentile(values, q):
    import numpy as np
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def _proc_status_bytes(field: str) -> int | None:
    """A memory field of Linux's /proc/self/status ("VmHWM", "VmRSS") in bytes; None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return None


def _peak_rss_bytes() -> int:
    """This process's peak resident set size in bytes.

    On Linux `ru_maxrss` survives `execve`: a worker forked from a large parent reports the
    parent's peak. `VmHWM` belongs to the new address space, so it is read first.
    """
    peak = _proc_status_bytes("VmHWM")
    if peak is not None:
        return peak
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # Linux reports KiB, macOS bytes


def _rss_bytes() -> int | None:
    """This process's resident set size now (Linux `VmRSS`), bytes; None elsewhere."""
    return _proc_status_bytes("VmRSS")


def rss_now() -> dict:
    """{"rss_bytes": `_rss_bytes`, "peak_rss_bytes": `_peak_rss_bytes`}, read in that order and the
    peak at least the RSS: two reads of /proc apart, the RSS can grow by a page in between (seen:
    4 KiB), and a peak below what was resident is no peak."""
    rss = _rss_bytes()
    peak = _peak_rss_bytes()
    return {"rss_bytes": rss, "peak_rss_bytes": peak if rss is None else max(peak, rss)}


def _worker(request: dict) -> dict:
    import numpy as np
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    # Growth by default, so the GPU peak is what the run used; not when the factory caps the
    # device: a logical device with a memory limit cannot also have memory growth.
    if request["factory_kwargs"].get("memory_limit_mb") is None:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    device = "GPU:0" if gpus else "CPU:0"
    batches, run_numpy, build_s = build_runner(request)

    def memory_info():
        try:
            return tf.config.experimental.get_memory_info(device)
        except ValueError:  # "Allocator stats not available": reported as None, not guessed
            return None

    results, outputs = [], {}
    t = time.perf_counter()
    run_numpy(batches[0])
    first_call_s = time.perf_counter() - t
    for index, images in enumerate(batches):
        out = None
        for _ in range(request["warmup"] - (index == 0)):
            out = run_numpy(images)
        try:
            tf.config.experimental.reset_memory_stats(device)
        except ValueError:
            pass
        before = memory_info()
        times = []
        for _ in range(request["repeats"]):
            t = time.perf_counter()
            out = run_numpy(images)
            times.append((time.perf_counter() - t) * 1000.0)
        after = memory_info()
        results.append({
            "shape": list(images.shape),
            "latency_ms": {"median": _percentile(times, 50), "p90": _percentile(times, 90), "all": times},
            "peak_memory_bytes": None if after is None else int(after["peak"]),
            "baseline_memory_bytes": None if before is None else int(before["current"]),
            **rss_now(),
        })
        for key, value in (out or {}).items():
            outputs[f"{index}/{key}"] = value
    if request.get("outputs_npz"):
        np.savez(request["outputs_npz"], **outputs)
    peaks = [r["peak_memory_bytes"] for r in results if r["peak_memory_bytes"] is not None]
    peak_index = max(range(len(results)), key=lambda i: results[i]["peak_memory_bytes"] or 0) if peaks else None
    baseline = results[peak_index]["baseline_memory_bytes"] if peaks else None
    return {
        "device": device,
        "batches": results,
        "peak_memory_bytes": max(peaks) if peaks else None,
        "baseline_memory_bytes": baseline,
        "transient_peak_bytes": (max(peaks) - baseline) if peaks and baseline is not None else None,
        **rss_now(),
        "build_s": build_s,
        "first_call_s": first_call_s,
        "tensorflow": tf.__version__,
        "outputs_npz": request.get("outputs_npz"),
    }


def main(argv=None) -> int:
    """`python -m migrate.common.measure REQUEST.json RESULT.json` (started by `measure_isolated`)."""
    from migrate.common import console
    console.quiet_worker()  # started by a command without --verbose: no TensorFlow notices in the stderr tail
    return serve_request(_worker, argv)


def build_runner(request: dict):
    """(the request's image batches [uint8 [N, H, W, 3]], `run(images) -> numpy outputs`, seconds
    the factory took): what a worker measures, from its `images_npz` and `factory`."""
    import importlib

    import numpy as np
    with np.load(request["images_npz"]) as data:
        batches = [np.asarray(data[k]) for k in sorted(data.files)]
    module_name, function_name = request["factory"].split(":")
    t = time.perf_counter()
    run = getattr(importlib.import_module(module_name), function_name)(**request["factory_kwargs"])
    build_s = time.perf_counter() - t
    return batches, (lambda images: {k: np.asarray(v) for k, v in run(images).items()}), build_s


def serve_request(worker, argv=None) -> int:
    """A worker process's main: `worker(request dict) -> result dict`, the request read from
    argv[0] (JSON) and the result written to argv[1] under a temporary name, then renamed."""
    request_path, result_path = (argv if argv is not None else sys.argv[1:])
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    result = worker(request)
    tmp = result_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
