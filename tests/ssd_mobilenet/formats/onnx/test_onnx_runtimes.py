"""The same `.onnx` file on every ONNX runtime: OpenVINO and OpenCV's DNN module give ONNX Runtime's
detections, every op is one TensorRT's ONNX parser supports (TensorRT cannot run here: the list is
checked, not the engine), `verify --onnx` proves the 2018 zoo conversion's file against the TF1
graph on the shared photos of several sizes, and OpenCV gives the TF1 graph's detections on them too."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import onnx
import pytest
from ssd_mobilenet.detections import DETECTION_OUTPUTS

pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx (pip install '.[onnx-export]')")
pytest.importorskip("onnxruntime", reason="ONNX Runtime is not installed (pip install '.[onnx]')")

from tests.conftest import SHARED, check_detections, shared_available  # noqa: E402
from migrate.cli import main  # noqa: E402
from ssd_mobilenet import detector  # noqa: E402
from ssd_mobilenet.formats import images  # noqa: E402
from ssd_mobilenet.formats.onnx import file_format as onnx_format  # noqa: E402
from ssd_mobilenet.formats.onnx import openvino_model  # noqa: E402
from ssd_mobilenet.formats.onnx import runner as onnx_runner  # noqa: E402
from ssd_mobilenet.formats.onnx import writer as onnx_export  # noqa: E402
from ssd_mobilenet.errors import InputError

PHOTOS = sorted(glob.glob(os.path.join(SHARED, "photos", "*.jpg")))

# TensorRT 8.5's ONNX parser: the operators its support matrix marks "Y" (onnx/onnx-tensorrt,
# docs/operators.md at commit 6d0ab7be324d02c7feb3a306b6fdbeae84f71ddc, "TensorRT 8.5 supports
# operators up to Opset 17"). Restrictions that matrix gives for the ops these files use are
# in TENSORRT_INITIALIZER_INPUTS and the Resize modes below.
TENSORRT_OPS = frozenset("""
Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh AveragePool BatchNormalization Cast Ceil Celu Clip Concat
Constant ConstantOfShape Conv ConvTranspose Cos Cosh CumSum DepthToSpace DequantizeLinear Div Dropout Einsum Elu Equal
Erf Exp Expand EyeLike Flatten Floor Gather GatherElements GatherND Gemm GlobalAveragePool GlobalLpPool GlobalMaxPool
Greater GreaterOrEqual GridSample GRU HardSwish HardSigmoid Identity If ImageScaler InstanceNormalization IsNaN
LeakyRelu Less LessOrEqual Log LogSoftmax Loop LRN LSTM LpNormalization LpPool MatMul Max MaxPool Mean
MeanVarianceNormalization Min Mod Mul Neg NonMaxSuppression NonZero Not OneHot Or Pad ParametricSoftplus Pow PRelu
QuantizeLinear RandomNormal RandomNormalLike RandomUniform RandomUniformLike Range Reciprocal ReduceL1 ReduceL2
ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize
ReverseSequence RNN RoiAlign Round ScaledTanh Scan Scatter ScatterElements ScatterND Selu Shape Shrink Sigmoid Sign Sin
Sinh Size Slice Softmax Softplus Softsign SpaceToDepth Split Sqrt Squeeze Sub Sum Tan Tanh ThresholdedRelu Tile TopK
Transpose Trilu Unsqueeze Upsample Where Xor
""".split())
TENSORRT_MAX_OPSET = 17
# Inputs the matrix says must be initializers (or constants): op -> input positions.
TENSORRT_INITIALIZER_INPUTS = {"Conv": [1], "TopK": [1], "Slice": [3], "Squeeze": [1], "Unsqueeze": [1],
                               "CumSum": [1]}


@pytest.fixture(scope="module")
def files(small_model, tmp_path_factory):
    """{"uint8": path, "float32": path, "converted": directory}: the small model's default file and its
    fixed-size float32 one, and the converted directory they were exported from."""
    root = tmp_path_factory.mktemp("onnx_runtimes")
    paths = {"converted": small_model().converted}
    model = detector.load_model(paths["converted"])
    for input_type in ("uint8", "float32"):
        paths[input_type] = str(root / f"{input_type}.onnx")
        onnx_export.export_onnx(model, paths[input_type], input_type=input_type)
    return paths


def _photos_or_generated():
    """uint8 [H, W, 3] photos of several sizes: the shared photos, or generated ones without them."""
    if PHOTOS:
        return [images.read_image(p) for p in PHOTOS]
    rng = np.random.default_rng(7)
    return [rng.integers(0, 256, (h, w, 3)).astype(np.uint8) for h, w in ((300, 300), (480, 640), (211, 97))]


def test_openvino_gives_onnx_runtimes_detections(files):
    ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (pip install '.[openvino]')")
    path = files["uint8"]
    file = onnx_runner.OnnxFile(path, threads=2)
    core = ov.Core()
    compiled = openvino_model.compile_model(core, path)  # float32, divisions kept
    detections = 0
    for image in _photos_or_generated():
        ours = file.detect(image)
        result = compiled({"input_tensor": image[None]})
        theirs = {key: np.asarray(result[compiled.output(key)]) for key in DETECTION_OUTPUTS}
        check_detections(theirs, ours)
        detections += int(ours["num_detections"][0])
    assert detections >= 100


def _opencv_detect(cv2, path: str):
    """detect(image uint8 [H, W, 3]) -> the four outputs of the `.onnx` file at `path` on OpenCV's DNN
    module (numpy, [1, D, ...]): `readNetFromONNX` as it is (its default engine, the new one), the
    photo fed at its own size as ONNX Runtime takes it."""
    net = cv2.dnn.readNetFromONNX(path)

    def detect(image):
        net.setInput(image[None])
        return {key: np.asarray(value) for key, value in zip(DETECTION_OUTPUTS, net.forward(list(DETECTION_OUTPUTS)))}
    return detect


def test_opencv_gives_onnx_runtimes_detections(files):
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (pip install '.[opencv]')")
    file = onnx_runner.OnnxFile(files["uint8"], threads=2)
    detect = _opencv_detect(cv2, files["uint8"])
    detections = 0
    for image in _photos_or_generated():
        ours = file.detect(image)
        check_detections(detect(image), ours)
        detections += int(ours["num_detections"][0])
    assert detections >= 100


# The TF1 graphs OpenCV is held to: the 2018 zoo graph and the OD API exporter's own FPN and PPN exports.
TF1_GRAPHS = ["zoo_2018", "fpn_small", "ppn_small"]


@pytest.mark.slow
@pytest.mark.skipif(not shared_available() or not PHOTOS, reason="needs ../shared (the zoo graph and photos)")
@pytest.mark.parametrize("graph", TF1_GRAPHS)
def test_opencv_gives_the_tf1_graphs_detections_on_the_shared_photos(graph, request, tmp_path):
    """The conversion's file on OpenCV against the TF1 frozen graph, photo by photo at its own size
    (decoded as TensorFlow decodes it): counts and classes exact, boxes and scores within 1e-5,
    detections of scores equal within it in either order (`parity.compare_detections`)."""
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (pip install '.[opencv]')")
    from tests.conftest import ODAPI_EXPORTS
    from migrate.tf1.frozen_graph import FrozenGraphRunner
    from migrate.tf1.parity import compare_detections
    from migrate.tf1.sources import read_graph_def
    if graph == "zoo_2018":
        src, converted = request.getfixturevalue("zoo_converted")
    else:
        src, converted = os.path.join(ODAPI_EXPORTS, graph), request.getfixturevalue("odapi_converted")(graph)
    path = tmp_path / "model.onnx"
    assert main(["export", converted, "--onnx", str(path), "--quiet"]) == 0
    detect = _opencv_detect(cv2, str(path))
    tf1 = FrozenGraphRunner(read_graph_def(os.path.join(src, "frozen_inference_graph.pb")))
    detections = 0
    try:
        for photo in PHOTOS:
            image = images.read_image(photo)
            ref = tf1.run(image[None], {key: f"{key}:0" for key in DETECTION_OUTPUTS})
            result = compare_detections(detect(image), ref, 0, atol=1e-5, rtol=0.0)
            assert result["ok"] and result["classes_equal"], (photo, result["note"])
            detections += result["num_tf1"]
    finally:
        tf1.close()
    assert detections > 0


def _initializers_and_constants(model) -> set:
    names = {t.name for t in model.graph.initializer}
    return names | {o for node in model.graph.node if node.op_type == "Constant" for o in node.output}


@pytest.mark.parametrize("input_type", ["uint8", "float32"])
def test_every_op_is_in_tensorrts_onnx_parser_support_list(files, input_type):
    model = onnx.load(files[input_type])
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) <= TENSORRT_MAX_OPSET
    ops = {node.op_type for node in model.graph.node}
    assert ops <= TENSORRT_OPS, sorted(ops - TENSORRT_OPS)
    constant = _initializers_and_constants(model)
    for node in model.graph.node:
        for position in TENSORRT_INITIALIZER_INPUTS.get(node.op_type, []):
            if position < len(node.input) and node.input[position]:
                assert node.input[position] in constant, (node.op_type, node.name, node.input[position])
        if node.op_type == "NonMaxSuppression":  # 8.4's matrix asked for initializers; kept so
            assert all(name in constant for name in node.input[2:]), node.name
        if node.op_type == "Resize":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            assert attrs.get("coordinate_transformation_mode", b"half_pixel") in (b"asymmetric",)
            assert attrs.get("mode", b"nearest") in (b"linear", b"nearest")
            assert attrs.get("nearest_mode", b"round_prefer_floor") in (b"floor", b"round_prefer_floor")
    (graph_input,) = model.graph.input
    dims = [d.dim_value for d in graph_input.type.tensor_type.shape.dim]
    if input_type == "float32":
        # TensorRT's input: float32 of a fixed size (it refuses uint8, onnx-tensorrt#400).
        assert graph_input.type.tensor_type.elem_type == onnx.TensorProto.FLOAT and dims == [1, 128, 128, 3]
    else:
        assert graph_input.type.tensor_type.elem_type == onnx.TensorProto.UINT8


@pytest.mark.slow
@pytest.mark.skipif(not shared_available() or not PHOTOS, reason="needs ../shared (the zoo graph and photos)")
def test_verify_onnx_passes_the_2018_zoo_conversions_file_on_the_shared_photos(zoo_converted, tmp_path, capsys):
    """The 2018 zoo graph's conversion (300x300, 90 classes) as an ONNX file, against the TF1 graph
    on the 7 shared photos (300x300 to 1352x900), each at its own size: counts and classes exact,
    boxes and scores within 1e-5; on ONNX Runtime, and on OpenVINO (`--runtime openvino`)."""
    pytest.importorskip("openvino", reason="OpenVINO is not installed (pip install '.[openvino]')")
    src, converted = zoo_converted
    path, report_path = tmp_path / "zoo.onnx", tmp_path / "report.json"
    assert main(["export", converted, "--onnx", str(path), "--quiet"]) == 0
    capsys.readouterr()
    code = main(["verify", src, converted, "--onnx", str(path), "--images", os.path.join(SHARED, "photos"),
                 "--no-measure", "--threads", "2", "--json", str(report_path), "--runtime", "openvino", "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    on_openvino = json.loads(report_path.read_text())
    assert on_openvino["passed"] and on_openvino["tflite"]["runtime"] == "openvino"
    assert any("on OpenVINO's CPU plugin, 2 threads" in note for note in on_openvino["notes"])
    code = main(["verify", src, converted, "--onnx", str(path), "--images", os.path.join(SHARED, "photos"),
                 "--no-measure", "--threads", "2", "--json", str(report_path), "--force", "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "uint8 input of any size, resized to 300x300 inside, float32, 90 classes" in printed
    assert "ONNX file" in printed and "PASSED" in printed
    report = json.loads(report_path.read_text())
    assert report["passed"] and report["mode"] == "onnx" and report["tolerances"]["criterion"] == "exact"
    dets = report["detections"]
    assert len(dets) == len(PHOTOS) and all(d["ok"] and d["classes_equal"] and d["num_tf1"] == d["num_tf2"]
                                             for d in dets)
    assert sum(d["num_tf1"] for d in dets) > 0
    assert max(d["max_box_err"] for d in dets) <= 1e-5 and max(d["max_score_err"] for d in dets) <= 1e-5
    print(f"zoo verify --onnx: {sum(d['num_tf1'] for d in dets)} detections, boxes within "
          f"{max(d['max_box_err'] for d in dets):.2e}, scores within {max(d['max_score_err'] for d in dets):.2e}")


@pytest.mark.parametrize("case", ["two_files", "batch", "not_ours", "runtime_without_onnx"])
def test_verify_onnx_bad_input_is_one_line(files, tmp_path, capsys, case):
    fake_src = tmp_path / "src"
    fake_src.mkdir()
    converted = files["converted"]  # read only: verify writes nothing there
    foreign = tmp_path / "foreign.onnx"
    foreign.write_bytes(b"\x08\x07" + bytes(50))
    args, expected = {
        "two_files": (["--onnx", files["uint8"], "--tflite", files["uint8"]], "--onnx: one file at a time"),
        "batch": (["--onnx", files["uint8"], "--batch", "2"], "--batch 2: does not apply with --onnx"),
        "not_ours": (["--onnx", str(foreign)], f"{foreign}: ONNX Runtime cannot load it"),
        "runtime_without_onnx": (["--tflite", files["uint8"], "--runtime", "openvino"],
                                 "--runtime openvino: for an --onnx file"),
    }[case]
    code = main(["verify", str(fake_src), converted, *args, "--no-measure", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: ") and expected in err, err


def test_a_float32_file_gets_the_photo_prepared_as_the_graph_prepares_it(files):
    """`OnnxFile` feeds a fixed-size float32 file the photo resized and scaled in numpy
    (`ssd_mobilenet.formats.preprocess`, TensorFlow's kernels bit for bit): the uint8 file's
    detections, for photos of any size."""
    uint8_file = onnx_runner.OnnxFile(files["uint8"], threads=1)
    float_file = onnx_runner.OnnxFile(files["float32"], threads=1)
    assert float_file.input_name == "normalized_input_image_tensor" and not float_file.any_size
    assert float_file.exact_for_any_size and "float32 input of 128x128" in float_file.kind
    detections = 0
    for image in _photos_or_generated()[:4]:
        ours, ref = float_file.detect(image), uint8_file.detect(image)
        check_detections(ours, ref)
        detections += int(ref["num_detections"][0])
    assert detections > 0


@pytest.mark.parametrize("entry", ['{"version": 1}', '{"version": "one", "image_size": [128, 128]}',
                                   '{"version": 1, "image_size": [128]}'])
def test_a_file_with_other_metadata_is_one_onnx_file_error(tmp_path, entry):
    """The four outputs and the metadata's name, but not what `migrate export --onnx` writes in it."""
    from onnx import TensorProto, helper
    outputs = [helper.make_tensor_value_info(key, TensorProto.FLOAT, [1]) for key in DETECTION_OUTPUTS]
    nodes = [helper.make_node("Identity", ["input_tensor"], [key]) for key in DETECTION_OUTPUTS]
    graph = helper.make_graph(nodes, "other", [helper.make_tensor_value_info("input_tensor", TensorProto.FLOAT, [1])],
                              outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, {onnx_format.METADATA_NAME: entry})
    path = tmp_path / "other.onnx"
    onnx.save(model, str(path))
    with pytest.raises(InputError, match="other.onnx: ssd_mobilenet_migrate metadata without version or image_size$"):
        onnx_runner.OnnxFile(str(path), threads=1)
