"""The TFLite export (`ssd_mobilenet.formats.tflite.writer`, `python -m migrate export --tflite`), run by
LiteRT's interpreter (`ai-edge-litert`) through the file's serving signature.

One small model (depth 0.25, 128x128, 3 classes, the zoo's post-processing: score threshold 1e-8,
100 detections, so NMS and the sort are exercised on every image) with the TF1 builder's seeded
synthetic weights assigned as `convert` assigns them, saved as a converted directory (config and
checkpoint, what `ssd_mobilenet.load` reads) once per run (`conftest.small_model()`, which the
ONNX and web export tests read too); the images are the shapes set's (gradient backgrounds, noise,
solid shapes).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from tests.conftest import SHARED, SMALL_PRESETS, check_detections
from ssd_mobilenet import SSDMobileNetV1, detector, loading, preprocessing, shape_images
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.formats.preprocess import INPUT_NAMES, INPUT_TYPES
from ssd_mobilenet.formats.tflite import file_format
from ssd_mobilenet.formats.tflite import writer as tflite
from ssd_mobilenet.detections import DETECTION_OUTPUTS

CONFIG = SSDConfig(**SMALL_PRESETS["plain"])
# What "the same detections" allows: TFLite's kernels round differently from oneDNN's in the
# last bits of float32 (measured: 3e-7 on scores and boxes); the project's parity tolerance.
ATOL = 1e-5

# The int8 calibration runs TensorFlow's own QuantizationDebugger, which builds a tf.lite.Interpreter.
pytestmark = pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")


@pytest.fixture(scope="module")
def converted(small_model):
    return small_model().converted


@pytest.fixture(scope="module")
def images():
    """uint8 [4, 128, 128, 3]: shapes-set images at the model's size."""
    rng = np.random.default_rng(11)
    return np.stack([shape_images.make_image(rng, 128, 128)[0] for _ in range(4)])


@pytest.fixture(scope="module")
def reference(converted, images):
    """The converted model's detections on `images` (`ssd_mobilenet.load`, what users run), numpy."""
    return {k: v.numpy() for k, v in loading.load(converted)(images).items()}


@pytest.fixture(scope="module")
def exported(converted, tmp_path_factory):
    """{input type: the per-class file `export_tflite` writes for it (bytes)}, exported once for
    the cases that read it."""
    folder, files = tmp_path_factory.mktemp("tflite_files"), {}

    def get(input_type):
        if input_type not in files:
            path = str(folder / f"{input_type}.tflite")
            tflite.export_tflite(detector.load_model(converted), path, input_type=input_type)
            files[input_type] = path
        return files[input_type]
    return get


def run_signature(model_bytes: bytes, **inputs) -> dict:
    runner = Interpreter(model_content=model_bytes).get_signature_runner()
    return {k: np.asarray(v) for k, v in runner(**inputs).items()}


def batched(outputs: list) -> dict:
    return {k: np.concatenate([o[k] for o in outputs]) for k in DETECTION_OUTPUTS}


def _reads_as_the_schema_does(data: bytes) -> None:
    """`predict`'s reader of a file's custom ops and metadata (flatbuffers' generic tables, no
    generated schema) reads what LiteRT's generated schema classes read."""
    from ai_edge_litert import schema_py_generated as schema

    custom = [op for op in file_format.operator_names(data) if not op.isupper()]
    assert file_format.custom_operator_names(data) == custom
    model = schema.Model.GetRootAsModel(data, 0)
    (entry,) = [model.Metadata(i) for i in range(model.MetadataLength())
                if model.Metadata(i).Name().decode() == file_format.METADATA_NAME]
    stored = json.loads(model.Buffers(entry.Buffer()).DataAsNumpy().tobytes().decode())
    assert file_format.read_metadata(data) == stored and stored["image_size"]


