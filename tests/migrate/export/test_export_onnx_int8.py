"""`migrate export --onnx OUT --int8 [--calibration IMAGES]`: a QDQ file (int8 convolutions,
calibrated on images; everything after the heads float32), its drift from the float file
reported, TensorRT's QDQ rules kept (symmetric: zero points 0), and `verify --onnx` judging it by
agreement with the TF1 graph."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx (pip install '.[onnx-export]')")
pytest.importorskip("onnxruntime", reason="ONNX Runtime is not installed (pip install '.[onnx]')")

from tests.conftest import SHARED, assert_float_postprocessing, run_cli, shared_available, unwrapped  # noqa: E402
from migrate.cli import main  # noqa: E402
from ssd_mobilenet.formats.onnx import runner as onnx_runner  # noqa: E402
from tests.ssd_mobilenet.formats.onnx.test_onnx_runtimes import PHOTOS, TENSORRT_OPS  # noqa: E402


@pytest.fixture(scope="module")
def int8_file(small_model, tmp_path_factory):
    """(converted directory, float file (`conftest.small_model()`), int8 file calibrated on generated
    images, export's stderr)."""
    converted, float_path = small_model().converted, small_model().onnx
    int8_path = str(tmp_path_factory.mktemp("onnx_int8") / "int8.onnx")
    code, out, err = run_cli(["export", converted, "--onnx", int8_path, "--int8"])
    assert code == 0, err
    assert out.startswith("exported ONNX opset 13, uint8 input, int8 QDQ, uint8 activations, 100 detections")
    return converted, float_path, int8_path, err


@pytest.fixture(scope="module")
def tensorrt_int8_file(small_model, tmp_path_factory):
    """The int8 file for TensorRT (`--input float32 --int8`), calibrated on generated images."""
    path = str(tmp_path_factory.mktemp("onnx_int8_tensorrt") / "int8_float32_input.onnx")
    code, out, err = run_cli(["export", small_model().converted, "--onnx", path, "--input", "float32", "--int8"])
    assert code == 0, err
    assert out.startswith("exported ONNX opset 13, float32 input, int8 QDQ, int8 activations, 100 detections")
    return path


def _check_convolutions_only_quantized(model, float_path) -> dict:
    """Asserts what both int8 forms share: every convolution reads dequantized int8 input and
    weights, no op after the heads reads a dequantized value, the scores reach NMS in float32,
    the float file's convolutions all there, metadata post-training. Returns the initializers."""
    onnx.checker.check_model(model, full_check=True)
    producer = {out: node for node in model.graph.node for out in node.output}
    consumers = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    dequantized_into = set()
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear":
            dequantized_into.update(c.op_type for c in consumers.get(node.output[0], []))
    for node in model.graph.node:
        if node.op_type == "Conv":
            assert all(producer[name].op_type == "DequantizeLinear" for name in node.input[:2]), node.name
    assert "Conv" in dequantized_into and not dequantized_into & {
        "Exp", "Sigmoid", "Softmax", "NonMaxSuppression", "TopK", "ScatterND", "Where", "Greater"}, dequantized_into
    assert_float_postprocessing(model)
    assert sum(node.op_type == "Conv" for node in model.graph.node) == sum(
        node.op_type == "Conv" for node in onnx.load(float_path).graph.node)
    meta = json.loads({p.key: p.value for p in model.metadata_props}["ssd_mobilenet_migrate"])
    assert meta["int8"] and meta["quantization"] == "post-training"
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _zero_points(model, initializers) -> list:
    """The activations' zero points (the QuantizeLinear nodes', arrays)."""
    return [initializers[node.input[2]] for node in model.graph.node if node.op_type == "QuantizeLinear"]


def _what_onnx_runtime_runs(path, folder) -> dict:
    """{op type: count} of the graph ONNX Runtime's CPU provider runs for the file at `path`, all
    its optimizations on (`optimized_model_filepath`: the graph after its QDQ fusions)."""
    ort = onnx_runner.import_onnxruntime()
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(folder / "optimized.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    counts = {}
    for node in onnx.load(options.optimized_model_filepath).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def test_default_int8_file_has_uint8_activations_that_onnx_runtime_fuses_whole(int8_file, tmp_path):
    """The CPU form: uint8 activations, each ReLU6 folded into its convolution's output range, so
    that ONNX Runtime runs every convolution as a QLinearConv, with no float Conv, no float ReLU6
    (Clip) between a dequantize and a quantize, and one QuantizeLinear (the scaled image's)."""
    _, float_path, int8_path, _ = int8_file
    model = onnx.load(int8_path)
    initializers = _check_convolutions_only_quantized(model, float_path)
    zero_points = _zero_points(model, initializers)
    assert zero_points and all(z.dtype == np.uint8 for z in zero_points)
    assert "Clip" not in {node.op_type for node in model.graph.node}
    convolutions = sum(node.op_type == "Conv" for node in onnx.load(float_path).graph.node)
    runs = _what_onnx_runtime_runs(int8_path, tmp_path)
    assert runs.get("QLinearConv") == convolutions and not {"Conv", "Clip"} & set(runs), runs
    assert runs.get("QuantizeLinear") == 1, runs
    meta = json.loads({p.key: p.value for p in model.metadata_props}["ssd_mobilenet_migrate"])
    assert meta["activations"] == "uint8"
    assert os.path.getsize(int8_path) < 0.5 * os.path.getsize(float_path)


def test_tensorrt_int8_file_keeps_tensorrts_qdq_rules(small_model, tensorrt_int8_file):
    """The TensorRT form (`--input float32`): symmetric int8 activations (zero points 0, which
    TensorRT's parser requires of QDQ), every op in its parser's list, the float32 input it takes."""
    model = onnx.load(tensorrt_int8_file)
    initializers = _check_convolutions_only_quantized(model, small_model().onnx)
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and len(node.input) > 2:
            assert not initializers[node.input[2]].any(), node.name  # zero point 0: TensorRT's rule
    assert all(z.dtype == np.int8 for z in _zero_points(model, initializers))
    assert {node.op_type for node in model.graph.node} <= TENSORRT_OPS
    (graph_input,) = model.graph.input
    assert graph_input.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    meta = json.loads({p.key: p.value for p in model.metadata_props}["ssd_mobilenet_migrate"])
    assert meta["activations"] == "int8" and meta["input"] == "float32"


def test_int8_drift_is_reported_and_the_file_runs(int8_file):
    from migrate.export import drift
    _, float_path, int8_path, err = int8_file
    notes = [line for line in unwrapped(err).splitlines() if line.startswith("[migrate] int8: ")]
    # The synthetic weights score below 0.5 on generated images: the note says there was nothing to compare
    # at 0.5, and the comparison below is at every score.
    assert len(notes) == 1, err
    assert "the float file has no detections scoring >= 0.5 on the 16 generated images" in notes[0], err
    file = onnx_runner.OnnxFile(int8_path, threads=1)
    assert "int8 QDQ, uint8 activations" in file.kind
    reference = onnx_runner.OnnxFile(float_path, threads=1)
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (150, 200, 3)).astype(np.uint8)
    ours, ref = file.detect(image), reference.detect(image)
    assert ours["detection_boxes"].shape == ref["detection_boxes"].shape == (1, 100, 4)
    a = drift.agreement(ref, ours, min_score=0.0)
    assert a["reference"] == 100 and a["rate"] > 0.5  # a quantized copy of the same model, not another one


def test_int8_file_converts_scores_with_the_runtimes_one_sigmoid(int8_file, tmp_path):
    """The float file's sigmoid is TensorFlow's step by step (its ties, `postprocessing.tensorflow_sigmoid`);
    the int8 file's is the runtime's one `Sigmoid` (`integer.runtime_sigmoid`), which ONNX Runtime
    runs as one kernel: the same detections as the float file's, scores a float32 step or two off."""
    from migrate.export import drift
    from ssd_mobilenet.formats.onnx import integer
    from ssd_mobilenet.postprocessing import SIGMOID_SCOPE
    _, float_path, int8_path, _ = int8_file
    float_model, int8_model = onnx.load(float_path), onnx.load(int8_path)
    scoped = [n.op_type for n in float_model.graph.node if n.name.startswith(SIGMOID_SCOPE + "/")]
    assert len(scoped) > 20 and {"Floor", "Exp", "Div"} <= set(scoped) and "Sigmoid" not in scoped
    assert not [n.name for n in int8_model.graph.node if n.name.startswith(SIGMOID_SCOPE + "/")]
    assert [n.op_type for n in int8_model.graph.node].count("Sigmoid") == 1
    assert _what_onnx_runtime_runs(int8_path, tmp_path).get("Sigmoid") == 1
    swapped = integer.runtime_sigmoid(float_model)
    onnx.checker.check_model(swapped, full_check=True)
    assert len(swapped.graph.node) == len(float_model.graph.node) - len(scoped) + 1
    assert len(swapped.graph.initializer) < len(float_model.graph.initializer)  # its constants went with it
    assert len(float_model.graph.node) == len(onnx.load(float_path).graph.node)  # a copy, the model untouched
    ours_path = str(tmp_path / "runtime_sigmoid.onnx")
    onnx.save(swapped, ours_path)
    ours, reference = onnx_runner.OnnxFile(ours_path, threads=1), onnx_runner.OnnxFile(float_path, threads=1)
    for seed in range(3):
        image = np.random.default_rng(seed).integers(0, 256, (150, 200, 3)).astype(np.uint8)
        a = drift.agreement(reference.detect(image), ours.detect(image), min_score=0.0)
        assert a["matched"] == a["reference"] == 100 and a["max_score_diff"] < 1e-6, a


def test_an_int8_file_on_openvino_is_the_same_model(int8_file):
    """`predict --runtime openvino` (`ssd_mobilenet.formats.onnx.runtimes`): the int8 file on
    OpenVINO says what it is as on ONNX Runtime and agrees with the float file as it does there
    (OpenVINO's int8 kernels round otherwise: agreement, not equality)."""
    pytest.importorskip("openvino", reason="OpenVINO is not installed (pip install '.[openvino]')")
    from migrate.export import drift
    from ssd_mobilenet.formats.onnx import runtimes
    from ssd_mobilenet.formats.onnx.openvino_model import OpenVinoFile
    _, float_path, int8_path, _ = int8_file
    file = runtimes.open_file(int8_path, threads=1, runtime="openvino")
    on_onnx_runtime = runtimes.open_file(int8_path, threads=1)
    assert isinstance(file, OpenVinoFile) and (file.runtime, on_onnx_runtime.runtime) == ("OpenVINO", "ONNX Runtime")
    assert file.kind == on_onnx_runtime.kind and "int8 QDQ" in file.kind
    image = np.random.default_rng(3).integers(0, 256, (150, 200, 3)).astype(np.uint8)
    ref = onnx_runner.OnnxFile(float_path, threads=1).detect(image)
    ours, theirs = file.detect(image), on_onnx_runtime.detect(image)
    assert ours["detection_boxes"].shape == (1, 100, 4)
    a, b = drift.agreement(ref, ours, min_score=0.0), drift.agreement(ref, theirs, min_score=0.0)
    assert a["reference"] == 100 and a["rate"] > 0.5  # a quantized copy of the same model, not another one
    print(f"int8 file against the float file: OpenVINO {a['matched']}, ONNX Runtime {b['matched']} of 100 kept")


@pytest.mark.slow
@pytest.mark.skipif(not shared_available() or not PHOTOS, reason="needs ../shared (the zoo graph and photos)")
def test_verify_onnx_int8_zoo_file_by_agreement_on_the_shared_photos(zoo_converted, tmp_path, capsys):
    src, converted = zoo_converted
    photos = os.path.join(SHARED, "photos")
    path, report_path = tmp_path / "zoo_int8.onnx", tmp_path / "report.json"
    assert main(["export", converted, "--onnx", str(path), "--int8", "--calibration", photos, "--quiet"]) == 0
    capsys.readouterr()
    code = main(["verify", src, converted, "--onnx", str(path), "--images", photos, "--no-measure", "--json",
                 str(report_path), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    report = json.loads(report_path.read_text())
    assert report["mode"] == "onnx" and report["tolerances"]["criterion"] == "agreement" and report["passed"]
    agreement = report["tflite"]["agreement"]
    assert agreement["reference"] > 0 and agreement["rate"] >= 0.5
    print(f"zoo int8 QDQ file: {agreement['matched']} of {agreement['reference']} TF1 detections scoring >= 0.5 "
          f"(rate {agreement['rate']:.3f}, mean IoU {agreement['mean_iou']:.3f})")
