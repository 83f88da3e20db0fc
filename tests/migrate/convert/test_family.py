"""The model family beyond the files in ../shared: other class counts, sizes, depth multipliers,
padding, heads and export versions, each built as a real TF1 model directory by
`migrate.tf1.builder` (an independent TF1/slim implementation of the OD API graph), read back
the way `convert` reads a user's directory, and compared stage by stage with the Keras model.

Tolerance: as tests/migrate/convert/test_parity.py, 1e-5 absolute on every stage (measured 0.0 with the TF1
graph's rounding-changing rewrites off) and exact detection counts and classes.
"""

import numpy as np
import pytest

from tests.conftest import check_detections, fits_100_columns, random_images, unwrapped
from migrate.tf1 import builder
from migrate.tf1 import assign, config_inference, sources
from migrate.tf1.frozen_graph import FrozenGraphRunner, endpoint_candidates
from ssd_mobilenet import SSDConfig, SSDMobileNetV1, anchor_generators
from ssd_mobilenet.anchor_generators import ssd as ssd_anchors
from ssd_mobilenet.config.pipeline_reader import read_pipeline_config
from ssd_mobilenet.config.pipeline_writer import to_pipeline_config
from ssd_mobilenet.config.ssd_config import NMS_CLIP_AFTER
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import ConfigError, InputError

ATOL = 1e-5


def f32(x):
    return float(np.float32(x))


F32_03 = f32(0.3)
ROUNDED = "tf1.4.1_export_rounded_interpolated_scales_small"


def _rounded_interpolated_scales(config) -> tuple:
    """`config`'s anchor specs with each layer's interpolated anchor (its last) at a scale rounded
    to four decimals, as float32 constants: what the TF 1.4.1 export the issue names holds."""
    return tuple(tuple((f32(round(s, 4)) if i > 0 and j == len(layer) - 1 else f32(s), f32(r))
                       for j, (s, r) in enumerate(layer))
                 for i, layer in enumerate(ssd_anchors.box_specs(config)))

def _fpn(**fields) -> SSDConfig:
    """An ssd_mobilenet_v1_fpn config in the zoo's form (weight-shared heads, multiscale anchors) and
    the exports' TF 1.15+ graph traits, with `fields`."""
    return SSDConfig(**{**dict(feature_extractor_type="ssd_mobilenet_v1_fpn",
                               box_predictor_type="weight_shared_convolutional_box_predictor",
                               anchor_generator_type="multiscale_anchor_generator", aspect_ratios=(1.0, 2.0, 0.5),
                               class_prediction_bias_init=f32(-4.6), score_threshold=f32(1e-8),
                               normalize_before_resize=True, fused_batch_norm=True, nms_variant=NMS_CLIP_AFTER),
                        **fields})


