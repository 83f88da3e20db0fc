"""The report as text: the console table, the JSON file, the targets check, scaling lines and
docs/benchmarks.md (`write_markdown`, with the prose of `notes`)."""

from __future__ import annotations

import json
import os

from migrate.bench.interleaving import MAX_ROUNDS_FACTOR, rounds
from migrate.bench import peak
from migrate.bench.notes import _NOTES, _SIDE_TEXT
from migrate.bench.sides import BASELINE, FILE_SIDES, MIXED_SIDES, ONNX_SIDES, TFLITE_SIDES
from ssd_mobilenet import atomic_write, hardware
from ssd_mobilenet.errors import OutputExistsError


def onednn_label(report: dict, setting: str) -> str:
    """A oneDNN setting as the tables show it, with what TensorFlow ran under it: "default (on)",
    "0 (off)" (off: Eigen's kernels)."""
    on = report.get("onednn_on", {}).get(setting)
    return setting if on is None else f"{setting} ({'on' if on else 'off'})"


def format_table(report: dict, markdown: bool = False) -> str:
    """The report as a table: one row per side, size, batch (and oneDNN setting) it ran at.
    `file MiB`: the model on disk (frozen graph, SavedModel directory, .tflite file; "-" for the
    `detector*` sides). `ready s`: seconds from loading the model to the end of its first call, in
    the side's fresh memory process (without TensorFlow for the TFLite sides). The allocator columns
    read "n/a" for the TFLite sides (the interpreter's arena is not TensorFlow's allocator) once
    memory was measured.

    `markdown`: one table of every column (docs/benchmarks.md), `GMAC/s (of peak)` among them
    (`migrate.bench.peak`: the model's multiply-adds a second at the median latency, and its share of
    this machine's peak in the side's precision). On the console: two tables within
    100 columns, latency (every row) and memory (the rows memory was measured for: sizes in MiB,
    `alloc` the allocator's transient peak, `steady` the steady RSS), the same cells."""
    if markdown:
        head = ["side", "oneDNN", "size", "batch", "median ms", "p90 ms", "img/s", "latency x TF1 (95%)",
                "GMAC/s (of peak)", "file MiB", "ready s", "alloc peak MiB", "alloc x TF1", "peak RSS MiB",
                "RSS x TF1", "steady RSS MiB", "x TF1"]
        lines = [_latency_cells(report, r) + [_peak_cell(r)] + _memory_cells(r) for r in report["rows"]]
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(out + ["| " + " | ".join(line) + " |" for line in lines])
    latency = _aligned(["side", "oneDNN", "size", "batch", "median ms", "p90 ms", "img/s", "x TF1 (95% CI)"],
                       [_latency_cells(report, r) for r in report["rows"]])
    measured = [r for r in report["rows"] if "peak_rss_bytes" in r]
    if not measured:
        return latency
    memory = _aligned(["memory MiB", "at", "file", "ready s", "alloc", "x TF1", "peak RSS", "x TF1", "steady",
                       "x TF1"],
                      [[r["side"], f"{r['size'][0]}x{r['size'][1]} b{r['batch']}", *_memory_cells(r)]
                       for r in measured])
    return f"{latency}\n\n{memory}"


def _mib(b) -> str:
    return "-" if b is None else f"{b / 2**20:.1f}"


def _ratio(r) -> str:
    return "-" if r is None else f"{r:.2f}"


def _latency_ratio(r: dict) -> str:
    """`x TF1 (95%)`: a row's latency ratio and, but for the baseline's, its interval."""
    latency = _ratio(r["latency_ratio"])
    if r["side"] != BASELINE and r.get("latency_ratio_ci95"):
        latency += " ({:.2f}-{:.2f})".format(*r["latency_ratio_ci95"])
    return latency


