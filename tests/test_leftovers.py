"""No command leaves files outside the paths it was given (issue 51).

Each command runs as a user runs it, `python -m migrate ...` in a fresh process (its exit handlers and
the processes it starts included), on the small models, with its inputs and outputs at the paths
given, from an empty working folder, with TMPDIR and HOME pointed at empty folders of their own.
Afterwards the temporary folder and the working folder are empty, and HOME holds only the per-user
files that importing TensorFlow writes once for every program that imports it (Keras's config, the
font cache of matplotlib, which Keras imports where it is installed), not files of the command.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from tests.conftest import REPO

# HOME's entries that importing TensorFlow writes on a HOME that never ran it: Keras writes its
# config (keras/src/backend/config.py), matplotlib its font cache and config folder.
LIBRARY_HOME_FILES = (".keras", ".keras/keras.json", ".cache", ".cache/matplotlib", ".cache/matplotlib/fontlist-*.json",
                      ".config", ".config/matplotlib")
# Where a library would otherwise look instead of HOME (set by the user or the machine).
HOME_OVERRIDES = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "KERAS_HOME", "MPLCONFIGDIR")


def entries(folder) -> list:
    """The paths below `folder`, relative to it, sorted."""
    return sorted(os.path.relpath(os.path.join(root, name), folder)
                  for root, dirs, files in os.walk(folder) for name in dirs + files)


def commands(pair, training_inputs, inputs, out) -> list:
    """Every command's cheapest form that does its work: [(name, argv after `python -m migrate`)]."""
    tf1, tf2 = pair
    training = training_inputs
    return [
        ("convert", ["convert", tf1, "--out", f"{out}/converted"]),
        ("verify", ["verify", tf1, tf2, "--images", inputs, "--no-measure"]),
        ("export --tflite", ["export", tf2, "--tflite", f"{out}/model.tflite"]),
        ("export --onnx", ["export", tf2, "--onnx", f"{out}/model.onnx"]),
        ("export --web", ["export", tf2, "--web", f"{out}/web"]),
        ("predict", ["predict", tf2, inputs, "--out", f"{out}/predict.jsonl"]),
        ("predict .tflite", ["predict", f"{out}/model.tflite", inputs, "--out", f"{out}/predict_tflite.jsonl"]),
        ("predict .onnx", ["predict", f"{out}/model.onnx", inputs, "--out", f"{out}/predict_onnx.jsonl"]),
        ("predict --engine beam", ["predict", tf2, inputs, "--engine", "beam", "--out", f"{out}/beam/predict.jsonl"]),
        ("evaluate", ["evaluate", training["converted"], "--records", training["eval"], "--labels",
                      training["labels"]]),
        ("train", ["train", training["converted"], "--config", training["config"], "--train", training["records"],
                   "--steps", "1", "--out", f"{out}/trained"]),
        ("shapes", ["shapes", f"{out}/shapes"]),
        # One side, memory measured in a fresh process as every side's is.
        ("bench", ["bench", tf1, tf2, "--batch", "1", "--size", "128x128", "--sides", "tf1_session", "--repeats", "1",
                   "--warmup", "0"]),
    ]


@pytest.mark.slow
def test_no_command_leaves_files_outside_the_paths_it_was_given(small_model, tmp_path):
    inputs, out, cwd, tmp, home = (tmp_path / name for name in ("inputs", "out", "cwd", "tmp", "home"))
    for folder in (inputs, out, cwd, tmp, home):
        folder.mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)).save(inputs / "a.jpg")
    env = {k: v for k, v in os.environ.items() if k not in HOME_OVERRIDES}
    env.update(TMPDIR=str(tmp), HOME=str(home), PYTHONPATH=REPO)
    left, seen = [], set()
    pair, training_inputs = small_model("two_classes").pair, small_model("training").training_inputs
    for name, argv in commands(pair, training_inputs, str(inputs), str(out)):
        run = subprocess.run([sys.executable, "-m", "migrate", *argv, "--quiet"], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"{name}: {run.stderr[-3000:]}"
        found = {f"TMPDIR/{p}" for p in entries(tmp)} | {f"cwd/{p}" for p in entries(cwd)} | {
            f"HOME/{p}" for p in entries(home) if not any(fnmatch.fnmatch(p, f) for f in LIBRARY_HOME_FILES)}
        left += [f"{name}: {path}" for path in sorted(found - seen)]
        seen |= found
    assert not left, "\n".join(left)
