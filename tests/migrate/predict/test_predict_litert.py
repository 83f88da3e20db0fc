"""`predict MODEL.tflite IMAGES...` on LiteRT in a process where TensorFlow cannot be imported
(a `tensorflow` package that raises on import, first on PYTHONPATH, as on a device that never
installed it): the same JSON lines as `predict` on the converted directory (TensorFlow) for
photos of any size, the unreadable image warned and skipped, bad input refused in one line."""

import os
import shutil

import numpy as np
import pytest

from tests.conftest import SMALL_PRESETS, json_lines, same_predict_lines, mixed_image_folder, without_tensorflow
from migrate.predict import prediction
from ssd_mobilenet import detector
from ssd_mobilenet.formats.tflite import writer as tflite

ATOL = 1e-5  # the project's parity tolerance: LiteRT's kernels round otherwise than oneDNN's
LABELS = "item { id: 1 name: 'cat' }\nitem { id: 2 name: 'dog' }\nitem { id: 3 name: 'bird' }\n"


@pytest.fixture(scope="module")
def model(small_model, tmp_path_factory):
    """(converted directory, its default `.tflite` file, a label map): the small model with the TF1
    builder's seeded synthetic weights (`conftest.small_model()`)."""
    root = tmp_path_factory.mktemp("litert_predict")
    converted = small_model().converted
    model = detector.load_model(converted)
    path = str(root / "model.tflite")
    tflite.export_tflite(model, path)
    (root / "labels.pbtxt").write_text(LABELS)
    return converted, path, str(root / "labels.pbtxt")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """`conftest.mixed_image_folder`: mixed sizes and formats, a grayscale PNG, a corrupt JPEG."""
    return mixed_image_folder(tmp_path_factory.mktemp("litert_images"))


@pytest.mark.slow
def test_tflite_predict_without_tensorflow_gives_the_converted_models_lines(model, folder, no_tensorflow, tmp_path):
    converted, path, labels = model
    out, png = tmp_path / "lite.jsonl", tmp_path / "drawn"
    run = without_tensorflow(["predict", path, folder, "--out", str(out), "--png", str(png), "--labels", labels,
                              "--threads", "2"], no_tensorflow)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "INFO:" not in run.stderr and "XNNPACK" not in run.stderr
    corrupt = os.path.join(folder, "corrupt.jpg")
    assert [ln for ln in run.stderr.splitlines() if ln.startswith("warning:")] == [
        ln for ln in run.stderr.splitlines() if ln.startswith(f"warning: {corrupt}: ")]
    assert "LiteRT, batch 1" in run.stderr and "uint8 input of any size" in run.stderr
    ours = json_lines(out)
    # The TensorFlow runtime on the converted directory, in this process.
    prediction.run(converted, [folder], out=str(tmp_path / "tf.jsonl"), labels=labels, batch_size=1)
    ref = json_lines(tmp_path / "tf.jsonl")
    assert sorted(ours) == sorted(ref) and set(ours[corrupt]) == {"image", "error"} == set(ref[corrupt])
    sizes = {(line["height"], line["width"]) for line in ours.values() if "error" not in line}
    assert len(sizes) >= 3 and (128, 128) not in sizes  # the file resized every photo itself
    assert same_predict_lines(ours, ref, ATOL) >= 100
    drawn = sorted(os.listdir(png))
    assert len(drawn) == len(ours) - 1 and all(name.endswith(".png") for name in drawn)


@pytest.mark.parametrize("case", ["truncated", "not_tflite", "tensorflow_option", "threads", "existing_out"])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(model, folder, no_tensorflow, tmp_path, case):
    converted, path, _ = model
    truncated, graph = tmp_path / "truncated.tflite", tmp_path / "graph.tflite"
    truncated.write_bytes(open(path, "rb").read()[:100000])
    shutil.copy(os.path.join(converted, "model_config.json"), graph)
    out = tmp_path / "r.jsonl"
    if case == "existing_out":
        out.write_text("keep\n")
    args, expected = {
        "truncated": ([str(truncated)], f"{truncated}: the LiteRT interpreter cannot load it"),
        "not_tflite": ([str(graph)], f"{graph}: not a TFLite file"),
        "tensorflow_option": ([path, "--batch", "4"], "--batch: sets up TensorFlow"),
        "threads": ([path, "--threads", "0"], "--threads 0: must be >= 1"),
        "existing_out": ([path], f"{out}: exists"),
    }[case]
    before = sorted(os.listdir(tmp_path))
    run = without_tensorflow(["predict", *args, folder, "--out", str(out)], no_tensorflow)
    assert run.returncode == 2, run.stderr
    err = run.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err
    assert sorted(os.listdir(tmp_path)) == before
    if case == "existing_out":
        assert out.read_text() == "keep\n"


def test_model_file_from_bytes_is_the_file(model, tmp_path):
    """`ModelFile.from_bytes` (export's int8 drift check) reads a file's bytes as `ModelFile`
    reads the file: the same description and detections; its errors name the given name."""
    from ssd_mobilenet.formats.tflite.runner import ModelFile
    from ssd_mobilenet.errors import InputError
    _, path, _ = model
    data = bytearray(open(path, "rb").read())
    from_path = ModelFile(path, threads=1)
    from_bytes = ModelFile.from_bytes(data, threads=1, name="the exported file")
    data[:] = b"\0" * len(data)  # the caller's buffer changes: the file's copy does not
    assert (from_bytes.kind, from_bytes.input_mode, from_bytes.image_size, from_bytes.operators) == \
           (from_path.kind, from_path.input_mode, from_path.image_size, from_path.operators)
    photo = np.random.default_rng(1).integers(0, 256, (97, 131, 3), dtype=np.uint8)
    for key, value in from_path.detect(photo).items():
        np.testing.assert_array_equal(from_bytes.detect(photo)[key], value)
    with pytest.raises(InputError, match="^the exported file: not a TFLite file"):
        ModelFile.from_bytes(b"not a model at all", name="the exported file")
    with pytest.raises(InputError, match="^the exported file: the LiteRT interpreter cannot load"):
        ModelFile.from_bytes(open(path, "rb").read()[:5000], name="the exported file")


def test_the_class_count_is_read_from_the_files_metadata_without_a_runtime(model, tmp_path):
    """`runtimes.model_classes`: what `--labels` is checked against, before any runtime loads."""
    from migrate.predict.runtimes import model_classes
    converted, path, _ = model
    assert model_classes(path) == model_classes(converted) == SMALL_PRESETS["plain"]["num_classes"]
    (tmp_path / "cut.tflite").write_bytes(open(path, "rb").read()[:64])
    assert model_classes(str(tmp_path / "cut.tflite")) is None  # the runtime reports that file
