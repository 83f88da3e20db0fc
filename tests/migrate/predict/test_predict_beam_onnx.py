"""`predict MODEL.onnx --engine beam`: the ONNX Runtime runtime behind Beam's pipeline (each
worker opens it through `migrate.predict.runtimes.open_runtime`), line for line `predict`'s on the same
file and images (one image per call in both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("apache_beam", reason="Apache Beam is not installed (pip install -e '.[beam]')")
pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx (pip install '.[onnx-export]')")
pytest.importorskip("onnxruntime", reason="ONNX Runtime is not installed (pip install '.[onnx]')")

from tests.conftest import REPO, random_images  # noqa: E402

BOUND_S = 300


def _run(args, cwd):
    return subprocess.run([sys.executable, "-m", "migrate", "predict", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=BOUND_S, env={**os.environ, "PYTHONPATH": REPO})


@pytest.mark.slow  # a Beam pipeline in a child process: ~9 s
def test_onnx_file_in_a_beam_pipeline_gives_predicts_lines(small_model, tmp_path):
    from PIL import Image
    path = small_model().onnx  # the small model's file by `migrate export --onnx`
    images = tmp_path / "images"
    images.mkdir()
    for i, (h, w) in enumerate([(128, 128), (90, 200), (300, 170)]):
        Image.fromarray(random_images(i, 1, h, w)[0]).save(images / f"{i}.png")
    reference = tmp_path / "predict.jsonl"
    done = _run([path, str(images), "--out", str(reference), "--quiet", "--min-score", "0.2"], cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "beam.jsonl"
    run = _run([path, str(images), "--out", str(out), "--engine", "beam", "--workers", "1", "--min-score", "0.2"],
               cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "ONNX Runtime on " in run.stderr, run.stderr
    shards = sorted(p for p in os.listdir(tmp_path) if p.startswith("beam-") and p.endswith(".jsonl"))
    lines = [json.loads(line) for shard in shards for line in open(tmp_path / shard)]
    expected = [json.loads(line) for line in open(reference)]
    assert len(expected) == 3 and sum(len(line["detections"]) for line in expected) > 0
    assert {line["image"]: line for line in lines} == {line["image"]: line for line in expected}
