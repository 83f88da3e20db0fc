"""A quantization-aware conversion's integer `.tflite` file (`ssd_mobilenet.formats.tflite.integer`,
`migrate export` without options): int8 convolutions on the checkpoint's FakeQuant ranges, float32
post-processing, and its agreement with the TF1 quantization-aware graph on real photos through
`verify --tflite`.

The model: the zoo's `ssd_mobilenet_v1_quantized_300x300_coco14_sync` graph with trained-looking
ranges (`conftest.quantized_fixture`), converted as `convert` assigns it (no self-check: test_convert
covers that; `conftest.quantized_converted`), and its integer file written by the command
(`conftest.quantized_tflite`, which tests/ssd_mobilenet/formats/onnx/test_onnx_aware.py reads too), once per run."""

import glob
import os
import shutil

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from tests.conftest import SHARED, needs_shared
from migrate.verify import verification
from migrate.verify.report import format_report
from migrate.cli import main
from ssd_mobilenet import detector
from ssd_mobilenet.formats import integer_weights
from ssd_mobilenet.formats.tflite import file_format
from ssd_mobilenet.formats.tflite import writer as tflite
from ssd_mobilenet.errors import InputError

PHOTOS = os.path.join(SHARED, "photos")


@needs_shared
@pytest.mark.slow
def test_integer_file_holds_int8_convolutions_on_the_checkpoints_ranges(quantized_converted, quantized_tflite):
    _, converted = quantized_converted
    path = quantized_tflite
    data = open(path, "rb").read()
    assert file_format.read_metadata(data)["quantization"] == "aware"
    interpreter = Interpreter(model_content=data)
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    ops = interpreter._get_ops_details()
    convs = [op for op in ops if op["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    model = detector.load_model(converted)
    quantized_layers = [layer for layer in model._flatten_layers(include_self=False)
                        if getattr(layer, "weights_quant", None) is not None]
    assert len(convs) == len(quantized_layers) > 27
    for op in convs:
        data_in, weights = tensors[op["inputs"][0]], tensors[op["inputs"][1]]
        assert data_in["dtype"] == np.int8 and weights["dtype"] == np.int8
        # Symmetric weights (TFLite's int8 kernels refuse another zero point), one scale per channel.
        params = weights["quantization_parameters"]
        channels = weights["shape"][params["quantized_dimension"]]
        assert not params["zero_points"].any() and len(params["scales"]) == channels > 1
    # The post-processing stays float32: the score conversion (LiteRT's LOGISTIC, as a post-training
    # int8 file's: not TensorFlow's sigmoid step by step, whose FLOOR the float file holds), the box
    # decoding's DIV and everything after.
    assert {tensors[op["outputs"][0]]["dtype"] for op in ops if op["op_name"] in ("LOGISTIC", "DIV")} == {np.float32}
    assert "FLOOR" not in {op["op_name"] for op in ops}
    assert len([op for op in ops if op["op_name"] == "LOGISTIC"]) == len(model.feature_map_shapes)  # one a map
    runner = interpreter.get_signature_runner()
    assert list(runner.get_input_details()["input_tensor"]["shape_signature"]) == [1, -1, -1, 3]
    assert {v["dtype"] for v in runner.get_output_details().values()} == {np.float32}


@needs_shared
def test_weight_ranges_keep_the_tf1_grid_where_it_fits(quantized_converted):
    """A channel whose rounded weights lie within 127 steps of zero keeps the TF1 step as its scale."""
    _, converted = quantized_converted
    from ssd_mobilenet.model import fold_batch_norm
    folded = fold_batch_norm(detector.load_model(converted))
    exact = total = 0
    for layer in folded._flatten_layers(include_self=False):
        if getattr(layer, "weights_quant", None) is None:
            continue
        ranges = integer_weights.symmetric_ranges(layer)
        step = integer_weights.nudged_step(layer.weights_quant)
        kernel = layer.kernel.numpy()
        axes = (0, 1, 3) if layer.depthwise else (0, 1, 2)
        assert (np.abs(kernel).max(axis=axes) <= ranges * (1 + 1e-6)).all()
        exact += int(np.isclose(ranges, 127 * step, rtol=1e-6).sum())
        total += len(ranges)
    assert exact / total > 0.95, (exact, total)


@needs_shared
@pytest.mark.slow  # the file's export (conftest.quantized_tflite): ~12 CPU s
@pytest.mark.skipif(not glob.glob(os.path.join(PHOTOS, "*.jpg")), reason=f"no photos at {PHOTOS}")
def test_integer_file_agrees_with_the_tf1_quantized_graph_on_photos(quantized_converted, quantized_tflite):
    """`verify --tflite`: the file fed each photo at its own size, the TF1 graph the same photo;
    detections scoring >= 0.5 matched by class and IoU >= 0.5 (the figures are printed, pytest -s).
    Measured when this was written: 673 of 700 (0.961) on the seven photos."""
    src, converted = quantized_converted
    report = verification.verify(src, converted, images=[PHOTOS], tflite=quantized_tflite, threads=2, measure=False)
    printed = format_report(report)
    print(printed)
    assert report.passed, printed
    assert report.tflite["int8"] and report.tolerances["criterion"] == "agreement"
    agreement = report.tflite["agreement"]
    assert agreement["reference"] >= 300 and agreement["rate"] > 0.9 and agreement["mean_iou"] > 0.9


@needs_shared
@pytest.mark.parametrize("flags, words", [(["--int8"], "--int8: a quantization-aware model exports as int8 without it"),
                                          (["--nms", "regular"], "--nms regular: not for a quantization-aware model"),
                                          (["--input", "float32"], "--input float32: not for a quantization-aware")])
def test_options_an_integer_file_does_not_take_are_refused(quantized_converted, tmp_path, capsys, flags, words):
    _, converted = quantized_converted
    # Refused from the model's config, before its weights are loaded: a directory of the config alone
    # gets the same line.
    config_only = tmp_path / "config_only"
    config_only.mkdir()
    shutil.copy(os.path.join(converted, detector.CONFIG_FILE), config_only)
    out = tmp_path / "x.tflite"
    for directory in (converted, str(config_only)):
        assert main(["export", directory, "--tflite", str(out), *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and words in err[0], err
        assert not out.exists()


@needs_shared
def test_the_library_refuses_calibration_images_for_it(quantized_converted):
    _, converted = quantized_converted
    with pytest.raises(ValueError, match="no calibration"):
        tflite.convert(detector.load_model(converted), representative_images=np.zeros([1, 8, 8, 3], np.uint8))


@needs_shared
def test_bench_takes_the_integer_files_as_its_tflite_and_onnx_sides(quantized_converted):
    """bench's `tflite` and `onnx` sides of a quantization-aware conversion are its integer files
    (the ONNX one: tests/ssd_mobilenet/formats/onnx/test_onnx_aware.py); there is no post-training `tflite_int8`
    or `onnx_int8` of it, and no float32 file for the `openvino` and `opencv` sides."""
    from migrate.bench import inputs
    _, converted = quantized_converted
    assert inputs.check_tflite(converted, ["tflite", "onnx"], [(300, 300)], [1]) == ((300, 300), True, True)
    with pytest.raises(InputError, match=r"^--sides tflite_int8: none of a quantization-aware model \(its "
                                                     r"tflite side is int8\)$"):
        inputs.check_tflite(converted, ["tflite", "tflite_int8"], [(300, 300)], [1])
    for side in ("onnx_int8", "openvino", "opencv"):
        with pytest.raises(InputError, match=f"^--sides {side}: none of a quantization-aware model .its "
                                                         "onnx side is int8.$"):
            inputs.check_tflite(converted, ["onnx", side], [(300, 300)], [1])
