"""`migrate.tf1.builder` against the real TF1 graphs, and the model directories it writes.

The builder is a second implementation of the OD API inference graph (tf-slim, graph mode),
independent of the Keras model. Against each published graph, with the fixture's checkpoint
frozen into both, it must hold the same variables and compute the same tensors: every stage
`endpoint_candidates` names, within 1e-5 (measured: 0.0, both graphs run with Grappler's
rounding-changing rewrites off), detections exact in count and class, 1e-5 in boxes and scores.
"""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import check_detections, DEPTHWISE, TF13, ZOO_2018, needs_shared, random_images
from migrate.tf1 import builder
from migrate.cli import main
from migrate.tf1 import assign, config_inference, sources
from migrate.tf1.frozen_graph import FrozenGraphRunner, endpoint_candidates
from migrate.tf1.graph_traits import graph_traits
from ssd_mobilenet import SSDMobileNetV1
from ssd_mobilenet.config.ssd_config import NMS_CLIP_AFTER, SSDConfig
from ssd_mobilenet.detections import DETECTION_OUTPUTS

tf1 = tf.compat.v1
ATOL = 1e-5
GRAPHS = [ZOO_2018, DEPTHWISE, TF13]
SHAPES = [(2, 300, 300), (1, 257, 311), (1, 480, 640)]


@pytest.fixture(scope="module")
def zoo_pairs(zoo_fixture):
    """`get(name) -> dict`: a zoo fixture's source and config, our graph for that config, and
    runners over our frozen graph and the fixture's real one (both with the checkpoint's weights).
    Building and freezing the graphs is the cost (~10..40 s per graph on 2 busy cores), hence
    `slow` on every test that uses it."""
    cache = {}

    def get(name):
        if name not in cache:
            fx = zoo_fixture(name)
            source = sources.open_source(fx)
            config, _ = config_inference.infer_config(source, trust_weights=True)
            graph, _, _ = builder.build_inference_graph(config)
            cache[name] = {
                "dir": fx, "source": source, "config": config, "graph": graph,
                "ours": FrozenGraphRunner(builder.frozen_graph_def(config, source.weights), exact_arithmetic=True),
                "real": FrozenGraphRunner(source.graph_def, exact_arithmetic=True),
                "stages": endpoint_candidates(SSDMobileNetV1(config)),
            }
        return cache[name]
    return get


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("name", GRAPHS)
def test_variables_are_those_of_the_real_checkpoint(zoo_pairs, name):
    pair = zoo_pairs(name)
    ours = {(v.op.name, tuple(v.shape.as_list())) for v in pair["graph"].get_collection(tf1.GraphKeys.GLOBAL_VARIABLES)
            if v.op.name != "global_step"}
    theirs = {(n, tuple(v.shape)) for n, v in pair["source"].weights.items() if n != "global_step"}
    assert ours == theirs, f"only ours: {sorted(ours - theirs)[:5]}; only the checkpoint's: {sorted(theirs - ours)[:5]}"


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("name", GRAPHS)
@pytest.mark.parametrize("shape", SHAPES)
def test_every_stage_matches_the_real_graph(zoo_pairs, name, shape):
    pair = zoo_pairs(name)
    ours, real = pair["ours"].resolve(pair["stages"]), pair["real"].resolve(pair["stages"])
    # The preprocessed image, every feature extractor layer and both heads, in both graphs.
    assert set(ours) == set(real) == set(pair["stages"])
    images = random_images(sum(shape), *shape)
    outputs = {k: f"{k}:0" for k in DETECTION_OUTPUTS}
    got = pair["ours"].run(images, {**{s: t for s, (_, t) in ours.items()}, **outputs})
    ref = pair["real"].run(images, {**{s: t for s, (_, t) in real.items()}, **outputs})
    for stage in real:
        # Box encodings are [N, A, 1, 4] before the squeeze in some releases: compare values.
        err = float(np.max(np.abs(got[stage] - ref[stage].reshape(got[stage].shape))))
        assert err <= ATOL, f"{stage}: max abs error {err:.3g} > {ATOL}"
    check_detections(got, ref)


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("name", GRAPHS)
def test_detections_match_the_fixture_reference(zoo_pairs, name):
    pair = zoo_pairs(name)
    images = np.load(os.path.join(pair["dir"], "inputs.npz"))["images"]
    ref = dict(np.load(os.path.join(pair["dir"], "reference.npz")))
    assert ref["num_detections"].min() > 0
    check_detections(pair["ours"].run(images, {k: f"{k}:0" for k in DETECTION_OUTPUTS}), ref)