FAMILY = {
    # Three aspect ratios and no interpolated anchor: 3 anchors per location everywhere. No
    # background column: the class head has num_classes columns, class ids count from 1 still.
    # A base anchor other than 1 x 1 (read back from the graph's anchors without a config).
    "one_class_pad_to_32": SSDConfig(num_classes=1, pad_to_multiple=32, aspect_ratios=(1.0, 2.0, 0.5),
                                     interpolated_scale_aspect_ratio=0.0, add_background_class=False,
                                     base_anchor_height=f32(1.2), base_anchor_width=f32(0.8)),
    # Explicit anchor scales and an interpolated anchor of aspect ratio 2.
    "depth_0.75_320_tf1.12_export": SSDConfig(num_classes=20, depth_multiplier=0.75, image_height=320,
                                              image_width=320, fused_batch_norm=True,
                                              nms_variant=NMS_CLIP_AFTER, score_threshold=F32_03,
                                              scales=tuple(f32(x) for x in (0.1, 0.25, 0.4, 0.55, 0.7, 0.85)),
                                              interpolated_scale_aspect_ratio=2.0),
    # min_depth 16 (the proto default) clamps Conv2d_0 (int(32 * 0.35) = 11) to 16 channels. The
    # weights show int(1024 * 0.35) = 358 channels at Conv2d_13: 358 / 1024 = 0.3496 builds the same
    # layers, and 0.35 is what the config says.
    # Also: every layer with the configured ratios, other scales, box coder and resize method, and
    # explicit anchor strides and offsets in pixels (the last layers' single row shows no stride).
    "depth_0.35_min_depth_landscape": SSDConfig(num_classes=5, depth_multiplier=f32(0.35), min_depth=16,
                                                image_height=240, image_width=416,
                                                anchor_strides=tuple((16 * 2 ** i, 16 * 2 ** i) for i in range(6)),
                                                anchor_offsets=tuple((4 * 2 ** i, 4 * 2 ** i) for i in range(6)),
                                                reduce_boxes_in_lowest_layer=False, min_scale=f32(0.1),
                                                max_scale=f32(0.8), box_coder_scales=(5.0, 5.0, 2.0, 2.0),
                                                resize_method="BICUBIC"),
    # pad_to_multiple: the image's zero rows and columns, then the explicit padding of Conv2d_0.
    "explicit_padding_depthwise_kernel3_pad_to_8": SSDConfig(num_classes=3, use_explicit_padding=True,
                                                             use_depthwise=True, box_predictor_use_depthwise=True,
                                                             pad_to_multiple=8, box_predictor_kernel_size=3,
                                                             image_height=257, image_width=257,
                                                             batch_norm_epsilon=f32(0.01),
                                                             box_predictor_batch_norm_epsilon=f32(0.005)),
    # The image's zero padding and the extra layers' are the same ops in the graph. 2017 exports
    # slice the background column off the logits and softmax the class columns alone.
    "tf1.3_export_softmax_portrait_pad_to_16": SSDConfig(num_classes=4, pad_extra_layers_to_even=True,
                                                         background_slice="logits",
                                                         pad_to_multiple=16, interpolated_anchor_after_unit_ratio=True,
                                                         score_converter="SOFTMAX", image_height=321, image_width=199,
                                                         # 2017 exports: conv_hyperparams' epsilon on every layer
                                                         batch_norm_epsilon=f32(0.003),
                                                         base_batch_norm_epsilon=f32(0.003)),
    # Later OD API code (TF 1.15 exports): the image scaled to [-1, 1] at full size, then resized;
    # FusedBatchNorm and NMS with its threshold, clipping after the sort. Small.
    "tf1.15_export_normalize_before_resize_small": SSDConfig(num_classes=11, depth_multiplier=0.25,
                                                             image_height=128, image_width=144,
                                                             normalize_before_resize=True, fused_batch_norm=True,
                                                             nms_variant=NMS_CLIP_AFTER),
    # A TF 1.4.1 export whose writer rounded the interpolated anchors' scales to four decimals
    # (0.4183 where sqrt(s_i * s_i+1) is 0.41833001): no ssd_anchor_generator setting gives them,
    # so they are taken as written. 23 classes, small.
    ROUNDED: SSDConfig(num_classes=23, depth_multiplier=0.25, image_height=128, image_width=128,
                       anchor_specs=_rounded_interpolated_scales(SSDConfig())),
    # The 2017_11_17 zoo graph's order (slice, scale_logits, sigmoid) with a logit scale, small.
    "2017_11_zoo_sigmoid_logit_scale_small": SSDConfig(num_classes=6, depth_multiplier=0.25, image_height=128,
                                                       image_width=160, background_slice="logits",
                                                       logit_scale=f32(2.5)),
    # FPN and PPN (the builder's slim graphs are the OD API exporter's: tests/migrate/tf1/test_builder.py),
    # in the exports' TF 1.15+ form. FPN levels 2..5 (Conv2d_3 tapped, no bottom-up layers) of
    # depth 128, every 3x3 conv depthwise separable, explicit padding at a size whose levels do not
    # halve exactly (the upsampled maps cropped), the predictor's convs separable too, 1 class.
    "fpn_levels2to5_depthwise_explicit_padding_136x104": _fpn(
        num_classes=1, depth_multiplier=0.25, image_height=136, image_width=104, fpn_min_level=2, fpn_max_level=5,
        fpn_additional_layer_depth=128, use_depthwise=True, use_explicit_padding=True, box_predictor_depth=32,
        box_predictor_num_layers_before_predictor=2, box_predictor_kernel_size=3, box_predictor_use_depthwise=True,
        anchor_min_level=2, anchor_max_level=5),
    # Levels 4..6 on multiplier 0.35 with min_depth 24 clamping early layers; one shared tower
    # without batch norm (its convs have biases); anchors of one scale in 3 per octave, scale 3.
    "fpn_levels4to6_shared_tower_without_batch_norm": _fpn(
        num_classes=7, depth_multiplier=f32(0.35), min_depth=24, image_height=160, image_width=128,
        fpn_min_level=4, fpn_max_level=6, box_predictor_depth=24, box_predictor_num_layers_before_predictor=2,
        box_predictor_kernel_size=3, share_prediction_tower=True, box_predictor_batch_norm=False,
        anchor_min_level=4, anchor_max_level=6, anchor_scale=3.0, scales_per_octave=3, aspect_ratios=(1.0, 2.0)),
    # PPN with separate towers of two 3x3 layers (the zoo's: one shared 1x1), 5 classes, non-square.
    "ppn_separate_towers_kernel3_128x160": SSDConfig(
        feature_extractor_type="ssd_mobilenet_v1_ppn", box_predictor_type="weight_shared_convolutional_box_predictor",
        num_classes=5, depth_multiplier=0.25, image_height=128, image_width=160, box_predictor_depth=32,
        box_predictor_num_layers_before_predictor=2, box_predictor_kernel_size=3,
        class_prediction_bias_init=f32(-4.6), min_scale=f32(0.15), reduce_boxes_in_lowest_layer=False,
        normalize_before_resize=True, fused_batch_norm=True, nms_variant=NMS_CLIP_AFTER),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            out = str(tmp_path_factory.mktemp("family") / name)
            builder.write_model_dir(FAMILY[name], out, seed=7)
            cache[name] = out
        return cache[name]
    return get


@pytest.mark.parametrize("name", list(FAMILY))
@pytest.mark.slow
def test_family_member_reads_back_and_matches_its_tf1_graph(built, name):
    source = sources.open_source(built(name))
    config, _ = config_inference.infer_config(source)
    assert config.to_dict() == FAMILY[name].to_dict()
    # What the weights alone show agrees with the config, and so does what the graph alone shows.
    facts = config_inference.weight_facts(source.weights, anchor_generators.anchors_per_location(config)[0], config.min_depth,
                               config.add_background_class)
    # Without a config the weights' multiplier is the shortest decimal building their layer depths.
    assert facts.pop("depth_multiplier") == pytest.approx(config.depth_multiplier, abs=1e-7)
    assert {k: getattr(config, k) for k in facts} == facts
    assert config.replace(**config_inference.graph_traits(source.graph_def)) == config
    model = SSDMobileNetV1(config)
    assign.assign(source.weights, model)
    runner = FrozenGraphRunner(source.graph_def, exact_arithmetic=True)
    stages = runner.resolve(endpoint_candidates(model))
    assert len(stages) == len(model.endpoint_names) + 3
    endpoints = model.endpoint_model()
    for shape in [(2, config.image_height, config.image_width), (1, 183, 275)]:
        images = random_images(sum(shape), *shape)
        ref = runner.run(images, {**{s: t for s, (_, t) in stages.items()},
                                  **{k: f"{k}:0" for k in DETECTION_OUTPUTS}})
        pre = model.preprocess(images)
        ours = {k: np.asarray(v) for k, v in endpoints(pre).items()}
        ours["Preprocessor"] = np.asarray(pre)
        for stage, (key, _) in stages.items():
            err = float(np.max(np.abs(ours[key] - ref[stage].reshape(ours[key].shape))))
            assert err <= ATOL, f"{name} {shape}: {stage} max abs error {err:.3g} > {ATOL}"
        assert ref["num_detections"].min() > 0
        check_detections({k: v.numpy() for k, v in model.detect(images).items()}, ref)
    runner.close()


# Full-depth members of 257..321 px, which no other fast case builds: 6..7 s each with their
# build (write_model_dir), slow; the fast tier keeps the other eight (FPN and PPN among them).
FULL_SIZE = ("depth_0.75_320_tf1.12_export", "explicit_padding_depthwise_kernel3_pad_to_8",
             "tf1.3_export_softmax_portrait_pad_to_16")


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in FULL_SIZE else name
                                  for name in FAMILY])
