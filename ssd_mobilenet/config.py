"""`SSDConfig`: everything the SSD MobileNet v1 inference graph depends on.

`SSDConfig.from_pipeline_config` reads a TF1 Object Detection API `pipeline.config`, once it
has passed `pipeline_schema` (a field or value the OD API's messages do not declare raises
`ConfigError` with its line). Fields that only matter for training (losses, matcher, optimizer,
input readers) are ignored; settings this model cannot reproduce raise `ConfigError` naming the
field and its value.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import numpy as np

from ssd_mobilenet import pipeline_schema, pipeline_text
from ssd_mobilenet.errors import ConfigError
from ssd_mobilenet.pipeline_text import Scalar, TextMessage

# How the exporter's post-processing orders thresholding, clipping and NMS. It changed in
# the Object Detection API in mid 2018 and the pipeline.config does not record which one a
# graph has; `migrate` reads it off the graph (a `FilterGreaterThan` scope means the old one).
NMS_CLIP_BEFORE = "clip_before_nms"  # TF 1.3 .. ~1.8 exports: threshold, clip, drop empty, NMS
NMS_CLIP_AFTER = "clip_after_sort"  # ~1.9+ exports: NMS with threshold, sort, clip, drop empty
NMS_VARIANTS = (NMS_CLIP_BEFORE, NMS_CLIP_AFTER)

# Where the background column of the class predictions is dropped. Also changed between
# releases without a trace in pipeline.config: 2017 exports (TF 1.3, the 2017_11_17 zoo graph)
# slice the raw logits and convert the class columns alone; exports since the 2018_01_28 zoo
# graph convert all columns and slice the scores. With SOFTMAX the two differ (the background
# logit takes part in the normalisation or not); `migrate` reads it off the graph.
BACKGROUND_SLICE_LOGITS = "logits"  # slice, scale_logits, score converter (2017)
BACKGROUND_SLICE_SCORES = "scores"  # scale_logits, score converter, slice (2018+)
BACKGROUND_SLICES = (BACKGROUND_SLICE_LOGITS, BACKGROUND_SLICE_SCORES)
# The OD API's ssd_mobilenet_v1 feature extractor refuses smaller inputs (its
# `check_min_image_dim(33, ...)`): below it the last extra layers have no pixels left.
MIN_IMAGE_SIZE = 33

# The architecture, chosen as the OD API's builders choose it: `model_builder` picks the feature
# extractor class by `feature_extractor.type`, `box_predictor_builder` the predictor by the
# box_predictor oneof, `anchor_generator_builder` the generator by its oneof. Each name is a module of
# `ssd_mobilenet.feature_extractors`, `.box_predictors` and `.anchor_generators`.
SSD_MOBILENET_V1 = "ssd_mobilenet_v1"
SSD_MOBILENET_V1_FPN = "ssd_mobilenet_v1_fpn"
SSD_MOBILENET_V1_PPN = "ssd_mobilenet_v1_ppn"
FEATURE_EXTRACTORS = (SSD_MOBILENET_V1, SSD_MOBILENET_V1_FPN, SSD_MOBILENET_V1_PPN)
# `feature_extractor.type` values read as one of those: the OD API's Keras (TF2) builds of the same
# networks, which a pipeline.config names when written for TF2.
FEATURE_EXTRACTOR_ALIASES = {"ssd_mobilenet_v1_keras": SSD_MOBILENET_V1,
                             "ssd_mobilenet_v1_fpn_keras": SSD_MOBILENET_V1_FPN}
CONVOLUTIONAL = "convolutional_box_predictor"
WEIGHT_SHARED = "weight_shared_convolutional_box_predictor"
BOX_PREDICTORS = (CONVOLUTIONAL, WEIGHT_SHARED)
SSD_ANCHORS = "ssd_anchor_generator"
MULTISCALE_ANCHORS = "multiscale_anchor_generator"
ANCHOR_GENERATORS = (SSD_ANCHORS, MULTISCALE_ANCHORS)
# FPN levels 2..5 are MobileNet layers (`fpn_min_level`'s valid values in the OD API); levels above
# 5 are bottom-up convs. Level l has stride 2^l.
FPN_BASE_LEVELS = (2, 3, 4, 5)

SCORE_CONVERTERS = ("SIGMOID", "SOFTMAX", "IDENTITY")
RESIZE_METHODS = ("BILINEAR", "NEAREST_NEIGHBOR", "BICUBIC", "AREA")


def _f32(x) -> float:
    """The value a float proto field holds: the float32 nearest to the spelled number."""
    return float(np.float32(x))


def float_text(x) -> str:
    """A float as a person writes it: the shortest decimal that reads back as the same value.

    A proto `float` field holds a float32, which SSDConfig keeps as a Python float
    (0.6000000238418579 for `iou_threshold: 0.6`); such a value is spelled as the shortest
    decimal whose float32 is it (numpy's float32 repr: `0.6`, `1e-08`, `0.3333`), so written
    and read back it is the same float32. Any other float gets Python's shortest (`repr`).
    """
    x = float(x)
    single = np.float32(x)
    return str(single) if float(single) == x else repr(x)


@dataclass(frozen=True)
class SSDConfig:
    """Hyper-parameters of an SSD MobileNet v1 inference graph.

    Floats that the TF1 graph holds as float32 proto fields are stored as the float32
    value (e.g. `score_threshold=0.300000011920929`), so arithmetic on them reproduces
    the graph's constants.
    """

    num_classes: int = 90
    image_height: int = 300
    image_width: int = 300
    resize_method: str = "BILINEAR"
    # Feature extractor (`feature_extractor.type`, one of FEATURE_EXTRACTORS) and, for
    # ssd_mobilenet_v1_fpn, its pyramid (`feature_extractor.fpn`): levels fpn_min_level ..
    # fpn_max_level (stride 2^level), each of depth(fpn_additional_layer_depth) channels.
    feature_extractor_type: str = SSD_MOBILENET_V1
    fpn_min_level: int = 3
    fpn_max_level: int = 7
    fpn_additional_layer_depth: int = 256
    depth_multiplier: float = 1.0
    min_depth: int = 16
    pad_to_multiple: int = 1
    use_explicit_padding: bool = False
    use_depthwise: bool = False
    batch_norm_epsilon: float = _f32(0.001)  # the extra layers' (feature_extractor.conv_hyperparams)
    # The 14 MobileNet layers' epsilon: exports since 2018 build them under slim's
    # mobilenet_v1_arg_scope (0.001) unless `override_base_feature_extractor_hyperparams`;
    # 2017 exports used conv_hyperparams. `migrate` reads both off the graph when it has one.
    base_batch_norm_epsilon: float = _f32(0.001)
    box_predictor_batch_norm_epsilon: float = _f32(0.001)  # depthwise predictor's BN
    # TF >= 1.9 (and some earlier) exports use the FusedBatchNorm kernel, whose rounding
    # differs from the unfused op sequence at ~1e-6 relative; reproduce whichever the graph has.
    fused_batch_norm: bool = False
    # OD API exports of 2017 (TF 1.3 era) zero-pad the input of every extra 3x3 stride-2
    # layer at the bottom/right to an even size (`ops.pad_to_multiple(x, 2)`) before the
    # SAME conv, which shifts the sampling grid for odd sizes (5x5 -> 3x3 maps). Not in
    # pipeline.config; `migrate` reads it off the graph.
    pad_extra_layers_to_even: bool = False
    # Preprocessing order. Exports up to ~2019 resize the uint8-valued image (cast to float32),
    # then scale it to [-1, 1]; later OD API code (`ssd_meta_arch.preprocess` normalizes first)
    # scales the full-size image and resizes the scaled one. The two round differently (up to
    # ~2.4e-7 after scaling for BILINEAR), so reproduce the graph's. Not in pipeline.config;
    # `migrate` reads it off the graph (whether the resize map reads `Preprocessor/sub`).
    normalize_before_resize: bool = False
    # Box predictor (`box_predictor` oneof, one of BOX_PREDICTORS): its heads' kernel size
    # (convolutional_box_predictor's default 1, weight_shared's 3) and depthwise convs.
    box_predictor_type: str = CONVOLUTIONAL
    box_predictor_kernel_size: int = 1
    box_predictor_use_depthwise: bool = False
    # weight_shared_convolutional_box_predictor: `num_layers_before_predictor` convs of `depth`
    # channels and the heads' kernel size, then ReLU6 (weights shared by every feature map),
    # before each head, one tower for both heads with share_prediction_tower; batch norm per
    # feature map when its conv_hyperparams has batch_norm (apply_batch_norm), biases otherwise.
    # The class head's bias init and dropout matter for training only (dropout is the identity at
    # inference).
    box_predictor_depth: int = 0
    box_predictor_num_layers_before_predictor: int = 0
    box_predictor_batch_norm: bool = True
    share_prediction_tower: bool = False
    class_prediction_bias_init: float = 0.0
    box_predictor_use_dropout: bool = False
    dropout_keep_probability: float = _f32(0.8)
    add_background_class: bool = True
    background_slice: str = BACKGROUND_SLICE_SCORES
    # Anchors (`anchor_generator` oneof, one of ANCHOR_GENERATORS). aspect_ratios is both
    # generators'; the rest of this block is ssd_anchor_generator's.
    anchor_generator_type: str = SSD_ANCHORS
    num_layers: int = 6
    min_scale: float = _f32(0.2)
    max_scale: float = _f32(0.95)
    scales: tuple = ()
    aspect_ratios: tuple = (1.0, 2.0, 0.5, 3.0, _f32(0.3333))
    interpolated_scale_aspect_ratio: float = 1.0
    base_anchor_height: float = 1.0
    base_anchor_width: float = 1.0
    anchor_strides: tuple = ()  # ((height_stride, width_stride), ...) in pixels, or () for 1/grid
    anchor_offsets: tuple = ()
    reduce_boxes_in_lowest_layer: bool = True
    # The graph's own per-layer ((scale, aspect_ratio), ...) anchor specs, when no setting of the
    # fields above gives them bit for bit (a writer that rounded the interpolated scales to four
    # decimals: 0.4183 where sqrt(s_i * s_i+1) is 0.41833001); () derives them from those fields.
    # Not in pipeline.config (which gets the nearest generator settings); model_config.json keeps them.
    anchor_specs: tuple = ()
    # 2017 exports (TF 1.3 era) place the interpolated-scale anchor right after each 1.0
    # aspect ratio instead of last; the box predictor's channel order follows it.
    # Not in pipeline.config; `migrate` reads it off the graph's anchors.
    interpolated_anchor_after_unit_ratio: bool = False
    # multiscale_anchor_generator: levels anchor_min_level .. anchor_max_level, one per feature
    # map; at level l anchors every 2^l pixels, of size anchor_scale * 2^l * 2^(k / scales_per_octave)
    # (k < scales_per_octave) for each aspect ratio, in pixels normalised by the image size.
    anchor_min_level: int = 3
    anchor_max_level: int = 7
    anchor_scale: float = 4.0
    scales_per_octave: int = 2
    # Box coder (faster_rcnn_box_coder): [ty, tx, th, tw] divided by these.
    box_coder_scales: tuple = (10.0, 10.0, 5.0, 5.0)
    # Post-processing.
    score_converter: str = "SIGMOID"
    logit_scale: float = 1.0
    score_threshold: float = _f32(1e-8)
    iou_threshold: float = _f32(0.6)
    max_detections_per_class: int = 100
    max_total_detections: int = 100
    nms_variant: str = NMS_CLIP_BEFORE
    # Quantization-aware training (`graph_rewriter.quantization`): 0 for a float graph, else
    # the bits of the FakeQuant ops on every layer's folded weights and on its output.
    weight_bits: int = 0
    activation_bits: int = 0

    def __post_init__(self):
        problems = []
        if self.num_classes < 1:
            problems.append(f"num_classes must be >= 1, got {self.num_classes}")
        if self.image_height < MIN_IMAGE_SIZE or self.image_width < MIN_IMAGE_SIZE:
            # The OD API's feature extractor refuses smaller inputs.
            problems.append(f"image size {self.image_height}x{self.image_width}: at least "
                            f"{MIN_IMAGE_SIZE}x{MIN_IMAGE_SIZE}")
        if self.pad_to_multiple < 1:
            problems.append(f"pad_to_multiple must be >= 1, got {self.pad_to_multiple}")
        if self.depth_multiplier <= 0:
            problems.append(f"depth_multiplier must be > 0, got {self.depth_multiplier}")
        problems += self._architecture_problems()
        if self.score_converter not in SCORE_CONVERTERS:
            problems.append(f"score_converter: {self.score_converter} (supported: {', '.join(SCORE_CONVERTERS)})")
        if self.resize_method not in RESIZE_METHODS:
            problems.append(f"resize_method: {self.resize_method} (supported: {', '.join(RESIZE_METHODS)})")
        if self.background_slice not in BACKGROUND_SLICES:
            problems.append(f"background_slice: {self.background_slice} (one of {', '.join(BACKGROUND_SLICES)})")
        if not isinstance(self.normalize_before_resize, bool):
            # A JSON/str "false" would be truthy: say so rather than build the other order.
            problems.append(f"normalize_before_resize: {self.normalize_before_resize!r} (true or false)")
        if self.nms_variant not in NMS_VARIANTS:
            problems.append(f"nms_variant: {self.nms_variant} (one of {', '.join(NMS_VARIANTS)})")
        if self.scales and len(self.scales) != self.num_layers:
            problems.append(f"{SSD_ANCHORS}.scales: {len(self.scales)} values for {self.num_layers} layers")
        if len(self.anchor_strides) not in (0, self.num_layers) or len(self.anchor_offsets) not in (0, self.num_layers):
            problems.append(f"{SSD_ANCHORS}: strides and offsets need one value per layer")
        if self.anchor_specs and (len(self.anchor_specs) != self.num_layers or not all(
                layer and all(len(pair) == 2 and min(pair) > 0 for pair in layer) for layer in self.anchor_specs)):
            problems.append(f"anchor_specs: {len(self.anchor_specs)} layers of (scale, aspect_ratio) > 0, not "
                            f"{self.num_layers}")
        if len(self.box_coder_scales) != 4 or min(self.box_coder_scales) <= 0:
            problems.append(f"box_coder.faster_rcnn_box_coder scales: {self.box_coder_scales}")
        bits_ok = lambda b: b == 0 or 2 <= b <= 16  # noqa: E731  (FakeQuant's num_bits range)
        if bool(self.weight_bits) != bool(self.activation_bits) or not (
                bits_ok(self.weight_bits) and bits_ok(self.activation_bits)):
            problems.append(f"quantization: weight_bits {self.weight_bits}, activation_bits "
                            f"{self.activation_bits} (both 2..16, or neither)")
        if self.weight_bits and self.feature_extractor_type != SSD_MOBILENET_V1:
            # No quantization-aware graph of it to prove the conversion against.
            problems.append(f"quantization with {self.feature_extractor_type} is not supported")
        if self.weight_bits and (self.use_depthwise or self.box_predictor_use_depthwise):
            # contrib.quantize's rewrite of these layers has no reference graph here to prove it against.
            problems.append("quantization with use_depthwise is not supported")
        if problems:
            raise ConfigError("; ".join(problems))

    def _architecture_problems(self) -> list:
        """What the feature extractor, box predictor and anchor generator settings cannot build
        together, as the OD API's builders would refuse it (or fail building the graph)."""
        problems = []
        fe, fe_path = self.feature_extractor_type, "feature_extractor"
        if fe not in FEATURE_EXTRACTORS:
            return [f"{fe_path}.type: {fe} (only {SSD_MOBILENET_V1}(_fpn, _ppn))"]
        if fe == SSD_MOBILENET_V1_FPN:
            if self.fpn_min_level not in FPN_BASE_LEVELS or self.fpn_max_level < self.fpn_min_level:
                problems.append(f"{fe_path}.fpn: min_level {self.fpn_min_level}, max_level {self.fpn_max_level} "
                                f"(min_level {FPN_BASE_LEVELS[0]}..{FPN_BASE_LEVELS[-1]}, max_level >= min_level)")
            elif not self.use_explicit_padding:
                problems += self._fpn_size_problems()
            if self.fpn_additional_layer_depth < 1:
                problems.append(f"{fe_path}.fpn.additional_layer_depth: {self.fpn_additional_layer_depth}")
        maps = self.num_feature_maps
        bp = self.box_predictor_type
        if bp not in BOX_PREDICTORS:
            problems.append(f"box_predictor: {bp} (not supported)")
        elif bp == WEIGHT_SHARED:
            if fe == SSD_MOBILENET_V1:
                # Its maps differ in depth: the OD API inserts projection layers, not reproduced here
                # (it is supported with FPN's and PPN's maps).
                problems.append(f"{WEIGHT_SHARED} on {fe} is not supported")
            if self.box_predictor_num_layers_before_predictor < 0 or (
                    self.box_predictor_num_layers_before_predictor and self.box_predictor_depth < 1):
                problems.append(f"num_layers_before_predictor {self.box_predictor_num_layers_before_predictor} "
                                f"of depth {self.box_predictor_depth}")
            if self.box_predictor_use_depthwise and self.box_predictor_kernel_size == 1:
                problems.append("box predictor: use_depthwise with kernel_size 1 (the OD API refuses it)")
        if self.box_predictor_kernel_size < 1:
            problems.append(f"box_predictor kernel_size: {self.box_predictor_kernel_size}")
        ag = self.anchor_generator_type
        if ag not in ANCHOR_GENERATORS:
            problems.append(f"anchor_generator: {ag} (not supported)")
        elif ag == SSD_ANCHORS and self.num_layers != maps:
            problems.append(f"{SSD_ANCHORS}.num_layers: {self.num_layers} ({fe} has {maps} feature maps)")
        elif ag == MULTISCALE_ANCHORS:
            levels = self.anchor_max_level - self.anchor_min_level + 1
            if self.anchor_min_level < 0 or levels != maps:
                problems.append(f"{MULTISCALE_ANCHORS}: levels {self.anchor_min_level}..{self.anchor_max_level} for "
                                f"{maps} feature maps")
            if not self.aspect_ratios or self.scales_per_octave < 1 or self.anchor_scale <= 0:
                # Anchors need at least one aspect ratio and scale.
                problems.append(f"aspect_ratios {list(self.aspect_ratios)}, scales_per_octave {self.scales_per_octave}, "
                                f"anchor_scale {self.anchor_scale}: no anchors")
            if self.anchor_specs:
                problems.append(f"anchor_specs are {SSD_ANCHORS}'s, not {MULTISCALE_ANCHORS}'s")
        if bp == WEIGHT_SHARED and not problems and len(set(self.anchors_per_location())) > 1:
            # It shares its layers across the feature maps: one anchor count at each.
            problems.append(f"weight-shared box predictor: anchors per location {self.anchors_per_location()} differ")
        return problems

    def _fpn_size_problems(self) -> list:
        """FPN adds each level's projection to the level above upsampled x2: without explicit
        padding (which slices the upsampled map) the sizes must halve exactly up to level 5, or the
        OD API cannot build the graph."""
        h = -(-self.image_height // self.pad_to_multiple) * self.pad_to_multiple
        w = -(-self.image_width // self.pad_to_multiple) * self.pad_to_multiple
        top = min(self.fpn_max_level, FPN_BASE_LEVELS[-1])
        sizes = {level: (-(-h // 2 ** level), -(-w // 2 ** level)) for level in range(self.fpn_min_level, top + 1)}
        for level in range(self.fpn_min_level, top):
            if sizes[level] != (2 * sizes[level + 1][0], 2 * sizes[level + 1][1]):
                # Level `level` is not twice level + 1 (19x19 and 10x10 at levels 4, 5 for 300x300).
                return [f"image size {self.image_height}x{self.image_width}: FPN needs a multiple of {2 ** top} "
                        "(or use_explicit_padding)"]
        return []

    # ---- derived quantities -------------------------------------------------------------

    @property
    def num_feature_maps(self) -> int:
        """Feature maps the feature extractor gives: 6, or FPN's levels."""
        if self.feature_extractor_type == SSD_MOBILENET_V1_FPN:
            return self.fpn_max_level - self.fpn_min_level + 1
        return 6

    @property
    def num_class_slots(self) -> int:
        """Columns of the class predictor: the classes plus background (column 0) if any."""
        return self.num_classes + (1 if self.add_background_class else 0)

    def depth(self, d: float) -> int:
        """Channels of a layer whose depth is `d` at multiplier 1 (slim's `depth` function)."""
        return max(int(d * self.depth_multiplier), self.min_depth)

    def anchors_per_location(self) -> list:
        """Anchors per feature map cell, per feature map: [3, 6, 6, 6, 6, 6] for the zoo config."""
        from ssd_mobilenet import anchor_generators
        return anchor_generators.anchors_per_location(self)

    def replace(self, **changes) -> "SSDConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "SSDConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"unknown SSDConfig fields: {', '.join(unknown)}")
        def frozen(value):  # JSON lists back to the tuples the fields hold, nested ones too
            return tuple(frozen(x) for x in value) if isinstance(value, list) else value
        return cls(**{k: frozen(v) for k, v in d.items()})

    # ---- pipeline.config -------------------------------------------------------------------

    @classmethod
    def from_pipeline_config(cls, path_or_text: str) -> "SSDConfig":
        """Reads a TF1 OD API `pipeline.config` (a file path or its text).

        Raises:
          ConfigError: naming the field and value the model cannot honour, a field or value the OD
            API's messages do not declare (with its line), or the parse error.
        """
        return _PipelineReader(parse_pipeline_config(path_or_text)).config()

    def to_pipeline_config(self) -> str:
        """The inference-relevant part of a TF1 `pipeline.config` for this config; floats in their
        shortest spelling (`float_text`), which reads back as the same float32."""
        f = float_text  # 0.6, not 0.6000000238418579: the shortest spelling of the same float32
        fe_extra = "      use_explicit_padding: true\n" if self.use_explicit_padding else ""
        fe_extra += "      use_depthwise: true\n" if self.use_depthwise else ""
        fe_extra += f"      pad_to_multiple: {self.pad_to_multiple}\n" if self.pad_to_multiple != 1 else ""
        if self.base_batch_norm_epsilon != _f32(0.001):
            if self.base_batch_norm_epsilon != self.batch_norm_epsilon:
                # No pipeline.config expresses it.
                raise ConfigError(f"base_batch_norm_epsilon {self.base_batch_norm_epsilon}: neither 0.001 nor "
                                  "batch_norm_epsilon")
            fe_extra += "      override_base_feature_extractor_hyperparams: true\n"
        if self.feature_extractor_type == SSD_MOBILENET_V1_FPN:
            fe_extra += (f"      fpn {{ min_level: {self.fpn_min_level} max_level: {self.fpn_max_level} "
                         f"additional_layer_depth: {self.fpn_additional_layer_depth} }}\n")
        ys, xs, hs, ws = self.box_coder_scales
        rewriter = ""
        if self.weight_bits:
            rewriter = (f"graph_rewriter {{\n  quantization {{\n    weight_bits: {self.weight_bits}\n"
                        f"    activation_bits: {self.activation_bits}\n  }}\n}}\n")
        return f"""model {{
  ssd {{
    num_classes: {self.num_classes}
    add_background_class: {str(self.add_background_class).lower()}
    image_resizer {{
      fixed_shape_resizer {{
        height: {self.image_height}
        width: {self.image_width}
        resize_method: {self.resize_method}
      }}
    }}
    feature_extractor {{
      type: "{self.feature_extractor_type}"
      depth_multiplier: {f(self.depth_multiplier)}
      min_depth: {self.min_depth}
{fe_extra}      conv_hyperparams {{
        activation: RELU_6
        regularizer {{ l2_regularizer {{ weight: 4e-05 }} }}
        initializer {{ truncated_normal_initializer {{ stddev: 0.03 }} }}
        batch_norm {{ decay: 0.9997 center: true scale: true epsilon: {f(self.batch_norm_epsilon)} }}
      }}
    }}
    box_coder {{
      faster_rcnn_box_coder {{ y_scale: {f(ys)} x_scale: {f(xs)} height_scale: {f(hs)} width_scale: {f(ws)} }}
    }}
    box_predictor {{
{self._box_predictor_text(f)}    }}
    anchor_generator {{
{self._anchor_generator_text(f)}    }}
    post_processing {{
      batch_non_max_suppression {{
        score_threshold: {f(self.score_threshold)}
        iou_threshold: {f(self.iou_threshold)}
        max_detections_per_class: {self.max_detections_per_class}
        max_total_detections: {self.max_total_detections}
      }}
      score_converter: {self.score_converter}
      logit_scale: {f(self.logit_scale)}
    }}
  }}
}}
{rewriter}"""

    def _box_predictor_text(self, f) -> str:
        """The `box_predictor` oneof of `to_pipeline_config` (`f` spells a float)."""
        batch_norm = (f"          batch_norm {{ decay: 0.9997 center: true scale: true "
                      f"epsilon: {f(self.box_predictor_batch_norm_epsilon)} }}\n")
        if self.box_predictor_type == CONVOLUTIONAL:
            return f"""      convolutional_box_predictor {{
        conv_hyperparams {{
          activation: RELU_6
          regularizer {{ l2_regularizer {{ weight: 4e-05 }} }}
          initializer {{ truncated_normal_initializer {{ stddev: 0.03 }} }}
{batch_norm}        }}
        num_layers_before_predictor: 0
        kernel_size: {self.box_predictor_kernel_size}
        box_code_size: 4
        use_depthwise: {str(self.box_predictor_use_depthwise).lower()}
      }}
"""
        return f"""      weight_shared_convolutional_box_predictor {{
        conv_hyperparams {{
          activation: RELU_6
          regularizer {{ l2_regularizer {{ weight: 4e-05 }} }}
          initializer {{ random_normal_initializer {{ mean: 0.0 stddev: 0.01 }} }}
{batch_norm if self.box_predictor_batch_norm else ""}        }}
        depth: {self.box_predictor_depth}
        num_layers_before_predictor: {self.box_predictor_num_layers_before_predictor}
        kernel_size: {self.box_predictor_kernel_size}
        box_code_size: 4
        class_prediction_bias_init: {f(self.class_prediction_bias_init)}
        use_dropout: {str(self.box_predictor_use_dropout).lower()}
        dropout_keep_probability: {f(self.dropout_keep_probability)}
        share_prediction_tower: {str(self.share_prediction_tower).lower()}
        use_depthwise: {str(self.box_predictor_use_depthwise).lower()}
      }}
"""

    def _anchor_generator_text(self, f) -> str:
        """The `anchor_generator` oneof of `to_pipeline_config` (`f` spells a float)."""
        ratios = "".join(f"        aspect_ratios: {f(r)}\n" for r in self.aspect_ratios)
        if self.anchor_generator_type == MULTISCALE_ANCHORS:
            return f"""      multiscale_anchor_generator {{
        min_level: {self.anchor_min_level}
        max_level: {self.anchor_max_level}
        anchor_scale: {f(self.anchor_scale)}
{ratios}        scales_per_octave: {self.scales_per_octave}
      }}
"""
        anchors = ratios + "".join(f"        scales: {f(s)}\n" for s in self.scales)
        for (hs, ws), (ho, wo) in zip(self.anchor_strides, self.anchor_offsets or [(None, None)] * self.num_layers):
            anchors += f"        height_stride: {hs}\n        width_stride: {ws}\n"
            if ho is not None:
                anchors += f"        height_offset: {ho}\n        width_offset: {wo}\n"
        if not self.reduce_boxes_in_lowest_layer:
            anchors += "        reduce_boxes_in_lowest_layer: false\n"
        if self.anchor_specs:
            anchors = ("        # The graph's anchors are explicit per-layer specs that no ssd_anchor_generator gives bit\n"
                       "        # for bit (model_config.json: anchor_specs); these are the nearest generator settings.\n"
                       + anchors)
        return f"""      ssd_anchor_generator {{
        num_layers: {self.num_layers}
        min_scale: {f(self.min_scale)}
        max_scale: {f(self.max_scale)}
{anchors}        interpolated_scale_aspect_ratio: {f(self.interpolated_scale_aspect_ratio)}
        base_anchor_height: {f(self.base_anchor_height)}
        base_anchor_width: {f(self.base_anchor_width)}
      }}
"""


def parse_pipeline_config(path_or_text: str) -> TextMessage:
    """The parsed tree of a `pipeline.config` (a file path or its text), checked against the
    OD API's messages (`pipeline_schema`) before anything reads a value from it.

    Raises:
      ConfigError: the file cannot be read, is not protobuf text format, or holds a field or
        value its message does not declare (with its `line`).
    """
    text = path_or_text
    if "\n" not in path_or_text and os.path.exists(path_or_text):
        try:
            with open(path_or_text, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read: {e}") from None
    try:
        root = pipeline_text.parse(text)
    except ConfigError as e:
        raise ConfigError(f"text format: {e.problem}", e.line) from None
    pipeline_schema.check(root)
    return root


class _PipelineReader:
    """Turns the `model.ssd` part of a parsed pipeline.config into an `SSDConfig`."""

    def __init__(self, root: TextMessage):
        self.root = root

    def fail(self, field_path: str, value, why: str):
        """Refuses `value` of the field `field_path` (dotted, from the top level) at its line:
        `NAME: VALUE — WHY` (`_located`)."""
        line, name = self._located(field_path)
        raise ConfigError(f"{name}: {value} — {why}", line)

    def missing(self, field_path: str):
        """Refuses a config without the field `field_path`, at the line of the block that lacks it."""
        line, name = self._located(field_path)
        raise ConfigError(f"{name} is missing", line)

    def _located(self, field_path: str) -> tuple:
        """(line, name) for a message about the field `field_path`: the line its last value is
        on and its own name (the line says which block it is in: a dotted path from the top level
        runs past a console line); for a field not written, the line of the block that lacks it
        and the names from there (`conv_hyperparams.batch_norm`). Line 0: not in the file."""
        node, line, names = self.root, 0, field_path.split(".")
        for i, name in enumerate(names):
            values = node.get(name) if isinstance(node, TextMessage) else None
            if not values:
                return line, ".".join(names[i:])
            node = values[-1]
            line = getattr(node, "line", 0) or line
        return line, names[-1]

    def get(self, msg, name, path, kind, default):
        value = msg.scalar(name) if msg is not None else None
        if value is None:
            return default
        text = value.text if isinstance(value, Scalar) else value
        try:
            if kind is float:
                return _f32(float(text.rstrip("fF")))
            if kind is int:
                return int(text, 0)
            if kind is bool:
                if text in ("true", "True", "t", "1"):
                    return True
                if text in ("false", "False", "f", "0"):
                    return False
                raise ValueError(text)
            return str(text)
        except ValueError:
            self.fail(f"{path}.{name}", text, f"expected a {kind.__name__}")

    def config(self) -> SSDConfig:
        model = self.root.child("model")
        if model is None:
            raise ConfigError("no `model { ... }` block: not an Object Detection API pipeline.config")
        arch, ssd = model.oneof(("ssd", "faster_rcnn", "center_net", "experimental_model"))
        if arch != "ssd":
            self.fail("model", arch or "(empty)", "only SSD models are supported")
        c = {}
        get = self.get
        c["num_classes"] = get(ssd, "num_classes", "model.ssd", int, None)
        if c["num_classes"] is None:
            self.missing("model.ssd.num_classes")
        c["add_background_class"] = get(ssd, "add_background_class", "model.ssd", bool, True)
        self._resizer(ssd, c)
        self._feature_extractor(ssd, c)
        self._box_predictor(ssd, c)
        self._anchors(ssd, c)
        self._box_coder(ssd, c)
        self._post_processing(ssd, c)
        self._quantization(c)
        return SSDConfig(**c)

    def _quantization(self, c):
        rewriter = self.root.child("graph_rewriter")
        q = rewriter.child("quantization") if rewriter is not None else None
        if q is None:
            return
        p = "graph_rewriter.quantization"
        c["weight_bits"] = self.get(q, "weight_bits", p, int, 8)
        c["activation_bits"] = self.get(q, "activation_bits", p, int, 8)
        if self.get(q, "symmetric", p, bool, False):
            self.fail(f"{p}.symmetric", "true", "contrib.quantize's asymmetric ranges only")

    def _resizer(self, ssd, c):
        resizer = ssd.child("image_resizer")
        kind, r = resizer.oneof(("fixed_shape_resizer", "keep_aspect_ratio_resizer", "identity_resizer",
                                 "conditional_shape_resizer", "pad_to_multiple_resizer")) if resizer else (None, None)
        if kind != "fixed_shape_resizer":
            self.fail("model.ssd.image_resizer", kind or "(missing)", "only fixed_shape_resizer")
        p = "model.ssd.image_resizer.fixed_shape_resizer"
        c["image_height"] = self.get(r, "height", p, int, 300)
        c["image_width"] = self.get(r, "width", p, int, 300)
        c["resize_method"] = self.get(r, "resize_method", p, str, "BILINEAR")
        if c["resize_method"] not in RESIZE_METHODS:
            self.fail(f"{p}.resize_method", c["resize_method"], "unsupported resize method")
        if self.get(r, "convert_to_grayscale", p, bool, False):
            self.fail(f"{p}.convert_to_grayscale", "true", "not supported")

    def _check_hyperparams(self, hp, path):
        if hp is None:
            return
        activation = self.get(hp, "activation", path, str, "RELU")
        if activation != "RELU_6":
            self.fail(f"{path}.activation", activation, "SSD MobileNet v1 layers use RELU_6")
        bn = hp.child("batch_norm")
        if bn is None:
            self.fail(f"{path}.batch_norm", "(missing)", "the feature extractor needs batch norm")
        for flag in ("center", "scale"):
            if not self.get(bn, flag, f"{path}.batch_norm", bool, flag == "center"):
                self.fail(f"{path}.batch_norm.{flag}", "false", "batch norm without beta/gamma is not supported")

    def _feature_extractor(self, ssd, c):
        p = "model.ssd.feature_extractor"
        fe = ssd.child("feature_extractor")
        if fe is None:
            self.missing(p)
        kind = self.get(fe, "type", p, str, "")
        kind = FEATURE_EXTRACTOR_ALIASES.get(kind, kind)
        if kind not in FEATURE_EXTRACTORS:
            self.fail(f"{p}.type", kind or "(missing)", f"only {SSD_MOBILENET_V1}(_fpn, _ppn)")
        c["feature_extractor_type"] = kind
        c["depth_multiplier"] = self.get(fe, "depth_multiplier", p, float, 1.0)
        c["min_depth"] = self.get(fe, "min_depth", p, int, 16)
        c["pad_to_multiple"] = self.get(fe, "pad_to_multiple", p, int, 1)
        c["use_explicit_padding"] = self.get(fe, "use_explicit_padding", p, bool, False)
        c["use_depthwise"] = self.get(fe, "use_depthwise", p, bool, False)
        if fe.child("bifpn") is not None:
            self.fail(f"{p}.bifpn", "{...}", "BiFPN is not supported")
        fpn = fe.child("fpn")
        if fpn is not None and kind != SSD_MOBILENET_V1_FPN:
            # model_builder passes the fpn settings to the feature extractor, whose class then refuses them.
            self.fail(f"{p}.fpn", "{...}", f"only {SSD_MOBILENET_V1_FPN} takes it")
        # FeaturePyramidNetworks' proto defaults, which are also the FPN extractor's without an fpn block.
        c["fpn_min_level"] = self.get(fpn, "min_level", f"{p}.fpn", int, 3)
        c["fpn_max_level"] = self.get(fpn, "max_level", f"{p}.fpn", int, 7)
        c["fpn_additional_layer_depth"] = self.get(fpn, "additional_layer_depth", f"{p}.fpn", int, 256)
        hp = fe.child("conv_hyperparams")
        self._check_hyperparams(hp, f"{p}.conv_hyperparams")
        bn = hp.child("batch_norm") if hp is not None else None
        c["batch_norm_epsilon"] = self.get(bn, "epsilon", f"{p}.conv_hyperparams.batch_norm", float, _f32(0.001))
        override = self.get(fe, "override_base_feature_extractor_hyperparams", p, bool, False)
        c["base_batch_norm_epsilon"] = c["batch_norm_epsilon"] if override else _f32(0.001)

    def _box_predictor(self, ssd, c):
        bp = ssd.child("box_predictor")
        kind, cbp = bp.oneof(BOX_PREDICTORS + ("mask_rcnn_box_predictor", "rfcn_box_predictor")) if bp else (None, None)
        if kind not in BOX_PREDICTORS:
            self.fail("model.ssd.box_predictor", kind or "(missing)", "not supported")
        c["box_predictor_type"] = kind
        if kind == WEIGHT_SHARED:
            self._weight_shared_box_predictor(cbp, c)
            return
        p = "model.ssd.box_predictor.convolutional_box_predictor"
        layers = self.get(cbp, "num_layers_before_predictor", p, int, 0)
        if layers != 0:
            self.fail(f"{p}.num_layers_before_predictor", layers, "only 0 is supported")
        code_size = self.get(cbp, "box_code_size", p, int, 4)
        if code_size != 4:
            self.fail(f"{p}.box_code_size", code_size, "faster_rcnn_box_coder codes have 4 values")
        if self.get(cbp, "apply_sigmoid_to_scores", p, bool, False):
            self.fail(f"{p}.apply_sigmoid_to_scores", "true", "not supported")
        c["box_predictor_kernel_size"] = self.get(cbp, "kernel_size", p, int, 1)
        c["box_predictor_use_depthwise"] = self.get(cbp, "use_depthwise", p, bool, False)
        if c["box_predictor_use_depthwise"]:
            self._check_hyperparams(cbp.child("conv_hyperparams"), f"{p}.conv_hyperparams")
            bn = cbp.child("conv_hyperparams").child("batch_norm")
            c["box_predictor_batch_norm_epsilon"] = self.get(bn, "epsilon", f"{p}.conv_hyperparams.batch_norm",
                                                             float, _f32(0.001))

    def _weight_shared_box_predictor(self, wsp, c):
        p = f"model.ssd.box_predictor.{WEIGHT_SHARED}"
        c["box_predictor_depth"] = self.get(wsp, "depth", p, int, 0)
        c["box_predictor_num_layers_before_predictor"] = self.get(wsp, "num_layers_before_predictor", p, int, 0)
        c["box_predictor_kernel_size"] = self.get(wsp, "kernel_size", p, int, 3)
        c["box_predictor_use_depthwise"] = self.get(wsp, "use_depthwise", p, bool, False)
        c["share_prediction_tower"] = self.get(wsp, "share_prediction_tower", p, bool, False)
        c["class_prediction_bias_init"] = self.get(wsp, "class_prediction_bias_init", p, float, 0.0)
        c["box_predictor_use_dropout"] = self.get(wsp, "use_dropout", p, bool, False)
        c["dropout_keep_probability"] = self.get(wsp, "dropout_keep_probability", p, float, _f32(0.8))
        code_size = self.get(wsp, "box_code_size", p, int, 4)
        if code_size != 4:
            self.fail(f"{p}.box_code_size", code_size, "faster_rcnn_box_coder codes have 4 values")
        # IDENTITY (the default) leaves the logits to post-processing's score converter; SIGMOID
        # converts them in the predictor too (the OD API's TPU inference form).
        converter = self.get(wsp, "score_converter", p, str, "IDENTITY")
        if converter != "IDENTITY":
            self.fail(f"{p}.score_converter", converter, "only IDENTITY is supported")
        if wsp is not None and wsp.child("box_encodings_clip_range") is not None:
            self.fail(f"{p}.box_encodings_clip_range", "{...}", "not supported")
        hp = wsp.child("conv_hyperparams") if wsp is not None else None
        if hp is not None and hp.child("group_norm") is not None:
            self.fail(f"{p}.conv_hyperparams.group_norm", "{...}", "group norm is not supported")
        # apply_batch_norm: the towers' batch norm comes with conv_hyperparams.batch_norm; their
        # activation is ReLU6 whatever conv_hyperparams says (the predictor applies it itself).
        bn = hp.child("batch_norm") if hp is not None else None
        c["box_predictor_batch_norm"] = bn is not None
        if bn is not None:
            for flag in ("center", "scale"):
                if not self.get(bn, flag, f"{p}.conv_hyperparams.batch_norm", bool, flag == "center"):
                    self.fail(f"{p}.conv_hyperparams.batch_norm.{flag}", "false",
                              "batch norm without beta/gamma is not supported")
            c["box_predictor_batch_norm_epsilon"] = self.get(bn, "epsilon", f"{p}.conv_hyperparams.batch_norm",
                                                             float, _f32(0.001))

    def _anchors(self, ssd, c):
        ag = ssd.child("anchor_generator")
        kind, a = ag.oneof(ANCHOR_GENERATORS + ("grid_anchor_generator", "flexible_grid_anchor_generator")) \
            if ag else (None, None)
        if kind not in ANCHOR_GENERATORS:
            self.fail("model.ssd.anchor_generator", kind or "(missing)", "not supported")
        c["anchor_generator_type"] = kind
        if kind == MULTISCALE_ANCHORS:
            self._multiscale_anchors(a, c)
            return
        p = "model.ssd.anchor_generator.ssd_anchor_generator"
        fl = lambda name: tuple(self._float(v, f"{p}.{name}") for v in a.scalars(name))
        c["num_layers"] = self.get(a, "num_layers", p, int, 6)
        c["min_scale"] = self.get(a, "min_scale", p, float, _f32(0.2))
        c["max_scale"] = self.get(a, "max_scale", p, float, _f32(0.95))
        c["scales"] = fl("scales")
        c["aspect_ratios"] = fl("aspect_ratios")
        c["interpolated_scale_aspect_ratio"] = self.get(a, "interpolated_scale_aspect_ratio", p, float, 1.0)
        c["base_anchor_height"] = self.get(a, "base_anchor_height", p, float, 1.0)
        c["base_anchor_width"] = self.get(a, "base_anchor_width", p, float, 1.0)
        c["reduce_boxes_in_lowest_layer"] = self.get(a, "reduce_boxes_in_lowest_layer", p, bool, True)
        hs, ws = a.scalars("height_stride"), a.scalars("width_stride")
        ho, wo = a.scalars("height_offset"), a.scalars("width_offset")
        ints = lambda vs, name: tuple(int(self._float(v, f"{p}.{name}")) for v in vs)
        c["anchor_strides"] = tuple(zip(ints(hs, "height_stride"), ints(ws, "width_stride")))
        c["anchor_offsets"] = tuple(zip(ints(ho, "height_offset"), ints(wo, "width_offset")))

    def _multiscale_anchors(self, a, c):
        p = f"model.ssd.anchor_generator.{MULTISCALE_ANCHORS}"
        c["anchor_min_level"] = self.get(a, "min_level", p, int, 3)
        c["anchor_max_level"] = self.get(a, "max_level", p, int, 7)
        c["anchor_scale"] = self.get(a, "anchor_scale", p, float, 4.0)
        c["scales_per_octave"] = self.get(a, "scales_per_octave", p, int, 2)
        c["aspect_ratios"] = tuple(self._float(v, f"{p}.aspect_ratios") for v in a.scalars("aspect_ratios"))
        if not c["aspect_ratios"]:
            self.fail(f"{p}.aspect_ratios", "(none)", "at least one is needed")
        if not self.get(a, "normalize_coordinates", p, bool, True):
            # Anchors in pixels make boxes in pixels, which the post-processing clips to [0, 1].
            self.fail(f"{p}.normalize_coordinates", "false", "only normalized anchors")

    def _float(self, value, path):
        try:
            return _f32(float(value.text.rstrip("fF")))
        except (AttributeError, ValueError):
            self.fail(path, value, "expected a number")

    def _box_coder(self, ssd, c):
        bc = ssd.child("box_coder")
        kind, b = bc.oneof(("faster_rcnn_box_coder", "mean_stddev_box_coder", "square_box_coder",
                            "keypoint_box_coder")) if bc else (None, None)
        if kind != "faster_rcnn_box_coder":
            self.fail("model.ssd.box_coder", kind or "(missing)", "only faster_rcnn_box_coder")
        p = "model.ssd.box_coder.faster_rcnn_box_coder"
        c["box_coder_scales"] = tuple(self.get(b, n, p, float, d) for n, d in
                                      (("y_scale", 10.0), ("x_scale", 10.0), ("height_scale", 5.0), ("width_scale", 5.0)))

    def _post_processing(self, ssd, c):
        pp = ssd.child("post_processing")
        p = "model.ssd.post_processing"
        nms = pp.child("batch_non_max_suppression") if pp is not None else None
        if nms is None:
            self.missing(f"{p}.batch_non_max_suppression")
        q = f"{p}.batch_non_max_suppression"
        c["score_threshold"] = self.get(nms, "score_threshold", q, float, 0.0)
        c["iou_threshold"] = self.get(nms, "iou_threshold", q, float, _f32(0.6))
        c["max_detections_per_class"] = self.get(nms, "max_detections_per_class", q, int, 100)
        c["max_total_detections"] = self.get(nms, "max_total_detections", q, int, 100)
        for flag in ("use_combined_nms", "use_class_agnostic_nms", "use_partitioned_nms"):
            if self.get(nms, flag, q, bool, False):
                self.fail(f"{q}.{flag}", "true", "only per-class NMS is supported")
        if nms.child("soft_nms_sigma") is not None or self.get(nms, "soft_nms_sigma", q, float, 0.0):
            self.fail(f"{q}.soft_nms_sigma", nms.scalar("soft_nms_sigma"), "soft NMS is not supported")
        c["score_converter"] = self.get(pp, "score_converter", p, str, "IDENTITY")
        if c["score_converter"] not in SCORE_CONVERTERS:
            self.fail(f"{p}.score_converter", c["score_converter"], f"supported: {', '.join(SCORE_CONVERTERS)}")
        c["logit_scale"] = self.get(pp, "logit_scale", p, float, 1.0)