# ---- a model directory written from a config no zoo graph has ---------------------------------

SMALL = SSDConfig(num_classes=3, image_height=224, image_width=320, depth_multiplier=0.5,
                  fused_batch_norm=True, nms_variant=NMS_CLIP_AFTER, use_explicit_padding=True,
                  score_threshold=float(np.float32(0.7)))  # 3..11 detections per test image, not a full 100
ZOO_FILES = ["checkpoint", "frozen_inference_graph.pb", "model.ckpt.data-00000-of-00001", "model.ckpt.index",
             "model.ckpt.meta", "pipeline.config", "saved_model"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("tf1_builder")
    model_dir = builder.write_model_dir(SMALL, str(root / "model"), seed=7)
    frozen = sources.read_graph_def(os.path.join(model_dir, "frozen_inference_graph.pb"))
    return {"root": root, "dir": model_dir, "frozen": frozen}


def _images():
    return [random_images(1, 2, 224, 320), random_images(2, 1, 257, 311), random_images(3, 1, 480, 640)]


def test_written_dir_has_the_zoo_layout_and_gives_back_its_config(written):
    assert sorted(os.listdir(written["dir"])) == ZOO_FILES
    assert sorted(os.listdir(os.path.join(written["dir"], "saved_model"))) == ["saved_model.pb", "variables"]
    config, _ = config_inference.infer_config(sources.open_source(written["dir"]))
    assert config.to_dict() == SMALL.to_dict()
    # The .meta and the SavedModel show the same graph-version traits as the frozen graph.
    traits = graph_traits(written["frozen"])
    assert traits["nms_variant"] == NMS_CLIP_AFTER and traits["fused_batch_norm"]
    for form in ("model.ckpt.meta", "saved_model"):
        source = sources.open_source(os.path.join(written["dir"], form))
        assert graph_traits(source.graph_def) == traits, form
    with pytest.raises(FileExistsError, match="not empty"):
        builder.write_model_dir(SMALL, written["dir"])
    assert sorted(os.listdir(written["dir"])) == ZOO_FILES
    assert [p for p in os.listdir(written["root"]) if p.startswith(".")] == []


def test_synthetic_weights_are_seeded_and_plausible(written):
    weights = builder.synthetic_weights(SMALL, seed=7)
    stored = sources.open_source(written["dir"]).weights
    assert sorted(weights) == sorted(n for n in stored if n != "global_step")
    for name, value in weights.items():
        np.testing.assert_array_equal(stored[name], value, err_msg=name)
    gammas = np.concatenate([v for n, v in weights.items() if n.endswith("/gamma")])
    variances = np.concatenate([v for n, v in weights.items() if n.endswith("/moving_variance")])
    class_biases = np.concatenate([v for n, v in weights.items() if n.endswith("ClassPredictor/biases")])
    assert 0.5 <= gammas.min() and gammas.max() <= 1.5
    assert 0.5 <= variances.min() and variances.max() <= 2.0
    assert -3.5 < class_biases.mean() < -2.5
    other = builder.synthetic_weights(SMALL, seed=8)
    name = "BoxPredictor_0/ClassPredictor/biases"
    assert not np.array_equal(other[name], weights[name])


def test_frozen_graph_def_names_missing_and_misshaped_variables(written):
    weights = dict(sources.open_source(written["dir"]).weights)
    del weights["FeatureExtractor/MobilenetV1/Conv2d_3_pointwise/weights"]
    weights["BoxPredictor_2/ClassPredictor/biases"] = np.zeros([5], np.float32)
    weights["FeatureExtractor/MobilenetV1/Conv2d_0/weights/RMSProp"] = np.zeros([1], np.float32)  # ignored
    with pytest.raises(ValueError) as e:
        builder.frozen_graph_def(SMALL, weights)
    assert "Conv2d_3_pointwise/weights: missing" in str(e.value)
    assert "BoxPredictor_2/ClassPredictor/biases: shape [5]" in str(e.value)
    assert "RMSProp" not in str(e.value)


def test_tf1_saved_model_serves_what_the_frozen_graph_computes(written):
    runner = FrozenGraphRunner(written["frozen"])
    graph = tf.Graph()
    with graph.as_default(), tf1.Session(graph=graph) as session:
        meta = tf1.saved_model.loader.load(session, [tf1.saved_model.SERVING],
                                           os.path.join(written["dir"], "saved_model"))
        signature = meta.signature_def["serving_default"]
        assert sorted(signature.outputs) == sorted(DETECTION_OUTPUTS)
        fetches = {k: t.name for k, t in signature.outputs.items()}
        for images in _images():
            got = session.run(fetches, {signature.inputs["inputs"].name: images})
            check_detections(got, runner.run(images, {k: f"{k}:0" for k in DETECTION_OUTPUTS}))


@pytest.mark.slow
def test_written_dir_converts_to_a_saved_model_with_the_same_detections(written, capsys):
    out = str(written["root"] / "converted")
    assert main(["convert", written["dir"], "--out", out, "--quiet", "--no-check"]) == 0
    serve = tf.saved_model.load(os.path.join(out, "saved_model")).signatures["serving_default"]
    runner = FrozenGraphRunner(written["frozen"], exact_arithmetic=True)
    counts = []
    for images in _images():
        ref = runner.run(images, {k: f"{k}:0" for k in DETECTION_OUTPUTS})
        got = {k: v.numpy() for k, v in serve(input_tensor=tf.constant(images)).items()}
        check_detections(got, ref)
        counts += list(ref["num_detections"])
    assert 0 < min(counts) and max(counts) < SMALL.max_total_detections


# ---- configs no zoo graph has, against the Keras model (the other implementation) ------------

# (Softmax scores, depthwise separable layers and heads of kernel 3, multiplier 0.75, non-square
# inputs and NMS with clipping first: the members of tests/migrate/convert/test_family.py, written by the builder
# and compared with the Keras model stage by stage the same way.)
FAMILY = {
    "2017_padding_and_anchor_order": SSDConfig(
        num_classes=2, image_height=320, image_width=240, pad_extra_layers_to_even=True,
        interpolated_anchor_after_unit_ratio=True, fused_batch_norm=True, logit_scale=2.0,
        resize_method="NEAREST_NEIGHBOR", nms_variant=NMS_CLIP_AFTER, score_threshold=float(np.float32(0.3)),
        max_total_detections=20),
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(FAMILY))
def test_config_family_matches_the_keras_model(variant):
    config = FAMILY[variant]
    weights = builder.synthetic_weights(config, seed=3)
    runner = FrozenGraphRunner(builder.frozen_graph_def(config, weights), exact_arithmetic=True)
    model = SSDMobileNetV1(config)
    assign.assign(weights, model)
    stages = runner.resolve(endpoint_candidates(model))
    assert len(stages) == len(model.endpoint_names) + 3
    images = random_images(5, 2, 300, 300)
    ref = runner.run(images, {**{s: t for s, (_, t) in stages.items()}, **{k: f"{k}:0" for k in DETECTION_OUTPUTS}})
    preprocessed = model.preprocess(images)
    ours = {k: np.asarray(v) for k, v in model.endpoint_model()(preprocessed).items()}
    ours["Preprocessor"] = np.asarray(preprocessed)
    for stage, (key, _) in stages.items():
        err = float(np.max(np.abs(ours[key] - ref[stage].reshape(ours[key].shape))))
        assert err <= ATOL, f"{stage}: max abs error {err:.3g} > {ATOL}"
    check_detections({k: v.numpy() for k, v in model.detect(images).items()}, ref)


# ---- what a graph alone says (users often have only the frozen graph or the SavedModel) -------

@pytest.mark.parametrize("form", ["frozen_inference_graph.pb", "saved_model", "model.ckpt.meta"])
def test_graph_alone_gives_the_post_processing_constants(written, form):
    # No pipeline.config is read when a single file is named: the graph's own thresholds must
    # replace the proto defaults, or the converted model would keep low-score detections.
    source = sources.open_source(os.path.join(written["dir"], form))
    assert source.pipeline_config is None
    config, _ = config_inference.infer_config(source)
    for key in sorted(config_inference.POSTPROCESSING_FIELDS) + ["nms_variant", "fused_batch_norm", "num_classes",
                                                       "use_explicit_padding", "min_depth",
                                                       "depth_multiplier", "image_height", "image_width"]:
        assert getattr(config, key) == getattr(SMALL, key), key


@pytest.mark.slow
def test_tf1_saved_model_alone_converts_with_the_same_detections(written, tmp_path):
    src = tmp_path / "only_saved_model"
    shutil.copytree(os.path.join(written["dir"], "saved_model"), src / "saved_model")
    out = str(tmp_path / "converted")
    assert main(["convert", str(src), "--out", out, "--quiet", "--no-check"]) == 0
    serve = tf.saved_model.load(os.path.join(out, "saved_model")).signatures["serving_default"]
    runner = FrozenGraphRunner(written["frozen"], exact_arithmetic=True)
    for images in _images():
        ref = runner.run(images, {k: f"{k}:0" for k in DETECTION_OUTPUTS})
        assert ref["num_detections"].max() < SMALL.max_total_detections
        check_detections({k: v.numpy() for k, v in serve(input_tensor=tf.constant(images)).items()}, ref)


ODAPI_EXPORTS = ["fpn_small", "ppn_small"]


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("name, upsampling", [("fpn_small", "stack"), ("fpn_small", "ones"), ("ppn_small", "stack")])
def test_fpn_and_ppn_graphs_are_the_odapi_exporters(name, upsampling):
    """Against the OD API exporter's own FPN and PPN exports (../shared/zoo/odapi_exports), their
    checkpoint frozen into both: the same variables, every stage 0.0 apart (both x2 upsampling forms
    of FPN: the OD API's 2018 reshape times ones, its 2019+ stacks), the same detections, the same
    anchors bit for bit, and the graph's traits and FPN levels read back alike."""
    from migrate.tf1.graph_anchors import graph_anchors
    from migrate.tf1.graph_traits import anchor_generator_type, fpn_levels, multiscale_anchor_fields
    from tests.conftest import zoo_path
    path = zoo_path("odapi_exports", name)
    source = sources.open_source(path)
    config, _ = config_inference.infer_config(source)
    ours = builder.frozen_graph_def(config, source.weights, fpn_upsampling=upsampling)
    real = sources.read_graph_def(os.path.join(path, "frozen_inference_graph.pb"))
    model = SSDMobileNetV1(config)
    runners = [FrozenGraphRunner(g, exact_arithmetic=True) for g in (real, ours)]
    stages = [r.resolve(endpoint_candidates(model)) for r in runners]
    assert list(stages[0]) == list(stages[1]) and len(stages[0]) == len(model.endpoint_names) + 3
    images = random_images(3, 2, 257, 311)
    outs = [r.run(images, {**{s: t for s, (_, t) in st.items()}, **{k: f"{k}:0" for k in DETECTION_OUTPUTS}})
            for r, st in zip(runners, stages)]
    for stage in stages[0]:
        np.testing.assert_array_equal(outs[1][stage], outs[0][stage].reshape(outs[1][stage].shape), err_msg=stage)
    check_detections(outs[1], outs[0], atol=0)
    size = (config.image_height, config.image_width)
    np.testing.assert_array_equal(graph_anchors(ours, size)[0], graph_anchors(real, size)[0])
    assert graph_traits(ours) == graph_traits(real)
    for read in (fpn_levels, anchor_generator_type, multiscale_anchor_fields):
        assert read(ours) == read(real)
    for r in runners:
        r.close()