def _latency_cells(report: dict, r: dict) -> list:
    """A row's latency cells: side, oneDNN, size, batch, median, p90, images/s, x TF1 (95%)."""
    latency = _latency_ratio(r)
    return [r["side"], onednn_label(report, r["onednn"]), f"{r['size'][0]}x{r['size'][1]}", str(r["batch"]),
            f"{r['latency_ms']['median']:.1f}", f"{r['latency_ms']['p90']:.1f}", f"{r['images_per_s']:.1f}", latency]


def _peak_cell(r: dict) -> str:
    """`GMAC/s (of peak)`: the model's multiply-adds per second at the row's median latency, and its
    share of this machine's peak in the side's precision ("-" without a peak measured)."""
    if r.get("mac_per_s") is None:
        return "-"
    return f"{r['mac_per_s'] / 1e9:.1f} ({r['peak_share']:.0%} {peak.side_precision(r['side'])})"


def peak_line(report: dict) -> str | None:
    """One line on this machine's measured peak and the model's cost (None if not measured)."""
    if not report.get("peak"):
        return None
    rates = ", ".join(f"{precision} {p['mac_per_s'] / 1e9:.1f} GMAC/s ({p['runtime']})"
                      for precision, p in report["peak"].items())
    return (f"This machine's peak, a {peak.SIZE}x{peak.SIZE} matrix product: {rates}; the model: "
            f"{report['multiply_adds'] / 1e9:.2f} GMAC a frame (its convolutions at its input size)")


def _memory_cells(r: dict) -> list:
    """A row's memory cells: file MiB, ready s, allocator transient peak and its ratio, peak RSS
    and its ratio, steady RSS and its ratio ("-" where not measured)."""
    alloc = [_mib(r.get("alloc_transient_bytes")), _ratio(r.get("alloc_ratio"))]
    if r["side"] in FILE_SIDES and "peak_rss_bytes" in r:
        alloc = ["n/a", "n/a"]
    return [_mib(r.get("file_bytes")), _seconds(r.get("ready_s")), *alloc, _mib(r.get("peak_rss_bytes")),
            _ratio(r.get("rss_ratio")), _mib(r.get("rss_bytes")), _ratio(r.get("steady_rss_ratio"))]


def _aligned(head: list, lines: list) -> str:
    """Columns two spaces apart: the first left-aligned, the others right-aligned."""
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = lambda cells: "  ".join(c.rjust(w) if i > 0 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head)] + [fmt(line) for line in lines])


def _seconds(s) -> str:
    """A ready time: two decimals under a second (LiteRT's are tens of ms), else one; "-" for None."""
    return "-" if s is None else f"{s:.2f}" if s < 1 else f"{s:.1f}"


def tflite_settings(report: dict) -> str | None:
    """One line on how the file sides (TFLite, ONNX) ran and where they did not (None without them)."""
    t = report.get("tflite")
    if not t:
        return None
    h, w = t["model_size"]
    if any(side in TFLITE_SIDES for side in report.get("sides", ["tflite"])):
        line = (f"TFLite sides: LiteRT's Interpreter(num_threads={t['threads']}), its default op resolver (XNNPACK "
                "delegate), ")
    else:
        line = "File sides: "
    if t.get("any_size", False):
        line += (f"one uint8 photo per call, of any size (the file resizes it to {h}x{w} itself): measured at "
                 f"batch 1 at every size")
    else:
        line += f"one uint8 image of the model's input size: measured at {h}x{w}, batch 1 only"
    line += "; memory and ready time in a process without TensorFlow"
    onnx_sides = [side for side in report.get("sides", []) if side in ONNX_SIDES]
    if onnx_sides:
        line += (f"; ONNX sides ({', '.join(onnx_sides)}): the same photos and cells, ONNX Runtime's CPU provider "
                 f"(intra_op_num_threads={t['threads']}), OpenVINO's CPU plugin ({t['threads']} threads) "
                 f"or OpenCV's DNN module ({t['threads']} threads)")
    if t.get("quantization_aware"):
        line += ("; the model is quantization-aware: `tflite` is its integer file (int8 convolutions on the "
                 "checkpoint's ranges, `migrate export` without options)"
                 + (", `onnx` its QDQ file (int8 on the same ranges, `migrate export --onnx`)"
                    if "onnx" in report.get("sides", []) else ""))
    if t["not_measured"]:
        line += f"; not at {', '.join(t['not_measured'])} (no TFLite rows there)"
    return line


