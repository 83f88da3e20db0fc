"""How close a side runs to this machine's limit: the multiply-adds a frame of the model costs, the
multiply-adds per second a plain matrix product reaches here in each precision, and each side's
share of that peak.

`python -m migrate.bench.peak CONVERTED THREADS` (a worker process, with the environment of the
other workers) prints {"multiply_adds": per frame, "peak": {precision: {"mac_per_s", "runtime"}}}:

- float32: the faster of TensorFlow's `tf.linalg.matmul` (Eigen's or oneDNN's kernels, as the TF
  sides run) and numpy's (its BLAS);
- bfloat16: the same in bfloat16 (native on CPUs with bf16 units, emulated elsewhere);
- int8: ONNX Runtime's `MatMulInteger`, uint8 x int8 -> int32 (MLAS: AVX2, VNNI or AMX).

Each is an n x n x n product (n = `SIZE`), the best of `REPEATS` timed calls after a warm-up, with
THREADS threads. A side's share: the model's multiply-adds per frame x frames per second at its
median latency, over the peak of the precision its convolutions run in (`side_precision`).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from migrate.bench.sides import FILE_EXPORTS, MIXED_SIDES

SIZE = 1024
REPEATS = 10


def side_precision(side: str) -> str:
    """The precision `side`'s convolutions run in: bfloat16 for the mixed sides, int8 for the int8
    files' (`sides.FILE_EXPORTS`), float32 for the rest."""
    if side in MIXED_SIDES:
        return "bfloat16"
    return "int8" if FILE_EXPORTS.get(side) else "float32"


def _best_seconds(call) -> float:
    call()
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def _tensorflow_peak(dtype: str) -> float:
    import tensorflow as tf
    rng = np.random.default_rng(0)
    a, b = (tf.cast(tf.constant(rng.standard_normal((SIZE, SIZE)), tf.float32), dtype) for _ in range(2))
    product = tf.function(lambda x, y: tf.linalg.matmul(x, y))
    return SIZE ** 3 / _best_seconds(lambda: product(a, b).numpy())


def _numpy_peak() -> float:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((SIZE, SIZE)).astype(np.float32) for _ in range(2))
    return SIZE ** 3 / _best_seconds(lambda: a @ b)


def _onnxruntime_int8_peak(threads: int) -> float:
    from onnx import TensorProto, helper

    from ssd_mobilenet.formats.onnx.runner import import_onnxruntime
    ort = import_onnxruntime()  # its telemetry off: it writes files outside the paths bench is given
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["c"])], "matmul_integer",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [SIZE, SIZE]),
         helper.make_tensor_value_info("b", TensorProto.INT8, [SIZE, SIZE])],
        [helper.make_tensor_value_info("c", TensorProto.INT32, [SIZE, SIZE])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {"a": rng.integers(0, 256, (SIZE, SIZE), dtype=np.uint8),
             "b": rng.integers(-128, 128, (SIZE, SIZE), dtype=np.int8)}
    return SIZE ** 3 / _best_seconds(lambda: session.run(None, feeds))


def measure_peak(threads: int) -> dict:
    """{precision: {"mac_per_s": float, "runtime": what ran the product}} on this machine, with
    `threads` threads (TensorFlow's set here: call this before TensorFlow runs anything)."""
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    float32 = max((_tensorflow_peak("float32"), "TensorFlow matmul"), (_numpy_peak(), "numpy matmul (BLAS)"))
    return {"float32": {"mac_per_s": float32[0], "runtime": float32[1]},
            "bfloat16": {"mac_per_s": _tensorflow_peak("bfloat16"), "runtime": "TensorFlow matmul"},
            "int8": {"mac_per_s": _onnxruntime_int8_peak(threads),
                     "runtime": "ONNX Runtime MatMulInteger (uint8 x int8)"}}


def model_multiply_adds(converted: str) -> int:
    """The multiply-adds of one frame of the model in the converted directory `converted`
    (`ssd_mobilenet.model.count_multiply_adds` at its input size)."""
    from ssd_mobilenet import converted_dir
    from ssd_mobilenet.model import SSDMobileNetV1, count_multiply_adds
    return count_multiply_adds(SSDMobileNetV1(converted_dir.read_config(converted)))


def add_shares(report: dict, peak: dict, multiply_adds: int) -> None:
    """Adds to every row of `report` "mac_per_s" (the model's multiply-adds x frames per second at the
    row's median latency) and "peak_share" (that over `peak` of the side's precision), and the
    report's "peak" and "multiply_adds"."""
    report["peak"], report["multiply_adds"] = peak, multiply_adds
    for row in report["rows"]:
        row["mac_per_s"] = multiply_adds * row["batch"] * 1000.0 / row["latency_ms"]["median"]
        row["peak_share"] = row["mac_per_s"] / peak[side_precision(row["side"])]["mac_per_s"]


if __name__ == "__main__":
    converted, threads = sys.argv[1], int(sys.argv[2])
    peak = measure_peak(threads)
    print(json.dumps({"multiply_adds": model_multiply_adds(converted), "peak": peak}))
