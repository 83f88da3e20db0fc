"""Reads a TF1 Object Detection API `pipeline.config` into an `SSDConfig`.

`read_pipeline_config(path_or_text)` parses the text (`pipeline_text`), checks it against the OD
API's messages (`pipeline_schema`: a field or value they do not declare raises `ConfigError` with
its line) and reads `model.ssd` (`PipelineReader`). Fields that only matter for training (losses,
matcher, optimizer, input readers) are ignored; settings this model cannot reproduce raise
`ConfigError` naming the field and its value.

An unset field reads as its default in `pipeline_messages` (`proto_default`), here and in the
training config's tables (`training.proto_table`), which read scalars with `PipelineReader.get`.
"""

from __future__ import annotations

import os

from ssd_mobilenet.config import pipeline_messages as pm
from ssd_mobilenet.config import proto_kinds as kinds
from ssd_mobilenet.config import pipeline_schema, pipeline_text
from ssd_mobilenet.config.pipeline_text import Scalar, TextMessage
from ssd_mobilenet.config.ssd_config import RESIZE_METHODS, SCORE_CONVERTERS, SSDConfig, f32
from ssd_mobilenet.config.type_names import (ANCHOR_GENERATORS, BOX_PREDICTORS, FEATURE_EXTRACTOR_ALIASES,
                                             FEATURE_EXTRACTORS, MULTISCALE_ANCHORS, SSD_MOBILENET_V1,
                                             SSD_MOBILENET_V1_FPN, WEIGHT_SHARED)
from ssd_mobilenet.errors import ConfigError

# An unset scalar field whose .proto gives no default reads as protobuf's zero value.
_ZERO = {kinds.FLOAT: 0.0, kinds.INT32: 0, kinds.UINT32: 0, kinds.BOOL: False, kinds.STRING: ""}
_PROTO_DEFAULT = object()  # `PipelineReader.get`'s default: the field's (`proto_default`)


def read_pipeline_config(path_or_text: str) -> SSDConfig:
    """Reads a TF1 OD API `pipeline.config` (a file path or its text).

    Raises:
      ConfigError: naming the field and value the model cannot honour, a field or value the OD
        API's messages do not declare (with its line), or the parse error.
    """
    return PipelineReader(parse_pipeline_config(path_or_text)).config()


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


def field_at(field_path: str) -> kinds.Field:
    """The `pipeline_messages` field at `field_path`, dotted from the top-level message
    (`model.ssd.post_processing.logit_scale`)."""
    message = pm.message(pipeline_schema.ROOT)
    *outer, name = field_path.split(".")
    for part in outer:
        kind = message.field(part).kind
        message = pm.message(kind) if isinstance(kind, str) else kind
    return message.field(name)


def proto_default(f: kinds.Field):
    """The value the unset field `f` reads as: its proto default (a float as its float32), else
    protobuf's zero value (an enum's first member); () for a repeated field."""
    if f.repeated:
        return ()
    if f.default is not None:
        return f32(f.default) if f.kind == kinds.FLOAT else f.default
    return f.kind.members[0] if isinstance(f.kind, kinds.Enum) else _ZERO[f.kind]


