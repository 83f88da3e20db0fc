"""Memory and profiling levers for running a detector: memory growth and limits, allocator
statistics, the largest batch under a memory budget, and profiler traces.

Device memory settings only take effect before TensorFlow initialises its devices (the
first op, `tf.config.list_logical_devices`, a `tf.function` call...), so `configure` is
called first thing and raises `InputError` when it is too late.

GPUs: `memory_growth` allocates on demand instead of reserving the whole device;
`memory_limit_mb` creates one logical device capped at that size.
CPU: TensorFlow has no CPU memory option in `tf.config`. Its BFC allocator, switched on for
the CPU by the environment variable `TF_CPU_ALLOCATOR_USE_BFC=true`, reads a cap from
`TF_CPU_BFC_MEM_LIMIT_IN_MB` and keeps the statistics `memory_info` reports. `configure`
sets both variables (when no GPU is visible or `device="CPU"`), so a limit is enforced on
the CPU too: an allocation beyond it fails with `ResourceExhaustedError` (OOM) instead of
growing the process. The CPU allocator always grows on demand, so `memory_growth` has
nothing to change there.

oneDNN weight cache (CPU): TensorFlow's oneDNN convolutions reorder their filter into a
blocked layout on every call unless the filter is a graph constant (and, as profiled here,
the depthwise convolutions fused with bias and ReLU6 even then). `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`
makes every oneDNN convolution and matmul in the process cache its reordered filter at the
first call, which `configure(onednn_weight_cache=True)` sets. It is a process-wide promise
that no weight changes after its first use: right for an inference process, wrong for
one that also trains (a training step would keep computing with the first filter).
TensorFlow reads the variable once, at the first oneDNN kernel, hence before any op.
"""

from __future__ import annotations

import contextlib
import gc
import os
import warnings

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

from ssd_mobilenet.errors import InputError

BFC_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
BFC_LIMIT_ENV = "TF_CPU_BFC_MEM_LIMIT_IN_MB"
WEIGHT_CACHE_ENV = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def devices_initialized() -> bool:
    """True once TensorFlow has created its devices (after which memory settings are fixed)."""
    return context.context()._initialized


def configure(memory_growth: bool = False, memory_limit_mb: int | None = None, device: str = "GPU",
              onednn_weight_cache: bool = False) -> dict:
    """Applies memory growth and/or a memory limit to every visible GPU (or the CPU), and the
    oneDNN weight cache.

    Args:
      memory_growth: GPUs allocate memory as needed instead of all of it at start.
      memory_limit_mb: cap in MiB: one logical device of this size per GPU; on the CPU the
        BFC allocator's limit (see the module docstring).
      device: "GPU" or "CPU". With "GPU" and no GPU visible, the settings go to the CPU
        and a warning says so.
      onednn_weight_cache: oneDNN convolutions cache their reordered filters (see the module
        docstring: inference-only processes). CPU latency lever: the converted model at
        batch 1 gains more from it than the TF1 graph, whose filters are constants already.
    Returns:
      {"device": "GPU" | "CPU", "devices": [physical device names], "memory_growth": bool,
       "memory_limit_mb": int | None, "onednn_weight_cache": bool}: what was applied.
    Raises:
      InputError: TensorFlow's devices are already initialised, or the arguments
        contradict each other.
    """
    device = device.upper()
    if device not in ("GPU", "CPU"):
        raise InputError(f"device must be 'GPU' or 'CPU', got {device!r}")
    if memory_limit_mb is not None and memory_limit_mb <= 0:
        raise InputError(f"memory limit must be a positive number of MiB, got {memory_limit_mb}")
    if memory_growth and memory_limit_mb is not None:
        # A limited logical device is allocated as it is used.
        raise InputError("memory growth and a memory limit exclude each other on a GPU; choose one")
    if devices_initialized():
        raise InputError("TensorFlow has already initialised its devices: call memory.configure() before "
                                 "any op")
    if onednn_weight_cache:
        os.environ[WEIGHT_CACHE_ENV] = "1"
    gpus = tf.config.list_physical_devices("GPU") if device == "GPU" else []
    if device == "GPU" and not gpus:
        if memory_limit_mb is not None or memory_growth:
            warnings.warn("no GPU visible: the memory settings apply to the CPU allocator", stacklevel=2)
        device = "CPU"
    applied = {"device": device, "memory_growth": bool(memory_growth), "memory_limit_mb": memory_limit_mb,
               "onednn_weight_cache": weight_cache_on()}
    if device == "CPU":
        os.environ[BFC_ENV] = "true"
        if memory_limit_mb is not None:
            os.environ[BFC_LIMIT_ENV] = str(int(memory_limit_mb))
        # CPU allocators always grow on demand: memory_growth is what happens anyway.
        return {**applied, "devices": [d.name for d in tf.config.list_physical_devices("CPU")]}
    try:
        for gpu in gpus:
            if memory_growth:
                tf.config.experimental.set_memory_growth(gpu, True)
            if memory_limit_mb is not None:
                tf.config.set_logical_device_configuration(
                    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=int(memory_limit_mb))])
    except RuntimeError as e:
        raise InputError(f"cannot apply GPU memory settings now: {e}") from e
    return {**applied, "devices": [d.name for d in gpus]}


