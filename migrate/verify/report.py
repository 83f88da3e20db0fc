"""What `verify` found and how it is shown: the `VerifyReport`, its first divergence and
tolerances, the short table the CLI prints, and the PNGs with both sides' boxes."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import NamedTuple

import numpy as np

from migrate.tf1.parity import MATCH_IOU, MIXED_TOLERANCES, NMS_FLIP_BAND
from ssd_mobilenet import atomic_write


class FileKind(NamedTuple):
    """What a model file and its runtime are called in `verify`'s report and messages."""
    mode: str     # the report's mode, and the tolerance rule's name for the file side
    runtime: str  # the runtime: "running ... on LiteRT"
    runner: str   # what runs the file, in the notes
    file: str     # "TFLite file"
    article: str  # "a" or "an", before `file`
    side: str     # the file side's column of the measurement table


# Each file runtime's names (`verify --tflite`: "litert", `verify --onnx`: "onnx", with `--runtime
# openvino`: "openvino").
RUNTIMES = {"litert": FileKind("tflite", "LiteRT", "LiteRT's interpreter", "TFLite file", "a", "TFLite"),
            "onnx": FileKind("onnx", "ONNX Runtime", "ONNX Runtime", "ONNX file", "an", "ONNX Runtime"),
            "openvino": FileKind("onnx", "OpenVINO", "OpenVINO's CPU plugin", "ONNX file", "an", "OpenVINO")}


@dataclasses.dataclass
class VerifyReport:
    """What `verify` found. `to_json()` gives the `--json` document."""
    passed: bool
    first_divergence: dict   # None when every tensor and detection agrees
    tensors: list            # per tensor in graph order: name, tf1_tensor, shape, max_abs_err, max_rel_err, ok
    detections: list         # per image: num_tf1, num_tf2, classes_equal, max_box_err, max_score_err, ok
    tf1: dict                # peak_memory_bytes, peak_rss_bytes, latency_ms, device, mode, ...
    tf2: dict
    tolerances: dict
    versions: dict
    images: list             # names (paths, or `generated:HxW#i`) of the images compared
    src: str
    converted: str
    mode: str
    notes: list = dataclasses.field(default_factory=list)
    precision: str = "float32"   # the TF2 side's compute precision
    postprocessing: dict = None  # `self_check.check_postprocessing`: both post-processings on crafted values
    memory: dict = None          # memory_growth, memory_limit_mb applied in both measurement processes
    trace_dir: str = None        # where the profiler trace of the TF2 side went
    tflite: dict = None          # mode "tflite" / "onnx": the file, its kind (`tflite_file`), threads, runtime
                                 # (a `RUNTIMES` key), agreement
    skipped: list = dataclasses.field(default_factory=list)  # image files that could not be decoded

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _first_divergence(tensors: list, detections: list, postprocessing: dict = None,
                      detections_stage: str = "Postprocessor"):
    """The first tensor outside tolerance, else `Postprocessor` when its check on crafted values
    differs, else `detections_stage` when only the detections differ, else None."""
    first = next((t for t in tensors if not t["ok"]), None)
    if first is not None:
        return {k: first.get(k) for k in ("name", "tf1_tensor", "max_abs_err", "max_rel_err", "note")}
    if postprocessing is not None and not postprocessing["ok"]:
        return {"name": "Postprocessor", "tf1_tensor": "detection_* (fed crafted concat, concat_1)",
                "max_abs_err": None, "max_rel_err": None,
                "note": f"{postprocessing['note']}; likely {', '.join(postprocessing['suspects'])}"}
    bad = next((d for d in detections if not d["ok"]), None)
    if bad is not None:
        return {"name": detections_stage, "tf1_tensor": "detection_*", "max_abs_err": None, "max_rel_err": None,
                "note": f"{bad['image']}: {bad['note']}"}
    return None