def test_frozen_graph_alone_gives_the_same_network(built, tmp_path, name):
    """Without pipeline.config the graph shows the anchors (each layer's scale and aspect-ratio
    constants), box coder scales and resize op; the weights the rest. The config read back may
    spell a field otherwise (min_depth where it clamps no layer), but builds the same model."""
    import shutil
    shutil.copy(f"{built(name)}/frozen_inference_graph.pb", tmp_path)
    source = sources.open_source(str(tmp_path))
    config, notes = config_inference.infer_config(source)
    want = FAMILY[name]
    model = SSDMobileNetV1(config)
    assign.assign(source.weights, model)  # every weight finds a variable of its shape
    np.testing.assert_array_equal(model.anchors, anchor_generators.generate_anchors(want, model.feature_map_shapes))
    # Base anchor size, strides and offsets come from the graph's evaluated anchors, with a note.
    grid = (want.base_anchor_height, want.base_anchor_width, want.anchor_strides, want.anchor_offsets)
    assert any(n.startswith("anchor grid from the graph's anchors") for n in notes) == (grid != (1.0, 1.0, (), ()))
    for key in ("num_classes", "add_background_class", "image_height", "image_width", "resize_method",
                "box_coder_scales", "score_converter", "logit_scale", "background_slice",
                "score_threshold", "iou_threshold", "max_detections_per_class", "max_total_detections", "nms_variant",
                "normalize_before_resize"):
        assert getattr(config, key) == getattr(want, key), key