def write_json(report: dict, path: str, force: bool = False) -> None:
    """Writes `report` to `path` atomically; refuses to replace an existing file without `force`."""
    if os.path.exists(path) and not force:
        raise OutputExistsError(f"{path}: exists (use --force to replace it)")
    atomic_write.write_text(path, json.dumps(report, indent=1))


# The targets (issue 19), per side: (side, batch, key, limit, what). The SavedModel is judged
# as users deploy it (plain `tf.saved_model.load`), and `ssd_mobilenet.load()` as the library
# runs it, both without process-wide levers; the mixed-precision SavedModel where the CPU has
# bfloat16 units (or a GPU float16 ones).
# (side, batch, ratio, limit, what, size): the size None is `targets`' default size. The TFLite
# targets are at the zoo model's 300x300, where devices run it.
TARGETS = (
    ("saved_model", 1, "latency_ratio", 0.8, "latency", None),
    ("saved_model", 8, "latency_ratio", 0.8, "latency", None),
    ("saved_model", 8, "alloc_ratio", 0.6, "allocator transient peak", None),
    ("saved_model", 8, "steady_rss_ratio", 1.0, "steady-state process RSS", None),
    ("detector", 1, "latency_ratio", 0.8, "latency", None),
    ("detector", 8, "latency_ratio", 0.8, "latency", None),
    # Since issue 43 the default SavedModel holds its weights as variables (its cold start and
    # memory); the constants' warm latency is the lever's (convert --constant-weights).
    ("saved_model_constants", 1, "latency_ratio", 0.8, "latency", None),
    ("saved_model_constants", 8, "latency_ratio", 0.8, "latency", None),
    ("saved_model_mixed", 1, "latency_ratio", 0.5, "latency", None),
    ("saved_model_mixed", 8, "latency_ratio", 0.5, "latency", None),
    ("tflite", 1, "latency_ratio", 0.6, "latency", (300, 300)),
    ("tflite", 1, "rss_ratio", 0.12, "process peak RSS", (300, 300)),
    ("tflite_int8", 1, "latency_ratio", 0.3, "latency", (300, 300)),
    ("tflite_int8", 1, "rss_ratio", 0.08, "process peak RSS", (300, 300)),
    # Issue 36: ONNX Runtime float32 at <= 0.5x the TF1 session's latency and <= 0.15x its RSS.
    ("onnx", 1, "latency_ratio", 0.5, "latency", (300, 300)),
    ("onnx", 1, "rss_ratio", 0.15, "process peak RSS", (300, 300)),
)


# Issue 43: the TensorFlow paths users run, cold over a folder of photos, against the TF1 session in
# the same run (`cold_start`): (side, metric, limit, what). `predict CONVERTED` has its rows in
# docs/photo_memory.md (scripts/photo_memory.py).
COLD_TARGETS = (
    ("saved_model", "peak_rss_bytes", 0.85, "peak RSS"),
    ("saved_model", "first_detections_s", 0.8, "time to the first detections"),
    ("saved_model", "wall_s", 0.8, "a folder's wall time"),
    ("detector", "peak_rss_bytes", 0.85, "peak RSS"),
    ("detector", "first_detections_s", 0.8, "time to the first detections"),
    ("detector", "wall_s", 0.8, "a folder's wall time"),
)


