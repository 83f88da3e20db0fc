"""`SSDConfig`: everything the SSD MobileNet v1 inference graph depends on, and its validation.

`pipeline_reader.read_pipeline_config` builds one from a TF1 Object Detection API
`pipeline.config` and `pipeline_writer.to_pipeline_config` writes one back; `to_dict`/`from_dict`
are its `model_config.json` form. An `SSDConfig` that cannot be built (as the OD API's builders
would refuse it) raises `ConfigError` naming the field and its value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ssd_mobilenet.anchor_generators import anchors_per_location
from ssd_mobilenet.config.type_names import (ANCHOR_GENERATORS, BOX_PREDICTORS, CONVOLUTIONAL, FEATURE_EXTRACTORS,
                                             MULTISCALE_ANCHORS, SSD_ANCHORS, SSD_MOBILENET_V1, SSD_MOBILENET_V1_FPN,
                                             WEIGHT_SHARED)
from ssd_mobilenet.errors import ConfigError

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

# FPN levels 2..5 are MobileNet layers (`fpn_min_level`'s valid values in the OD API); levels above
# 5 are bottom-up convs. Level l has stride 2^l.
FPN_BASE_LEVELS = (2, 3, 4, 5)

SCORE_CONVERTERS = ("SIGMOID", "SOFTMAX", "IDENTITY")
RESIZE_METHODS = ("BILINEAR", "NEAREST_NEIGHBOR", "BICUBIC", "AREA")


def f32(x) -> float:
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
    batch_norm_epsilon: float = f32(0.001)  # the extra layers' (feature_extractor.conv_hyperparams)
    # The 14 MobileNet layers' epsilon: exports since 2018 build them under slim's
    # mobilenet_v1_arg_scope (0.001) unless `override_base_feature_extractor_hyperparams`;
    # 2017 exports used conv_hyperparams. `migrate` reads both off the graph when it has one.
    base_batch_norm_epsilon: float = f32(0.001)
    box_predictor_batch_norm_epsilon: float = f32(0.001)  # depthwise predictor's BN
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
    dropout_keep_probability: float = f32(0.8)
    add_background_class: bool = True
    background_slice: str = BACKGROUND_SLICE_SCORES
    # Anchors (`anchor_generator` oneof, one of ANCHOR_GENERATORS). aspect_ratios is both
    # generators'; the rest of this block is ssd_anchor_generator's.
    anchor_generator_type: str = SSD_ANCHORS
    num_layers: int = 6
    min_scale: float = f32(0.2)
    max_scale: float = f32(0.95)
    scales: tuple = ()
    aspect_ratios: tuple = (1.0, 2.0, 0.5, 3.0, f32(0.3333))
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
    score_threshold: float = f32(1e-8)
    iou_threshold: float = f32(0.6)
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
        if bp == WEIGHT_SHARED and not problems and len(set(anchors_per_location(self))) > 1:
            # It shares its layers across the feature maps: one anchor count at each.
            problems.append(f"weight-shared box predictor: anchors per location {anchors_per_location(self)} differ")
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