NORMALIZE_FIRST = "tf1.15_export_normalize_before_resize_small"


@pytest.mark.parametrize("form", ["frozen_inference_graph.pb", "saved_model", "model.ckpt.meta", "checkpoint alone"])
def test_preprocessing_order_from_every_source_form(built, tmp_path, form):
    """Every form with a graph shows the order; a checkpoint alone (with its pipeline.config, which
    cannot say it) converts with the older order, named among the assumed fields."""
    import glob
    import os
    import shutil
    from migrate.convert import conversion
    if form == "checkpoint alone":
        for path in glob.glob(f"{built(NORMALIZE_FIRST)}/model.ckpt.*") + [f"{built(NORMALIZE_FIRST)}/pipeline.config"]:
            if not path.endswith(".meta"):
                shutil.copy(path, tmp_path)
        source = sources.open_source(str(tmp_path))
    else:
        source = sources.open_source(os.path.join(built(NORMALIZE_FIRST), form))
    config, notes = config_inference.infer_config(source)
    assert config.normalize_before_resize == (form != "checkpoint alone")
    if form == "checkpoint alone":
        assert conversion.assumed_fields(source, config)["normalize_before_resize"] is False
        assert any("preprocessing order" in n for n in notes)
    else:
        assert config.to_dict() == FAMILY[NORMALIZE_FIRST].to_dict()


# (convert's check on a normalize-first graph, compared at the resize loop's output bit for bit:
# tests/migrate/tf1/test_self_check.py::test_a_normalize_first_graph_is_compared_at_its_preprocessed_image.)


def test_anchors_the_weights_cannot_hold_are_refused_without_config(built, tmp_path):
    """A checkpoint alone shows how many anchors each location has, not their shapes: when the
    zoo defaults' count differs, the error says so and what to add, instead of a shape error."""
    import glob
    import shutil
    for path in glob.glob(f"{built('one_class_pad_to_32')}/model.ckpt.data*") + glob.glob(
            f"{built('one_class_pad_to_32')}/model.ckpt.index"):
        shutil.copy(path, tmp_path)
    with pytest.raises(InputError, match=r"model.ckpt.index: \[3 3 3 3 3 3\] anchors per "
                                         r"location; add its pipeline.config"):
        config_inference.infer_config(sources.open_source(str(tmp_path)))


