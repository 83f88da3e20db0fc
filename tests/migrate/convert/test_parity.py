"""The Keras model against the real TF1 graphs, stage by stage, with the same weights.

Reference: the published graph, frozen with the fixture's synthetic weights, run in a
`tf.compat.v1.Session` with Grappler's rounding-changing rewrites off (see
`FrozenGraphRunner`), and the fixture's own reference outputs (run with variables).
Tolerance: 1e-5 absolute on every intermediate tensor (ReLU6 outputs are <= 6, logits
and box codes O(1..10)); detections exact in count and class, 1e-5 in boxes and scores.
"""

import os

import numpy as np
import pytest

from tests.conftest import (check_detections, DEPTHWISE, QUANTIZED, TF13, ZOO_2017, ZOO_2018, model_for_fixture, needs_shared,
                      random_images)
from migrate.tf1.frozen_graph import FrozenGraphRunner, endpoint_candidates
from ssd_mobilenet.detections import DETECTION_OUTPUTS

ATOL = 1e-5
# QUANTIZED: the quantization-aware zoo graph with trained-looking FakeQuant ranges
# (`quantized_fixture`); its FakeQuant outputs sit on a grid, so the same tolerance means the
# same grid points, not just nearby values.
# The fast tier compares the 2018 zoo graph and the quantization-aware one, whose fixtures its
# other cases (test_convert, test_verify) build anyway; the three others each cost a fixture of
# their own (make_zoo_fixture in a child process, then the model): 9..13 s a graph, slow.
GRAPHS = [ZOO_2018, pytest.param(ZOO_2017, marks=pytest.mark.slow), pytest.param(DEPTHWISE, marks=pytest.mark.slow),
          pytest.param(TF13, marks=pytest.mark.slow), QUANTIZED]


@pytest.fixture(scope="module")
def setups(zoo_fixture, request):
    cache = {}

    def get(name):
        if name not in cache:
            fx = request.getfixturevalue("quantized_fixture") if name == QUANTIZED else zoo_fixture(name)
            model, graph_def = model_for_fixture(fx)
            cache[name] = (fx, model, FrozenGraphRunner(graph_def, exact_arithmetic=True))
        return cache[name]
    return get


@needs_shared
@pytest.mark.parametrize("name", GRAPHS)
@pytest.mark.parametrize("shape", [(2, 300, 300), (2, 257, 311), (1, 480, 640)])
def test_every_stage_matches_the_tf1_graph(setups, name, shape):
    _, model, runner = setups(name)
    images = random_images(sum(shape), *shape)
    stages = runner.resolve(endpoint_candidates(model))
    # Every feature extractor layer, the preprocessed image and both heads are compared.
    assert len(stages) == len(model.endpoint_names) + 3
    ref = runner.run(images, {**{s: t for s, (_, t) in stages.items()},
                              **{k: f"{k}:0" for k in DETECTION_OUTPUTS}})
    pre = model.preprocess(images)
    ours = {k: np.asarray(v) for k, v in model.endpoint_model()(pre).items()}
    ours["Preprocessor"] = np.asarray(pre)
    for stage, (key, _) in stages.items():
        expected = ref[stage].reshape(ours[key].shape)
        err = float(np.max(np.abs(ours[key] - expected)))
        assert err <= ATOL, f"{stage}: max abs error {err:.3g} > {ATOL}"
    det = {k: v.numpy() for k, v in model.detect(images).items()}
    check_detections(det, ref)


@needs_shared
@pytest.mark.parametrize("name", GRAPHS)
def test_detections_match_the_fixture_reference(setups, name):
    fx, model, _ = setups(name)
    images = np.load(os.path.join(fx, "inputs.npz"))["images"]
    ref = dict(np.load(os.path.join(fx, "reference.npz")))
    assert ref["num_detections"].min() > 0
    det = {k: v.numpy() for k, v in model.detect(images).items()}
    check_detections(det, ref)