def _tolerances(atol: float, rtol: float, precision: str) -> dict:
    """The report's `tolerances`: the values and the criterion applied."""
    out = {"atol": atol, "rtol": rtol, "precision": precision,
           "tf1_reference": "the graph as written: a session with Grappler off"}
    if precision == "float32":
        out.update(criterion="exact", rule="|tf2 - tf1| <= atol + rtol * max|tf1| per tensor; "
                   "boxes and scores atol + rtol; detection counts and classes exact")
    else:
        margin = MIXED_TOLERANCES[precision]["score_margin"]
        out.update(criterion="mixed_precision", score_margin=margin, match_iou=MATCH_IOU, nms_flip_band=NMS_FLIP_BAND,
                   rule=f"|tf2 - tf1| <= atol + rtol * max|tf1| per tensor (the {precision} tolerance); "
                   f"detections matched one to one by class and IoU >= {MATCH_IOU}; every detection scoring >= "
                   f"floor + {margin} on either side is matched or an NMS flip (the other side has one of its "
                   f"class scoring at least as high, less {margin}, at IoU >= the NMS threshold - "
                   f"{NMS_FLIP_BAND}); floor: the score threshold, or the lowest score kept when the list is full")
    return out


def _write_pngs(drawn, png_dir: str, titles=("TF1 graph", "TF2")) -> None:
    """Writes, per image, the TF1 side's and the TF2 side's detections drawn side by side.

    Args:
      drawn: [(name, image uint8 [H, W, 3], tf1 detections, tf2 detections)], each detections
        a dict of numpy `boxes` [K, 4] ([ymin, xmin, ymax, xmax] normalised), `classes` [K]
        (1-based int) and `scores` [K] (`side_by_side.drawn_detections`).
      titles: the left (TF1) and right (TF2) pictures' titles.
    """
    from migrate.common import draw
    tmp = atomic_write.temp_dir_beside(png_dir, prefix=".verify-png-")
    try:
        for index, (name, image, tf1, tf2) in enumerate(drawn):
            stem = os.path.splitext(os.path.basename(name.replace(":", "_").replace("#", "_")))[0]
            pictures = [draw.draw_labelled(image, d["boxes"], d["classes"], d["scores"]) for d in (tf1, tf2)]
            draw.write_png(draw.side_by_side(*pictures, *titles), os.path.join(tmp, f"{index:03d}_{stem}.png"))
        atomic_write.replace_path(tmp, png_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _mib(value):
    return "-" if value is None else f"{value / 2**20:.1f} MiB"


def _wrapped(text: str, indent: str) -> list:
    """`text` as lines of at most 100 columns, each after `indent` (a long path is not broken)."""
    import textwrap
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False)


