"""The processes `bench` starts, all with the same environment: the export worker, the latency
worker (`python -m migrate.bench`, `interleaving`) once per oneDNN setting, and one memory
worker per side (`migrate.common.measure.measure_isolated` for the TensorFlow sides,
`litert_memory.measure_without_tensorflow` for the TFLite ones: a process without TensorFlow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from migrate.bench.interleaving import _images, interleaved_latency
from migrate.bench.litert_memory import measure_without_tensorflow
from migrate.bench.sides import BASELINE, FILE_SIDES, OWN_BASELINE, applies, latency_groups
from migrate.common import measure
from ssd_mobilenet.errors import RunError


def _latency_worker(request_path, result_path):
    with open(request_path, encoding="utf-8") as f:
        req = json.load(f)
    if req.get("memory_growth") or req.get("memory_limit_mb"):
        from ssd_mobilenet import memory
        memory.configure(memory_growth=req.get("memory_growth", False), memory_limit_mb=req.get("memory_limit_mb"))
    times = interleaved_latency(req["sides"], req["src"], req["converted"], [tuple(s) for s in req["sizes"]],
                                req["batches"], req["warmup"], req["repeats"], trace_dir=req.get("trace_dir"),
                                progress=lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True),
                                exported=req.get("exported"), tflite_size=req.get("tflite_size"),
                                threads=req.get("tflite_threads"))
    from ssd_mobilenet import memory
    with open(result_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"times": times, "onednn_on": memory.onednn_on()}, f)
    os.replace(result_path + ".tmp", result_path)


def _run_latency_process(request: dict, env: dict, progress) -> dict:
    """{"times": {side: {"HxW/bN": [ms...]}}, "onednn_on": whether TensorFlow ran oneDNN's kernels}."""
    with tempfile.TemporaryDirectory(prefix="migrate-bench-") as tmp:
        req, res = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(req, "w", encoding="utf-8") as f:
            json.dump(request, f)
        proc = subprocess.Popen([sys.executable, "-m", "migrate.bench", req, res], env=_worker_env(env),
                                stderr=subprocess.PIPE, text=True)
        tail = []
        for line in proc.stderr:
            tail = (tail + [line.rstrip()])[-15:]
            if line.startswith("[bench]"):
                progress(line[len("[bench] "):].rstrip())
        if proc.wait() != 0 or not os.path.isfile(res):
            raise RunError("latency worker failed:\n" + "\n".join(tail))
        with open(res, encoding="utf-8") as f:
            return json.load(f)


def _run_peak_process(converted: str, threads: int, env: dict) -> dict:
    """`migrate.bench.peak`'s worker: {"multiply_adds": per frame, "peak": {precision: ...}}."""
    proc = subprocess.run([sys.executable, "-m", "migrate.bench.peak", converted, str(threads)],
                          env=_worker_env(env), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RunError("peak worker failed:\n" + "\n".join(proc.stderr.splitlines()[-15:]))
    return json.loads(proc.stdout.splitlines()[-1])


def _onednn_expected(worker_env: dict) -> bool:
    """Whether a worker with `worker_env` (over this process's environment) runs oneDNN's kernels:
    its `TF_ENABLE_ONEDNN_OPTS`, else TensorFlow's default for this CPU, as this process has it."""
    setting = {**os.environ, **worker_env}.get("TF_ENABLE_ONEDNN_OPTS")
    if setting is not None:
        return setting.strip().lower() in ("1", "true")
    from ssd_mobilenet import memory
    return memory.onednn_on()


def _worker_env(env: dict) -> dict:
    """This process's environment with `env` and this checkout first on PYTHONPATH, for a worker."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return {**os.environ, **env, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}


def _run_export_process(converted: str, out_dir: str, sides, env: dict) -> None:
    proc = subprocess.run([sys.executable, "-c", "import sys; from migrate.bench.sides import _export_worker; "
                           "_export_worker(*sys.argv[1:])", converted, out_dir, ",".join(sides)],
                          env=_worker_env(env), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RunError("export worker failed:\n" + "\n".join(proc.stderr.splitlines()[-15:]))


def _measure(request, sides, sizes, batches, settings, base_env, memory, memory_repeats, say):
    """(latency {oneDNN label: times}, memory {side: measure result}, {oneDNN label: whether TensorFlow
    ran oneDNN's kernels (False: Eigen's)}) of every side."""
    latency, onednn_on = {}, {}
    envs = [dict(base_env) if setting is None else {**base_env, "TF_ENABLE_ONEDNN_OPTS": setting}
            for setting in settings]
    for setting, worker_env in zip(settings, envs):
        label = "default" if setting is None else setting
        groups = latency_groups(sides, _onednn_expected(worker_env))
        times = {}
        for i, group in enumerate(groups):
            say(f"interleaved latency, oneDNN {label}" + (f", process {i + 1} of {len(groups)}: {', '.join(group)}"
                                                         if len(groups) > 1 else ""))
            result = _run_latency_process({**request, "sides": group}, worker_env, say)
            if i == 0:
                times, onednn_on[label] = result["times"], result["onednn_on"]
                continue
            # Each of these sides against the TF1 session of its own process (`statistics._report`).
            for side in group[1:]:
                times[side] = result["times"][side]
                times.setdefault(OWN_BASELINE, {})[side] = result["times"][BASELINE]
        latency[label] = times
    # Memory rows go with the first setting's (`statistics._report`): measured under it.
    memory_results, memory_env = {}, envs[0]
    if memory:
        tflite_run, tflite_size = any(side in FILE_SIDES for side in sides), request.get("tflite_size")
        for side in sides:
            # The sizes and batches the side runs at; "keys" names them (the result's "batches"
            # follow it).
            cells = [(size, b) for size in sizes for b in batches if applies(side, size, b, tflite_size)]
            if tflite_run:
                # The TFLite sides' cells (batch 1) first in every process, in the same order, so the
                # baseline's RSS after them (`statistics._report`) is what those cells alone took,
                # as in the TFLite processes.
                cells.sort(key=lambda cell: not applies(FILE_SIDES[0], cell[0], cell[1], tflite_size))
            kwargs = {"side": side, "src": request["src"], "converted": request["converted"],
                      "exported": request.get("exported", {}).get(side), "threads": request.get("tflite_threads")}
            images = [_images(size, b) for size, b in cells]
            if side in FILE_SIDES:
                say(f"memory: {side} in a fresh process without TensorFlow")
                result = measure_without_tensorflow("migrate.bench.sides:runner", kwargs, images, warmup=1,
                                                    repeats=memory_repeats, env=memory_env)
                if result.get("tensorflow_imported") is not False:
                    raise RunError(f"the memory process of {side} imported TensorFlow: its RSS would not be "
                                   "LiteRT's alone")
            else:
                say(f"memory: {side} in a fresh process")
                result = measure.measure_isolated("migrate.bench.sides:runner", kwargs, images, warmup=1,
                                                  repeats=memory_repeats, env=memory_env)
            result["keys"] = [f"{size[0]}x{size[1]}/b{b}" for size, b in cells]
            memory_results[side] = result
    return latency, memory_results, onednn_on
