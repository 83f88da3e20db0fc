"""The SSDConfig of a source: pipeline.config + graph traits + what the weights prove.

Weights decide the architecture facts they encode (class count, depth multiplier,
use_depthwise, predictor kernel); a pipeline.config that disagrees is an error unless the
user trusts the weights.
"""

from __future__ import annotations

import os
import re

import numpy as np

from migrate.tf1 import architecture, name_map
from migrate.tf1.graph_anchors import ANCHOR_ATOL, fit_anchor_grid, graph_anchors, max_difference
from migrate.tf1.graph_traits import (TFLITE_POSTPROCESS_OP, anchor_box_specs, anchor_generator_type, fpn_levels,
                                      graph_traits, is_tflite_export, multiscale_anchor_fields,
                                      tflite_postprocess_node)
from ssd_mobilenet import anchor_generators
from ssd_mobilenet.anchor_generators.ssd import box_specs
from ssd_mobilenet.config.pipeline_reader import read_pipeline_config
from ssd_mobilenet.config.ssd_config import SSDConfig, float_text
from ssd_mobilenet.config.type_names import (MULTISCALE_ANCHORS, SSD_ANCHORS, SSD_MOBILENET_V1, SSD_MOBILENET_V1_FPN,
                                             SSD_MOBILENET_V1_PPN, WEIGHT_SHARED)
from ssd_mobilenet.feature_extractors import feature_map_shapes, fpn
from ssd_mobilenet.feature_extractors.mobilenet_v1 import MOBILENET_V1_BLOCKS
from ssd_mobilenet.feature_extractors.ssd_mobilenet_v1 import EXTRA_LAYER_DEPTHS
from ssd_mobilenet.errors import ConfigError, InputError

FE = "FeatureExtractor/MobilenetV1/"
POSTPROCESSING_FIELDS = frozenset({"score_converter", "logit_scale", "score_threshold", "iou_threshold",
                                   "max_detections_per_class", "max_total_detections", "box_coder_scales"})


