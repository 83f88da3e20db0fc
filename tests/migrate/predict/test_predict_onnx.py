"""`migrate export --onnx` and `predict MODEL.onnx IMAGES...` on ONNX Runtime, in a process where
TensorFlow cannot be imported (a `tensorflow` package that raises on import, first on
PYTHONPATH, as in a venv holding only the `[onnx]` extra): the same JSON lines as `predict` on
the converted directory (TensorFlow) for photos of any size, the unreadable image warned and
skipped, bad input refused in one line with exit 2 and nothing written."""

from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import pytest

pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx (pip install '.[onnx-export]')")
pytest.importorskip("onnxruntime", reason="ONNX Runtime is not installed (pip install '.[onnx]')")

from tests.conftest import (SMALL_PRESETS, json_lines, same_predict_lines, mixed_image_folder,  # noqa: E402
                            run_cli, unwrapped, without_tensorflow)
from migrate.predict import prediction  # noqa: E402
from ssd_mobilenet.formats.onnx import file_format as onnx_format  # noqa: E402
from ssd_mobilenet.formats.onnx import runner as onnx_runner  # noqa: E402
ATOL = 1e-5  # the project's parity tolerance: ONNX Runtime's kernels round otherwise than oneDNN's
LABELS = "item { id: 1 name: 'cat' }\nitem { id: 2 name: 'dog' }\nitem { id: 3 name: 'bird' }\n"


@pytest.fixture(scope="module")
def model(small_model, tmp_path_factory):
    """(converted directory, its `.onnx` file written by `migrate export --onnx` (`conftest.small_model()`),
    a label map)."""
    root = tmp_path_factory.mktemp("onnx_predict")
    small = small_model()
    converted, path, (out, err) = small.converted, small.onnx, small.onnx_console
    assert out.startswith("exported ONNX opset 13, uint8 input, float32, 100 detections") and path in out
    # The console shows the project's lines only (tf2onnx's log is hidden without --verbose).
    assert all(line.startswith("[migrate] ") for line in err.splitlines()), err
    (root / "labels.pbtxt").write_text(LABELS)
    return converted, path, str(root / "labels.pbtxt")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """`conftest.mixed_image_folder`: mixed sizes and formats, a grayscale PNG, a corrupt JPEG."""
    return mixed_image_folder(tmp_path_factory.mktemp("onnx_images"))


def test_onnx_predict_without_tensorflow_gives_the_converted_models_lines(model, folder, no_tensorflow, tmp_path):
    converted, path, labels = model
    out, png = tmp_path / "onnx.jsonl", tmp_path / "drawn"
    run = without_tensorflow(["predict", path, folder, "--out", str(out), "--png", str(png), "--labels", labels,
                              "--threads", "2", "--min-score", "0.05"], no_tensorflow)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    corrupt = os.path.join(folder, "corrupt.jpg")
    assert [ln for ln in run.stderr.splitlines() if ln.startswith("warning:")] == [
        ln for ln in run.stderr.splitlines() if ln.startswith(f"warning: {corrupt}: ")]
    assert "ONNX Runtime, batch 1" in run.stderr and (
        f"[migrate] {path}: ONNX file, ONNX Runtime, 2 threads\n"
        "[migrate] uint8 input of any size, resized to 128x128 inside, float32, 3 classes, 100 detections\n"
        in unwrapped(run.stderr)), run.stderr  # a long path wraps the line
    ours = json_lines(out)
    # The TensorFlow runtime on the converted directory, in this process.
    prediction.run(converted, [folder], out=str(tmp_path / "tf.jsonl"), labels=labels, batch_size=1, min_score=0.05)
    ref = json_lines(tmp_path / "tf.jsonl")
    assert sorted(ours) == sorted(ref) and set(ours[corrupt]) == {"image", "error"} == set(ref[corrupt])
    sizes = {(line["height"], line["width"]) for line in ours.values() if "error" not in line}
    assert len(sizes) >= 3 and (128, 128) not in sizes  # the file resized every photo itself
    assert same_predict_lines(ours, ref, ATOL) >= 50
    drawn = sorted(os.listdir(png))
    assert len(drawn) == len(ours) - 1 and all(name.endswith(".png") for name in drawn)


@pytest.mark.parametrize("case", ["truncated", "not_ours", "tensorflow_option", "threads", "existing_out",
                                  "truncated_openvino", "not_ours_openvino"])
def test_predict_bad_input_exits_2_with_one_line_and_writes_nothing(model, folder, no_tensorflow, tmp_path, case):
    import onnx
    from onnx import TensorProto, helper
    converted, path, _ = model
    truncated, foreign = tmp_path / "truncated.onnx", tmp_path / "foreign.onnx"
    truncated.write_bytes(open(path, "rb").read()[:100000])
    # A valid ONNX file that is not this project's: one Identity, other outputs.
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "other",
                              [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 8, 8, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 8, 8, 3])])
    foreign_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    foreign_model.ir_version = 8
    onnx.save(foreign_model, str(foreign))
    out = tmp_path / "r.jsonl"
    if case == "existing_out":
        out.write_text("keep\n")
    args, expected = {
        "truncated": ([str(truncated)], f"{truncated}: ONNX Runtime cannot load it"),
        "not_ours": ([str(foreign)], f"{foreign}: not from `migrate export` (outputs: y)"),
        "tensorflow_option": ([path, "--batch", "4"], "--batch: sets up TensorFlow"),
        "threads": ([path, "--threads", "0"], "--threads 0: must be >= 1"),
        "existing_out": ([path], f"{out}: exists"),
        "truncated_openvino": ([str(truncated), "--runtime", "openvino"],
                               f"{truncated}: not from `migrate export` (no ssd_mobilenet_migrate metadata)"),
        "not_ours_openvino": ([str(foreign), "--runtime", "openvino"], f"{foreign}: not from `migrate export`"),
    }[case]
    if case.endswith("_openvino"):
        pytest.importorskip("openvino", reason="OpenVINO is not installed (pip install '.[openvino]')")
    before = sorted(os.listdir(tmp_path))
    run = without_tensorflow(["predict", *args, folder, "--out", str(out)], no_tensorflow)
    assert run.returncode == 2, run.stderr
    err = run.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err
    assert sorted(os.listdir(tmp_path)) == before
    if case == "existing_out":
        assert out.read_text() == "keep\n"


