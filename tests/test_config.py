import glob
import os

import pytest

from tests.conftest import ZOO, needs_shared, zoo_path
from ssd_mobilenet import ConfigError, SSDConfig
from ssd_mobilenet import pipeline_text


@needs_shared
@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ZOO, "**", "*.config"), recursive=True)))
def test_every_zoo_config_parses(path):
    with open(path) as f:
        root = pipeline_text.parse(f.read())
    assert root.child("model").child("ssd") is not None


@needs_shared
def test_zoo_config_values_are_float32_of_their_spelling():
    c = SSDConfig.from_pipeline_config(zoo_path("ssd_mobilenet_v1_coco_2018_01_28", "pipeline.config"))
    assert (c.num_classes, c.image_height, c.image_width) == (90, 300, 300)
    assert c.score_threshold == 0.30000001192092896  # float32(0.300000011921)
    assert c.iou_threshold == 0.6000000238418579
    assert c.aspect_ratios[-1] == 0.33329999446868896  # float32(0.3333), not 1/3
    assert c.score_converter == "SIGMOID" and c.box_coder_scales == (10.0, 10.0, 5.0, 5.0)
    # Another spelling of the same float32 values gives the same config.
    d = SSDConfig.from_pipeline_config(zoo_path("custom_nc2_use_depthwise", "pipeline.config"))
    assert (d.min_scale, d.max_scale, d.aspect_ratios) == (c.min_scale, c.max_scale, c.aspect_ratios)
    assert d.use_depthwise and d.box_predictor_use_depthwise and d.box_predictor_kernel_size == 3
    assert d.score_threshold == 9.99999993922529e-09


@needs_shared
def test_trailing_commas_and_colon_braces_are_read():
    c = SSDConfig.from_pipeline_config(zoo_path("custom_nc3_tf1.3_config_mismatch", "pipeline.config"))
    assert c.num_classes == 1 and c.score_threshold == pytest.approx(1e-8)
    assert c.batch_norm_epsilon == pytest.approx(0.001)


@needs_shared
def test_depth_multiplier_sample_config():
    c = SSDConfig.from_pipeline_config(
        zoo_path("sample_configs", "ssd_mobilenet_v1_0.75_depth_300x300_coco14_sync.config"))
    assert c.depth_multiplier == 0.75


@needs_shared
@pytest.mark.parametrize("name, field", [
    ("ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync.config", "model.ssd."),
    ("ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync.config", "model.ssd."),
])
def test_unsupported_variants_name_the_field(name, field):
    with pytest.raises(ConfigError, match=field):
        SSDConfig.from_pipeline_config(zoo_path("sample_configs", name))


@needs_shared
def test_quantized_sample_config():
    c = SSDConfig.from_pipeline_config(
        zoo_path("sample_configs", "ssd_mobilenet_v1_0.75_depth_quantized_300x300_coco14_sync.config"))
    assert (c.depth_multiplier, c.weight_bits, c.activation_bits) == (0.75, 8, 8)
    assert SSDConfig.from_pipeline_config(c.to_pipeline_config()) == c


def test_quantization_settings_not_reproduced_are_refused():
    rewriter = "\ngraph_rewriter { quantization { weight_bits: 4 activation_bits: 8 %s } }"
    assert SSDConfig.from_pipeline_config(_minimal() + rewriter % "").weight_bits == 4
    with pytest.raises(ConfigError, match="symmetric"):
        SSDConfig.from_pipeline_config(_minimal() + rewriter % "symmetric: true")
    with pytest.raises(ConfigError, match="use_depthwise"):
        SSDConfig.from_pipeline_config(_minimal(**{"min_depth: 8": "min_depth: 8 use_depthwise: true"})
                                       + rewriter % "")


def _minimal(**repl):
    text = """model { ssd { num_classes: 4
      image_resizer { fixed_shape_resizer { height: 200 width: 240 } }
      feature_extractor { type: "ssd_mobilenet_v1" depth_multiplier: 0.5 min_depth: 8
        conv_hyperparams { activation: RELU_6 batch_norm { epsilon: 0.001 scale: true } } }
      box_coder { faster_rcnn_box_coder { } }
      box_predictor { convolutional_box_predictor { kernel_size: 1 } }
      anchor_generator { ssd_anchor_generator { num_layers: 6 aspect_ratios: 1.0 aspect_ratios: 2.0 } }
      post_processing { batch_non_max_suppression { score_threshold: 0.5 } score_converter: SOFTMAX }
    } }"""
    for a, b in repl.items():
        text = text.replace(a, b)
    return text


