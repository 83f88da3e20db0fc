"""Where a side's time goes inside oneDNN: every primitive one call executes, by kind, data type and
implementation (`scripts/kernels.py`).

Each side runs in a fresh process with `ONEDNN_VERBOSE=1`, which makes oneDNN print one line per
executed primitive (`onednn_verbose,v1,primitive,exec,cpu,<kind>,<implementation>,<prop>,
<memory descriptors>,<attributes>,<auxiliary>,<problem>,<ms>`) and its ISA line
(`...,info,cpu,isa:...`). The worker warms the side up, then prints a marker, runs CALLS calls,
and prints their wall times; only the lines between the markers are counted. The implementation
names the instruction set a kernel uses (`avx512_core_amx` with AMX tiles, `avx512_core_bf16`
with AVX512-BF16 dot products, `avx512_core` without either), and reorders show whether data is
converted on every call (a filter reordered per call appears as reorders of its weight shape).

oneDNN's own time is summed per call; TensorFlow runs independent ops at once, so wall minus the
oneDNN sum is what the call spends outside oneDNN only approximately. Verbose logging adds a
little to every primitive: compare sides measured by this module with each other, and take
latencies from `bench`.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys

from ssd_mobilenet.errors import RunError

START, END = "[kernels] start", "[kernels] end"
VERBOSE_ENV = {"ONEDNN_VERBOSE": "1"}
# Within the console's 100 columns after `error: ` (scripts/kernels.py). Eigen's kernels are TensorFlow's
# default on CPUs without AVX-512 VNNI, BF16 or AMX, and with TF_ENABLE_ONEDNN_OPTS=0.
OFF = "Eigen's kernels run here, not oneDNN's: nothing to count (TF_ENABLE_ONEDNN_OPTS=1 for oneDNN)"


def primitive_class(kind: str, problem: str) -> str:
    """A readable class of one primitive: convolutions split into depthwise (grouped), 1x1 and
    kxk by their problem descriptor (`g512mb1_ic512oc512_ih19...kh3...`); other kinds as named."""
    if kind != "convolution":
        return kind
    if problem.startswith("g"):
        return "convolution depthwise"
    if "kh1" in problem and "kw1" in problem:
        return "convolution 1x1"
    return "convolution kxk"


def _source_type(descriptors: str) -> str:
    """The source data type of a primitive's memory descriptors (`src:bf16::blocked:...`)."""
    for part in descriptors.split():
        if part.startswith("src:"):
            return part.split(":")[1]
    return "?"


def parse(lines, calls: int) -> dict:
    """Summary of the oneDNN verbose `lines` of `calls` calls.

    Returns {"isa": the ISA line or None, "threads": oneDNN's thread count or None,
    "primitives_per_call": float, "onednn_ms_per_call": float,
    "rows": [{"class", "dtype", "implementation", "per_call", "ms_per_call"}], largest time first,
    "reorders": [{"problem", "ms_per_call", "per_call"}] (the reorder primitives by shape)}.
    """
    isa = threads = None
    groups = collections.defaultdict(lambda: [0, 0.0])
    reorders = collections.defaultdict(lambda: [0, 0.0])
    counting = False
    for line in lines:
        line = line.rstrip("\n")
        if line == START:
            counting = True
            continue
        if line == END:
            counting = False
            continue
        if not line.startswith("onednn_verbose,"):
            continue
        parts = line.split(",")
        if ",info,cpu,isa:" in line:
            isa = line.split("isa:", 1)[1]
        elif ",info,cpu,runtime:" in line and "nthr:" in line:
            threads = int(line.rsplit("nthr:", 1)[1])
        elif counting and len(parts) >= 13 and parts[2] == "primitive" and parts[3] == "exec":
            kind, implementation, descriptors, problem = parts[5], parts[6], parts[8], parts[-2]
            ms = float(parts[-1])
            group = groups[(primitive_class(kind, problem), _source_type(descriptors), implementation)]
            group[0] += 1
            group[1] += ms
            if kind == "reorder":
                reorders[problem][0] += 1
                reorders[problem][1] += ms
    rows = [{"class": c, "dtype": d, "implementation": i, "per_call": n / calls, "ms_per_call": ms / calls}
            for (c, d, i), (n, ms) in groups.items()]
    rows.sort(key=lambda r: -r["ms_per_call"])
    return {"isa": isa, "threads": threads,
            "primitives_per_call": sum(r["per_call"] for r in rows),
            "onednn_ms_per_call": sum(r["ms_per_call"] for r in rows), "rows": rows,
            "reorders": sorted(({"problem": p, "per_call": n / calls, "ms_per_call": ms / calls}
                                for p, (n, ms) in reorders.items()), key=lambda r: -r["ms_per_call"])}