def targets(report: dict, size=(480, 640)) -> list:
    """`TARGETS` checked on `report` (at `size` unless a target names its own): [(text, measured,
    passed)], for the sides, sizes and batches the report has.

    `passed` judges the median ratio; `measured` adds the latency ratio's 95% interval and says
    when that interval reaches across the limit (the run does not settle it either way)."""
    out = []
    for side, batch, key, limit, what, own_size in TARGETS:
        at = tuple(own_size or size)
        row = next((r for r in report["rows"] if r["side"] == side and r["batch"] == batch and tuple(r["size"]) == at
                    and r["onednn"] == report["onednn"][0] and r.get(key) is not None), None)
        if row is None:
            continue
        measured = f"{row[key]:.2f}x"
        interval = row.get(key + "_ci95")
        if interval:
            measured += f", 95% interval {interval[0]:.2f}-{interval[1]:.2f}x"
            if interval[0] <= limit < interval[1]:
                measured += f", which reaches across {limit}x"
        passed = row[key] <= limit
        if side in MIXED_SIDES and report.get("missing_units"):
            # The target is for machines with units for the precision; elsewhere it is emulated.
            measured += f"; not applicable: {report['missing_units']}"
            passed = None
        out.append((f"`{side}` {what} at batch {batch}, {at[0]}x{at[1]}: <= {limit}x TF1", measured, passed))
    cold = {row["side"]: row for row in (report.get("cold") or {}).get("rows", [])}
    for side, metric, limit, what in COLD_TARGETS:
        row = cold.get(side)
        if row is None:
            continue
        lo, hi = row[metric + "_ratio_range"]
        measured = f"{row[metric + '_ratio']:.2f}x, rounds {lo:.2f}-{hi:.2f}x"
        if lo <= limit < hi:
            measured += f", which reach across {limit}x"
        out.append((f"`{side}` cold on photos, {what}: <= {limit}x TF1", measured, row[metric + "_ratio"] <= limit))
    return out


def cold_table(report: dict) -> str | None:
    """The cold start rows as a Markdown table (`cold_start.markdown`); None without them."""
    if not report.get("cold"):
        return None
    from migrate.bench.cold_start import markdown
    return markdown(report["cold"])


def scaling(report: dict) -> list:
    """One Markdown line per side and size: per-image latency and allocator peak from the smallest
    to the largest batch (peak memory should grow no faster than the batch)."""
    lines = []
    first = report["onednn"][0]
    b0, b1 = min(report["batches"]), max(report["batches"])
    if b0 == b1:
        return ["(one batch size measured)"]
    for size in report["sizes"]:
        for side in report["sides"]:
            rows = {r["batch"]: r for r in report["rows"]
                    if r["side"] == side and r["size"] == size and r["onednn"] == first}
            if b0 not in rows or b1 not in rows:  # a TFLite side: batch 1 only
                continue
            lo, hi = rows[b0], rows[b1]
            text = (f"- `{side}` {size[0]}x{size[1]}: {lo['latency_ms']['median'] / b0:.1f} -> "
                    f"{hi['latency_ms']['median'] / b1:.1f} ms per image from batch {b0} to {b1}")
            if lo.get("alloc_transient_bytes") and hi.get("alloc_transient_bytes"):
                growth = hi["alloc_transient_bytes"] / lo["alloc_transient_bytes"]
                text += (f"; allocator peak {lo['alloc_transient_bytes'] / 2**20:.1f} -> "
                         f"{hi['alloc_transient_bytes'] / 2**20:.1f} MiB, x{growth:.1f} for x{b1 // b0} the images")
            lines.append(text)
    return lines


# The zoo's FPN and PPN models, measured by `scripts/bench.py --model NAME` into docs/benchmarks_NAME.*:
# (the files' name, the model as the section names it, its own input size).
FAMILY_PAGES = (("benchmarks_fpn_640", "FPN 640x640", (640, 640)), ("benchmarks_ppn_300", "PPN 300x300", (300, 300)))
FAMILY_HEADING = "## FPN and PPN"