def test_minimal_config_defaults_follow_the_proto():
    c = SSDConfig.from_pipeline_config(_minimal())
    assert (c.image_height, c.image_width, c.depth_multiplier, c.min_depth) == (200, 240, 0.5, 8)
    assert c.iou_threshold == pytest.approx(0.6) and c.max_total_detections == 100
    assert c.score_converter == "SOFTMAX" and c.anchors_per_location() == [3, 3, 3, 3, 3, 3]


@pytest.mark.parametrize("change, field", [
    ({'"ssd_mobilenet_v1"': '"ssd_mobilenet_v2"'}, "feature_extractor.type"),
    ({"fixed_shape_resizer { height: 200 width: 240 }": "keep_aspect_ratio_resizer { min_dimension: 300 }"},
     "image_resizer"),
    ({"RELU_6": "SWISH"}, "activation"),
    ({"SOFTMAX": "SIGMOID_WITH_LOGITS"}, "score_converter"),
    ({"convolutional_box_predictor { kernel_size: 1 }": "weight_shared_convolutional_box_predictor { }"},
     "box_predictor"),
    ({"num_layers: 6": "num_layers: 5"}, "num_layers"),
    ({"num_classes: 4": "num_classes: four"}, "num_classes"),
])
def test_unsupported_values_raise_naming_field(change, field):
    with pytest.raises(ConfigError, match=field):
        SSDConfig.from_pipeline_config(_minimal(**change))


def test_broken_text_is_a_config_error():
    with pytest.raises(ConfigError, match="text format"):
        SSDConfig.from_pipeline_config("model { ssd { num_classes: 3 \n")


def test_pipeline_config_round_trip():
    c = SSDConfig.from_pipeline_config(_minimal()).replace(use_explicit_padding=True, pad_to_multiple=32)
    again = SSDConfig.from_pipeline_config(c.to_pipeline_config())
    # Fields pipeline.config cannot hold (graph-version traits) keep their defaults.
    assert again == c


def test_dict_round_trip():
    c = SSDConfig(num_classes=7, anchor_strides=((16, 16),) * 6, anchor_offsets=((8, 8),) * 6)
    assert SSDConfig.from_dict(c.to_dict()) == c


def test_preprocessing_order_round_trips_and_defaults_to_resize_first():
    """A graph-version trait: model_config.json keeps it; configs written before it existed, and
    pipeline.config (which cannot say it), give the older order."""
    c = SSDConfig(num_classes=11, image_height=256, image_width=256, normalize_before_resize=True)
    assert SSDConfig.from_dict(c.to_dict()) == c and c.to_dict()["normalize_before_resize"] is True
    old = c.to_dict()
    del old["normalize_before_resize"]
    assert SSDConfig.from_dict(old).normalize_before_resize is False
    assert SSDConfig.from_pipeline_config(c.to_pipeline_config()) == c.replace(normalize_before_resize=False)
    with pytest.raises(ConfigError, match="normalize_before_resize: 'false'"):
        SSDConfig(normalize_before_resize="false")


def test_base_layers_keep_mobilenet_epsilon_unless_overridden():
    # OD API 2018+: the 14 MobileNet layers use mobilenet_v1_arg_scope's 0.001 and only the
    # extra layers take conv_hyperparams, unless override_base_feature_extractor_hyperparams.
    plain = SSDConfig.from_pipeline_config(_minimal(**{"epsilon: 0.001": "epsilon: 0.01"}))
    assert plain.batch_norm_epsilon == pytest.approx(0.01) and plain.base_batch_norm_epsilon == pytest.approx(0.001)
    over = SSDConfig.from_pipeline_config(_minimal(**{
        "epsilon: 0.001": "epsilon: 0.01", 'min_depth: 8': 'min_depth: 8 override_base_feature_extractor_hyperparams: true'}))
    assert over.base_batch_norm_epsilon == over.batch_norm_epsilon == pytest.approx(0.01)
    for config in (plain, over):
        assert SSDConfig.from_pipeline_config(config.to_pipeline_config()) == config


def test_inputs_under_33_pixels_are_refused():
    """The OD API's feature extractor refuses them (test_extract_features_raises_error_with_invalid_image_size)."""
    with pytest.raises(ConfigError, match="at least 33x33"):
        SSDConfig(image_height=32, image_width=300)
    with pytest.raises(ConfigError, match="at least 33x33"):
        SSDConfig.from_pipeline_config(_minimal(**{"fixed_shape_resizer { height: 200 width: 240 }":
                                                   "fixed_shape_resizer { height: 200 width: 20 }"}))
    assert SSDConfig(image_height=33, image_width=33).image_height == 33