def test_anchors_no_anchor_grid_gives_are_refused(built, tmp_path):
    """Anchors that no base size, strides and offsets make from the graph's scales and ratios
    (here: the decoder fed other values) are refused in one line, not converted to a model that
    decodes against other anchors."""
    import tensorflow as tf
    from migrate.tf1.graph_anchors import ANCHORS_CONSUMER, graph_anchors
    graph_def = sources.read_graph_def(f"{built('one_class_pad_to_32')}/frozen_inference_graph.pb")
    real, form, _ = graph_anchors(graph_def, (300, 300))
    assert form == "corners" and real.shape == (3 * sum(s * s for s in (20, 10, 5, 3, 2, 1)), 4)  # 320x320
    shifted = graph_def.node.add()
    shifted.name, shifted.op = "shifted_anchors", "Const"
    shifted.attr["dtype"].type = tf.float32.as_datatype_enum
    shifted.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(real + np.float32(0.01)))
    consumer = next(n for n in graph_def.node if n.name == ANCHORS_CONSUMER)
    consumer.input[0] = "shifted_anchors"
    (tmp_path / "frozen_inference_graph.pb").write_bytes(graph_def.SerializeToString())
    with pytest.raises(ConfigError, match=r"frozen_inference_graph.pb: no ssd_anchor_generator grid "
                                          r"gives its anchors \([0-9.e-]+ off\)"):
        config_inference.infer_config(sources.open_source(str(tmp_path)))


@pytest.mark.parametrize("op, name, mode", [
    ("CombinedNonMaxSuppression", "BatchMultiClassNonMaxSuppression/CombinedNonMaxSuppression", "combined"),
    ("NonMaxSuppressionV3", "BatchMultiClassNonMaxSuppression/map/while/ClassAgnosticNonMaxSuppression/"
                            "non_max_suppression/NonMaxSuppressionV3", "class-agnostic")])
def test_other_nms_modes_in_the_graph_are_refused(built, tmp_path, op, name, mode):
    """A graph exported with post_processing's use_combined_nms or use_class_agnostic_nms selects
    other detections than per-class NMS: refused, naming the node, when there is no config to say so."""
    graph_def = sources.read_graph_def(f"{built('one_class_pad_to_32')}/frozen_inference_graph.pb")
    node = graph_def.node.add()
    node.name, node.op = f"Postprocessor/{name}", op
    (tmp_path / "frozen_inference_graph.pb").write_bytes(graph_def.SerializeToString())
    with pytest.raises(ConfigError, match=f"frozen_inference_graph.pb: {mode} NMS not supported "
                                          r"\((Combined|ClassAgnostic)NonMaxSuppression\)$"):
        config_inference.infer_config(sources.open_source(str(tmp_path)))


@pytest.mark.parametrize("configured, expected", [(64, 64), (16, 32), (1, 32)])
def test_image_padding_in_the_graph_decides_pad_to_multiple(built, tmp_path, configured, expected):
    """The graph shows the padded size (300 -> 320), not the multiple: a configured multiple that
    pads to that size stays (64), one that does not (16 -> 304, 1) gives way to the graph's."""
    import shutil
    src = tmp_path / "model"
    shutil.copytree(built("one_class_pad_to_32"), src)
    (src / "pipeline.config").write_text(to_pipeline_config(FAMILY["one_class_pad_to_32"].replace(
        pad_to_multiple=configured)))
    config, notes = config_inference.infer_config(sources.open_source(str(src)))
    assert config.pad_to_multiple == expected
    assert any(n.startswith("pad_to_multiple: 32") for n in notes) == (configured != expected)


# Static batch 1: the image's zero padding (240 -> 256) is a Fill of constant shape here.
TFLITE_CONFIG = SSDConfig(num_classes=5, depth_multiplier=0.25, image_height=240, image_width=320,
                          pad_to_multiple=32, score_threshold=F32_03, logit_scale=f32(1.5),
                          base_anchor_height=f32(0.9))