def test_openvino_runs_the_file_as_onnx_runtime_does(model, folder, no_tensorflow, tmp_path):
    """`predict MODEL.onnx --runtime openvino`: the file on OpenVINO's CPU plugin (without
    TensorFlow) gives ONNX Runtime's lines, and says what runs it."""
    pytest.importorskip("openvino", reason="OpenVINO is not installed (pip install '.[openvino]')")
    _, path, labels = model
    lines = {}
    for runtime in ("onnxruntime", "openvino"):
        out = tmp_path / f"{runtime}.jsonl"
        run = without_tensorflow(["predict", path, folder, "--out", str(out), "--runtime", runtime, "--threads", "2",
                                  "--labels", labels, "--min-score", "0.05"], no_tensorflow)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
        name = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}[runtime]
        assert f"[migrate] {path}: ONNX file, {name}, 2 threads\n" in unwrapped(run.stderr), run.stderr
        lines[runtime] = json_lines(out)
    assert sorted(lines["openvino"]) == sorted(lines["onnxruntime"])
    assert same_predict_lines(lines["openvino"], lines["onnxruntime"], ATOL) >= 50


@pytest.mark.parametrize("case", ["exists", "nms", "calibration", "no_model", "no_tf2onnx", "no_onnxruntime"])
def test_export_bad_input_exits_2_with_one_line_and_writes_nothing(model, tmp_path, case, monkeypatch):
    converted, path, _ = model
    out = tmp_path / "m.onnx"
    if case == "exists":
        out.write_bytes(b"keep")
    if case == "no_tf2onnx":  # `import tf2onnx` raises ImportError, as without the [onnx-export] extra
        monkeypatch.setitem(sys.modules, "tf2onnx", None)
    if case == "no_onnxruntime":  # --int8 quantizes with onnxruntime.quantization
        monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)
    args, expected = {
        "exists": ([converted], f"{out}: exists (use --force to replace it)"),
        "nms": ([converted, "--nms", "fast"], "--nms: applies to --tflite files only, not to --onnx"),
        "calibration": ([converted, "--calibration", path], "--calibration: calibrates the --int8 quantization"),
        "no_model": ([str(tmp_path / "nope")], "no such directory"),
        "no_tf2onnx": ([converted], "--onnx: tf2onnx is not installed: pip install 'ssd-mobilenet-migrate[onnx-export]'"),
        "no_onnxruntime": ([converted, "--int8"], "--onnx: onnxruntime is not installed: pip install"),
    }[case]
    before = sorted(os.listdir(tmp_path))
    code, stdout, stderr = run_cli(["export", *args, "--onnx", str(out)])
    assert code == 2 and not stdout
    err = stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err
    assert sorted(os.listdir(tmp_path)) == before
    if case == "exists":
        assert out.read_bytes() == b"keep"


@pytest.mark.slow
def test_export_force_replaces_the_file_with_the_same_model(model, tmp_path):
    converted, path, _ = model
    out = tmp_path / "m.onnx"
    out.write_bytes(b"old")
    code, stdout, _ = run_cli(["export", converted, "--onnx", str(out), "--force", "--quiet", "--max-detections", "10"])
    assert code == 0 and str(out) in stdout and "10 detections" in stdout
    file = onnx_runner.OnnxFile(str(out), threads=1)
    assert file.metadata["max_detections"] == 10
    assert file.detect(np.zeros([50, 60, 3], np.uint8))["detection_scores"].shape == (1, 10)


def test_a_tflite_file_still_runs_on_litert(model, tmp_path):
    """`open_runtime` chooses by the file: an .onnx suffix or ONNX content -> ONNX Runtime, a
    TFLite file -> LiteRT; the same file under another name is still ONNX."""
    from migrate.predict.runtimes import file_runtime
    _, path, _ = model
    renamed = tmp_path / "model.bin"
    shutil.copy(path, renamed)
    assert file_runtime(path) == file_runtime(str(renamed)) == "onnx"
    tflite_like = tmp_path / "x.tflite"
    tflite_like.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(32))
    assert file_runtime(str(tflite_like)) == "litert"


def test_the_class_count_is_read_from_the_files_metadata_without_a_runtime(model, tmp_path):
    """`runtimes.model_classes` reads the `.onnx` file's metadata from its protobuf wire format,
    with neither ONNX Runtime nor the onnx package: what `--labels` is checked against."""
    import onnx

    from migrate.predict.runtimes import model_classes
    converted, path, _ = model
    meta = json.loads({p.key: p.value for p in onnx.load(path).metadata_props}[onnx_format.METADATA_NAME])
    assert onnx_format.read_metadata(path) == meta
    classes = SMALL_PRESETS["plain"]["num_classes"]
    assert model_classes(path) == model_classes(converted) == meta["num_classes"] == classes
    (tmp_path / "cut.onnx").write_bytes(open(path, "rb").read()[:64])
    assert model_classes(str(tmp_path / "cut.onnx")) is None
