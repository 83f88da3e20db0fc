"""`migrate export QAT_CONVERTED --onnx OUT`: a quantization-aware conversion's ONNX file carries the
checkpoint's trained ranges as QDQ (`ssd_mobilenet.formats.onnx.aware`), as its integer `.tflite`
file does: the ranges read back from the file are TensorFlow's nudging of the checkpoint's
FakeQuant variables, its weights are the integer file's, and `verify --onnx` matches its
detections with the TF1 quantization-aware graph's on the shared photos.

The model: the zoo's quantization-aware graph with trained-looking ranges (`conftest.quantized_fixture`,
skipped without ../shared), converted as `convert` assigns it (`conftest.quantized_converted`, once per
run), its ONNX file written by the command once per module."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from ssd_mobilenet.detections import DETECTION_OUTPUTS

pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx (pip install '.[onnx-export]')")
pytest.importorskip("onnxruntime", reason="ONNX Runtime is not installed (pip install '.[onnx]')")

from tests.conftest import SHARED, assert_float_postprocessing, run_cli, unwrapped  # noqa: E402
from migrate.export import drift  # noqa: E402
from migrate.verify import verification  # noqa: E402
from migrate.verify.report import format_report  # noqa: E402
from ssd_mobilenet import detector  # noqa: E402
from ssd_mobilenet.formats.onnx import aware as onnx_aware  # noqa: E402
from ssd_mobilenet.formats.onnx import runner as onnx_runner  # noqa: E402
from ssd_mobilenet.formats.onnx import writer as onnx_export  # noqa: E402
from tests.ssd_mobilenet.formats.onnx.test_onnx_runtimes import PHOTOS, TENSORRT_OPS  # noqa: E402
from ssd_mobilenet.postprocessing import SIGMOID_SCOPE  # noqa: E402


def test_only_8_bit_ranges_are_taken():
    """A uint8 / int8 QDQ saturates at 8 bits: narrower FakeQuant ranges are refused."""
    from ssd_mobilenet.config.ssd_config import SSDConfig
    onnx_aware.check_bits(SSDConfig(weight_bits=8, activation_bits=8))
    for weights, activations in [(4, 8), (8, 6)]:
        with pytest.raises(ValueError, match=f"not {weights}-bit weights and {activations}-bit activations"):
            onnx_aware.check_bits(SSDConfig(weight_bits=weights, activation_bits=activations))


@pytest.fixture(scope="module")
def aware_command(quantized_converted, tmp_path_factory):
    """(TF1 model dir, converted dir, its ONNX file as `python -m migrate export CONVERTED --onnx FILE`
    writes it, in this process, the command's stdout, its stderr)."""
    src, converted = quantized_converted
    path = str(tmp_path_factory.mktemp("onnx_aware") / "aware.onnx")
    code, out, err = run_cli(["export", converted, "--onnx", path])
    assert code == 0, err
    return src, converted, path, out, err


@pytest.fixture(scope="module")
def aware_file(aware_command):
    """(TF1 model dir, converted dir, its ONNX file as `export --onnx` writes it)."""
    return aware_command[:3]


def _graph(model):
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    producer = {out: node for node in model.graph.node for out in node.output}
    return initializers, producer


def _tf_grid(lo, hi):
    """(scale, zero point) of TensorFlow's FakeQuant on [lo, hi], 8 bits, read off the op itself:
    its outputs for inputs far below and above the range are the nudged range's ends."""
    import tensorflow as tf
    ends = tf.quantization.fake_quant_with_min_max_vars(tf.constant([-1e9, 1e9]), lo, hi, num_bits=8).numpy()
    scale = (ends[1] - ends[0]) / 255
    return scale, int(round(-ends[0] / scale))


@pytest.mark.parametrize("lo, hi, narrow", [(0.0, 6.0, False), (0.0, 2.7183, False), (-1.0, 1.0, False),
                                             (-7.31, 3.13, False), (0.4, 5.0, False), (-5.0, -0.2, False),
                                             (-0.37, 0.41, True)])
def test_nudged_ranges_are_tensorflows_fake_quant_grid(lo, hi, narrow):
    """QuantizeLinear + DequantizeLinear on `nudged`'s (scale, zero point) give TF's FakeQuant
    output, but at exact ties (ONNX rounds them to even, TF up)."""
    import tensorflow as tf
    scale, zero = onnx_aware.nudged(lo, hi, 8, narrow)
    x = np.linspace(lo - 1, hi + 1, 20001, dtype=np.float32)
    theirs = tf.quantization.fake_quant_with_min_max_vars(x, lo, hi, num_bits=8, narrow_range=narrow).numpy()
    steps = x / scale + zero
    ours = (np.clip(np.round(steps), 1 if narrow else 0, 255) - zero) * scale
    away_from_ties = np.abs(np.abs(steps - np.floor(steps)) - 0.5) > 1e-3
    np.testing.assert_allclose(ours[away_from_ties], theirs[away_from_ties], rtol=0, atol=1e-5 * scale)
    assert away_from_ties.mean() > 0.99


def test_export_reports_the_drift_and_refuses_int8(aware_command, tmp_path):
    """The command: the file compared with the converted model on generated images (a note, no
    per-image warnings), its size; --int8 refused, as for the integer `.tflite` file."""
    _, converted, path, out, err = aware_command
    assert out.startswith("exported ONNX opset 13, uint8 input, int8 QDQ, 100 detections")
    notes = [line for line in unwrapped(err).splitlines() if line.startswith("[migrate] int8: ")]
    assert len(notes) == 1 and "on 16 generated images kept" in notes[0], err
    assert not [line for line in err.splitlines() if line.startswith("warning:")], err
    assert os.path.getsize(path) < 0.35 * 27e6  # int8 weights: about a quarter of the float file
    # Refused from the model's config, before its weights are loaded: a directory of the config alone
    # gets the same line.
    config_only = tmp_path / "config_only"
    config_only.mkdir()
    shutil.copy(os.path.join(converted, detector.CONFIG_FILE), config_only)
    target = tmp_path / "x.onnx"
    for directory in (converted, str(config_only)):
        code, _, err = run_cli(["export", directory, "--onnx", str(target), "--int8"])
        lines = err.strip().splitlines()
        assert code == 2 and lines == ["error: --int8: a quantization-aware model exports as int8 without it"], err
        assert not target.exists()
    assert "int8 QDQ (quantization-aware)" in onnx_runner.OnnxFile(path, threads=1).kind


def test_file_holds_qdq_on_the_checkpoints_activation_ranges(aware_file):
    src, _, path = aware_file
    import tensorflow as tf
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert not {n.op_type for n in model.graph.node} & set(onnx_export.FORBIDDEN_OPS)
    meta = json.loads({p.key: p.value for p in model.metadata_props}["ssd_mobilenet_migrate"])
    assert meta["int8"] and meta["quantization"] == "quantization-aware"
    initializers, producer = _graph(model)
    # The checkpoint's activation ranges (one per layer) and the scaled image's [-1, 1].
    reader = tf.train.load_checkpoint(os.path.join(src, "model.ckpt"))
    names = sorted(n[:-len("/min")] for n in reader.get_variable_to_shape_map() if n.endswith("act_quant/min"))
    expected = sorted([_tf_grid(-1.0, 1.0)] + [_tf_grid(reader.get_tensor(f"{n}/min"), reader.get_tensor(f"{n}/max"))
                                               for n in names])
    quantizers = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert len(quantizers) == len(names) + 1 > 30
    found = []
    for node in quantizers:
        scale, zero_point = initializers[node.input[1]], initializers[node.input[2]]
        assert zero_point.dtype == np.uint8 and scale.shape == ()  # per tensor, TF1's asymmetric grid
        found.append((float(scale), int(zero_point)))
    found.sort()
    for (scale, zero_point), (want_scale, want_zero) in zip(found, expected):
        assert zero_point == want_zero and scale == pytest.approx(want_scale, rel=1e-6)
    # Every convolution reads dequantized input, int8 weights (per output channel, zero point 0)
    # and an int32 bias; the post-processing reads no dequantized value.
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == len(names)
    for conv in convs:
        weights, bias = producer[conv.input[1]], producer[conv.input[2]]
        assert weights.op_type == bias.op_type == "DequantizeLinear", conv.name
        w, w_zero = initializers[weights.input[0]], initializers[weights.input[2]]
        assert w.dtype == np.int8 and not w_zero.any() and initializers[weights.input[1]].shape == (w.shape[0],)
        assert initializers[bias.input[0]].dtype == np.int32
    assert_float_postprocessing(model)
    # The scores by the runtime's sigmoid, as every int8 file's (`postprocessing.file_sigmoid`).
    assert [n.op_type for n in model.graph.node].count("Sigmoid") == 1
    assert not [n.name for n in model.graph.node if n.name.startswith(SIGMOID_SCOPE + "/")]
    # TensorRT's parser knows every op, but takes int8 QDQ with zero point 0 only: the uint8
    # activations are the documented reason this file is not TensorRT's (docs/guides/deploy.md).
    assert {n.op_type for n in model.graph.node} <= TENSORRT_OPS


def test_file_weights_are_the_integer_tflite_files(aware_file):
    """The file's weights dequantized are the kernels the integer `.tflite` file's converter
    rounds (`tflite_integer.integer_copy`: symmetric per channel on `symmetric_ranges`)."""
    _, converted, path = aware_file
    from ssd_mobilenet import layers as layers_lib
    from ssd_mobilenet.formats.tflite import integer as tflite_integer
    folded = tflite_integer.integer_copy(detector.load_model(converted))
    kernels = {}
    for layer in folded._flatten_layers(include_self=False):
        if isinstance(layer, layers_lib.SlimConv) and layer.weights_quant is not None:
            kernel = layer.weights_quant(layer.kernel).numpy()
            kernels[layer.kernel.path.rsplit("/", 1)[0]] = (kernel.transpose(2, 3, 0, 1) if layer.depthwise
                                                            else kernel.transpose(3, 2, 0, 1))
    model = onnx.load(path)
    initializers, producer = _graph(model)
    seen = set()
    for conv in (n for n in model.graph.node if n.op_type == "Conv"):
        dq = producer[conv.input[1]]
        w, scale = initializers[dq.input[0]], initializers[dq.input[1]]
        name = dq.input[0][len("qat/"):-len("/weights_int8")]
        np.testing.assert_allclose(w.astype(np.float32) * scale[:, None, None, None], kernels[name],
                                   rtol=1e-6, atol=0, err_msg=name)
        seen.add(name)
    assert seen == set(kernels)


@pytest.mark.skipif(not PHOTOS, reason=f"no photos at {os.path.join(SHARED, 'photos')}")
def test_verify_onnx_matches_the_tf1_quantized_graph_on_photos(aware_file):
    """`verify --onnx`: each photo at its own size to the file and the TF1 graph; detections scoring
    >= 0.5 matched by class and IoU >= 0.5. Measured when this was written: 678 of 700 (0.969, mean
    IoU 0.977); the integer `.tflite` file 673 of 700 (0.961, 0.974)."""
    src, converted, path = aware_file
    report = verification.verify(src, converted, images=[os.path.join(SHARED, "photos")], onnx=path, threads=2,
                                 measure=False)
    printed = format_report(report)
    print(printed)
    assert report.passed and report.mode == "onnx", printed
    assert report.tflite["int8"] and report.tolerances["criterion"] == "agreement"
    agreement = report.tflite["agreement"]
    assert agreement["reference"] >= 300 and agreement["rate"] > 0.93 and agreement["mean_iou"] > 0.95


@pytest.mark.slow
@pytest.mark.skipif(not PHOTOS, reason=f"no photos at {os.path.join(SHARED, 'photos')}")
def test_float32_input_file_agrees_with_the_integer_tflite_file(quantized_converted, quantized_tflite, tmp_path):
    """The fixed-size float32-input file (`--input float32`) against the integer `.tflite` file
    (`export --tflite`'s, `conftest.quantized_tflite`) on the same prepared photos: two integer
    files of one model, matched by class and IoU."""
    _, converted = quantized_converted
    from ssd_mobilenet.formats.images import read_image
    from ssd_mobilenet.formats.tflite.runner import ModelFile
    onnx_path = tmp_path / "aware_f32.onnx"
    onnx_export.export_onnx(detector.load_model(converted), str(onnx_path), input_type="float32")
    ours = onnx_runner.OnnxFile(str(onnx_path), threads=2)
    assert ours.metadata["input"] == "float32" and ours.metadata["int8"]
    theirs = ModelFile(quantized_tflite, threads=2)
    pairs = [(theirs.detect(image), ours.detect(image)) for image in map(read_image, PHOTOS)]
    joined = [{k: np.concatenate([p[i][k] for p in pairs]) for k in DETECTION_OUTPUTS} for i in (0, 1)]
    a = drift.agreement(*joined)
    print(f"float32-input ONNX file vs the integer .tflite file: {a['matched']} of {a['reference']} "
          f"(rate {a['rate']:.3f}, mean IoU {a['mean_iou']:.3f})")
    assert a["reference"] >= 300 and a["rate"] > 0.93 and a["mean_iou"] > 0.95