@pytest.mark.slow
def test_tflite_export_converts_its_network_and_refuses_verify(tmp_path, capsys):
    """`export_tflite_ssd_graph`'s tflite_graph.pb holds the same weights as constants, no
    Preprocessor and (by default) a TFLite-only post-processing op: convert takes the network,
    the input size and the op's counts and thresholds from it; verify cannot run it."""
    import os
    import tensorflow as tf
    from migrate.cli import main
    src = tmp_path / "tflite"
    src.mkdir()
    weights = builder.synthetic_weights(TFLITE_CONFIG, seed=3)
    graph_def = builder.tflite_graph_def(TFLITE_CONFIG, weights, max_detections=10)
    (src / "tflite_graph.pb").write_bytes(graph_def.SerializeToString())
    out = str(tmp_path / "out")
    assert main(["convert", str(src), "--out", out]) == 0
    assert "is a TFLite export" in unwrapped(capsys.readouterr().err)
    from ssd_mobilenet import detector
    model = detector.load_model(out)
    assert model.config.image_height == 240 and model.config.pad_to_multiple == 32
    assert model.config.max_total_detections == 10
    assert model.config.score_threshold == F32_03 and model.config.score_converter == "SIGMOID"
    assert model.config.logit_scale == f32(1.5)
    # Its anchors constant ([ycenter, xcenter, h, w]) shows the base anchor size.
    assert f32(model.config.base_anchor_height) == f32(0.9) and model.config.base_anchor_width == 1.0
    # The network (raw outputs after the score converter) against the TFLite graph run by TF1,
    # without the TFLite op, on the model's own preprocessing of a 480x640 image.
    pre = model.preprocess(random_images(5, 1, 480, 640))
    graph = tf.Graph()
    with graph.as_default():
        sub = tf.compat.v1.graph_util.extract_sub_graph(graph_def, list(builder.TFLITE_OUTPUTS[:2]))
        tf.compat.v1.import_graph_def(sub, name="")
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        ref = session.run([f"{n}:0" for n in builder.TFLITE_OUTPUTS[:2]],
                          {"normalized_input_image_tensor:0": np.asarray(pre)})
    raw = model(pre)
    np.testing.assert_allclose(raw["box_encodings"].numpy(), ref[0], rtol=0, atol=ATOL)
    scores = tf.sigmoid(raw["class_predictions_with_background"] / model.config.logit_scale).numpy()
    np.testing.assert_allclose(scores, ref[1], rtol=0, atol=ATOL)
    assert main(["verify", str(src), out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: {os.path.join(str(src), 'tflite_graph.pb')}: a TFLite export graph: give the model "
                       "it was exported from")
    # Under any name: bench reads the graph, not the file name.
    os.rename(src / "tflite_graph.pb", src / "frozen_inference_graph.pb")
    assert main(["bench", str(src), out]) == 2
    assert "a TFLite export graph" in capsys.readouterr().err


@pytest.mark.slow
def test_tflite_export_without_its_op_takes_the_thresholds_of_pipeline_config(tmp_path):
    src = tmp_path / "tflite"
    src.mkdir()
    weights = builder.synthetic_weights(TFLITE_CONFIG, seed=3)
    graph_def = builder.tflite_graph_def(TFLITE_CONFIG, weights, postprocess_op=False)
    (src / "tflite_graph.pb").write_bytes(graph_def.SerializeToString())
    (src / "pipeline.config").write_text(to_pipeline_config(TFLITE_CONFIG.replace(max_total_detections=7)))
    config, notes = config_inference.infer_config(sources.open_source(str(src)))
    assert config.to_dict() == TFLITE_CONFIG.replace(max_total_detections=7).to_dict()
    assert any("is a TFLite export without its post-processing op" in n for n in notes)


def test_a_checkpoint_graph_beside_a_tflite_export_is_preferred(built, tmp_path):
    """tflite_graph.pb is the graph of last resort: a checkpoint's .meta beside it has the
    Preprocessor and Postprocessor that verify runs."""
    import os
    import shutil
    src = tmp_path / "model"
    shutil.copytree(built("one_class_pad_to_32"), src)
    shutil.rmtree(src / "saved_model")
    os.remove(src / "frozen_inference_graph.pb")
    config = FAMILY["one_class_pad_to_32"]
    graph_def = builder.tflite_graph_def(config, sources.open_source(str(src)).weights)
    (src / "tflite_graph.pb").write_bytes(graph_def.SerializeToString())
    assert sources.open_source(str(src)).graph_from == str(src / "model.ckpt.meta")
    os.remove(src / "model.ckpt.meta")
    source = sources.open_source(str(src))
    assert source.graph_from == str(src / "tflite_graph.pb") and source.weights_from == str(src / "model.ckpt.index")


def test_embedded_ssd_mobilenet_v1_is_refused_as_such(tmp_path, capsys):
    """The OD API's embedded_ssd_mobilenet_v1 (AIY vision kit exports): 5 feature maps, the last extra
    layer a 2x2 conv. Refused by its feature extractor in one line naming the file (exit 2), before
    its 5 anchor layers would be refused as anchors. Here: a frozen graph of its weights' constants
    (what a frozen graph gives the reader), made from a small ssd_mobilenet_v1's."""
    import re
    import tensorflow as tf
    from migrate.cli import main
    config = SSDConfig(num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128)
    graph_def = tf.compat.v1.GraphDef()
    for name, value in builder.synthetic_weights(config, seed=1).items():
        if name.startswith("BoxPredictor_5/") or "_Conv2d_5_" in name:
            continue  # 5 feature maps
        m = re.match(r"(.*_Conv2d_4_)3x3(_s2_\d+/.*)", name)
        if m:
            name, value = m.group(1) + "2x2" + m.group(2), value[:2, :2] if value.ndim == 4 else value
        node = graph_def.node.add(name=name, op="Const")
        node.attr["dtype"].type = tf.float32.as_datatype_enum
        node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
    path = tmp_path / "frozen_inference_graph.pb"
    path.write_bytes(graph_def.SerializeToString())
    assert main(["convert", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: {path}: feature extractor embedded_ssd_mobilenet_v1 not supported"
    assert not (tmp_path / "out").exists()


def _variables(scope_names) -> dict:
    """{name: small float32 value} of variables named as another OD API feature extractor's."""
    rng = np.random.default_rng(0)
    return {name: rng.normal(size=(3, 3, 8, 8)).astype(np.float32) for name in scope_names}


def _frozen_graph(path, weights):
    import tensorflow as tf
    graph_def = tf.compat.v1.GraphDef()
    for name, value in weights.items():
        node = graph_def.node.add(name=name, op="Const")
        node.attr["dtype"].type = tf.float32.as_datatype_enum
        node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
    path.write_bytes(graph_def.SerializeToString())


def _checkpoint(folder, weights):
    import tensorflow as tf
    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=str(folder / "model.ckpt"), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[n]) for n in names])
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\n')