@pytest.mark.parametrize("input_type", INPUT_TYPES)
def test_per_class_tflite_gives_the_converted_models_detections(exported, images, reference, input_type):
    data = open(exported(input_type), "rb").read()
    ops = file_format.operator_names(data)
    assert not [op for op in ops if op.startswith("Flex") or op == "TFLite_Detection_PostProcess"], ops
    _reads_as_the_schema_does(data)
    assert "NON_MAX_SUPPRESSION_V4" in ops and "TOPK_V2" in ops

    interpreter = Interpreter(model_content=data)
    signature = interpreter.get_signature_list()[file_format.SIGNATURE_KEY]
    assert signature == {"inputs": [INPUT_NAMES[input_type]], "outputs": sorted(DETECTION_OUTPUTS)}
    runner = interpreter.get_signature_runner()
    detail = runner.get_input_details()[INPUT_NAMES[input_type]]
    # The uint8 file takes photos of any size and resizes them itself; the float32 one the scaled image.
    assert list(detail["shape_signature"]) == ([1, -1, -1, 3] if input_type == "uint8" else [1, 128, 128, 3])
    ours = []
    for image in images:
        feed = image[None] if input_type == "uint8" else preprocessing.preprocess(image[None], CONFIG).numpy()
        ours.append({k: np.asarray(v) for k, v in runner(**{INPUT_NAMES[input_type]: feed}).items()})
    ours = batched(ours)
    assert ours["detection_boxes"].shape == (4, 100, 4) and ours["num_detections"].shape == (4,)
    ref = reference
    # Dense detections (threshold 1e-8): every image fills all 100, so the order of 100 is compared.
    assert (ref["num_detections"] == 100).all()
    check_detections(ours, ref, atol=ATOL)
    # Padded rows are zeros with class 1, as in the SavedModel.
    assert ours["detection_classes"].min() >= 1.0


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED, "photos")), reason=f"no photos at {SHARED}/photos")
@pytest.mark.parametrize("input_type", INPUT_TYPES)
def test_photos_of_any_size_get_the_converted_models_detections(converted, exported, input_type):
    """The path users run without TensorFlow: the photo decoded by `ssd_mobilenet.formats.images`
    (TensorFlow's pixels), fed by `ModelFile.detect` (the uint8 file resizes it itself; the float32
    file gets the graph's preprocessing in numpy). Detections equal the converted model's on the
    same photo (its own resize) at the project's tolerance, on the seven real photos (300x300 to
    1352x900), which are not the model's 128x128."""
    import glob

    from ssd_mobilenet.formats import images as litert_images
    from ssd_mobilenet.formats.tflite.runner import ModelFile
    file = ModelFile(exported(input_type), threads=2)
    assert file.exact_for_any_size and file.image_size == [128, 128]
    detect = loading.load(converted)
    photos = sorted(glob.glob(os.path.join(SHARED, "photos", "*.jpg")))
    assert len({litert_images.read_image(p).shape for p in photos}) >= 4
    for photo in photos:
        image = litert_images.read_image(photo)
        ref = {k: v.numpy() for k, v in detect(image[None]).items()}
        check_detections(file.detect(image), ref, atol=ATOL)


@pytest.mark.slow  # an export (the per-class float32 file's numerics: test_per_class_tflite_...[float32])
def test_cli_writes_the_file_it_is_asked_for(converted, images, reference, tmp_path, capsys):
    from migrate.cli import main
    out = tmp_path / "out" / "model.tflite"
    argv = ["export", converted, "--tflite", str(out), "--input", "float32", "--max-detections", "5", "--quiet"]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith(f"-> {out}")  # then its bytes and operators
    feed = preprocessing.preprocess(images[:1], CONFIG).numpy()
    ours = run_signature(out.read_bytes(), normalized_input_image_tensor=feed)
    ref = reference
    # --max-detections 5: the first 5 of the converted model's 100.
    assert ours["detection_boxes"].shape == (1, 5, 4) and ours["num_detections"][0] == 5
    for key in ("detection_boxes", "detection_scores", "detection_classes"):
        np.testing.assert_allclose(ours[key][0], ref[key][0, :5], rtol=0, atol=ATOL)


