import glob
import re
import os

import numpy as np
import pytest

from tests.conftest import ZOO, needs_shared, zoo_path
from ssd_mobilenet import SSDConfig, anchor_generators
from ssd_mobilenet.config import pipeline_text
from ssd_mobilenet.config.pipeline_reader import read_pipeline_config
from ssd_mobilenet.config.pipeline_writer import to_pipeline_config
from ssd_mobilenet.errors import ConfigError


@needs_shared
@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ZOO, "**", "*.config"), recursive=True)))
def test_every_zoo_config_parses(path):
    with open(path) as f:
        root = pipeline_text.parse(f.read())
    assert root.child("model").child("ssd") is not None


@needs_shared
def test_zoo_config_values_are_float32_of_their_spelling():
    c = read_pipeline_config(zoo_path("ssd_mobilenet_v1_coco_2018_01_28", "pipeline.config"))
    assert (c.num_classes, c.image_height, c.image_width) == (90, 300, 300)
    assert c.score_threshold == 0.30000001192092896  # float32(0.300000011921)
    assert c.iou_threshold == 0.6000000238418579
    assert c.aspect_ratios[-1] == 0.33329999446868896  # float32(0.3333), not 1/3
    assert c.score_converter == "SIGMOID" and c.box_coder_scales == (10.0, 10.0, 5.0, 5.0)
    # Another spelling of the same float32 values gives the same config.
    d = read_pipeline_config(zoo_path("custom_nc2_use_depthwise", "pipeline.config"))
    assert (d.min_scale, d.max_scale, d.aspect_ratios) == (c.min_scale, c.max_scale, c.aspect_ratios)
    assert d.use_depthwise and d.box_predictor_use_depthwise and d.box_predictor_kernel_size == 3
    assert d.score_threshold == 9.99999993922529e-09


@needs_shared
def test_trailing_commas_and_colon_braces_are_read():
    c = read_pipeline_config(zoo_path("custom_nc3_tf1.3_config_mismatch", "pipeline.config"))
    assert c.num_classes == 1 and c.score_threshold == pytest.approx(1e-8)
    assert c.batch_norm_epsilon == pytest.approx(0.001)


@needs_shared
def test_depth_multiplier_sample_config():
    c = read_pipeline_config(
        zoo_path("sample_configs", "ssd_mobilenet_v1_0.75_depth_300x300_coco14_sync.config"))
    assert c.depth_multiplier == 0.75


@needs_shared
def test_fpn_and_ppn_sample_configs():
    """The zoo's FPN 640 and PPN 300 configs, as the OD API's builders read them."""
    fpn = read_pipeline_config(
        zoo_path("sample_configs", "ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync.config"))
    assert (fpn.feature_extractor_type, fpn.box_predictor_type, fpn.anchor_generator_type) == (
        "ssd_mobilenet_v1_fpn", "weight_shared_convolutional_box_predictor", "multiscale_anchor_generator")
    assert (fpn.fpn_min_level, fpn.fpn_max_level, fpn.fpn_additional_layer_depth) == (3, 7, 256)
    assert (fpn.box_predictor_depth, fpn.box_predictor_num_layers_before_predictor, fpn.box_predictor_kernel_size,
            fpn.share_prediction_tower, fpn.box_predictor_batch_norm) == (256, 4, 3, False, True)
    assert fpn.class_prediction_bias_init == np.float32(-4.6)
    assert (fpn.anchor_min_level, fpn.anchor_max_level, fpn.anchor_scale, fpn.scales_per_octave,
            fpn.aspect_ratios) == (3, 7, 4.0, 2, (1.0, 2.0, 0.5))
    assert fpn.num_feature_maps == 5 and anchor_generators.anchors_per_location(fpn) == [6] * 5
    ppn = read_pipeline_config(
        zoo_path("sample_configs", "ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync.config"))
    assert (ppn.feature_extractor_type, ppn.box_predictor_type, ppn.anchor_generator_type) == (
        "ssd_mobilenet_v1_ppn", "weight_shared_convolutional_box_predictor", "ssd_anchor_generator")
    assert (ppn.box_predictor_depth, ppn.box_predictor_num_layers_before_predictor, ppn.box_predictor_kernel_size,
            ppn.share_prediction_tower, ppn.reduce_boxes_in_lowest_layer) == (512, 1, 1, True, False)
    assert anchor_generators.anchors_per_location(ppn) == [6] * 6
    for config in (fpn, ppn):
        assert read_pipeline_config(to_pipeline_config(config)) == config
        assert SSDConfig.from_dict(config.to_dict()) == config