@pytest.mark.parametrize("form, names, named", [
    ("frozen graph", ["FeatureExtractor/MobilenetV2/Conv/weights", "FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512/weights",
                      "BoxPredictor_0/BoxEncodingPredictor/weights"],
     "ssd_mobilenet_v2 (MobilenetV2/)"),
    ("checkpoint", ["FeatureExtractor/resnet_v1_50/conv1/weights", "FeatureExtractor/resnet_v1_50/fpn/projection_1/weights",
                    "WeightSharedConvolutionalBoxPredictor/BoxPredictor/weights"],
     "ssd_resnet50_v1_fpn (resnet_v1_50/)"),
    ("checkpoint", ["FeatureExtractor/InceptionV2/Conv2d_1a_7x7/weights", "BoxPredictor_0/ClassPredictor/weights"],
     "ssd_inception_v2 (InceptionV2/)"),
])
def test_another_feature_extractor_is_refused_naming_it(tmp_path, capsys, form, names, named):
    """Its variable scope (or a frozen graph's node names, which hold no weight this tool reads) names
    the OD API feature extractor, in one line, exit 2, nothing written; so it does beside a
    pipeline.config, whichever feature extractor that names (a config alone naming another is
    refused by its `feature_extractor.type`: tests/ssd_mobilenet/config/test_config.py)."""
    from migrate.cli import main
    src = tmp_path / "src"
    src.mkdir()
    if form == "frozen graph":
        where = src / "frozen_inference_graph.pb"
        _frozen_graph(where, _variables(names))
    else:
        _checkpoint(src, _variables(names))
        where = src / "model.ckpt.index"
    assert main(["convert", str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: {where}: feature extractor {named} not supported"
    if form == "frozen graph":
        return
    text = to_pipeline_config(SSDConfig(num_classes=3))
    for kind in ("ssd_inception_v2", "ssd_mobilenet_v1_fpn"):
        (src / "pipeline.config").write_text(text.replace('type: "ssd_mobilenet_v1"', f'type: "{kind}"'))
        assert main(["convert", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: {where}: feature extractor {named} not supported"]
    assert not (tmp_path / "out").exists()


# Each form is a conversion with its check (6.3 s for the directory in 97db5d3's fast tier): all in
# the slow tier. The fast tier keeps the written anchors read back from the frozen graph alone
# (test_frozen_graph_alone_gives_the_same_network[ROUNDED]) and the check refusing the formula on
# them (test_the_check_refuses_the_formula_on_a_graph_of_written_anchors).
@pytest.mark.slow
@pytest.mark.parametrize("form", ["frozen_inference_graph.pb", "model.ckpt.meta", "directory"])
def test_anchors_taken_as_written_convert_in_every_source_form(built, tmp_path, form):
    """The rounded scales' graph converts with its self-check on (every stage and the detections
    against the TF1 graph, at the tolerances) from each form that holds the graph; the report and
    the console say the anchors were taken as written; model_config.json keeps the exact specs and
    pipeline.config the nearest generator settings, which read back as a valid config."""
    import json
    import os
    from migrate.cli import main
    from ssd_mobilenet import detector
    src = built(ROUNDED) if form == "directory" else os.path.join(built(ROUNDED), form)
    out = str(tmp_path / "out")
    assert main(["convert", src, "--out", out, "--quiet"]) == 0
    with open(os.path.join(out, "conversion_report.json")) as f:
        report = json.load(f)
    assert report["check"]["ran"] and report["check"]["passed"]
    assert any(n.startswith("anchors taken as written") and "0.4183 where the generator gives 0.41833001" in n
               for n in report["notes"])
    want = FAMILY[ROUNDED]
    config = SSDConfig.from_dict(json.load(open(os.path.join(out, "model_config.json"))))
    assert config.anchor_specs == want.anchor_specs
    model = detector.load_model(out)
    assert model.config.anchor_specs == want.anchor_specs
    np.testing.assert_array_equal(model.anchors, anchor_generators.generate_anchors(want, model.feature_map_shapes))
    written = read_pipeline_config(os.path.join(out, "pipeline.config"))
    assert not written.anchor_specs and (written.min_scale, written.max_scale) == (want.min_scale, want.max_scale)
    assert "nearest generator settings" in open(os.path.join(out, "pipeline.config")).read()


@pytest.mark.slow
def test_the_check_refuses_the_formula_on_a_graph_of_written_anchors(built, tmp_path, monkeypatch, capsys):
    """A config that derives the interpolated scales by the formula on such a graph decodes
    against anchors ~4e-5 off (inside the stage tolerance on generated images): the check's
    crafted post-processing stops it, same classes and scores at other boxes, and names the
    anchor fields; nothing is written."""
    import os
    from migrate.cli import main
    real = config_inference.infer_config
    monkeypatch.setattr(config_inference, "infer_config",
                        lambda *a, **k: (real(*a, **k)[0].replace(anchor_specs=()), real(*a, **k)[1]))
    out = tmp_path / "out"
    assert main(["convert", os.path.join(built(ROUNDED), "frozen_inference_graph.pb"), "--out", str(out),
                 "--quiet"]) == 1
    printed = capsys.readouterr().err.strip()
    assert fits_100_columns(printed), printed
    err = unwrapped(printed)  # one message, wrapped within 100 columns
    assert len(err.splitlines()) == 1 and "first at Postprocessor" in err, err
    assert "anchor_specs" in err.split("; likely ", 1)[1], err
    assert not out.exists()