class PipelineReader:
    """Turns the `model.ssd` part of a parsed pipeline.config into an `SSDConfig` (`config()`).

    `get` reads one scalar field as proto text format spells it, `fail` and `missing` refuse a
    field at its line; `training.train_config` and `training.proto_table` read the training
    fields with them. A reader of `root` None locates nothing: its errors name the dotted path.
    """

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

    def get(self, msg, name, path, kind, default=_PROTO_DEFAULT):
        """The scalar field `name` of `msg` (the message at the dotted `path`, None for an unset
        one) as `kind` (float: its float32; int, bool, str), spelt as proto text format spells it;
        unset: `default`, else the field's proto default (`proto_default`)."""
        value = msg.scalar(name) if msg is not None else None
        if value is None:
            return proto_default(field_at(f"{path}.{name}")) if default is _PROTO_DEFAULT else default
        text = value.text if isinstance(value, Scalar) else value
        try:
            if kind is float:
                return f32(float(text.rstrip("fF")))
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
        c["add_background_class"] = get(ssd, "add_background_class", "model.ssd", bool)
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
        c["weight_bits"] = self.get(q, "weight_bits", p, int)
        c["activation_bits"] = self.get(q, "activation_bits", p, int)
        if self.get(q, "symmetric", p, bool):
            self.fail(f"{p}.symmetric", "true", "contrib.quantize's asymmetric ranges only")

    def _resizer(self, ssd, c):
        resizer = ssd.child("image_resizer")
        kind, r = resizer.oneof(("fixed_shape_resizer", "keep_aspect_ratio_resizer", "identity_resizer",
                                 "conditional_shape_resizer", "pad_to_multiple_resizer")) if resizer else (None, None)
        if kind != "fixed_shape_resizer":
            self.fail("model.ssd.image_resizer", kind or "(missing)", "only fixed_shape_resizer")
        p = "model.ssd.image_resizer.fixed_shape_resizer"
        c["image_height"] = self.get(r, "height", p, int)
        c["image_width"] = self.get(r, "width", p, int)
        c["resize_method"] = self.get(r, "resize_method", p, str)
        if c["resize_method"] not in RESIZE_METHODS:
            self.fail(f"{p}.resize_method", c["resize_method"], "unsupported resize method")
        if self.get(r, "convert_to_grayscale", p, bool):
            self.fail(f"{p}.convert_to_grayscale", "true", "not supported")

    def _check_hyperparams(self, hp, path):
        if hp is None:
            return
        activation = self.get(hp, "activation", path, str)
        if activation != "RELU_6":
            self.fail(f"{path}.activation", activation, "SSD MobileNet v1 layers use RELU_6")
        bn = hp.child("batch_norm")
        if bn is None:
            self.fail(f"{path}.batch_norm", "(missing)", "the feature extractor needs batch norm")
        for flag in ("center", "scale"):
            if not self.get(bn, flag, f"{path}.batch_norm", bool):
                self.fail(f"{path}.batch_norm.{flag}", "false", "batch norm without beta/gamma is not supported")

    def _feature_extractor(self, ssd, c):
        p = "model.ssd.feature_extractor"
        fe = ssd.child("feature_extractor")
        if fe is None:
            self.missing(p)
        kind = self.get(fe, "type", p, str)
        kind = FEATURE_EXTRACTOR_ALIASES.get(kind, kind)
        if kind not in FEATURE_EXTRACTORS:
            self.fail(f"{p}.type", kind or "(missing)", f"only {SSD_MOBILENET_V1}(_fpn, _ppn)")
        c["feature_extractor_type"] = kind
        c["depth_multiplier"] = self.get(fe, "depth_multiplier", p, float)
        c["min_depth"] = self.get(fe, "min_depth", p, int)
        c["pad_to_multiple"] = self.get(fe, "pad_to_multiple", p, int)
        c["use_explicit_padding"] = self.get(fe, "use_explicit_padding", p, bool)
        c["use_depthwise"] = self.get(fe, "use_depthwise", p, bool)
        if fe.child("bifpn") is not None:
            self.fail(f"{p}.bifpn", "{...}", "BiFPN is not supported")
        fpn = fe.child("fpn")
        if fpn is not None and kind != SSD_MOBILENET_V1_FPN:
            # model_builder passes the fpn settings to the feature extractor, whose class then refuses them.
            self.fail(f"{p}.fpn", "{...}", f"only {SSD_MOBILENET_V1_FPN} takes it")
        # FeaturePyramidNetworks' proto defaults, which are also the FPN extractor's without an fpn block.
        c["fpn_min_level"] = self.get(fpn, "min_level", f"{p}.fpn", int)
        c["fpn_max_level"] = self.get(fpn, "max_level", f"{p}.fpn", int)
        c["fpn_additional_layer_depth"] = self.get(fpn, "additional_layer_depth", f"{p}.fpn", int)
        hp = fe.child("conv_hyperparams")
        self._check_hyperparams(hp, f"{p}.conv_hyperparams")
        bn = hp.child("batch_norm") if hp is not None else None
        c["batch_norm_epsilon"] = self.get(bn, "epsilon", f"{p}.conv_hyperparams.batch_norm", float)
        override = self.get(fe, "override_base_feature_extractor_hyperparams", p, bool)
        c["base_batch_norm_epsilon"] = c["batch_norm_epsilon"] if override else f32(0.001)

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
        layers = self.get(cbp, "num_layers_before_predictor", p, int)
        if layers != 0:
            self.fail(f"{p}.num_layers_before_predictor", layers, "only 0 is supported")
        code_size = self.get(cbp, "box_code_size", p, int)
        if code_size != 4:
            self.fail(f"{p}.box_code_size", code_size, "faster_rcnn_box_coder codes have 4 values")
        if self.get(cbp, "apply_sigmoid_to_scores", p, bool):
            self.fail(f"{p}.apply_sigmoid_to_scores", "true", "not supported")
        c["box_predictor_kernel_size"] = self.get(cbp, "kernel_size", p, int)
        c["box_predictor_use_depthwise"] = self.get(cbp, "use_depthwise", p, bool)
        if c["box_predictor_use_depthwise"]:
            self._check_hyperparams(cbp.child("conv_hyperparams"), f"{p}.conv_hyperparams")
            bn = cbp.child("conv_hyperparams").child("batch_norm")
            c["box_predictor_batch_norm_epsilon"] = self.get(bn, "epsilon", f"{p}.conv_hyperparams.batch_norm",
                                                             float)

    def _weight_shared_box_predictor(self, wsp, c):
        p = f"model.ssd.box_predictor.{WEIGHT_SHARED}"
        c["box_predictor_depth"] = self.get(wsp, "depth", p, int)
        c["box_predictor_num_layers_before_predictor"] = self.get(wsp, "num_layers_before_predictor", p, int)
        c["box_predictor_kernel_size"] = self.get(wsp, "kernel_size", p, int)
        c["box_predictor_use_depthwise"] = self.get(wsp, "use_depthwise", p, bool)
        c["share_prediction_tower"] = self.get(wsp, "share_prediction_tower", p, bool)
        c["class_prediction_bias_init"] = self.get(wsp, "class_prediction_bias_init", p, float)
        c["box_predictor_use_dropout"] = self.get(wsp, "use_dropout", p, bool)
        c["dropout_keep_probability"] = self.get(wsp, "dropout_keep_probability", p, float)
        code_size = self.get(wsp, "box_code_size", p, int)
        if code_size != 4:
            self.fail(f"{p}.box_code_size", code_size, "faster_rcnn_box_coder codes have 4 values")
        # IDENTITY (the default) leaves the logits to post-processing's score converter; SIGMOID
        # converts them in the predictor too (the OD API's TPU inference form).
        converter = self.get(wsp, "score_converter", p, str)
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
                if not self.get(bn, flag, f"{p}.conv_hyperparams.batch_norm", bool):
                    self.fail(f"{p}.conv_hyperparams.batch_norm.{flag}", "false",
                              "batch norm without beta/gamma is not supported")
            c["box_predictor_batch_norm_epsilon"] = self.get(bn, "epsilon", f"{p}.conv_hyperparams.batch_norm",
                                                             float)

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
        c["num_layers"] = self.get(a, "num_layers", p, int)
        c["min_scale"] = self.get(a, "min_scale", p, float)
        c["max_scale"] = self.get(a, "max_scale", p, float)
        c["scales"] = fl("scales")
        c["aspect_ratios"] = fl("aspect_ratios")
        c["interpolated_scale_aspect_ratio"] = self.get(a, "interpolated_scale_aspect_ratio", p, float)
        c["base_anchor_height"] = self.get(a, "base_anchor_height", p, float)
        c["base_anchor_width"] = self.get(a, "base_anchor_width", p, float)
        c["reduce_boxes_in_lowest_layer"] = self.get(a, "reduce_boxes_in_lowest_layer", p, bool)
        hs, ws = a.scalars("height_stride"), a.scalars("width_stride")
        ho, wo = a.scalars("height_offset"), a.scalars("width_offset")
        ints = lambda vs, name: tuple(int(self._float(v, f"{p}.{name}")) for v in vs)
        c["anchor_strides"] = tuple(zip(ints(hs, "height_stride"), ints(ws, "width_stride")))
        c["anchor_offsets"] = tuple(zip(ints(ho, "height_offset"), ints(wo, "width_offset")))

    def _multiscale_anchors(self, a, c):
        p = f"model.ssd.anchor_generator.{MULTISCALE_ANCHORS}"
        c["anchor_min_level"] = self.get(a, "min_level", p, int)
        c["anchor_max_level"] = self.get(a, "max_level", p, int)
        c["anchor_scale"] = self.get(a, "anchor_scale", p, float)
        c["scales_per_octave"] = self.get(a, "scales_per_octave", p, int)
        c["aspect_ratios"] = tuple(self._float(v, f"{p}.aspect_ratios") for v in a.scalars("aspect_ratios"))
        if not c["aspect_ratios"]:
            self.fail(f"{p}.aspect_ratios", "(none)", "at least one is needed")
        if not self.get(a, "normalize_coordinates", p, bool):
            # Anchors in pixels make boxes in pixels, which the post-processing clips to [0, 1].
            self.fail(f"{p}.normalize_coordinates", "false", "only normalized anchors")

    def _float(self, value, path):
        try:
            return f32(float(value.text.rstrip("fF")))
        except (AttributeError, ValueError):
            self.fail(path, value, "expected a number")

    def _box_coder(self, ssd, c):
        bc = ssd.child("box_coder")
        kind, b = bc.oneof(("faster_rcnn_box_coder", "mean_stddev_box_coder", "square_box_coder",
                            "keypoint_box_coder")) if bc else (None, None)
        if kind != "faster_rcnn_box_coder":
            self.fail("model.ssd.box_coder", kind or "(missing)", "only faster_rcnn_box_coder")
        p = "model.ssd.box_coder.faster_rcnn_box_coder"
        c["box_coder_scales"] = tuple(self.get(b, n, p, float) for n in ("y_scale", "x_scale", "height_scale",
                                                                          "width_scale"))

    def _post_processing(self, ssd, c):
        pp = ssd.child("post_processing")
        p = "model.ssd.post_processing"
        nms = pp.child("batch_non_max_suppression") if pp is not None else None
        if nms is None:
            self.missing(f"{p}.batch_non_max_suppression")
        q = f"{p}.batch_non_max_suppression"
        c["score_threshold"] = self.get(nms, "score_threshold", q, float)
        c["iou_threshold"] = self.get(nms, "iou_threshold", q, float)
        c["max_detections_per_class"] = self.get(nms, "max_detections_per_class", q, int)
        c["max_total_detections"] = self.get(nms, "max_total_detections", q, int)
        for flag in ("use_combined_nms", "use_class_agnostic_nms", "use_partitioned_nms"):
            if self.get(nms, flag, q, bool):
                self.fail(f"{q}.{flag}", "true", "only per-class NMS is supported")
        if nms.child("soft_nms_sigma") is not None or self.get(nms, "soft_nms_sigma", q, float):
            self.fail(f"{q}.soft_nms_sigma", nms.scalar("soft_nms_sigma"), "soft NMS is not supported")
        c["score_converter"] = self.get(pp, "score_converter", p, str)
        if c["score_converter"] not in SCORE_CONVERTERS:
            self.fail(f"{p}.score_converter", c["score_converter"], f"supported: {', '.join(SCORE_CONVERTERS)}")
        c["logit_scale"] = self.get(pp, "logit_scale", p, float)
