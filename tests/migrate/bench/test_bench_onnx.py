"""`bench --sides onnx,onnx_int8,openvino,opencv`: the ONNX files measured against the TF1 session in one
interleaved latency run, each side's memory in a fresh process that never imports TensorFlow,
file size and ready time; their runners give the TF1 graph's detections (float32) or agree by
class and IoU (int8)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx (pip install '.[onnx-export]')")
pytest.importorskip("onnxruntime", reason="ONNX Runtime is not installed (pip install '.[onnx]')")

from tests.conftest import check_detections, random_images, unwrapped  # noqa: E402
from migrate.bench import sides  # noqa: E402
from migrate.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def small(small_model, tmp_path_factory):
    """(TF1 model directory, converted directory, {side: exported file}) of the small model
    (`conftest.small_model("two_classes")`: depth 0.25, 128x128, 2 classes, the TF1 builder's seeded synthetic
    weights, built once per run) and the two ONNX files bench exports from it."""
    src, out = small_model("two_classes").pair
    files = sides.export_sides(out, str(tmp_path_factory.mktemp("bench_onnx") / "exported"), ["onnx", "onnx_int8"])
    return src, out, files


def test_onnx_runners_give_the_tf1_detections(small):
    from migrate.export import drift
    src, out, files = small
    tf1 = sides.runner("tf1_session", src, out)
    onnx_run = sides.runner("onnx", src, out, exported=files["onnx"], threads=1)
    int8_run = sides.runner("onnx_int8", src, out, exported=files["onnx_int8"], threads=1)
    runners = [onnx_run]
    try:
        import openvino  # noqa: F401
        runners.append(sides.runner("openvino", src, out, exported=files["onnx"], threads=1))
    except ImportError:
        pass
    try:
        import cv2  # noqa: F401
        runners.append(sides.runner("opencv", src, out, exported=files["onnx"], threads=1))
    except ImportError:
        pass
    for seed, (h, w) in enumerate([(128, 128), (90, 200)]):
        image = random_images(seed, 1, h, w)
        ref = tf1(image)
        for run in runners:
            check_detections(run(image), ref)
        agreement = drift.agreement(ref, int8_run(image), min_score=0.0)
        assert agreement["reference"] > 0 and agreement["rate"] > 0.5


def test_onnx_memory_process_never_imports_tensorflow(small, tmp_path):
    from migrate.bench import litert_memory
    src, out, files = small
    stub = tmp_path / "no_tensorflow"
    (stub / "tensorflow").mkdir(parents=True)
    (stub / "tensorflow" / "__init__.py").write_text("raise ImportError('tensorflow is not available here')\n")
    kwargs = {"side": "onnx", "src": src, "converted": out, "exported": files["onnx"], "threads": 1}
    images = [random_images(1, 1, 128, 128), random_images(2, 1, 90, 200)]
    result = litert_memory.measure_without_tensorflow("migrate.bench.sides:runner", kwargs, images, warmup=1,
                                                      repeats=1, env={"PYTHONPATH": str(stub)})
    assert result["tensorflow_imported"] is False and result["runtime"].startswith("ONNX Runtime ")
    assert [b["shape"] for b in result["batches"]] == [[1, 128, 128, 3], [1, 90, 200, 3]]
    assert result["peak_rss_bytes"] >= result["rss_bytes"] > 0 and result["peak_memory_bytes"] is None


@pytest.mark.slow  # two fresh processes, one importing TensorFlow (6.4 s in the fast tier of 97db5d3)
def test_photo_memory_runs_predict_over_the_photos_beside_the_tf1_session(small, tmp_path):
    from PIL import Image

    from migrate.bench import photo_memory
    src, out, files = small
    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(5)
    for name, (h, w) in {"a.png": (96, 200), "b.jpg": (300, 170)}.items():
        Image.fromarray(rng.integers(0, 256, (h, w, 3)).astype(np.uint8)).save(photos / name, quality=90)
    report = photo_memory.measure_photos(os.path.join(src, "frozen_inference_graph.pb"), [files["onnx"]], str(photos))
    assert [(p["height"], p["width"]) for p in report["photos"]] == [(96, 200), (300, 170)]
    tf1, onnx_row = report["rows"]
    assert (tf1["side"], onnx_row["side"]) == ("tf1_session", os.path.basename(files["onnx"]))
    assert tf1["tensorflow_imported"] and not onnx_row["tensorflow_imported"]
    assert onnx_row["runtime"] == "ONNX Runtime" and tf1["rss_ratio"] == 1.0
    assert 0 < onnx_row["rss_ratio"] < 1 and onnx_row["peak_rss_bytes"] >= onnx_row["rss_bytes"] > 0
    # Timed from just before each process started: to its first detections (predict's first JSON
    # line), to its exit; processes in the environment users have.
    for row in report["rows"]:
        assert 0 < row["first_detections_s"] < row["wall_s"]
    assert tf1["first_detections_s_ratio"] == tf1["wall_s_ratio"] == 1.0
    assert "TF_CPU_ALLOCATOR_USE_BFC" not in report["env"]
    assert "| onnx.onnx | ONNX Runtime |" in photo_memory.markdown(report)


@pytest.mark.slow
def test_bench_onnx_sides_against_the_tf1_session(small, tmp_path, capsys):
    pytest.importorskip("openvino", reason="OpenVINO is not installed (pip install '.[openvino]')")
    pytest.importorskip("cv2", reason="OpenCV is not installed (pip install '.[opencv]')")
    src, out, _ = small
    json_path, md_path = tmp_path / "bench.json", tmp_path / "benchmarks.md"
    assert main(["bench", src, out, "--sides", "tf1_session,onnx,onnx_int8,openvino,openvino_int8,opencv",
                 "--size", "128x128", "--batch", "1", "--repeats", "2", "--warmup", "1", "--threads", "2",
                 "--json", str(json_path), "--markdown", str(md_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    report = json.loads(json_path.read_text())
    rows = {r["side"]: r for r in report["rows"]}
    assert set(rows) == {"tf1_session", "onnx", "onnx_int8", "openvino", "openvino_int8", "opencv"}
    for side in ("onnx", "onnx_int8", "openvino", "openvino_int8", "opencv"):
        r, mem = rows[side], report["memory"][side]
        assert r["rounds"] == rows["tf1_session"]["rounds"] and r["latency_ratio"] > 0
        assert mem["tensorflow_imported"] is False and r["alloc_transient_bytes"] is None
        assert 0 < r["rss_ratio"] < 1 and r["ready_s"] > 0 and r["file_bytes"] > 0
    assert report["memory"]["openvino"]["runtime"].startswith("OpenVINO ")
    assert report["memory"]["openvino_int8"]["runtime"].startswith("OpenVINO ")
    assert report["memory"]["onnx_int8"]["runtime"].startswith("ONNX Runtime ")
    assert report["memory"]["opencv"]["runtime"].startswith("OpenCV ")
    assert rows["onnx_int8"]["file_bytes"] == rows["openvino_int8"]["file_bytes"] < rows["onnx"]["file_bytes"] / 2
    # The settings note, wrapped.
    assert "ONNX sides (onnx, onnx_int8, openvino, openvino_int8, opencv)" in unwrapped(printed)
    md = md_path.read_text()
    assert "- `onnx`: " in md and "- `openvino`: " in md and "- `openvino_int8`: " in md and "- `opencv`: " in md
    assert os.path.getsize(md_path) > 0 and np.isfinite(rows["onnx"]["latency_ms"]["median"])
