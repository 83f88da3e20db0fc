"""The command line on a device install: a venv with only the `litert` or `onnx` extra, where
TensorFlow and the packages that come with it are not installed (tests/migrate/device_install.py runs
`python -m migrate` in such a process). Every command that runs TensorFlow says so in one line
naming the extra to install, before it reads a path; `predict` on a `.tflite` or `.onnx` file
runs there as it does beside TensorFlow; `--version` and `--help` answer."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from migrate.commands.common import TENSORFLOW_INSTALL
from tests.conftest import REPO, SHARED, built_once, run_cli

LAUNCHER = os.path.join(REPO, "tests", "migrate", "device_install.py")


def on_device(args, cwd) -> subprocess.CompletedProcess:
    """`python -m migrate ARGS` in `cwd`, in a process where TensorFlow is not installed."""
    return subprocess.run([sys.executable, LAUNCHER, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": REPO, "COLUMNS": "1000"})


@pytest.fixture(scope="module")
def device_folder(small_model, tmp_path_factory):
    """A folder as a device holds it: the small model as a TF1 directory (tf1) and converted
    (converted), two photos."""
    def build(out):
        os.symlink(small_model("two_classes").tf1, out / "tf1")
        os.symlink(small_model("two_classes").converted, out / "converted")
        (out / "photos").mkdir()
        for name in ("image1.jpg", "image3.jpg"):
            os.symlink(os.path.join(SHARED, "photos", name), out / "photos" / name)
    return built_once(tmp_path_factory, "device_folder", build)


@pytest.fixture(scope="module")
def model_files(small_model, tmp_path_factory):
    """{suffix: file} of `small_model()` as `export --tflite` and `export --onnx` write it."""
    def build(out):
        code, _, err = run_cli(["export", small_model().converted, "--tflite", str(out / "model.tflite"), "--quiet"])
        assert code == 0, err
    folder = built_once(tmp_path_factory, "device_model_files", build)
    return {"tflite": os.path.join(folder, "model.tflite"), "onnx": small_model().onnx}


# Each command that runs TensorFlow, with paths that exist (but MISSING): (command line, what the
# line says needs TensorFlow).
NEEDS_TENSORFLOW = [
    ("convert tf1 --out out/converted", "convert"),
    ("convert tf1 --out out/converted --verbose", "convert"),
    ("convert MISSING", "convert"),  # said first: the user would otherwise fix the path to learn this
    ("verify tf1 converted --no-measure", "verify"),
    ("export converted --tflite out/model.tflite", "export"),
    ("evaluate converted --records MISSING.record --labels coco", "evaluate"),
    ("shapes out/shapes", "shapes"),
    ("train converted --train MISSING.record --out out/trained", "train"),
    ("bench tf1 converted --sides tf1_session,tf2_savedmodel", "bench"),
    ("predict converted photos --out out/lines.jsonl", "a converted directory"),
    ("predict converted photos --out out/lines.jsonl --verbose", "a converted directory"),
]


@pytest.mark.parametrize("command, what", NEEDS_TENSORFLOW, ids=[c for c, _ in NEEDS_TENSORFLOW])
def test_a_command_that_runs_tensorflow_names_the_extra_to_install(device_folder, tmp_path, command, what):
    os.symlink(device_folder, tmp_path / "device")
    run = on_device(command.split(), tmp_path / "device")
    assert (run.returncode, run.stdout) == (2, ""), run.stderr[-3000:]
    assert run.stderr == f"error: {what} needs TensorFlow: {TENSORFLOW_INSTALL}\n"
    assert not os.path.exists(os.path.join(device_folder, "out"))  # nothing written


@pytest.mark.parametrize("suffix", ["tflite", "onnx"])
def test_predict_on_a_model_file_gives_the_lines_it_gives_beside_tensorflow(device_folder, model_files, tmp_path,
                                                                             suffix):
    names = tmp_path / "names.txt"  # a label map of the model's 3 classes: the labels on both sides too
    names.write_text("circle\nsquare\ntriangle\n")
    args = ["predict", model_files[suffix], os.path.join(device_folder, "photos"), "--labels", str(names)]
    run = on_device([*args, "--out", str(tmp_path / "device.jsonl")], tmp_path)
    assert run.returncode == 0 and "error" not in run.stderr, run.stderr[-3000:]
    code, _, err = run_cli([*args, "--out", str(tmp_path / "beside.jsonl"), "--quiet"])
    assert code == 0, err
    assert open(tmp_path / "device.jsonl").read() == open(tmp_path / "beside.jsonl").read()


def test_version_and_help_answer_without_tensorflow(tmp_path):
    version = on_device(["--version"], tmp_path)
    assert (version.returncode, version.stderr) == (0, "") and version.stdout.endswith("; no TensorFlow)\n")
    for args in (["--help"], ["convert", "--help"], ["predict", "--help"]):
        run = on_device(args, tmp_path)
        assert (run.returncode, run.stderr) == (0, "") and run.stdout.startswith("usage: python -m migrate"), args


def test_the_launcher_hides_tensorflow_as_an_uninstalled_package():
    # What the tests above rely on: the packages are not found, as where they are not installed.
    code = ("import sys; sys.path.insert(0, 'tests/migrate'); import device_install; device_install.hide()\n"
            "import importlib.util\n"
            "assert all(importlib.util.find_spec(m) is None for m in device_install.ABSENT)\n"
            "try:\n    import absl\nexcept ModuleNotFoundError as e:\n    print(e)\n"
            "import numpy, PIL, google.protobuf, ai_edge_litert\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout) == (0, "No module named 'absl'\n"), run.stderr
