"""Where a cold process's memory goes, stage by stage, and what each part of TensorFlow adds to it:
the breakdown behind the cold start rows (`cold_start`), written by scripts/cold_memory.py into
docs/cold_memory.md.

One fresh process per side and setting (`python -m migrate.bench.cold_memory REQUEST RESULT`,
in the environment a user's process has, `measure.USER_ENV`, plus the setting's) notes at each
stage of a cold run over a folder of photos:

  rss, peak              VmRSS and VmHWM (/proc/self/status)
  file                   resident pages of mapped files: the shared libraries' code and data
                         (`Rss` - `Anonymous` of /proc/self/smaps_rollup)
  anonymous              the rest: the C heap, thread stacks, TensorFlow's and oneDNN's buffers
  malloc_in_use          glibc's bytes handed out (`mallinfo2`: uordblks + hblkhd)
  malloc_free            glibc's freed bytes it keeps (fordblks): resident until reused or trimmed
  threads                the process's threads

The stages: the interpreter up, `import tensorflow` (the TensorFlow sides), the model loaded
(`sides.runner`: a session, a loaded SavedModel, a detector), the first photo, all photos, and
after `malloc_trim(0)` (what of the heap glibc gives back: transient allocations it kept).

`SETTINGS` switch one part off, the same for every side, to size its share: Grappler, oneDNN's
primitive cache, the thread pools, glibc's per-thread arenas, oneDNN itself. None of them is what
a user gets; they measure, they are not levers.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile

from migrate.common import measure
from ssd_mobilenet.detections import DETECTION_OUTPUTS

# name: (what it switches, environment, Grappler on)
SETTINGS = {
    "default": ("as users run it", {}, True),
    "grappler_off": ("Grappler off (TF1: the session's rewrite options; TF2: `tf.config.optimizer`)", {}, False),
    "primitive_cache_0": ("oneDNN's primitive cache off (`ONEDNN_PRIMITIVE_CACHE_CAPACITY=0`)",
                          {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"}, True),
    "one_thread_pools": ("one intra-op and one inter-op thread (`TF_NUM_INTRAOP_THREADS=1`, `..._INTEROP_...=1`)",
                         {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}, True),
    "one_malloc_arena": ("one glibc arena for every thread (`MALLOC_ARENA_MAX=1`)", {"MALLOC_ARENA_MAX": "1"}, True),
    "onednn_off": ("Eigen's kernels instead of oneDNN's (`TF_ENABLE_ONEDNN_OPTS=0`)",
                   {"TF_ENABLE_ONEDNN_OPTS": "0"}, True),
}


def measure_stages(side: str, src: str, converted: str, photos, exported: str | None = None,
                   setting: str = "default", timeout: float | None = None) -> list:
    """[{"stage", "rss", "peak", "file", "anonymous", "malloc_in_use", "malloc_free", "threads"}] (bytes;
    the malloc fields None where the C library is not glibc) of `side` (a bench side) starting cold over
    `photos` in a fresh process under `setting` (`SETTINGS`)."""
    from migrate.common import images
    _, env, grappler = SETTINGS[setting]
    request = {"side": side, "src": os.path.abspath(src), "converted": os.path.abspath(converted),
               "exported": exported, "photos": images.list_images(photos), "grappler": grappler}
    with tempfile.TemporaryDirectory(prefix="migrate-cold-memory-") as tmp:
        path = os.path.join(tmp, "request.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(request, f)
        return measure.run_worker("migrate.bench.cold_memory", [path], env, timeout,
                                  f"memory stages of {side} ({setting})", base=measure.USER_ENV)["stages"]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _libc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        return libc
    except (OSError, AttributeError):  # not glibc, or older than 2.33
        return None


def _rollup(field: str) -> int | None:
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def snapshot(stage: str, libc=None) -> dict:
    """This process's memory now (module docstring), as a stage's row."""
    rss, anonymous = _rollup("Rss"), _rollup("Anonymous")
    now = measure.rss_now()
    row = {"stage": stage, "rss": now["rss_bytes"], "peak": now["peak_rss_bytes"],
           "file": None if rss is None or anonymous is None else rss - anonymous, "anonymous": anonymous,
           "malloc_in_use": None, "malloc_free": None, "threads": len(os.listdir("/proc/self/task"))}
    if libc is not None:
        info = libc.mallinfo2()
        row.update(malloc_in_use=info.uordblks + info.hblkhd, malloc_free=info.fordblks)
    return row


def _worker(request: dict) -> dict:
    libc = _libc()
    stages = [snapshot("Python and the project's modules", libc)]
    from migrate.bench import sides as sides_lib
    side = request["side"]
    if side in sides_lib.FILE_SIDES:
        from ssd_mobilenet.formats.images import read_image
    else:
        import tensorflow as tf

        from migrate.common.images import read_image
        stages.append(snapshot("import tensorflow", libc))
        if not request["grappler"]:
            tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    if side == "tf1_session" and not request["grappler"]:
        from migrate.tf1.frozen_graph import FrozenGraphRunner
        from migrate.tf1.sources import read_graph_def
        session = FrozenGraphRunner(read_graph_def(sides_lib._frozen_graph(request["src"])), exact_arithmetic=True)
        run = lambda images: session.run(images, {k: f"{k}:0" for k in DETECTION_OUTPUTS})  # noqa: E731
    else:
        run = sides_lib.runner(side, request["src"], request["converted"], request["exported"])
    stages.append(snapshot("model loaded", libc))
    for i, path in enumerate(request["photos"]):
        run(read_image(path)[None])
        if i == 0:
            stages.append(snapshot("first photo", libc))
    stages.append(snapshot("all photos", libc))
    if libc is not None:
        libc.malloc_trim(0)
        stages.append(snapshot("after malloc_trim(0)", libc))
    return {"stages": stages}


def main(argv=None) -> int:
    """`python -m migrate.bench.cold_memory REQUEST.json RESULT.json` (started by `measure_stages`)."""
    return measure.serve_request(_worker, argv)


if __name__ == "__main__":
    sys.exit(main())
