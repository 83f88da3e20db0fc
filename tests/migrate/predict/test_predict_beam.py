"""`predict --engine beam` (`migrate.predict.beam`): a model over a folder as an Apache Beam
pipeline on Beam's local runner with two worker processes, line for line against `predict` run
in this process on the same inputs.

One small model (depth 0.25, 128x128, 3 classes, the TF1 builder's seeded synthetic weights,
saved as a converted directory once per run: `conftest.small_model()`) and a folder of generated images of mixed
sizes and kinds, with the entries `predict`'s listing leaves out (hidden files and folders, a
text file) and one it keeps by content (a JPEG without an extension).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO, smooth_noise, unwrapped, write_image_folder
from migrate.cli import main
from migrate.common import console
from ssd_mobilenet import detector
from ssd_mobilenet.formats.tflite import writer as tflite

pytest.importorskip("apache_beam", reason="Apache Beam is not installed (pip install -e '.[beam]')")

# A pipeline's batches are RunInference's, not predict's: the TensorFlow runtime's kernels may
# sum in another order for another batch size (test_predict's tolerance for the same reason).
ATOL = 1e-6
BOUND_S = 300  # a pipeline run here takes ~20 s; a hung worker fails the test instead of the suite


@pytest.fixture(scope="module")
def converted(small_model):
    return small_model().converted  # read only: the pipelines write elsewhere


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """JPEG and PNG images of mixed sizes (a subfolder, grayscale, RGBA, a JPEG named without
    extension), a truncated JPEG, a text file, a hidden file and a hidden folder."""
    root = tmp_path_factory.mktemp("beam_images")
    rng = np.random.default_rng(7)
    png = lambda h, w, c=3: tf.io.encode_png(smooth_noise(rng, h, w, c)).numpy()  # noqa: E731
    jpeg = lambda h, w: tf.io.encode_jpeg(smooth_noise(rng, h, w), quality=90).numpy()  # noqa: E731
    write_image_folder(root, {
        "a_128x128.png": png(128, 128), "b_257x311.jpg": jpeg(257, 311), "c_480x640.jpg": jpeg(480, 640),
        "d_gray_200x150.png": png(200, 150, 1), "e_rgba_90x120.png": png(90, 120, 4), "frame_0001": jpeg(100, 160),
        "sub/f_123x457.png": png(123, 457), "sub/g_300x300.jpg": jpeg(300, 300),
        ".hidden.jpg": jpeg(64, 64), ".cache/h.jpg": jpeg(64, 64),
    }, truncated_from="c_480x640.jpg")
    return str(root)


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _pipeline(args, cwd):
    """`python -m migrate predict ... --engine beam` in a fresh process: (exit code, stderr lines, the
    lines it wrapped joined: a long OUT wraps the last one)."""
    run = subprocess.run([sys.executable, "-m", "migrate", "predict", *args, "--engine", "beam"], cwd=cwd,
                         capture_output=True, text=True, timeout=BOUND_S, env={**os.environ, "PYTHONPATH": REPO})
    return run.returncode, unwrapped(run.stderr).splitlines()


def _shard_lines(out: str) -> dict:
    prefix, suffix = os.path.splitext(out)
    shards = sorted(glob.glob(f"{prefix}-*-of-*{suffix}"))
    assert shards, os.listdir(os.path.dirname(out))
    lines = [line for shard in shards for line in _lines(shard)]
    by_image = {line["image"]: line for line in lines}
    assert len(by_image) == len(lines)  # each image once
    return by_image


@pytest.mark.slow
def test_two_workers_write_predicts_lines(converted, folder, tmp_path):
    reference = str(tmp_path / "predict.jsonl")
    assert main(["predict", converted, folder, "--out", reference, "--quiet"]) == 0
    expected = {line["image"]: line for line in _lines(reference)}
    assert len(expected) == 9  # 8 images and the truncated one; hidden entries and the text file left out

    out = str(tmp_path / "beam" / "results.jsonl")
    code, err = _pipeline([converted, folder, "--out", out, "--workers", "2", "--batch", "3"], cwd=str(tmp_path))
    assert code == 0, err
    # The console holds the project's lines only: no runner log, TensorFlow notice or traceback.
    assert all(console.PROJECT_LINE.match(line) for line in err), err
    corrupt = os.path.join(folder, "c_corrupt.jpg")
    assert any(line.startswith(f"warning: {corrupt}: cannot read image") for line in err), err
    assert "9 images (1 unreadable)" in err[-2] and "local runner (2 workers)" in err[-1], err[-2:]
    assert not glob.glob(str(tmp_path / "beam" / "beam-temp-*"))

    got = _shard_lines(out)
    assert set(got) == set(expected)
    for image, line in got.items():
        ref = expected[image]
        if "error" in ref:
            assert line == ref
            continue
        assert {k: line[k] for k in ("height", "width", "num_detections")} == \
               {k: ref[k] for k in ("height", "width", "num_detections")}
        dets, ref_dets = line["detections"], ref["detections"]
        assert [d["class_id"] for d in dets] == [d["class_id"] for d in ref_dets]
        np.testing.assert_allclose([d["box"] for d in dets], [d["box"] for d in ref_dets], rtol=0, atol=ATOL)
        np.testing.assert_allclose([d["score"] for d in dets], [d["score"] for d in ref_dets], rtol=0, atol=ATOL)


@pytest.mark.slow
def test_tflite_file_on_patterns_gives_predicts_lines(converted, folder, tmp_path):
    """The LiteRT runtime behind the same pipeline, its inputs a pattern without a folder (which
    Beam's local file system matches only with `./` before it), a folder and a file, relative to
    the working directory: the lines are predict's on the same files, exactly (one image per
    call in both), with the paths as written."""
    model = str(tmp_path / "model.tflite")
    tflite.export_tflite(detector.load_model(converted), model)
    reference = str(tmp_path / "predict.jsonl")
    pngs = sorted(name for name in os.listdir(folder) if name.endswith(".png"))
    done = subprocess.run([sys.executable, "-m", "migrate", "predict", model, *pngs, "sub", "c_corrupt.jpg", "--out",
                           reference, "--quiet", "--min-score", "0.2"], cwd=folder, capture_output=True, text=True,
                          timeout=BOUND_S, env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr
    out = str(tmp_path / "results.jsonl")
    code, err = _pipeline([model, "*.png", "sub", "c_corrupt.jpg", "--out", out, "--workers", "2",
                           "--min-score", "0.2", "--quiet"], cwd=folder)
    assert code == 0, err
    assert [line for line in err if not line.startswith("warning: ")] == [], err  # --quiet
    expected = {line["image"]: line for line in _lines(reference)}
    assert "a_128x128.png" in expected and len(expected) == 6
    assert _shard_lines(out) == expected


@pytest.mark.parametrize("case", ["no_out", "workers_alone", "png", "no_match", "unknown_option", "cluster_workers",
                                  "no_model_config", "shard_exists", "shard_exists_relative"])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(converted, folder, tmp_path, capsys, monkeypatch, case):
    out = str(tmp_path / "out" / "results.jsonl")
    if case == "shard_exists_relative":  # OUT a name in the working folder, which Beam matches to nothing
        os.makedirs(os.path.dirname(out))
        monkeypatch.chdir(os.path.dirname(out))
        out = "results.jsonl"
    image = os.path.join(folder, "a_128x128.png")
    engine = ["--engine", "beam", "--out", out]
    argv, message = {
        "no_out": ([converted, image, "--engine", "beam"], "--engine beam: needs --out"),
        "workers_alone": ([converted, image, "--workers", "2"], "--workers: needs --engine beam"),
        "png": ([converted, image, *engine, "--png", str(tmp_path / "drawn")], "--png: not available with --engine"),
        "no_match": ([converted, os.path.join(folder, "*.gif"), *engine], "*.gif: no file matches"),
        "unknown_option": ([converted, image, *engine, "--pipeline-options", "--no_such_option=1"],
                           "--no_such_option=1: not an option of Beam's runners"),
        "cluster_workers": ([converted, image, *engine, "--workers", "2", "--pipeline-options",
                             "--runner=FlinkRunner"], "--workers: the local runner's; FlinkRunner counts its workers in --pipeline-options"),
        "no_model_config": ([str(tmp_path), image, *engine], "model_config.json: not found"),
        "shard_exists": ([converted, image, *engine], "results-00000-of-00001.jsonl: exists (use --force"),
        "shard_exists_relative": ([converted, image, *engine], "results-00000-of-00001.jsonl: exists (use --force"),
    }[case]
    if case.startswith("shard_exists"):
        os.makedirs(tmp_path / "out", exist_ok=True)
        with open(str(tmp_path / "out" / "results-00000-of-00001.jsonl"), "w") as f:
            f.write("keep me\n")
    before = sorted(os.listdir(tmp_path))
    assert main(["predict", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1], err
    assert len([line for line in err if not line.startswith("[migrate]")]) == 1, err
    assert sorted(os.listdir(tmp_path)) == before
    if case.startswith("shard_exists"):
        assert os.listdir(tmp_path / "out") == ["results-00000-of-00001.jsonl"]


@pytest.mark.slow
def test_a_worker_that_cannot_load_the_model_fails_the_run_in_one_line(converted, folder, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()  # a converted directory's config without its checkpoint
    (broken / "model_config.json").write_bytes(open(os.path.join(converted, "model_config.json"), "rb").read())
    out = str(tmp_path / "out" / "results.jsonl")
    code, err = _pipeline([str(broken), folder, "--out", out, "--quiet"], cwd=str(tmp_path))
    assert code == 1
    assert len(err) == 1 and err[0].startswith("error: the pipeline failed: InputError: ") and \
        f"{broken}: unreadable checkpoint/" in err[0], err
    assert sorted(os.listdir(tmp_path)) == ["broken"]  # no shard, no temporary folder, no output folder