def weight_cache_on() -> bool:
    """Whether this process's oneDNN kernels cache their filters (`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS`)."""
    return os.environ.get(WEIGHT_CACHE_ENV, "").strip().lower() in ("1", "true")


def onednn_on() -> bool:
    """Whether TensorFlow runs its oneDNN kernels in this process: `TF_ENABLE_ONEDNN_OPTS` when set,
    else TensorFlow's default for the CPU (on with AVX-512 VNNI, BF16 or AMX; off elsewhere, which
    runs Eigen's kernels)."""
    from tensorflow.python.util import _pywrap_util_port
    return bool(_pywrap_util_port.IsMklEnabled())


def default_device() -> str:
    """"GPU:0" when a GPU is visible, else "CPU:0"."""
    return "GPU:0" if tf.config.list_physical_devices("GPU") else "CPU:0"


def memory_stats_available(device: str) -> bool:
    """Whether the allocator of `device` keeps statistics (GPUs always; the CPU with BFC)."""
    return not device.upper().startswith("CPU") or os.environ.get(BFC_ENV, "").lower() in ("true", "1")


def memory_info(device: str | None = None) -> dict:
    """{"device", "current", "peak"}: the TensorFlow allocator's bytes in use now and at peak
    since the start or the last `reset_peak` on `device` (default: `default_device()`).

    Raises:
      InputError: on the CPU without the BFC allocator, whose statistics are all 0
        (set TF_CPU_ALLOCATOR_USE_BFC=true before TensorFlow starts, or call `configure`).
    """
    device = device or default_device()
    if not memory_stats_available(device):
        # Set it before TensorFlow starts, or call ssd_mobilenet.memory.configure(device='CPU') first.
        raise InputError(f"{device}: the allocator keeps no statistics; set {BFC_ENV}=true first")
    info = tf.config.experimental.get_memory_info(device)
    return {"device": device, "current": int(info["current"]), "peak": int(info["peak"])}


def reset_peak(device: str | None = None) -> None:
    tf.config.experimental.reset_memory_stats(device or default_device())


def measure_peak(fn, device: str | None = None) -> int:
    """Allocator peak in bytes (absolute, weights included) while `fn()` runs.

    Python's garbage is collected first: tensors that only unreachable objects still hold (an
    earlier model, a dropped trace) would otherwise count until the collector happens to run, so
    the same call would measure higher early in a process than later."""
    device = device or default_device()
    memory_info(device)  # fails early when there are no statistics
    gc.collect()
    reset_peak(device)
    fn()
    return memory_info(device)["peak"]


def max_batch_size(detector, budget_bytes: int, image_size=(480, 640), limit: int = 64, seed: int = 0,
                   runs: int = 3) -> int:
    """The largest batch (<= `limit`) whose allocator peak stays under `budget_bytes`, by measuring.

    Each candidate batch of random uint8 images of `image_size` (H, W) runs once to warm
    caches, then `runs` times; the highest peak counts: the allocator's absolute peak on the
    detector's device, weights and everything else resident included, as a device limit
    counts it. Several runs because the peak of one batch varies from run to run with the
    order in which concurrent ops allocate (images' post-processing runs in parallel; the
    spread is in docs/measurements.md, far below a batch's step). Batch sizes
    double until one exceeds the budget, then a binary search finds the boundary: it assumes
    the peak grows with the batch, which holds beyond that spread.

    Returns:
      the batch size; 0 when even a batch of 1 does not fit.
    Raises:
      InputError: the allocator keeps no statistics (see `memory_info`).
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    h, w = image_size
    peaks = {}

    def fits(n):
        if n not in peaks:
            # The same images for a batch size whatever the search order: post-processing
            # allocates by the number of candidate boxes, so the peak depends on the content.
            images = tf.constant(np.random.default_rng(seed).integers(0, 256, (n, h, w, 3), dtype=np.uint8))
            run = lambda: [t.numpy() for t in detector(images).values()]
            run()
            peaks[n] = max(measure_peak(run) for _ in range(runs))
        return peaks[n] <= budget_bytes

    return largest_fitting(fits, limit)


def largest_fitting(fits, limit: int) -> int:
    """The largest n in 1..`limit` with `fits(n)`, 0 when not even `fits(1)`: n doubles until one
    does not fit, then a binary search finds the boundary (assuming fitting is monotonic in n)."""
    if not fits(1):
        return 0
    good, bad = 1, None
    while bad is None and good < limit:
        n = min(good * 2, limit)
        if fits(n):
            good = n
        else:
            bad = n
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


@contextlib.contextmanager
def trace(logdir: str):
    """Writes a TensorBoard profiler trace of what runs inside the block to `logdir`
    (open with `tensorboard --logdir DIR`, Profile tab; `.xplane.pb` under plugins/profile)."""
    try:
        tf.profiler.experimental.start(logdir)
    except tf.errors.AlreadyExistsError as e:
        raise InputError(f"{logdir}: a profiler trace is already being recorded") from e
    try:
        yield logdir
    finally:
        tf.profiler.experimental.stop()