def _worker(request_json: str) -> None:
    """In the profiled process: warm-up calls, START, the counted calls, END, then their wall times
    and whether TensorFlow ran its oneDNN kernels as one JSON line."""
    import time

    from migrate.bench.interleaving import _images
    from migrate.bench.sides import runner
    from migrate.common import console
    from ssd_mobilenet import memory
    console.quiet_worker()
    req = json.loads(request_json)
    run = runner(req["side"], req["src"], req["converted"], req.get("exported"))
    images = _images(tuple(req["size"]), req["batch"])
    for _ in range(req["warmup"]):
        run(images)
    print(START, flush=True)
    wall = []
    for _ in range(req["calls"]):
        start = time.perf_counter()
        run(images)
        wall.append(time.perf_counter() - start)
    print(END, flush=True)
    print(json.dumps({"wall_ms": [w * 1e3 for w in wall], "onednn": memory.onednn_on()}), flush=True)


def profile(side: str, src: str, converted: str, size=(480, 640), batch: int = 1, calls: int = 10,
            warmup: int = 3, exported: str = None, env: dict = None) -> dict:
    """`parse`'s summary of `side` (a `bench` side) run CALLS times in a fresh process with oneDNN's
    verbose log, plus "wall_ms_per_call" (the median) and "onednn": whether TensorFlow ran its oneDNN
    kernels (`memory.onednn_on()` in the worker: off on CPUs without AVX-512 unless
    TF_ENABLE_ONEDNN_OPTS=1). Where it is off, the few primitives Eigen's matrix products call through
    oneDNN are all that would be counted, so `rows` is left empty rather than read as the model's."""
    from migrate.bench.workers import _worker_env
    request = {"side": side, "src": src, "converted": converted, "exported": exported, "size": list(size),
               "batch": batch, "calls": calls, "warmup": warmup}
    proc = subprocess.run([sys.executable, "-c", "import sys; from migrate.bench.kernels import _worker; "
                           "_worker(sys.argv[1])", json.dumps(request)],
                          env=_worker_env({**(env or {}), **VERBOSE_ENV}), capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise RunError(f"kernels worker for {side} failed:\n" + "\n".join(proc.stderr.splitlines()[-15:]))
    result = json.loads(lines[-1])
    wall = sorted(result["wall_ms"])
    summary = parse(lines[:-1] if result["onednn"] else [], calls)
    summary.update(side=side, wall_ms_per_call=wall[len(wall) // 2], onednn=result["onednn"],
                   size=list(size), batch=batch, calls=calls)
    return summary


def format_summary(summary: dict) -> str:
    """A side's summary as text: two header lines, then one line per primitive group and reorder; one
    line where TensorFlow ran no oneDNN kernels."""
    wall, onednn = summary["wall_ms_per_call"], summary["onednn_ms_per_call"]
    if not summary["onednn"]:
        return f"{summary['side']}: {wall:.2f} ms a call; {OFF}"
    # Two lines: in one, a call of 10 ms or more passed the console's 100 columns (Xeon, oneDNN).
    head = (f"{summary['side']}: batch {summary['batch']}, {summary['size'][0]}x{summary['size'][1]}, "
            f"{wall:.2f} ms a call (median of {summary['calls']})")
    share = (f"  oneDNN {onednn:.2f} ms in {summary['primitives_per_call']:.0f} primitives, outside it "
             f"~{max(wall - onednn, 0.0):.2f} ms")
    lines = [head, share, f"  {'primitive':24s} {'dtype':6s} {'implementation':36s} {'per call':>8s} {'ms':>7s} {'share':>6s}"]
    for r in summary["rows"]:
        lines.append(f"  {r['class']:24s} {r['dtype']:6s} {r['implementation']:36s} {r['per_call']:8.1f} "
                     f"{r['ms_per_call']:7.3f} {r['ms_per_call'] / wall:6.1%}")
    for r in summary["reorders"]:
        lines.append(f"  reorder {r['problem']:46s} {r['per_call']:.1f} a call, {r['ms_per_call']:.3f} ms")
    return "\n".join(lines)
