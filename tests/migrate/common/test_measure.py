"""`migrate.common.measure`: memory and latency of a runner, each in a fresh subprocess.

The factories below are what the worker imports (`tests` is put on its PYTHONPATH): small
but real TensorFlow computations whose allocator use grows with the batch.
"""

import os

import numpy as np
import pytest

from migrate.common.measure import measure_isolated
from ssd_mobilenet.errors import RunError

TESTS = os.path.dirname(os.path.abspath(__file__))
ENV = {"PYTHONPATH": TESTS}


def conv_runner(channels: int):
    """A 3x3 conv + ReLU6 over the images: float32 [N, H, W, channels] per batch."""
    import tensorflow as tf
    kernel = tf.constant(np.random.default_rng(0).normal(0, 0.1, (3, 3, 3, channels)).astype(np.float32))

    def run(images):
        x = tf.cast(images, tf.float32) / 255.0
        return {"features": tf.nn.relu6(tf.nn.conv2d(x, kernel, 1, "SAME")),
                "allocator_env": np.array(os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", ""))}
    return run


def failing_runner():
    raise RuntimeError("factory exploded on purpose")


@pytest.mark.slow  # a fresh process importing TensorFlow (7.5 s in the fast tier of 97db5d3)
def test_memory_and_latency_of_a_real_computation(tmp_path):
    rng = np.random.default_rng(1)
    small, large = (rng.integers(0, 256, (n, 96, 128, 3)).astype(np.uint8) for n in (1, 8))
    outputs = str(tmp_path / "out.npz")
    # Batches as an .npz, in key order (the form `verify` passes; a list is the other).
    images = str(tmp_path / "images.npz")
    np.savez(images, batch_000=small, batch_001=large)
    result = measure_isolated("test_measure:conv_runner", {"channels": 16}, images, warmup=1, repeats=3,
                              env=ENV, outputs_npz=outputs)
    assert result["device"] in ("CPU:0", "GPU:0")
    assert result["env"]["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    first, second = result["batches"]
    assert first["shape"] == [1, 96, 128, 3] and second["shape"] == [8, 96, 128, 3]
    for batch in result["batches"]:
        assert len(batch["latency_ms"]["all"]) == 3 and all(t > 0 for t in batch["latency_ms"]["all"])
        assert batch["latency_ms"]["median"] <= batch["latency_ms"]["p90"]
        assert batch["peak_memory_bytes"] >= batch["baseline_memory_bytes"] >= 0
    # The float32 [8, 96, 128, 16] activation alone is 6.3 MB; batch 1 needs an eighth of it.
    assert second["peak_memory_bytes"] - second["baseline_memory_bytes"] >= 8 * 96 * 128 * 16 * 4
    assert second["peak_memory_bytes"] > first["peak_memory_bytes"]
    assert result["peak_memory_bytes"] == second["peak_memory_bytes"]
    assert result["transient_peak_bytes"] == result["peak_memory_bytes"] - result["baseline_memory_bytes"]
    # A TensorFlow process is well over 100 MB resident; far less would mean the wrong unit.
    assert 100 * 2**20 < result["peak_rss_bytes"] < 64 * 2**30
    with np.load(outputs) as out:
        assert str(out["0/allocator_env"]) == "true"  # set before TensorFlow started in the worker
        expected = conv_runner(16)(large)["features"].numpy()
        np.testing.assert_allclose(out["1/features"], expected, rtol=0, atol=1e-6)


@pytest.mark.slow  # a fresh process importing TensorFlow before the factory fails (7.3 s, ibid.)
def test_worker_failure_comes_back_with_its_stderr():
    with pytest.raises(RunError, match="factory exploded on purpose"):
        measure_isolated("test_measure:failing_runner", {}, [np.zeros((1, 8, 8, 3), np.uint8)], env=ENV)