@needs_shared
def test_quantized_sample_config():
    c = read_pipeline_config(
        zoo_path("sample_configs", "ssd_mobilenet_v1_0.75_depth_quantized_300x300_coco14_sync.config"))
    assert (c.depth_multiplier, c.weight_bits, c.activation_bits) == (0.75, 8, 8)
    assert read_pipeline_config(to_pipeline_config(c)) == c


def test_quantization_settings_not_reproduced_are_refused():
    rewriter = "\ngraph_rewriter { quantization { weight_bits: 4 activation_bits: 8 %s } }"
    assert read_pipeline_config(_minimal() + rewriter % "").weight_bits == 4
    with pytest.raises(ConfigError, match="symmetric"):
        read_pipeline_config(_minimal() + rewriter % "symmetric: true")
    with pytest.raises(ConfigError, match="use_depthwise"):
        read_pipeline_config(_minimal(**{"min_depth: 8": "min_depth: 8 use_depthwise: true"})
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
    c = read_pipeline_config(_minimal())
    assert (c.image_height, c.image_width, c.depth_multiplier, c.min_depth) == (200, 240, 0.5, 8)
    assert c.iou_threshold == pytest.approx(0.6) and c.max_total_detections == 100
    assert c.score_converter == "SOFTMAX" and anchor_generators.anchors_per_location(c) == [3, 3, 3, 3, 3, 3]


@pytest.mark.parametrize("change, field", [
    ({'"ssd_mobilenet_v1"': '"ssd_mobilenet_v2"'}, "type: ssd_mobilenet_v2"),
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
        read_pipeline_config(_minimal(**change))


def _family(**repl):
    """A small FPN config (`kind="ppn"`: PPN) in the zoo's form, with textual replacements."""
    text = """model { ssd { num_classes: 3
      image_resizer { fixed_shape_resizer { height: 256 width: 256 } }
      feature_extractor { type: "ssd_mobilenet_v1_fpn" depth_multiplier: 0.25 min_depth: 16
        conv_hyperparams { activation: RELU_6 batch_norm { epsilon: 0.001 scale: true } }
        override_base_feature_extractor_hyperparams: true
        fpn { min_level: 3 max_level: 7 } }
      box_coder { faster_rcnn_box_coder { } }
      box_predictor { weight_shared_convolutional_box_predictor {
        conv_hyperparams { activation: RELU_6 batch_norm { epsilon: 0.001 scale: true } }
        depth: 64 num_layers_before_predictor: 4 kernel_size: 3 class_prediction_bias_init: -4.6 } }
      anchor_generator { multiscale_anchor_generator { min_level: 3 max_level: 7 anchor_scale: 4.0
        aspect_ratios: 1.0 aspect_ratios: 2.0 aspect_ratios: 0.5 scales_per_octave: 2 } }
      post_processing { batch_non_max_suppression { score_threshold: 1e-8 } score_converter: SIGMOID }
    } }"""
    for a, b in repl.items():
        text = text.replace(a, b)
    return text


def test_family_defaults_follow_the_protos():
    """Fields a config leaves out take the proto defaults of the releases users' exports come from:
    the FPN block's levels 3..7 and depth 256, the weight-shared predictor's kernel 3, depth 0, no
    shared tower, the multiscale generator's levels 3..7, anchor scale 4, 2 scales per octave."""
    c = read_pipeline_config(_family(**{"fpn { min_level: 3 max_level: 7 }": "",
                                                  "kernel_size: 3": "", "min_level: 3 max_level: 7 anchor_scale: 4.0": "",
                                                  "scales_per_octave: 2": ""}))
    assert (c.fpn_min_level, c.fpn_max_level, c.fpn_additional_layer_depth) == (3, 7, 256)
    assert (c.box_predictor_kernel_size, c.share_prediction_tower, c.box_predictor_use_depthwise) == (3, False, False)
    assert (c.anchor_min_level, c.anchor_max_level, c.anchor_scale, c.scales_per_octave) == (3, 7, 4.0, 2)
    # No batch_norm in the predictor's conv_hyperparams: its tower convs have biases instead.
    no_bn = read_pipeline_config(_family(**{
        "conv_hyperparams { activation: RELU_6 batch_norm { epsilon: 0.001 scale: true } }\n        depth":
        "conv_hyperparams { activation: RELU_6 }\n        depth"}))
    assert no_bn.box_predictor_batch_norm is False
    assert read_pipeline_config(to_pipeline_config(no_bn)) == no_bn


# A field read off the file is named with its line (line 3: feature_extractor's, 6: its fpn block,
# 10: the box predictor's last line); a combination of fields without one line, by the fields.
@pytest.mark.parametrize("change, field", [
    ({'"ssd_mobilenet_v1_fpn"': '"ssd_mobilenet_v2_fpn"'}, "line 3: type: ssd_mobilenet_v2_fpn"),
    ({'"ssd_mobilenet_v1_fpn"': '"ssd_resnet50_v1_fpn"'}, "line 3: type: ssd_resnet50_v1_fpn"),
    ({"fpn { min_level: 3 max_level: 7 }": "bifpn { min_level: 3 max_level: 7 }"}, "line 6: bifpn"),
    ({'"ssd_mobilenet_v1_fpn"': '"ssd_mobilenet_v1_ppn"'}, "line 6: fpn: {...} — only ssd_mobilenet_v1_fpn takes it"),
    ({"min_level: 3 max_level: 7 }": "min_level: 1 max_level: 7 }"}, "feature_extractor.fpn"),
    ({"height: 256 width: 256": "height: 300 width: 300"}, "image size 300x300"),
    ({"class_prediction_bias_init: -4.6": "score_converter: SIGMOID"}, "line 10: score_converter: SIGMOID"),
    ({"class_prediction_bias_init: -4.6": "box_encodings_clip_range { min: -10 max: 10 }"},
     "box_encodings_clip_range"),
    ({"class_prediction_bias_init: -4.6": "box_code_size: 5"}, "box_code_size"),
    ({"kernel_size: 3": "kernel_size: 1 use_depthwise: true"}, "use_depthwise with kernel_size 1"),
    ({"scales_per_octave: 2": "scales_per_octave: 2 normalize_coordinates: false"}, "normalize_coordinates"),
    ({"aspect_ratios: 1.0 aspect_ratios: 2.0 aspect_ratios: 0.5": ""}, "aspect_ratios"),
    ({"min_level: 3 max_level: 7 anchor_scale": "min_level: 3 max_level: 6 anchor_scale"},
     "multiscale_anchor_generator: levels 3..6"),
    ({'"ssd_mobilenet_v1_fpn"': '"ssd_mobilenet_v1"', "fpn { min_level: 3 max_level: 7 }": ""},
     "weight_shared_convolutional_box_predictor on ssd_mobilenet_v1"),
    ({"multiscale_anchor_generator { min_level: 3 max_level: 7 anchor_scale: 4.0\n        aspect_ratios: 1.0 "
      "aspect_ratios: 2.0 aspect_ratios: 0.5 scales_per_octave: 2 }": "ssd_anchor_generator { num_layers: 6 }"},
     "ssd_anchor_generator.num_layers: 6 (ssd_mobilenet_v1_fpn has 5 feature maps)"),
])
def test_family_values_not_reproduced_are_refused_naming_the_field(change, field):
    text = _family(**change)
    assert text != _family()
    with pytest.raises(ConfigError, match=re.escape(field)):
        read_pipeline_config(text)


def test_quantization_of_fpn_is_refused():
    rewriter = "\ngraph_rewriter { quantization { weight_bits: 8 activation_bits: 8 } }"
    with pytest.raises(ConfigError, match="quantization with ssd_mobilenet_v1_fpn"):
        read_pipeline_config(_family() + rewriter)


def test_fpn_sizes_without_explicit_padding_must_halve_exactly():
    """Each level adds the level above upsampled x2: 300 gives 38, 19, 10 at levels 3..5 and the
    OD API cannot build the graph; explicit padding crops the upsampled map, and any size builds."""
    with pytest.raises(ConfigError, match="image size 300x300: FPN needs a multiple of 32"):
        read_pipeline_config(_family(**{"height: 256 width: 256": "height: 300 width: 300"}))
    padded = read_pipeline_config(_family(**{"height: 256 width: 256": "height: 300 width: 300",
                                                       "min_depth: 16": "min_depth: 16 use_explicit_padding: true"}))
    assert padded.image_height == 300
    # pad_to_multiple pads the image (inside the feature extractor) to a size that halves.
    assert read_pipeline_config(_family(**{"height: 256 width: 256": "height: 200 width: 200",
                                                     "min_depth: 16": "min_depth: 16 pad_to_multiple: 32"}))


def test_broken_text_is_a_config_error():
    with pytest.raises(ConfigError, match="text format"):
        read_pipeline_config("model { ssd { num_classes: 3 \n")


def test_pipeline_config_round_trip():
    c = read_pipeline_config(_minimal()).replace(use_explicit_padding=True, pad_to_multiple=32)
    again = read_pipeline_config(to_pipeline_config(c))
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
    assert read_pipeline_config(to_pipeline_config(c)) == c.replace(normalize_before_resize=False)
    with pytest.raises(ConfigError, match="normalize_before_resize: 'false'"):
        SSDConfig(normalize_before_resize="false")


def test_base_layers_keep_mobilenet_epsilon_unless_overridden():
    # OD API 2018+: the 14 MobileNet layers use mobilenet_v1_arg_scope's 0.001 and only the
    # extra layers take conv_hyperparams, unless override_base_feature_extractor_hyperparams.
    plain = read_pipeline_config(_minimal(**{"epsilon: 0.001": "epsilon: 0.01"}))
    assert plain.batch_norm_epsilon == pytest.approx(0.01) and plain.base_batch_norm_epsilon == pytest.approx(0.001)
    over = read_pipeline_config(_minimal(**{
        "epsilon: 0.001": "epsilon: 0.01", 'min_depth: 8': 'min_depth: 8 override_base_feature_extractor_hyperparams: true'}))
    assert over.base_batch_norm_epsilon == over.batch_norm_epsilon == pytest.approx(0.01)
    for config in (plain, over):
        assert read_pipeline_config(to_pipeline_config(config)) == config


def test_inputs_under_33_pixels_are_refused():
    """The OD API's feature extractor refuses them (test_extract_features_raises_error_with_invalid_image_size)."""
    with pytest.raises(ConfigError, match="at least 33x33"):
        SSDConfig(image_height=32, image_width=300)
    with pytest.raises(ConfigError, match="at least 33x33"):
        read_pipeline_config(_minimal(**{"fixed_shape_resizer { height: 200 width: 240 }":
                                                   "fixed_shape_resizer { height: 200 width: 20 }"}))
    assert SSDConfig(image_height=33, image_width=33).image_height == 33
