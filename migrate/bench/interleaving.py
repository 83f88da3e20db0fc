"""Latency with every side in one process, interleaved: round r times every side once, in an order
rotated every round, so machine noise hits all sides alike; small batches get more rounds."""

from __future__ import annotations

import os
import time

from migrate.bench.sides import applies, runner


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
                        progress=None, exported=None, tflite_size=None, threads=None) -> dict:
    """{side: {"HxW/bN": [ms per run]}} with all sides timed interleaved in this process
    (`rounds(repeats, batch, batches)` rounds per batch). A side that does not run at a size and
    batch (`sides.applies`: the TFLite sides outside batch 1, or outside `tflite_size` for files
    of one size; None: their files take any size) has no entry there; the others rotate among
    themselves.

    `exported`: {side: its SavedModel dir or .tflite file} for the sides bench exported first;
    `threads`: the TFLite interpreter's thread count.
    `trace_dir`: afterwards, a profiler trace of two runs of each side at the first size and
    batch goes to `trace_dir/<side>`.
    """
    say = progress or (lambda msg: None)
    runners = {}
    for side in sides:
        say(f"building {side}")
        runners[side] = runner(side, src, converted, (exported or {}).get(side), threads)
    times = {side: {} for side in sides}
    for size in sizes:
        for batch in batches:
            key = f"{size[0]}x{size[1]}/b{batch}"
            images = _images(size, batch)
            here = [side for side in sides if applies(side, size, batch, tflite_size)]
            say(f"latency {key}")
            for side in here:
                for _ in range(warmup):
                    runners[side](images)
                times[side][key] = []
            for r in range(rounds(repeats, batch, batches)):
                order = here[r % len(here):] + here[:r % len(here)]
                for side in order:
                    t = time.perf_counter()
                    runners[side](images)
                    times[side][key].append((time.perf_counter() - t) * 1000.0)
    if trace_dir:
        from ssd_mobilenet import memory
        images = _images(sizes[0], batches[0])
        for side in sides:
            if not applies(side, sizes[0], batches[0], tflite_size):
                continue
            say(f"trace {side}")
            with memory.trace(os.path.join(trace_dir, side)):
                for _ in range(2):
                    runners[side](images)
    return times
