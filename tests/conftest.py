"""Shared fixtures: real TF1 model directories built once per session from ../shared/zoo."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SSD_MIGRATE_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
ZOO = os.path.join(SHARED, "zoo")
MAKE_FIXTURE = os.path.join(SHARED, "tools", "make_zoo_fixture.py")

ZOO_2018 = "ssd_mobilenet_v1_coco_2018_01_28"
DEPTHWISE = "custom_nc2_use_depthwise"
TF13 = "custom_nc3_tf1.3_config_mismatch"


def shared_available() -> bool:
    return os.path.isfile(MAKE_FIXTURE) and os.path.isdir(ZOO)


needs_shared = pytest.mark.skipif(not shared_available(), reason=f"ground truth not found at {SHARED}")


def zoo_path(*parts) -> str:
    return os.path.join(ZOO, *parts)


@pytest.fixture(scope="session")
def zoo_fixture(tmp_path_factory):
    """`zoo_fixture(name, perturb=None) -> dir`: a complete TF1 model directory built by
    ../shared/tools/make_zoo_fixture.py from the published graph, once per session."""
    if not shared_available():
        pytest.skip(f"ground truth not found at {SHARED}")
    built = {}

    def build(name, perturb=None):
        key = (name, perturb)
        if key not in built:
            out = tmp_path_factory.mktemp(name.replace(".", "_") + ("_perturbed" if perturb else ""))
            cmd = [sys.executable, MAKE_FIXTURE, zoo_path(name), str(out)]
            if perturb:
                cmd += ["--perturb", perturb]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"make_zoo_fixture failed for {name}:\n{proc.stderr[-3000:]}")
            built[key] = str(out)
        return built[key]

    return build


def read_graph_def(path: str):
    graph_def = tf.compat.v1.GraphDef()
    with open(path, "rb") as f:
        graph_def.ParseFromString(f.read())
    return graph_def


def random_images(seed, n, h, w) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, 3)).astype(np.uint8)


def model_for_fixture(fixture_dir):
    """The Keras model configured from a TF1 model directory's pipeline.config, graph and
    weights, with the TF1 checkpoint's weights assigned."""
    from migrate import assign, sources
    from migrate.graph_traits import graph_traits
    from ssd_mobilenet import SSDConfig, SSDMobileNetV1

    graph_def = read_graph_def(os.path.join(fixture_dir, "frozen_inference_graph.pb"))
    weights = sources.read_checkpoint(os.path.join(fixture_dir, "model.ckpt"))
    config = SSDConfig.from_pipeline_config(os.path.join(fixture_dir, "pipeline.config"))
    config = config.replace(**graph_traits(graph_def))
    # The TF 1.3 export's config says 1 class where its weights have 3 (a real mismatch).
    slots = weights["BoxPredictor_0/ClassPredictor/biases"].shape[0] // config.anchors_per_location()[0]
    config = config.replace(num_classes=slots - 1)
    model = SSDMobileNetV1(config)
    assign.assign(weights, model)
    return model, graph_def