def test_cli_refuses_bad_input_in_one_line(converted, tmp_path, capsys):
    """Refused before anything is converted or written: an existing file without --force (kept as it
    was), no converted directory, an unreadable checkpoint, a bad option, a folder as the file."""
    from migrate.cli import main
    out = tmp_path / "out" / "model.tflite"
    out.parent.mkdir()
    out.write_bytes(b"keep")

    def refused(argv, *words):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and all(w in err[0] for w in words), err

    refused(["export", converted, "--tflite", str(out), "--quiet"], str(out), "--force")
    assert out.read_bytes() == b"keep"
    target = tmp_path / "new.tflite"
    refused(["export", str(tmp_path / "none"), "--tflite", str(target)], str(tmp_path / "none"), "no such directory")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "model.ckpt.index").write_bytes(b"")
    refused(["export", str(folder), "--tflite", str(target)], str(folder), "not a converted model directory")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / detector.CONFIG_FILE).write_bytes(open(os.path.join(converted, detector.CONFIG_FILE), "rb").read())
    checkpoint = os.path.join(converted, detector.CHECKPOINT_DIR)
    (corrupt / detector.CHECKPOINT_DIR).mkdir()
    for name in os.listdir(checkpoint):
        data = open(os.path.join(checkpoint, name), "rb").read()
        # The index is kept; the tensor data is cut short, as an interrupted copy leaves it.
        (corrupt / detector.CHECKPOINT_DIR / name).write_bytes(data if ".index" in name else data[:len(data) // 2])
    refused(["export", str(corrupt), "--tflite", str(target)], str(corrupt), "unreadable checkpoint/")
    refused(["export", converted, "--tflite", str(target), "--max-detections", "0"], "--max-detections 0")
    refused(["export", converted, "--tflite", str(tmp_path)], str(tmp_path), "is a folder")
    assert not target.exists() and sorted(os.listdir(tmp_path)) == ["corrupt", "folder", "out"]
    assert os.listdir(tmp_path / "out") == ["model.tflite"]


@pytest.mark.parametrize("nms", [file_format.NMS_REGULAR, file_format.NMS_FAST])
def test_custom_op_modes_carry_the_tf1_op_and_agree_with_the_per_class_model(converted, images, reference, nms):
    """The file holds `TFLite_Detection_PostProcess` with the attributes export_tflite_ssd_graph.py
    set and the center-size anchors as a constant input; the interpreter's builtin resolver runs
    it. Its detections are the op's NMS, not the graph's: they are matched to the converted
    model's by class and IoU, and the rates are printed (pytest -s) and bounded."""
    from migrate.export import drift
    model = detector.load_model(converted)
    data = tflite.convert(model, nms=nms)
    assert [op for op in file_format.operator_names(data) if not op.isupper()] == ["TFLite_Detection_PostProcess"]
    _reads_as_the_schema_does(data)
    [(attributes, anchors)] = file_format.custom_op_options(data)
    assert attributes == {"max_detections": 100, "max_classes_per_detection": 1, "detections_per_class": 100,
                          "use_regular_nms": int(nms == file_format.NMS_REGULAR), "num_classes": 3,
                          "nms_score_threshold": pytest.approx(1e-8, rel=1e-6),
                          "nms_iou_threshold": pytest.approx(0.6, rel=1e-6),
                          "y_scale": 10.0, "x_scale": 10.0, "h_scale": 5.0, "w_scale": 5.0}
    a = model.anchors
    np.testing.assert_allclose(anchors, np.stack([(a[:, 0] + a[:, 2]) / 2, (a[:, 1] + a[:, 3]) / 2,
                                                  a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]], axis=1), rtol=0, atol=1e-7)
    runner = Interpreter(model_content=data).get_signature_runner()
    ours = batched([{k: np.asarray(v) for k, v in runner(input_tensor=image[None]).items()} for image in images])
    ref = reference
    assert ours["detection_classes"].shape == (4, 100) and set(np.unique(ours["detection_classes"])) <= {1.0, 2.0, 3.0}
    rates = {floor: drift.agreement(ref, ours, min_score=floor) for floor in (0.0, 0.3)}
    # The op does not clip its boxes (the graph does): clipped, the same detections are the same boxes.
    clipped = dict(ours, detection_boxes=np.clip(ours["detection_boxes"], 0.0, 1.0))
    rates.update({f"clipped {floor}": drift.agreement(ref, clipped, min_score=floor) for floor in (0.0, 0.3)})
    print(nms, rates)
    # The best detections are the same objects (the synthetic model's top scores are ~0.4);
    # down in the 1e-8 tail the modes differ by design.
    assert rates[0.3]["rate"] == 1.0 and rates["clipped 0.3"]["mean_iou"] > 0.9999
    assert rates[0.0]["rate"] > (0.9 if nms == file_format.NMS_REGULAR else 0.5)


@pytest.mark.slow  # a file of its own: 7.1 s in 97db5d3's fast tier
def test_detections_per_class_reaches_the_op(converted, images):
    """The converter drops `detections_per_class`; the written options carry it and the
    kernel applies it: regular NMS with 2 per class gives at most 2 of each class."""
    loaded = detector.load_model(converted)
    model = SSDMobileNetV1(CONFIG.replace(max_detections_per_class=2))
    model.set_weights(loaded.get_weights())
    data = tflite.convert(model, nms=file_format.NMS_REGULAR)
    assert file_format.custom_op_options(data)[0][0]["detections_per_class"] == 2
    out = run_signature(data, input_tensor=images[:1])
    n = int(out["num_detections"][0])
    classes = out["detection_classes"][0, :n]
    assert n == 6 and all((classes == c).sum() == 2 for c in (1.0, 2.0, 3.0))


def test_int8_cli_quantizes_on_user_images_and_reports_the_drift(converted, images, reference, tmp_path, capsys):
    """--int8 --calibration: the network's convolutions run on int8 weights, the input and outputs
    keep their types, and the drift from the float model is reported; the figures are printed
    (pytest -s), the bound only says the quantized model finds the same confident objects."""
    from PIL import Image

    from migrate.export import drift
    from migrate.cli import main
    folder = tmp_path / "calibration"
    folder.mkdir()
    rng = np.random.default_rng(5)
    for i in range(6):  # other sizes than the model's: resized as the graph resizes
        Image.fromarray(shape_images.make_image(rng, 96, 160)[0]).save(folder / f"{i}.png")
    out = tmp_path / "int8.tflite"
    assert main(["export", converted, "--tflite", str(out), "--int8", "--calibration", str(folder)]) == 0
    captured = capsys.readouterr()
    assert "int8" in captured.out and "[migrate] int8: " in captured.err
    data = out.read_bytes()
    interpreter = Interpreter(model_content=data)
    details = interpreter.get_tensor_details()
    conv_inputs = {i for op in interpreter._get_ops_details() if op["op_name"] == "CONV_2D" for i in op["inputs"]}
    assert {d["dtype"] for d in details if d["index"] in conv_inputs} == {np.int8, np.int32}  # data, filter, bias
    # The post-processing stays float32: one float32 tensor is quantized (the scaled image into the
    # first conv), no scores or class ids are rounded through int8.
    dtypes = {d["index"]: d["dtype"] for d in details}
    assert len([op for op in interpreter._get_ops_details()
                if op["op_name"] == "QUANTIZE" and dtypes[op["inputs"][0]] == np.float32]) == 1
    # Its scores come from LiteRT's float32 LOGISTIC, not from TensorFlow's sigmoid step by step (FLOOR
    # among its ops: the float file's, for the TF1 graph's ties, which int8 logits do not keep either way).
    logistic = [op for op in interpreter._get_ops_details() if op["op_name"] == "LOGISTIC"]
    assert len(logistic) == 1 and dtypes[logistic[0]["outputs"][0]] == np.float32
    assert "FLOOR" not in {op["op_name"] for op in interpreter._get_ops_details()}
    runner = interpreter.get_signature_runner()
    assert runner.get_input_details()["input_tensor"]["dtype"] == np.uint8
    assert {v["dtype"] for v in runner.get_output_details().values()} == {np.float32}
    ours = batched([{k: np.asarray(v) for k, v in runner(input_tensor=image[None]).items()} for image in images])
    ref = reference
    np.testing.assert_array_equal(ours["detection_classes"], np.round(ours["detection_classes"]))
    rates = {floor: drift.agreement(ref, ours, min_score=floor) for floor in (0.0, 0.3)}
    print("int8", rates)
    assert rates[0.3]["rate"] == 1.0 and rates[0.3]["mean_iou"] > 0.9


def test_int8_refusals(converted, tmp_path, capsys):
    from migrate.cli import main
    target = tmp_path / "x.tflite"
    for argv, words in [(["--calibration", str(tmp_path)], ["--calibration", "--int8"]),
                        (["--int8", "--calibration", str(tmp_path)], [str(tmp_path), "no JPEG or PNG"]),
                        (["--int8", "--calibration", str(tmp_path / "none.png")], ["none.png", "no such file"])]:
        assert main(["export", converted, "--tflite", str(target), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(w in err[0] for w in words), err
    assert not target.exists()


def test_a_converter_refusal_for_flex_ops_is_recognised():
    """What `convert` reads off a converter that would need Flex ops (then `migrate export` falls
    back to regular NMS): a real refusal, TF's uint8 ResizeBilinear, which TFLite has no kernel for."""
    spec = tf.TensorSpec([1, 8, 8, 3], tf.uint8)
    fn = tf.function(lambda x: tf.raw_ops.ResizeBilinear(images=x, size=[4, 4]), input_signature=[spec])
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], tf.Module())
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    with pytest.raises(Exception) as refused:
        converter.convert()
    assert tflite.flex_ops_needed(refused.value) == "ResizeBilinear"
    assert tflite.flex_ops_needed(ValueError("another problem")) is None