# Every layer depth the multiplier scales: the MobileNet blocks (FPN's depthwise variant's too), the
# extra layers and their 1x1 halves, FPN's zoo depth.
_DEPTH_BASES = sorted({base for *_, base in MOBILENET_V1_BLOCKS + fpn.DEPTHWISE_BLOCKS} | set(EXTRA_LAYER_DEPTHS)
                      | {d // 2 for d in EXTRA_LAYER_DEPTHS} | {256})


def _layer_depths(depth_multiplier: float) -> list:
    """The channel counts `depth_multiplier` gives (before min_depth): int(base * multiplier), as
    the OD API computes them. Multipliers giving the same list build the same network."""
    return [int(base * depth_multiplier) for base in _DEPTH_BASES]


def _depth_multiplier(channels: int, base: int = 1024) -> float:
    """The multiplier a layer of depth `base` at multiplier 1 shows with `channels`: channels / base
    builds the same layers as the model's own for Conv2d_13_pointwise (every base divides 1024), but
    a 1.4 model has 1433 channels, 1.3994140625; the shortest decimal that builds the same layers is
    the multiplier written in its config."""
    exact = channels / float(base)
    for digits in (1, 2, 3, 4):
        if _layer_depths(round(exact, digits)) == _layer_depths(exact):
            return round(exact, digits)
    return exact


def _blocks(feature_extractor_type: str, use_depthwise: bool):
    return fpn.DEPTHWISE_BLOCKS if feature_extractor_type == SSD_MOBILENET_V1_FPN and use_depthwise \
        else MOBILENET_V1_BLOCKS


def weight_facts(weights: dict, anchors_layer0: int = 3, min_depth: int = 16, background: bool = True,
                 config: SSDConfig = None) -> dict:
    """SSDConfig fields the TF1 weights determine (only those they hold evidence for).

    The feature extractor and box predictor their scopes show (`architecture`), and what their
    shapes fix: class count, depth multiplier, depthwise layers, kernel sizes, FPN levels and
    depth, the weight-shared predictor's towers. `min_depth` shows where it clamped a layer (that
    layer's depth); where it clamped none, any value up to the shallowest layer builds the same
    network, so it is only a fact when the given (configured) `min_depth` would clamp a layer the
    weights show shallower. `config` (default: the defaults with `min_depth`) gives the values
    the weights leave open (FPN levels where layer depths coincide, its depth's spelling).
    """
    config = config or SSDConfig(min_depth=min_depth, add_background_class=background)
    facts = {}
    fe = architecture.feature_extractor_type(weights)
    bp = architecture.box_predictor_type(weights)
    if fe is not None:
        facts["feature_extractor_type"] = fe
    if bp is not None:
        facts["box_predictor_type"] = bp
    fe = fe or config.feature_extractor_type
    cls_bias = architecture.class_bias(weights)
    if cls_bias is not None:
        facts["num_classes"] = int(cls_bias.shape[0]) // anchors_layer0 - (1 if background else 0)
    fpn_depthwise = (architecture.fpn_facts(weights, config).get("use_depthwise", config.use_depthwise)
                     if fe == SSD_MOBILENET_V1_FPN else False)
    blocks = _blocks(fe, fpn_depthwise)
    # The deepest pointwise layer there is (a PPN frozen graph has none after Conv2d_11).
    deepest = next(((i, base) for i, kind, _, base in reversed(blocks)
                    if weights.get(f"{FE}Conv2d_{i}_pointwise/weights") is not None), None)
    if deepest is not None:
        i, base = deepest
        facts["depth_multiplier"] = _depth_multiplier(int(weights[f"{FE}Conv2d_{i}_pointwise/weights"].shape[-1]),
                                                      base)
        # min_depth shows only where it clamped a layer: max(int(d * multiplier), min_depth).
        clamped, depths = set(), []
        for i, kind, _, base in blocks:
            w = weights.get(FE + (f"Conv2d_{i}/weights" if kind == "conv" else f"Conv2d_{i}_pointwise/weights"))
            if w is not None:
                depths.append(int(w.shape[-1]))
                if depths[-1] > int(base * facts["depth_multiplier"]):
                    clamped.add(depths[-1])
        if len(clamped) == 1:
            facts["min_depth"] = clamped.pop()
        elif not clamped and depths and min(depths) < config.min_depth:
            facts["min_depth"] = min(depths)
    if fe == SSD_MOBILENET_V1:
        facts["use_depthwise"] = any(re.match(FE + r"Conv2d_13_pointwise_2_Conv2d_\d+_3x3_s2_\d+_depthwise/", n)
                                     for n in weights)
    elif fe == SSD_MOBILENET_V1_FPN:
        shaped = config.replace(**{k: v for k, v in facts.items() if k in ("depth_multiplier", "min_depth")}) \
            if "depth_multiplier" in facts else config
        facts.update(architecture.fpn_facts(weights, shaped))
    if bp == WEIGHT_SHARED:
        ws = architecture.weight_shared_facts(weights)
        ws.pop("num_feature_maps", None)
        facts.update(ws)
    else:
        dw = weights.get("BoxPredictor_0/BoxEncodingPredictor_depthwise/depthwise_weights")
        facts["box_predictor_use_depthwise"] = dw is not None
        kernel = dw if dw is not None else weights.get("BoxPredictor_0/BoxEncodingPredictor/weights")
        if kernel is not None:
            facts["box_predictor_kernel_size"] = int(kernel.shape[0])
    return facts


def weight_classes(weights: dict) -> int | None:
    """The class count of an SSD MobileNet v1's weights, from its first box predictor: class
    columns (background included) over the box encodings' 4 per anchor; None for other heads."""
    anchors = architecture.predictor_anchors(weights, 6)
    if not anchors or "BoxPredictor_0/ClassPredictor/biases" not in weights:
        return None
    return weight_facts(weights, anchors_layer0=anchors[0])["num_classes"]


def _specs_match(config: SSDConfig, layers) -> bool:
    """Whether `config`'s anchor generator gives the graph's per-layer (scales, ratios) in float32."""
    mine = [(np.float32([sc for sc, _ in spec]), np.float32([r for _, r in spec])) for spec in box_specs(config)]
    return len(mine) == len(layers) and all(np.array_equal(a, c) and np.array_equal(b, d)
                                            for (a, b), (c, d) in zip(mine, layers))


def anchor_fields(layers, config: SSDConfig):
    """The ssd_anchor_generator fields of `config` that give the graph's anchors, or None:
    `nearest_anchor_fields`, checked by generating the specs again (None when they differ in
    any bit, e.g. interpolated scales a writer rounded)."""
    fields = nearest_anchor_fields(layers, config)
    return fields if fields is not None and _specs_match(config.replace(**fields), layers) else None


def nearest_anchor_fields(layers, config: SSDConfig):
    """The ssd_anchor_generator fields the graph's per-layer specs read as, or None when they do
    not read as any (not a valid config).

    `layers`: `graph_traits.anchor_box_specs`. Layer 0 with `reduce_boxes_in_lowest_layer` is
    (0.1, 1), (s0, 2), (s0, 0.5); every other layer is its scale with each aspect ratio, plus the
    interpolated anchor (scale sqrt(s_i * s_i+1)) last or, in 2017 graphs, after the 1.0 ratio:
    the layers' own scales and ratios are read back; the interpolated scales follow from them.
    """
    s0, r0 = layers[0]
    reduce = bool(s0.size == 3 and r0.tolist() == [1.0, 2.0, 0.5] and s0[0] == np.float32(0.1) and s0[1] == s0[2])
    nominal = [float(s[1] if (i == 0 and reduce) else s[0]) for i, (s, _) in enumerate(layers)]
    ref = 1 if reduce else 0
    if ref >= len(layers):
        return None
    scales, ratios = layers[ref]
    own = scales == np.float32(nominal[ref])
    fields = {"reduce_boxes_in_lowest_layer": reduce, "aspect_ratios": tuple(float(r) for r in ratios[own])}
    if not config.interpolated_anchor_after_unit_ratio:
        odd = ratios[~own]
        fields["interpolated_scale_aspect_ratio"] = float(odd[0]) if odd.size else 0.0
    n = len(layers)
    linear = [nominal[0] + (nominal[-1] - nominal[0]) * i / (n - 1) for i in range(n)] if n > 1 else nominal
    if np.array_equal(np.float32(linear), np.float32(nominal)):
        fields.update(min_scale=nominal[0], max_scale=nominal[-1], scales=())
    else:
        fields["scales"] = tuple(nominal)
    fields["num_layers"] = n
    try:
        config.replace(**fields)
    except ConfigError:
        return None
    return fields


def written_specs(layers) -> tuple:
    """The graph's per-layer specs as `SSDConfig.anchor_specs`: ((scale, aspect_ratio), ...) per
    layer, the float32 constants the graph holds as Python floats."""
    return tuple(tuple((float(s), float(r)) for s, r in zip(scales, ratios)) for scales, ratios in layers)


def _written_note(layers, config: SSDConfig) -> str:
    """Why the anchors were taken as written: the first pairs that differ from the nearest generator's."""
    differ = []
    for i, ((scales, ratios), mine) in enumerate(zip(layers, box_specs(config))):
        for j, ((s, r), (ms, mr)) in enumerate(zip(zip(scales, ratios), mine)):
            if np.float32(ms) != s or np.float32(mr) != r:
                differ.append(f"layer {i} anchor {j}: scale {_show(float(s))} where the generator gives "
                              f"{float(np.float32(ms)):.8g}")
    shown = "; ".join(differ[:3]) + (f"; {len(differ) - 3} more" if len(differ) > 3 else "")
    return ("anchors taken as written: no ssd_anchor_generator setting gives the graph's (scale, aspect ratio) "
            f"pairs bit for bit ({shown}); model_config.json keeps them, pipeline.config the nearest settings")


def _config_origin(source) -> str:
    """Where the config's anchor fields came from, for notes."""
    return "pipeline.config's" if source.pipeline_config is not None else "the zoo defaults'"


def _anchor_grid_from_graph(source, config: SSDConfig, notes: list) -> SSDConfig:
    """`config` with the base anchor size, strides and offsets that give the graph's anchors.

    The scales and aspect ratios are already the graph's (`anchor_fields`); what is left of the
    anchor generator shows only in the anchors themselves, so they are evaluated
    (`graph_anchors`) and compared with the config's.
    """
    origin = _config_origin(source)
    anchors, form, why = graph_anchors(source.graph_def, (config.image_height, config.image_width))
    if anchors is None:
        notes.append(f"anchors not evaluated from {source.graph_from} ({why}): base anchor size, strides and "
                     f"offsets are {origin}")
        return config
    shapes = feature_map_shapes(config)
    difference = max_difference(config, shapes, anchors, form)
    if difference <= ANCHOR_ATOL:
        return config
    count = sum(gh * gw * n for (gh, gw), n in zip(shapes, anchor_generators.anchors_per_location(config)))
    # How far apart, in a few words (docs/guides/troubleshooting.md says what to look at).
    apart = (f"{len(anchors)} of them, not {count}" if difference == float("inf") else f"{difference:.3g} off")
    if config.anchor_generator_type == MULTISCALE_ANCHORS:
        # Its anchors follow from the fields read off the graph's constants; nothing is left to fit.
        raise ConfigError(f"{source.graph_from}: anchors not its multiscale_anchor_generator's ({apart})")
    fields = fit_anchor_grid(config, shapes, anchors, form)
    if fields is None:
        raise ConfigError(f"{source.graph_from}: no ssd_anchor_generator grid gives its anchors ({apart})")
    changed = {k: v for k, v in fields.items() if getattr(config, k) != v}
    notes.append("anchor grid from the graph's anchors, not " + origin + ": "
                 + ", ".join(f"{k}={_show(v)}" for k, v in sorted(changed.items())))
    return config.replace(**fields)


_PREDICTOR = re.compile(r"^BoxPredictor_(\d+)/")
_EXTRA_LAYER = re.compile(FE + r"(Conv2d_13_pointwise_2_Conv2d_\d+_(\d+)x(\d+)_s2_\d+)/")


def check_feature_extractor(weights: dict, where: str, graph_def=None, graph_from: str = None) -> None:
    """Refuses weights (or a graph) of another SSD feature extractor than MobileNet v1's in one line.

    Their variable scope names the others (`FeatureExtractor/MobilenetV2/`, `.../InceptionV2/`,
    `.../resnet_v1_50/`: `architecture.OTHER_FEATURE_EXTRACTORS`); a frozen graph of one holds no
    weight this tool reads, so its weight nodes' names are looked at too. Among MobileNet v1's, the box
    predictors (`BoxPredictor_<i>`, one per feature map) and the extra layers' kernels show the
    OD API's embedded_ssd_mobilenet_v1 (AIY vision kit models): 5 feature maps and a 2x2 last
    extra layer (`Conv2d_13_pointwise_2_Conv2d_4_2x2_s2_<depth>`, VALID-padded); ssd_mobilenet_v1
    has 6 and 3x3 ones. Their anchors would be refused too, but as anchors, which misleads.

    Raises:
      ConfigError: naming `where` (or `graph_from`) and the feature extractor seen, or what shows it
        is another one (the box predictors' count, an extra layer's kernel).
    """
    for names, source in ((weights, where), (architecture.graph_weight_names(graph_def) if graph_def is not None
                                             else (), graph_from)):
        other = architecture.other_feature_extractor(names)
        if other is not None:
            raise ConfigError(f"{source}: feature extractor {other} not supported")
    predictors = {int(m.group(1)) for m in map(_PREDICTOR.match, weights) if m}
    odd = sorted({f"{m.group(2)}x{m.group(3)}" for m in map(_EXTRA_LAYER.match, weights) if m and m.group(2) != "3"})
    if odd and len(predictors) == 5:
        raise ConfigError(f"{where}: feature extractor embedded_ssd_mobilenet_v1 not supported")
    if architecture.feature_extractor_type(weights) != SSD_MOBILENET_V1:
        return
    if predictors and len(predictors) != 6:
        raise ConfigError(f"{where}: feature extractor not supported ({len(predictors)} box predictors, not 6)")
    if odd:
        raise ConfigError(f"{where}: feature extractor not supported (a {odd[0]} extra layer, not 3x3)")


def _quantization_text(weight_bits: int, activation_bits: int) -> str:
    """`float`, `8-bit quantization-aware`, or `quantization-aware (W-bit weights, A-bit activations)`."""
    if not weight_bits:
        return "float"
    if weight_bits == activation_bits:
        return f"{weight_bits}-bit quantization-aware"
    return f"quantization-aware ({weight_bits}-bit weights, {activation_bits}-bit activations)"


def _beside(path: str, first: str) -> str:
    """`path` as a line that already names `first` shows it: its file name alone when the two are
    in one folder (`pipeline.config` after `models/ssd/model.ckpt.index`)."""
    return os.path.basename(path) if os.path.dirname(path) == os.path.dirname(first) else path


def _check_quantization(source, config: SSDConfig, notes: list) -> SSDConfig:
    """A quantization-aware model's weights hold every layer's FakeQuant ranges
    (`.../weights_quant/min`, ...); a float model's hold none. Both forms must agree with the
    config (pipeline.config's `graph_rewriter.quantization`, or the graph's FakeQuant ops):
    the same weights computed the other way give other detections."""
    ranges = sorted(n for n in source.weights if name_map.QUANT_RANGE.search(n))
    if bool(ranges) == bool(config.weight_bits):
        return config
    if ranges and source.graph_def is None and source.pipeline_config is None:
        notes.append(f"quantization-aware weights ({len(ranges)} FakeQuant ranges): 8-bit weights and activations "
                     "assumed (tf.contrib.quantize's default); a graph or pipeline.config beside them states it")
        return config.replace(weight_bits=8, activation_bits=8)
    where = source.graph_from if source.graph_def is not None else source.pipeline_config_from
    said = _quantization_text(config.weight_bits, config.activation_bits)
    # Quantization-aware weights hold FakeQuant ranges (weights_quant/act_quant min and max).
    held = "quantization-aware weights (FakeQuant ranges)" if ranges else "float weights (no FakeQuant ranges)"
    raise InputError(f"{source.weights_from}: {held}, but {_beside(where, source.weights_from)} is {said}")


def _tflite_note(source) -> str:
    op = tflite_postprocess_node(source.graph_def)
    if op is None:
        return (f"{source.graph_from} is a TFLite export without its post-processing op: the TF2 model "
                "preprocesses and post-processes as the OD API graph does, with pipeline.config's thresholds")
    # attr[...] on a missing key would add it to the source's GraphDef; older exporters lack use_regular_nms.
    regular = "use_regular_nms" in op.attr and op.attr["use_regular_nms"].b
    top = op.attr["max_classes_per_detection"].i if "max_classes_per_detection" in op.attr else 1
    fast = "" if regular else (f"; that op's fast NMS (one NMS over each box's top {top} class(es)) can keep "
                               "other boxes than per-class NMS")
    return (f"{source.graph_from} is a TFLite export: its {TFLITE_POSTPROCESS_OP} op runs in TFLite only, so the "
            "TF2 model preprocesses and post-processes as the OD API graph does (resize and scale, per-class "
            "NMS), with the op's counts, thresholds and box coder scales" + fast)


def _show(value) -> str:
    """A config value as its proto spells it: 0.35, not 0.3499999940395355 (float32 fields)."""
    if isinstance(value, float):
        return float_text(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _padded_size(size, multiple: int) -> tuple:
    return tuple(-(-s // multiple) * multiple for s in size)


# The note listing every field read off a graph: in the report, and on the console with --verbose
# (`graph_field_notes` puts a one-line summary before it).
EVERY_GRAPH_FIELD = "from the graph, every field: "


def graph_field_notes(traits: dict) -> list:
    """[summary, full list] of the fields read off a graph: how many, and those other than the
    zoo's defaults (`SSDConfig`'s), then `EVERY_GRAPH_FIELD` with all of them."""
    import dataclasses
    defaults = {f.name: f.default for f in dataclasses.fields(SSDConfig)}
    other = {k: v for k, v in sorted(traits.items()) if k in defaults and defaults[k] != v}
    summary = (f"from the graph: {len(traits)} fields, "
               + (f"{len(other)} other than the zoo defaults: " + ", ".join(f"{k}={_show(v)}" for k, v in other.items())
                  if other else "all as the zoo defaults"))
    return [summary, EVERY_GRAPH_FIELD + ", ".join(f"{k}={_show(v)}" for k, v in sorted(traits.items()))]


# Where a source without pipeline.config starts, per feature extractor its weights show: the zoo
# model's config (../shared/zoo/sample_configs) for what neither the graph nor the weights say.
ZOO_DEFAULTS = {
    SSD_MOBILENET_V1: ("ssd_mobilenet_v1_coco", {}),
    SSD_MOBILENET_V1_FPN: ("ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync", dict(
        feature_extractor_type=SSD_MOBILENET_V1_FPN, image_height=640, image_width=640,
        box_predictor_type=WEIGHT_SHARED, box_predictor_depth=256, box_predictor_num_layers_before_predictor=4,
        box_predictor_kernel_size=3, class_prediction_bias_init=float(np.float32(-4.6)),
        anchor_generator_type=MULTISCALE_ANCHORS, anchor_min_level=3, anchor_max_level=7, anchor_scale=4.0,
        scales_per_octave=2, aspect_ratios=(1.0, 2.0, 0.5))),
    SSD_MOBILENET_V1_PPN: ("ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync", dict(
        feature_extractor_type=SSD_MOBILENET_V1_PPN, box_predictor_type=WEIGHT_SHARED, box_predictor_depth=512,
        box_predictor_num_layers_before_predictor=1, box_predictor_kernel_size=1, share_prediction_tower=True,
        class_prediction_bias_init=float(np.float32(-4.6)), min_scale=float(np.float32(0.15)),
        reduce_boxes_in_lowest_layer=False)),
}


def _zoo_config(source) -> tuple:
    """(SSDConfig, zoo model name) for a source without pipeline.config: the zoo defaults of the
    feature extractor its weights show, with the architecture they and the graph show (box
    predictor, FPN levels; the anchors' levels follow FPN's unless the graph says them)."""
    weights = source.weights
    fe = architecture.feature_extractor_type(weights) or SSD_MOBILENET_V1
    zoo, fields = ZOO_DEFAULTS[fe]
    fields = dict(fields)
    bp = architecture.box_predictor_type(weights)
    if bp is not None and bp != fields.get("box_predictor_type", SSDConfig.box_predictor_type):
        fields.update(box_predictor_type=bp, box_predictor_kernel_size=3 if bp == WEIGHT_SHARED else 1)
    if fe == SSD_MOBILENET_V1_FPN:
        levels = fpn_levels(source.graph_def) if source.graph_def is not None else {}
        levels = levels or {k: v for k, v in architecture.fpn_facts(weights, SSDConfig(**fields)).items()
                            if k in ("fpn_min_level", "fpn_max_level")}
        fields.update(levels)
        if fields.get("anchor_generator_type") == MULTISCALE_ANCHORS:
            fields.update(anchor_min_level=fields.get("fpn_min_level", 3), anchor_max_level=fields.get("fpn_max_level", 7))
    try:
        return SSDConfig(**fields), zoo
    except ConfigError as e:
        raise ConfigError(f"{source.weights_from}: {e}") from None


def _check_architecture(source, config: SSDConfig) -> None:
    """The feature extractor and box predictor the weights show must be the pipeline.config's:
    the same weights in another network are no model (not overridable with --trust-weights)."""
    shown = {"feature_extractor_type": architecture.feature_extractor_type(source.weights),
             "box_predictor_type": architecture.box_predictor_type(source.weights)}
    differ = [f"{getattr(config, k)}, but the weights are {v}" for k, v in shown.items()
              if v is not None and v != getattr(config, k)]
    if differ:
        raise InputError(f"{source.pipeline_config_from}: " + "; ".join(differ))


def _multiscale_anchors_from_graph(source, config: SSDConfig, notes: list) -> SSDConfig:
    """`config` with the multiscale_anchor_generator fields the graph's constants spell, where its
    anchors come from that generator (checked against the evaluated anchors afterwards)."""
    if source.graph_def is None or anchor_generator_type(source.graph_def) != MULTISCALE_ANCHORS:
        return config
    fields = multiscale_anchor_fields(source.graph_def)
    if fields is None:
        notes.append(f"the multiscale anchor generator's settings not read off {source.graph_from}: "
                     f"{_config_origin(source)} are taken and checked against its anchors")
        return config.replace(anchor_generator_type=MULTISCALE_ANCHORS) if config.anchor_generator_type != \
            MULTISCALE_ANCHORS else config
    changed = {k: v for k, v in fields.items() if getattr(config, k) != v}
    if changed:
        notes.append("anchors from the graph's anchor generator, not " + _config_origin(source) + ": "
                     + ", ".join(f"{k}={_show(v)}" for k, v in sorted(changed.items())))
    try:
        return config.replace(**fields)
    except ConfigError as e:
        raise ConfigError(f"{source.graph_from}: {e}") from None


def infer_config(source, trust_weights=False, image_size=None):
    """(SSDConfig, notes): the config to convert with and what was inferred or overridden.

    Raises:
      ConfigError: the pipeline.config is unreadable or unsupported.
      InputError: pipeline.config and weights disagree (without `trust_weights`).
    """
    notes = []
    # Before the graph's traits and anchors: another feature extractor fails those in misleading ways.
    check_feature_extractor(source.weights, source.weights_from, source.graph_def, source.graph_from)
    if source.pipeline_config is not None:
        try:
            config = read_pipeline_config(source.pipeline_config)
        except ConfigError as e:
            raise e.at(source.pipeline_config_from) from None
        _check_architecture(source, config)
    else:
        config, zoo = _zoo_config(source)
        notes.append(f"no pipeline.config: starting from the zoo defaults ({zoo})"
                     + ("" if source.graph_def is not None else "; without a graph the anchor generator's fields "
                        "stay the defaults (`migrate verify` shows it at Postprocessor/Decode if the model's differ)"))
    if source.graph_def is not None:
        try:
            traits = graph_traits(source.graph_def)
        except ConfigError as e:
            raise ConfigError(f"{source.graph_from}: {e}") from None
        if source.pipeline_config is not None:
            for key in ("image_height", "image_width"):
                if key in traits and traits[key] != getattr(config, key):
                    graph = _beside(source.graph_from, source.pipeline_config_from)
                    raise InputError(f"{source.pipeline_config_from}: {key} {getattr(config, key)}, but {graph} "
                                     f"resizes to {traits[key]}")
            quantized = (traits["weight_bits"], traits["activation_bits"])
            if quantized != (config.weight_bits, config.activation_bits):
                graph = _beside(source.graph_from, source.pipeline_config_from)
                raise InputError(
                    f"{source.pipeline_config_from}: {_quantization_text(config.weight_bits, config.activation_bits)}, "
                    f"but {graph} is {_quantization_text(*quantized)}")
            # The graph's post-processing constants and resize op are what produced the TF1 detections.
            for key in sorted((POSTPROCESSING_FIELDS | {"resize_method", "add_background_class"}) & set(traits)):
                if traits[key] != getattr(config, key):
                    notes.append(f"{key}: {_show(traits[key])} in the graph overrides {_show(getattr(config, key))} "
                                 "from pipeline.config")
        size = (traits.get("image_height", config.image_height), traits.get("image_width", config.image_width))
        if "pad_to_multiple" in traits and (_padded_size(size, config.pad_to_multiple)
                                            == _padded_size(size, traits["pad_to_multiple"])):
            del traits["pad_to_multiple"]  # the configured multiple pads to the size the graph shows
        elif "pad_to_multiple" in traits and source.pipeline_config is not None:
            notes.append(f"pad_to_multiple: {traits['pad_to_multiple']} (the zero padding in the graph) overrides "
                         f"{config.pad_to_multiple} from pipeline.config")
        if is_tflite_export(source.graph_def):
            notes.append(_tflite_note(source))
        config = config.replace(**traits)
        notes += graph_field_notes(traits)
    else:
        # The values themselves are on the console once, in the assumed fields (`convert._unchecked`).
        notes.append("no graph: NMS order, batch-norm kernel, preprocessing order, 2017-era padding/anchor "
                     "order and the anchors' exact scales cannot be read off a graph: SSDConfig's defaults are "
                     "assumed for them (the interpolated scales by the ssd_anchor_generator formula); "
                     "convert with the .meta or frozen graph beside the checkpoint to be sure")
    config = _multiscale_anchors_from_graph(source, config, notes)
    layers = anchor_box_specs(source.graph_def) if source.graph_def is not None else None
    if layers is not None and config.anchor_generator_type != SSD_ANCHORS:
        # The graph computes ssd_anchor_generator's anchors where the config names another generator.
        nearest = nearest_anchor_fields(layers, config.replace(anchor_generator_type=SSD_ANCHORS)) or {}
        notes.append(f"anchor generator: {SSD_ANCHORS} in the graph overrides {config.anchor_generator_type} from "
                     f"{_config_origin(source)[:-2]}")
        config = config.replace(anchor_generator_type=SSD_ANCHORS, **nearest)
    if layers is not None and not _specs_match(config, layers):
        # The anchors the graph computes are what the box predictor was trained against.
        fields = anchor_fields(layers, config)
        if fields is None:
            # Readable but no generator's: taken as written, on the nearest settings (for the
            # pipeline.config); the anchor grid's fit and its check below decide whether they hold.
            nearest = nearest_anchor_fields(layers, config) or {}
            config = config.replace(**nearest)
            notes.append(_written_note(layers, config))
            config = config.replace(anchor_specs=written_specs(layers))
        else:
            changed = {k: v for k, v in fields.items() if getattr(config, k) != v}
            origin = _config_origin(source)
            notes.append("anchors from the graph's anchor generator, not " + origin + ": "
                         + ", ".join(f"{k}={_show(v)}" for k, v in sorted(changed.items())))
            config = config.replace(**fields)
    if source.graph_def is not None:
        # At the graph's own image size: anchors are normalised, and --image-size may differ.
        config = _anchor_grid_from_graph(source, config, notes)
    if image_size is not None:
        if config.pad_to_multiple > 1 and source.pipeline_config is None:
            notes.append(f"pad_to_multiple {config.pad_to_multiple}: the smallest multiple giving the graph's padded "
                         "size; at --image-size it may pad otherwise than the model's own (a pipeline.config "
                         "states it)")
        config = config.replace(image_height=image_size[0], image_width=image_size[1])
        notes.append(f"image size {image_size[0]}x{image_size[1]} from --image-size")
    elif source.graph_def is None and source.pipeline_config is None:
        notes.append(f"image size {config.image_height}x{config.image_width} assumed ({zoo}'s; no graph, no "
                     "pipeline.config): override with --image-size H W")
    config = _check_quantization(source, config, notes)
    held = architecture.predictor_anchors(source.weights, config.num_feature_maps)
    if held is not None and held != anchor_generators.anchors_per_location(config):
        listed = lambda counts: "[" + " ".join(map(str, counts)) + "]"  # noqa: E731
        if source.pipeline_config is None:
            # Neither pipeline.config nor a graph: the zoo defaults' generator gives other counts
            # (troubleshooting.md names them); the model's own config or graph says its generator.
            raise InputError(f"{source.weights_from}: {listed(held)} anchors per location; add its pipeline.config")
        raise InputError(f"{source.weights_from}: {listed(held)} anchors per location, "
                         f"{_beside(source.pipeline_config_from, source.weights_from)} "
                         f"{listed(anchor_generators.anchors_per_location(config))}")
    facts = weight_facts(source.weights, anchor_generators.anchors_per_location(config)[0], config.min_depth,
                         config.add_background_class, config)
    for key in ("feature_extractor_type", "box_predictor_type"):  # checked first (`_check_architecture`)
        facts.pop(key, None)
    if "depth_multiplier" in facts and _layer_depths(facts["depth_multiplier"]) == _layer_depths(config.depth_multiplier):
        # The weights show layer depths, not the float that made them: a configured multiplier
        # that builds the same layers agrees with them (1.4 -> 1433 channels, read back 1.3994).
        facts["depth_multiplier"] = config.depth_multiplier
    # Without a pipeline.config the defaults are only a starting point, not a claim to check.
    mismatches = [(key, getattr(config, key), value) for key, value in facts.items()
                  if source.pipeline_config is not None and getattr(config, key) != value]
    if mismatches and not trust_weights:
        detail = "; ".join(f"{k} {_show(c)}, the weights {_show(v)}" for k, c, v in mismatches)
        raise InputError(f"{source.pipeline_config_from}: {detail} (--trust-weights)")
    for key, configured, value in mismatches:
        notes.append(f"{key}: {_show(value)} from the weights overrides {_show(configured)} from pipeline.config "
                     "(--trust-weights)")
    if source.pipeline_config is None:
        notes.append("from the weights: " + ", ".join(f"{k}={_show(v)}" for k, v in sorted(facts.items())))
    try:
        config = config.replace(**facts)
    except ConfigError as e:
        raise ConfigError(f"{source.weights_from}: {e}") from None
    return config, notes
