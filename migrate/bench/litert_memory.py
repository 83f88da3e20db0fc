"""The memory process of bench's file sides (TFLite, ONNX Runtime, OpenVINO, OpenCV): a fresh Python process
that never imports TensorFlow.

`migrate.common.measure` measures a TensorFlow side in a process that imports TensorFlow first (its
allocator statistics come from there). A `.tflite` file runs on LiteRT alone, so its process here
holds what a LiteRT deployment holds: Python, numpy, LiteRT's interpreter and the file. It is
`python -m migrate.bench.litert_memory REQUEST.json RESULT.json`, started by
`measure_without_tensorflow` with the same request, environment and result fields as
`measure.measure_isolated` (the allocator ones None: the interpreter allocates from its own arena),
plus:
  runtime               "LiteRT <ai-edge-litert version>", "ONNX Runtime <version>", "OpenVINO <version>" or
                        "OpenCV <version>"
  import_s              seconds to import the runtime (before `build_s`, as TensorFlow's import is
                        before a TensorFlow side's `build_s`)
  tensorflow_imported   whether `tensorflow` was in `sys.modules` after the runs (False, or
                        bench refuses the figures)

Nothing this module imports at module level, nor the factory it runs (`sides.runner` for a TFLite
side), imports TensorFlow; tests/migrate/bench/test_bench.py runs it with a `tensorflow` that cannot be imported.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from migrate.common import measure


def measure_without_tensorflow(factory: str, factory_kwargs: dict, images, warmup: int = 1, repeats: int = 5,
                               env: dict = None, timeout: float = None) -> dict:
    """`measure.measure_isolated` for a runner that needs no TensorFlow: `factory`'s runner
    measured in a fresh `python -m migrate.bench.litert_memory` process; the result as
    the module docstring says.

    Args:
      factory: "package.module:function" returning `run(images uint8 [1, H, W, 3]) -> dict of arrays`.
      factory_kwargs: JSON-serialisable keyword arguments for the factory.
      images: a list of uint8 [N, H, W, 3] arrays, one per cell (each measured separately).
      warmup, repeats: untimed runs, then timed runs, per cell.
      env: extra environment variables for the worker (on top of `measure.BASE_ENV`, as the
        TensorFlow sides get them); a PYTHONPATH here comes after this checkout's root.
      timeout: seconds before the worker is killed.
    Raises:
      RunError: the worker failed (its stderr tail is in the message).
    """
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="migrate-litert-measure-") as tmp:
        images_npz = os.path.join(tmp, "images.npz")
        np.savez(images_npz, **{f"batch_{i:03d}": np.asarray(b) for i, b in enumerate(images)})
        request = {"factory": factory, "factory_kwargs": factory_kwargs, "images_npz": images_npz,
                   "warmup": int(warmup), "repeats": int(repeats)}
        request_path = os.path.join(tmp, "request.json")
        with open(request_path, "w", encoding="utf-8") as f:
            json.dump(request, f)
        result = measure.run_worker("migrate.bench.litert_memory", [request_path], env, timeout,
                                    f"measurement of {factory}")
    result["env"] = {**measure.BASE_ENV, **(env or {})}
    return result


def tensorflow_imported() -> bool:
    """Whether TensorFlow (or any module of it) is loaded in this process."""
    return any(name == "tensorflow" or name.startswith("tensorflow.") for name in sys.modules)


def _worker(request: dict) -> dict:
    from importlib import metadata

    side = request.get("factory_kwargs", {}).get("side", "tflite")
    t = time.perf_counter()
    # The runtime's import, outside `build_s` (module docstring).
    if side in ("onnx", "onnx_int8"):
        from ssd_mobilenet.formats.onnx.runner import import_onnxruntime
        import_onnxruntime()
        package, runtime = "onnxruntime", "ONNX Runtime"
    elif side in ("openvino", "openvino_int8"):
        import openvino  # noqa: F401
        package, runtime = "openvino", "OpenVINO"
    elif side == "opencv":
        import cv2  # noqa: F401
        package, runtime = "opencv-python-headless", "OpenCV"
    else:
        from ssd_mobilenet.formats.tflite.runner import litert_interpreter
        litert_interpreter()
        package, runtime = "ai-edge-litert", "LiteRT"
    import_s = time.perf_counter() - t
    batches, run_numpy, build_s = measure.build_runner(request)

    t = time.perf_counter()
    run_numpy(batches[0])
    first_call_s = time.perf_counter() - t
    results = []
    for index, images in enumerate(batches):
        for _ in range(request["warmup"] - (index == 0)):
            run_numpy(images)
        times = []
        for _ in range(request["repeats"]):
            t = time.perf_counter()
            run_numpy(images)
            times.append((time.perf_counter() - t) * 1000.0)
        results.append({
            "shape": list(images.shape),
            "latency_ms": {"median": measure._percentile(times, 50), "p90": measure._percentile(times, 90),
                           "all": times},
            "peak_memory_bytes": None, "baseline_memory_bytes": None,
            **measure.rss_now(),
        })
    try:
        version = metadata.version(package)
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "device": "CPU:0",
        "batches": results,
        "peak_memory_bytes": None,
        "baseline_memory_bytes": None,
        "transient_peak_bytes": None,
        **measure.rss_now(),
        "import_s": import_s,
        "build_s": build_s,
        "first_call_s": first_call_s,
        "runtime": f"{runtime} {version}",
        "tensorflow_imported": tensorflow_imported(),
    }


def main(argv=None) -> int:
    """`python -m migrate.bench.litert_memory REQUEST.json RESULT.json`."""
    # Not `console.quiet_worker()`: it imports TensorFlow. The runner quiets the interpreter's
    # native notice itself (`console.native_stderr_quieted`), and this process's stderr is shown
    # only when it fails.
    return measure.serve_request(_worker, argv)


if __name__ == "__main__":
    sys.exit(main())