def family_section(out_dir: str) -> list:
    """docs/benchmarks.md's rows of the FPN and PPN models: per side, its latency at batch 1 at the
    model's own size and at batch 8 at 480x640, its peak RSS, and its cold start on the photos, each
    beside the TF1 session of the same run (`x TF1`), read from the reports `FAMILY_PAGES` name in
    `out_dir`. [] when neither report is there."""
    found = []
    for name, model, size in FAMILY_PAGES:
        path = os.path.join(out_dir, f"{name}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                found.append((name, model, list(size), json.load(f)))
    if not found:
        return []
    lines = [FAMILY_HEADING, "",
             "The zoo's SSD MobileNet v1 FPN and PPN COCO models (their configs, built by the project's TF1 builder "
             "with synthetic weights), each side beside the TF1 session of its own run; every row, the settings and "
             "the targets are on the model's page. `b1 own size`: batch 1 at the model's input size; `b8 480x640`: "
             "batch 8 of 480x640 images (TensorFlow sides only); `peak RSS`: the warm run's fresh process; `cold`: "
             "a fresh process over the photos (first detections, peak RSS).", "",
             "| model | side | b1 own size ms | x TF1 (95%) | b8 480x640 ms | x TF1 (95%) | peak RSS MiB | x TF1 "
             "| cold first detections s | x TF1 | cold peak RSS MiB | x TF1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, model, size, report in found:
        first = report["onednn"][0]
        cells = {(r["side"], tuple(r["size"]), r["batch"]): r for r in report["rows"] if r["onednn"] == first}
        cold = {r["side"]: r for r in (report.get("cold") or {}).get("rows", [])}
        for side in report["sides"]:
            own, batch8 = cells.get((side, tuple(size), 1)), cells.get((side, (480, 640), 8))
            any_row = own or batch8 or next((r for (s, _, _), r in cells.items() if s == side), None)
            row = [f"[{model}]({name}.md)", f"`{side}`"]
            for r in (own, batch8):
                row += [f"{r['latency_ms']['median']:.1f}", _latency_ratio(r)] if r else ["-", "-"]
            row += ([_mib(any_row["peak_rss_bytes"]), f"{any_row['rss_ratio']:.2f}"]
                    if any_row and any_row.get("peak_rss_bytes") else ["n/a", "n/a"])
            c = cold.get(side)
            row += ([f"{c['first_detections_s']:.1f}", f"{c['first_detections_s_ratio']:.2f}",
                     f"{c['peak_rss_bytes'] / 2 ** 20:.0f}", f"{c['peak_rss_bytes_ratio']:.2f}"] if c
                    else ["-"] * 4)
            lines.append("| " + " | ".join(row) + " |")
    return lines


def refresh_family_section(path: str) -> bool:
    """Rewrites the FPN and PPN section of the benchmarks page `path` (docs/benchmarks.md) from the
    reports beside it, in place of the old one or before `## Sides`; False when `path` does not exist."""
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        text = f.read()
    section = family_section(os.path.dirname(path))
    start = text.find(f"\n{FAMILY_HEADING}\n")
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start] + text[end:]
    if section:
        at = text.find("\n## Sides\n")
        at = len(text) if at < 0 else at
        text = text[:at] + "\n" + "\n".join(section) + "\n" + text[at:]
    atomic_write.write_text(path, text)
    return True


def _machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in (hardware.read_cpuinfo() or "").splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return f"{model}, {os.cpu_count()} logical cores"


def write_markdown(report: dict, path: str, command: str, force: bool = False, plot: str = None) -> None:
    """docs/benchmarks.md: how it was run, the table, the targets, scaling and the notes (atomic write).
    `plot`: a PNG written by `write_plot`, shown under the scaling section (path relative to `path`)."""
    if os.path.exists(path) and not force:
        raise OutputExistsError(f"{path}: exists (use --force to replace it)")
    spreads = [r["latency_ms"]["spread"] for r in report["rows"]]
    per_batch = ", ".join(f"{rounds(report['repeats'], b, report['batches'])} at batch {b}" for b in report["batches"])
    lines = ["# Benchmarks: TF1 frozen graph vs the converted TF2 model", "",
             "Generated by one run of (from the repository root, after "
             "`python -m migrate convert SRC --out CONVERTED`):",
             "", "```bash", command, "```", "",
             f"Machine: {_machine()}; device {report['device']}; TensorFlow {report['tensorflow']}; "
             f"oneDNN: {', '.join(onednn_label(report, s) for s in report['onednn'])} (off: Eigen's kernels); "
             f"environment of every worker: `{' '.join(f'{k}={v}' for k, v in sorted(report['env'].items()))}`; "
             f"interleaved rounds per batch: {per_batch} (`--repeats` {report['repeats']}, up to "
             f"{MAX_ROUNDS_FACTOR}x for smaller batches), after "
             f"{report['warmup']} warm-up runs per side"
             + (f". {tflite_settings(report)}." if report.get("tflite") else "."), "",
             "Latency: all sides in one process, interleaved, so machine noise hits them alike (on oneDNN's "
             "kernels the sides whose filters are graph constants in a second process beside a TF1 session of "
             "their own: TensorFlow's oneDNN convolutions are shared across models by shape, and lay variable "
             "filters out otherwise); `latency x TF1` is "
             "median / median of `tf1_session` at the same size, batch and oneDNN setting (of the side's own "
             "process), with in brackets its 95% "
             "interval from resampling the rounds in pairs (bootstrap). Memory: each side in its own fresh "
             "process (the TFLite sides' processes never import TensorFlow); `alloc peak` is the TensorFlow "
             "allocator's transient peak during the runs (peak minus what was resident before: weights, graph "
             "constants), `peak RSS` the process's peak and `steady RSS` its resident memory after the last run "
             "(what a serving process holds between requests). `file MiB`: the model a side loads, on disk "
             "(frozen graph, SavedModel directory, `.tflite` file). `ready s`: in that fresh process (its runtime "
             "already imported: TensorFlow, or LiteRT for the TFLite sides), seconds from loading the model to the "
             "end of its first call on the first batch (loading, tracing, graph optimisation, kernel creation): "
             "what a serving process waits before its first answer.", "",
             "## Targets", ""]
    for text, measured, passed in targets(report):
        verdict = "(not applicable)" if passed is None else "(met)" if passed else "(NOT met)"
        lines.append(f"- {text}: **{measured}** {verdict}")
    lines += ["", "## Results", ""]
    if report.get("peak"):
        lines += [peak_line(report) + ". `GMAC/s (of peak)`: the model's multiply-adds a frame times the frames "
                  "a second at the median latency, and its share of that peak in the precision the side's "
                  "convolutions run in (`migrate.bench.peak`): how close the side runs to what this CPU can do.", ""]
    lines += [format_table(report, markdown=True)]
    cold = report.get("cold")
    if cold:
        lines += ["", "## Cold start on photos", "",
                  "Each side as a user's process runs it: a fresh process that imports its runtime, loads the "
                  "model and runs every photo of the folder, one per call at its own size, decoded by its "
                  "runtime (`migrate.bench.cold_start`). `first detections s`: from just before the "
                  "process starts to the first photo's detections; `folder wall s`: to its exit; `peak RSS`: "
                  "the process's `VmHWM`. Environment of these processes: "
                  f"`{' '.join(f'{k}={v}' for k, v in sorted(cold['env'].items()))}` (TensorFlow's own "
                  "allocator, as users have it).", "", cold_table(report).rstrip("\n")]
    lines += ["", "## Scaling with the batch", ""]
    lines += scaling(report)
    if plot:
        lines += ["", f"![latency per image and allocator transient peak against the batch size]({plot})"]
    lines += ["",
              "`spread` of the latency samples ((p90 - p10) / median) per row is in the `--json` report; "
              f"in this run it was {min(spreads):.0%} to {max(spreads):.0%} "
              f"(median {sorted(spreads)[len(spreads) // 2]:.0%}). "
              "On a machine shared with other jobs it runs to tens of percent: compare ratios, not times, "
              "and rerun on a quiet machine before drawing conclusions from a few percent.", "",
              "## Sides", ""]
    lines += [f"- `{name}`: {text}" for name, text in _SIDE_TEXT.items() if name in report["sides"]]
    lines += ["", _NOTES]
    atomic_write.write_text(path, "\n".join(lines) + "\n")


# The README's headline: the sides a user chooses between, by the form they deploy.
HEADLINE_SIDES = (("saved_model", "SavedModel `convert` writes (weights as variables)"),
                  ("saved_model_constants", "SavedModel, `--constant-weights`"),
                  ("saved_model_mixed", "SavedModel, `--precision mixed_bfloat16`"),
                  ("tflite", "`.tflite` float32 (LiteRT)"), ("tflite_int8", "`.tflite` int8 (LiteRT)"),
                  ("onnx", "`.onnx` float32 (ONNX Runtime)"), ("onnx_int8", "`.onnx` int8 (ONNX Runtime)"),
                  ("openvino", "`.onnx` float32 (OpenVINO)"), ("openvino_int8", "`.onnx` int8 (OpenVINO)"))
HEADLINE_CELLS = (((480, 640), 1), ((480, 640), 8), ((300, 300), 1))  # (size, batch) of the latency columns
HEADLINE_START, HEADLINE_END = "<!-- headline table: scripts/bench.py --publish -->", "<!-- end of headline table -->"


def headline_table(report: dict) -> str:
    """The README's headline table: per side of `HEADLINE_SIDES` in the report, its latency against the
    TF1 session warm (480x640 at batch 1 and 8, 300x300 at batch 1; in brackets the 95% interval), and
    cold over the photos (peak RSS, time to the first detections), from one run's report."""
    first = report["onednn"][0]
    cells = {(r["side"], tuple(r["size"]), r["batch"]): r for r in report["rows"] if r["onednn"] == first}
    cold = {r["side"]: r for r in (report.get("cold") or {}).get("rows", [])}
    base = [cells.get((BASELINE, *at)) for at in HEADLINE_CELLS]
    lines = ["| side | warm 480x640, batch 1 | batch 8 | 300x300, batch 1 | cold: peak RSS | first detections |",
             "|---|---|---|---|---|---|",
             "| TF1 session (the baseline) | " + " | ".join(f"{r['latency_ms']['median']:.1f} ms" if r else "-"
                                                      for r in base)
             + (" | 1.00 | 1.00 |" if BASELINE in cold else " | - | - |")]
    for side, name in HEADLINE_SIDES:
        if side not in report["sides"]:
            continue
        row = [name]
        for at in HEADLINE_CELLS:
            r = cells.get((side, *at))
            row.append("-" if r is None else f"{r['latency_ratio']:.2f}x ({r['latency_ratio_ci95'][0]:.2f}-"
                       f"{r['latency_ratio_ci95'][1]:.2f})")
        c = cold.get(side)
        row += [f"{c['peak_rss_bytes_ratio']:.2f}x", f"{c['first_detections_s_ratio']:.2f}x"] if c else ["-", "-"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def refresh_headline(readme: str, report: dict) -> bool:
    """Replaces the table between `HEADLINE_START` and `HEADLINE_END` in `readme` by `headline_table(report)`
    (atomic write); False (nothing written) where the markers are not there."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    if HEADLINE_START not in text or HEADLINE_END not in text:
        return False
    head, rest = text.split(HEADLINE_START, 1)
    tail = rest.split(HEADLINE_END, 1)[1]
    atomic_write.write_text(readme, f"{head}{HEADLINE_START}\n{headline_table(report)}\n{HEADLINE_END}{tail}")
    return True
