"""Writes an `SSDConfig` as the inference part of a TF1 Object Detection API `pipeline.config`.

`to_pipeline_config(config)` is the text `migrate convert` writes next to the model (and the TF1
builder next to its graph); `pipeline_reader.read_pipeline_config` reads it back as the same
`SSDConfig` (floats spelt by `float_text`, which read back as the same float32).
"""

from __future__ import annotations

from ssd_mobilenet.config.ssd_config import SSDConfig, f32, float_text
from ssd_mobilenet.config.type_names import CONVOLUTIONAL, MULTISCALE_ANCHORS, SSD_MOBILENET_V1_FPN
from ssd_mobilenet.errors import ConfigError


def to_pipeline_config(config: SSDConfig) -> str:
    """The inference-relevant part of a TF1 `pipeline.config` for `config`; floats in their
    shortest spelling (`float_text`), which reads back as the same float32."""
    f = float_text  # 0.6, not 0.6000000238418579: the shortest spelling of the same float32
    fe_extra = "      use_explicit_padding: true\n" if config.use_explicit_padding else ""
    fe_extra += "      use_depthwise: true\n" if config.use_depthwise else ""
    fe_extra += f"      pad_to_multiple: {config.pad_to_multiple}\n" if config.pad_to_multiple != 1 else ""
    if config.base_batch_norm_epsilon != f32(0.001):
        if config.base_batch_norm_epsilon != config.batch_norm_epsilon:
            # No pipeline.config expresses it.
            raise ConfigError(f"base_batch_norm_epsilon {config.base_batch_norm_epsilon}: neither 0.001 nor "
                              "batch_norm_epsilon")
        fe_extra += "      override_base_feature_extractor_hyperparams: true\n"
    if config.feature_extractor_type == SSD_MOBILENET_V1_FPN:
        fe_extra += (f"      fpn {{ min_level: {config.fpn_min_level} max_level: {config.fpn_max_level} "
                     f"additional_layer_depth: {config.fpn_additional_layer_depth} }}\n")
    ys, xs, hs, ws = config.box_coder_scales
    rewriter = ""
    if config.weight_bits:
        rewriter = (f"graph_rewriter {{\n  quantization {{\n    weight_bits: {config.weight_bits}\n"
                    f"    activation_bits: {config.activation_bits}\n  }}\n}}\n")
    return f"""model {{
  ssd {{
    num_classes: {config.num_classes}
    add_background_class: {str(config.add_background_class).lower()}
    image_resizer {{
      fixed_shape_resizer {{
        height: {config.image_height}
        width: {config.image_width}
        resize_method: {config.resize_method}
      }}
    }}
    feature_extractor {{
      type: "{config.feature_extractor_type}"
      depth_multiplier: {f(config.depth_multiplier)}
      min_depth: {config.min_depth}
{fe_extra}      conv_hyperparams {{
        activation: RELU_6
        regularizer {{ l2_regularizer {{ weight: 4e-05 }} }}
        initializer {{ truncated_normal_initializer {{ stddev: 0.03 }} }}
        batch_norm {{ decay: 0.9997 center: true scale: true epsilon: {f(config.batch_norm_epsilon)} }}
      }}
    }}
    box_coder {{
      faster_rcnn_box_coder {{ y_scale: {f(ys)} x_scale: {f(xs)} height_scale: {f(hs)} width_scale: {f(ws)} }}
    }}
    box_predictor {{
{_box_predictor_text(config, f)}    }}
    anchor_generator {{
{_anchor_generator_text(config, f)}    }}
    post_processing {{
      batch_non_max_suppression {{
        score_threshold: {f(config.score_threshold)}
        iou_threshold: {f(config.iou_threshold)}
        max_detections_per_class: {config.max_detections_per_class}
        max_total_detections: {config.max_total_detections}
      }}
      score_converter: {config.score_converter}
      logit_scale: {f(config.logit_scale)}
    }}
  }}
}}
{rewriter}"""


def _box_predictor_text(config: SSDConfig, f) -> str:
    """The `box_predictor` oneof of `to_pipeline_config` (`f` spells a float)."""
    batch_norm = (f"          batch_norm {{ decay: 0.9997 center: true scale: true "
                  f"epsilon: {f(config.box_predictor_batch_norm_epsilon)} }}\n")
    if config.box_predictor_type == CONVOLUTIONAL:
        return f"""      convolutional_box_predictor {{
        conv_hyperparams {{
          activation: RELU_6
          regularizer {{ l2_regularizer {{ weight: 4e-05 }} }}
          initializer {{ truncated_normal_initializer {{ stddev: 0.03 }} }}
{batch_norm}        }}
        num_layers_before_predictor: 0
        kernel_size: {config.box_predictor_kernel_size}
        box_code_size: 4
        use_depthwise: {str(config.box_predictor_use_depthwise).lower()}
      }}
"""
    return f"""      weight_shared_convolutional_box_predictor {{
        conv_hyperparams {{
          activation: RELU_6
          regularizer {{ l2_regularizer {{ weight: 4e-05 }} }}
          initializer {{ random_normal_initializer {{ mean: 0.0 stddev: 0.01 }} }}
{batch_norm if config.box_predictor_batch_norm else ""}        }}
        depth: {config.box_predictor_depth}
        num_layers_before_predictor: {config.box_predictor_num_layers_before_predictor}
        kernel_size: {config.box_predictor_kernel_size}
        box_code_size: 4
        class_prediction_bias_init: {f(config.class_prediction_bias_init)}
        use_dropout: {str(config.box_predictor_use_dropout).lower()}
        dropout_keep_probability: {f(config.dropout_keep_probability)}
        share_prediction_tower: {str(config.share_prediction_tower).lower()}
        use_depthwise: {str(config.box_predictor_use_depthwise).lower()}
      }}
"""


def _anchor_generator_text(config: SSDConfig, f) -> str:
    """The `anchor_generator` oneof of `to_pipeline_config` (`f` spells a float)."""
    ratios = "".join(f"        aspect_ratios: {f(r)}\n" for r in config.aspect_ratios)
    if config.anchor_generator_type == MULTISCALE_ANCHORS:
        return f"""      multiscale_anchor_generator {{
        min_level: {config.anchor_min_level}
        max_level: {config.anchor_max_level}
        anchor_scale: {f(config.anchor_scale)}
{ratios}        scales_per_octave: {config.scales_per_octave}
      }}
"""
    anchors = ratios + "".join(f"        scales: {f(s)}\n" for s in config.scales)
    for (hs, ws), (ho, wo) in zip(config.anchor_strides, config.anchor_offsets or [(None, None)] * config.num_layers):
        anchors += f"        height_stride: {hs}\n        width_stride: {ws}\n"
        if ho is not None:
            anchors += f"        height_offset: {ho}\n        width_offset: {wo}\n"
    if not config.reduce_boxes_in_lowest_layer:
        anchors += "        reduce_boxes_in_lowest_layer: false\n"
    if config.anchor_specs:
        anchors = ("        # The graph's anchors are explicit per-layer specs that no ssd_anchor_generator gives bit\n"
                   "        # for bit (model_config.json: anchor_specs); these are the nearest generator settings.\n"
                   + anchors)
    return f"""      ssd_anchor_generator {{
        num_layers: {config.num_layers}
        min_scale: {f(config.min_scale)}
        max_scale: {f(config.max_scale)}
{anchors}        interpolated_scale_aspect_ratio: {f(config.interpolated_scale_aspect_ratio)}
        base_anchor_height: {f(config.base_anchor_height)}
        base_anchor_width: {f(config.base_anchor_width)}
      }}
"""
