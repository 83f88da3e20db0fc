"""The largest training batch whose measured step stays under a memory budget (`train --max-memory`).

As `predict --max-memory` does for inference (`memory.max_batch_size`), the batch is found by
measuring: the TensorFlow allocator's absolute peak (weights, optimiser slots, gradients and
everything else resident included, as a device limit counts it) while a `Trainer` runs one
optimiser step on a generated batch of that size, with the trainer's levers as they are
(precision, recompute, accumulation, frozen batch norm). Each size is traced on step functions of
its own (dropped afterwards, `Trainer.traced_apart`) and run once first, then run `runs` times,
garbage collected before each; the highest peak above what was resident before the size was
traced counts, on top of what was resident when the search began. So a size measures the same
whether it is measured first in the process or after others (what the traces of sizes measured
before keep would count otherwise, and the search assumes the peak grows with the batch). Batch
sizes double until one exceeds the budget, then a binary search finds the boundary
(`memory.largest_fitting`).

Where TensorFlow runs Eigen's kernels (CPUs without AVX-512), the gradients of convolutions hold
large temporaries, and whether concurrent ops hold two at once varies from run to run: a step's
peak then varies by one such temporary (docs/measurements.md), which the highest of the runs
covers only in part; leave that much headroom in the budget.

The measured steps change the trainer's state (weights, slots, moving averages, step): it is
written to a temporary checkpoint first and read back afterwards, so training starts from where
it would have. The input pipeline's buffers (decoded records ahead of the step) are outside the
measurement. On a CPU the allocator keeps statistics only with the BFC allocator
(`memory.configure`, before TensorFlow starts), else `InputError`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import tempfile

import numpy as np
import tensorflow as tf

from ssd_mobilenet import memory
from ssd_mobilenet.training.data import MAX_NUMBER_OF_BOXES
from ssd_mobilenet.errors import InputError

MAX_BATCH = 1024  # the search's upper end (images per micro-batch)


def generated_batch(config, size: int, seed: int = 0, max_boxes: int = MAX_NUMBER_OF_BOXES) -> dict:
    """A batch as `data.make_dataset` gives it: "image" float32 [size, h, w, 3] uniform in [-1, 1]
    (preprocessed), "boxes" float32 [size, max_boxes, 4] ([ymin, xmin, ymax, xmax] normalised;
    two boxes per image, zeros after them), "classes" int32 [size, max_boxes] (1-based, 0 after),
    "num_boxes" int32 [size] (2)."""
    rng = np.random.default_rng(seed)
    image = rng.uniform(-1, 1, (size, config.image_height, config.image_width, 3)).astype(np.float32)
    corner = rng.uniform(0.0, 0.5, (size, 2, 2))
    extent = rng.uniform(0.1, 0.5, (size, 2, 2))
    boxes = np.zeros((size, max_boxes, 4), np.float32)
    boxes[:, :2] = np.concatenate([corner, corner + extent], axis=-1)
    classes = np.zeros((size, max_boxes), np.int32)
    classes[:, :2] = rng.integers(1, config.num_classes + 1, (size, 2))
    return {"image": tf.constant(image), "boxes": tf.constant(boxes), "classes": tf.constant(classes),
            "num_boxes": tf.constant(np.full(size, 2, np.int32))}


def step_peaks(trainer, micro_batch: int, runs: int = 3, device: str | None = None) -> list:
    """Allocator peaks in bytes of `runs` optimiser steps (`trainer.accumulate` micro-batches of
    `micro_batch` generated images each) after one warm-up step, on step functions traced for this
    size alone (`Trainer.traced_apart`), each above what was resident before the size was traced:
    what its trace keeps plus the step's transient memory, not what sizes measured before left.
    Changes the trainer's state (see `preserved_state`)."""
    batch = generated_batch(trainer.model.config, micro_batch)

    def step():
        for _ in range(trainer.accumulate):
            losses = trainer.train_step(batch)
        float(losses["Loss/total_loss"])  # waits for the step

    gc.collect()
    resident = memory.memory_info(device)["current"]
    with trainer.traced_apart():
        step()
        return [memory.measure_peak(step, device) - resident for _ in range(runs)]


@contextlib.contextmanager
def preserved_state(trainer):
    """Within: the trainer may run steps; on leaving, its state (model, optimiser, moving average,
    accumulators) is read back from a checkpoint written on entering."""
    checkpoint = trainer.checkpoint()
    with tempfile.TemporaryDirectory(prefix="memory_budget_") as folder:
        path = checkpoint.write(os.path.join(folder, "state"))
        try:
            yield
        finally:
            checkpoint.read(path).assert_consumed()


def largest_batch(trainer, max_memory_mb: float, limit: int = MAX_BATCH, runs: int = 3, progress=None) -> int:
    """The largest micro-batch (<= `limit`) whose training step peaks at most `max_memory_mb` MiB.

    `progress` gets one line per size measured: "batch N: step peak X MiB".
    Returns:
      images per micro-batch (a step takes `trainer.accumulate` of them).
    Raises:
      InputError: not even one image fits; InputError: no allocator statistics.
    """
    memory.memory_info()  # no statistics: refused before any step runs
    budget = int(max_memory_mb * 2**20)
    peaks = {}
    gc.collect()
    resident = memory.memory_info()["current"]  # weights, slots, averages: what training starts with

    def fits(n):
        peaks[n] = resident + max(step_peaks(trainer, n, runs))
        if progress is not None:
            progress(f"batch {n}: step peak {peaks[n] / 2**20:.1f} MiB")
        return peaks[n] <= budget

    with preserved_state(trainer):
        n = memory.largest_fitting(fits, limit)
    if n == 0:
        config = trainer.model.config
        raise InputError(f"--max-memory {max_memory_mb:g}: one {config.image_height}x{config.image_width} image's "
                         f"training step peaks at {peaks[1] / 2**20:.0f} MiB (weights included)")
    return n