def format_report(report: VerifyReport) -> str:
    """The short table the CLI prints, laid out within 100 columns (a long stage name, a model
    file's description and a divergence's note get lines of their own)."""
    from migrate.common.console import shown
    precision = "" if report.precision == "float32" else f", {report.precision}"
    lines = [f"verify {shown(report.src)}", f"    -> {shown(report.converted)}  (mode {report.mode}{precision})"]
    # A model file's names on the runtime that ran it, or None for the converted model.
    kind = RUNTIMES[report.tflite["runtime"]] if report.tflite else None
    if report.tflite:
        threads = report.tflite["threads"]
        lines.append(f"    {kind.file} {shown(report.tflite['file'])}, {threads} thread{'s' if threads > 1 else ''}:")
        lines += _wrapped(report.tflite["kind"], "    ")
    if report.skipped:
        lines.append(f"images       {len(report.images)} compared, {len(report.skipped)} unreadable (skipped)")
    worst = max(report.tensors, key=lambda t: t["max_abs_err"] if t["max_abs_err"] is not None else np.inf,
                default=None)
    ok_tensors = sum(t["ok"] for t in report.tensors)
    if not report.tensors:
        lines.append(f"tensors      not compared ({f'{kind.article} {kind.file}' if kind else 'a SavedModel'} "
                     "shows its detections only)")
    else:
        # The bound as it is applied, per tensor of its range (`parity.compare_tensor`), and the
        # largest error beside the bound at its own tensor: the two read together.
        lines.append(f"tensors      {ok_tensors}/{len(report.tensors)} within atol + rtol * max|TF1| (atol "
                     f"{report.tolerances['atol']:g}, rtol {report.tolerances['rtol']:g})")
        if worst and worst["max_abs_err"] is not None:
            lines += _wrapped(f"largest error {worst['max_abs_err']:.3g} at {worst['name']}", " " * 13)
            if worst.get("allowed") is not None:
                allowed = f"(allowed there {worst['allowed']:.3g})"
                fits = len(lines[-1]) + 1 + len(allowed) <= 100
                lines[-1:] = [f"{lines[-1]} {allowed}"] if fits else [lines[-1], " " * 13 + allowed]
    ok_images = sum(d["ok"] for d in report.detections)
    total = sum(d["num_tf1"] for d in report.detections)
    if report.tolerances.get("criterion") == "agreement":
        t, a = report.tolerances, report.tflite["agreement"]
        lines.append(f"detections   {ok_images}/{len(report.detections)} images with agreement >= {t['min_rate']:g}: "
                     f"{a['matched']}/{a['reference']} TF1 detections found")
        lines.append(f"{'':13}(scoring >= {t['min_score']:g}; same class, IoU >= {t['match_iou']:g}), rate "
                     f"{a['rate']:.3f}, mean IoU {a['mean_iou']:.3f}")
    elif report.tolerances.get("criterion") == "mixed_precision":
        matched = sum(d["matched"] for d in report.detections)
        flips = sum(d["nms_flips"] for d in report.detections)
        lines.append(f"detections   {ok_images}/{len(report.detections)} images agree by class and IoU "
                     f"(score margin {report.tolerances['score_margin']:g}):")
        lines.append(f"{'':13}{matched}/{total} TF1 detections matched, {flips} NMS flips")
    else:
        swaps = sum(d["ties_swapped"] for d in report.detections)
        lines.append(f"detections   {ok_images}/{len(report.detections)} images agree ({total} TF1 detections"
                     + (f", {swaps} tied pairs in another order" if swaps else "") + ")")
    pp = report.postprocessing
    if pp:
        ok_pp = sum(d["ok"] for d in pp["detections"])
        lines.append(f"post-proc.   {ok_pp}/{len(pp['detections'])} crafted images agree "
                     f"({sum(d['num_tf1'] for d in pp['detections'])} TF1 detections from crafted encodings and "
                     "logits)")
    fd = report.first_divergence
    if fd:
        lines.append(f"FIRST DIVERGENCE  {fd['name']}")
        if fd.get("max_abs_err") is not None:
            lines.append(f"{'':18}max abs err {fd['max_abs_err']:.3g}, max rel err {fd['max_rel_err']:.3g}")
        if fd.get("note"):
            lines += _wrapped(fd["note"], " " * 18)
    if report.tf1.get("measured"):
        lines.append("")
        side = kind.side if kind else "TF2"
        lines.append(f"{'':24}{'TF1':>22}{side:>22}")
        lines.append(f"{'device':24}{report.tf1['device']:>22}{report.tf2['device']:>22}")
        lines.append(f"{'allocator peak':24}{_mib(report.tf1['peak_memory_bytes']):>22}"
                     f"{_mib(report.tf2['peak_memory_bytes']):>22}")
        lines.append(f"{'  of it transient':24}{_mib(report.tf1['transient_peak_bytes']):>22}"
                     f"{_mib(report.tf2['transient_peak_bytes']):>22}")
        lines.append(f"{'process peak RSS':24}{_mib(report.tf1['peak_rss_bytes']):>22}"
                     f"{_mib(report.tf2['peak_rss_bytes']):>22}")
        if kind:
            # Whose footprint each RSS is: the TF1 process holds TensorFlow, the file's does not.
            lines.append(f"{'':24}{'(with TensorFlow)':>22}{f'({kind.runtime} alone)':>22}")
        for key, tf1_lat in report.tf1["latency_ms"].items():
            tf2_lat = report.tf2["latency_ms"][key]
            label = f"{key.replace('_', ' ')} median/p90"
            cells = [f"{lat['median']:.1f} / {lat['p90']:.1f} ms" for lat in (tf1_lat, tf2_lat)]
            lines.append(f"{label:24}{cells[0]:>22}{cells[1]:>22}")
    lines.append("PASSED" if report.passed else "FAILED")
    return "\n".join(lines)
