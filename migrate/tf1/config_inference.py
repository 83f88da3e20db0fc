"""The SSDConfig of a source: pipeline.config + graph traits + what the weights prove.

Weights decide the architecture facts they encode (class count, depth multiplier,
use_depthwise, predictor kernel); a pipeline.config that disagrees is an error unless the
user trusts the weights.
"""

from __future__ import annotations

import re

import numpy as np

from migrate.tf1 import name_map
from migrate.tf1.graph_anchors import ANCHOR_ATOL, fit_anchor_grid, graph_anchors, max_difference
from migrate.tf1.graph_traits import (TFLITE_POSTPROCESS_OP, anchor_box_specs, graph_traits, is_tflite_export,
                                  tflite_postprocess_node)
from ssd_mobilenet.anchors import box_specs
from ssd_mobilenet.backbone import EXTRA_LAYER_DEPTHS, MOBILENET_V1_BLOCKS, feature_map_shapes
from ssd_mobilenet.box_predictor import BOX_CODE_SIZE
from ssd_mobilenet.config import ConfigError, SSDConfig, float_text

FE = "FeatureExtractor/MobilenetV1/"
POSTPROCESSING_FIELDS = frozenset({"score_converter", "logit_scale", "score_threshold", "iou_threshold",
                                   "max_detections_per_class", "max_total_detections", "box_coder_scales"})


class MismatchError(ValueError):
    """pipeline.config and the weights disagree."""


# Every layer depth the multiplier scales: the MobileNet blocks, the extra layers and their 1x1 halves.
_DEPTH_BASES = sorted({base for *_, base in MOBILENET_V1_BLOCKS} | set(EXTRA_LAYER_DEPTHS)
                      | {d // 2 for d in EXTRA_LAYER_DEPTHS})


def _layer_depths(depth_multiplier: float) -> list:
    """The channel counts `depth_multiplier` gives (before min_depth): int(base * multiplier), as
    the OD API computes them. Multipliers giving the same list build the same network."""
    return [int(base * depth_multiplier) for base in _DEPTH_BASES]


def _depth_multiplier(pointwise13_channels: int) -> float:
    """The multiplier Conv2d_13_pointwise's channels show: channels / 1024 builds the same layers as
    the model's own (every base divides 1024), but a 1.4 model has 1433 channels, 1.3994140625; the
    shortest decimal that builds the same layers is the multiplier written in its config."""
    exact = pointwise13_channels / 1024.0
    for digits in (1, 2, 3, 4):
        if _layer_depths(round(exact, digits)) == _layer_depths(exact):
            return round(exact, digits)
    return exact


def weight_facts(weights: dict, anchors_layer0: int = 3, min_depth: int = 16, background: bool = True) -> dict:
    """SSDConfig fields the TF1 weights determine (only those they hold evidence for).

    `min_depth` shows where it clamped a layer (that layer's depth); where it clamped none, any
    value up to the shallowest layer builds the same network, so it is only a fact when the
    given (configured) `min_depth` would clamp a layer the weights show shallower.
    """
    facts = {}
    cls_bias = weights.get("BoxPredictor_0/ClassPredictor/biases")
    if cls_bias is not None:
        facts["num_classes"] = int(cls_bias.shape[0]) // anchors_layer0 - (1 if background else 0)
    pw13 = weights.get(FE + "Conv2d_13_pointwise/weights")
    if pw13 is not None:
        facts["depth_multiplier"] = _depth_multiplier(int(pw13.shape[-1]))
        # min_depth shows only where it clamped a layer: max(int(d * multiplier), min_depth).
        clamped, depths = set(), []
        for i, kind, _, base in MOBILENET_V1_BLOCKS:
            w = weights.get(FE + (f"Conv2d_{i}/weights" if kind == "conv" else f"Conv2d_{i}_pointwise/weights"))
            if w is not None:
                depths.append(int(w.shape[-1]))
                if depths[-1] > int(base * facts["depth_multiplier"]):
                    clamped.add(depths[-1])
        if len(clamped) == 1:
            facts["min_depth"] = clamped.pop()
        elif not clamped and depths and min(depths) < min_depth:
            facts["min_depth"] = min(depths)
    facts["use_depthwise"] = any(re.match(FE + r"Conv2d_13_pointwise_2_Conv2d_\d+_3x3_s2_\d+_depthwise/", n)
                                 for n in weights)
    dw = weights.get("BoxPredictor_0/BoxEncodingPredictor_depthwise/depthwise_weights")
    facts["box_predictor_use_depthwise"] = dw is not None
    kernel = dw if dw is not None else weights.get("BoxPredictor_0/BoxEncodingPredictor/weights")
    if kernel is not None:
        facts["box_predictor_kernel_size"] = int(kernel.shape[0])
    return facts


def weight_classes(weights: dict) -> int | None:
    """The class count of an SSD MobileNet v1's weights, from its first box predictor: class
    columns (background included) over the box encodings' 4 per anchor; None for other heads."""
    anchors = _box_predictor_anchors(weights)
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
    fields = fit_anchor_grid(config, shapes, anchors, form)
    if fields is None:
        count = sum(gh * gw * n for (gh, gw), n in zip(shapes, config.anchors_per_location()))
        what = (f"{len(anchors)} anchors where this config's feature maps {shapes} have {count}"
                if difference == float("inf") else f"anchors {difference:.3g} away from this config's at most")
        raise ConfigError(f"{source.graph_from}: its anchor generator gives {what}, and no base anchor size, "
                          "strides and offsets of an ssd_anchor_generator give its anchors")
    changed = {k: v for k, v in fields.items() if getattr(config, k) != v}
    notes.append("anchor grid from the graph's anchors, not " + origin + ": "
                 + ", ".join(f"{k}={_show(v)}" for k, v in sorted(changed.items())))
    return config.replace(**fields)


def _box_predictor_anchors(weights: dict) -> list | None:
    """Anchors per location of each feature map, from the box encoding heads' output channels."""
    counts = []
    for i in range(6):
        bias = weights.get(f"BoxPredictor_{i}/BoxEncodingPredictor/biases")
        if bias is None:
            return None
        counts.append(int(bias.shape[0]) // BOX_CODE_SIZE)
    return counts


_PREDICTOR = re.compile(r"^BoxPredictor_(\d+)/")
_EXTRA_LAYER = re.compile(FE + r"(Conv2d_13_pointwise_2_Conv2d_\d+_(\d+)x(\d+)_s2_\d+)/")


def check_feature_extractor(weights: dict, where: str) -> None:
    """Refuses weights of another SSD feature extractor than ssd_mobilenet_v1 in one line.

    The box predictors (`BoxPredictor_<i>`, one per feature map) and the extra layers' kernels
    show it before anything else is read: the OD API's embedded_ssd_mobilenet_v1 (AIY vision
    kit models) has 5 feature maps and a 2x2 last extra layer
    (`Conv2d_13_pointwise_2_Conv2d_4_2x2_s2_<depth>`, VALID-padded); ssd_mobilenet_v1 has 6 and
    3x3 ones. Its anchors (5 layers) would be refused too, but as anchors, which misleads.

    Raises:
      ConfigError: naming `where`, the feature maps and the extra layer seen.
    """
    predictors = {int(m.group(1)) for m in map(_PREDICTOR.match, weights) if m}
    odd = sorted({m.group(1) for m in map(_EXTRA_LAYER.match, weights) if m and m.group(2) != "3"})
    if odd and len(predictors) == 5:
        raise ConfigError(f"{where}: the feature extractor is embedded_ssd_mobilenet_v1 (5 feature maps, 2x2 kernel "
                          f"extra layer {odd[0]}), which is not supported: only ssd_mobilenet_v1 (6 feature maps) is")
    if predictors and len(predictors) != 6:
        raise ConfigError(f"{where}: {len(predictors)} box predictors (feature maps), which is not an "
                          "ssd_mobilenet_v1 feature extractor (6 feature maps); other feature extractors are not "
                          "supported")
    if odd:
        raise ConfigError(f"{where}: extra feature map layer {odd[0]} has a kernel ssd_mobilenet_v1 does not build "
                          "(3x3): another feature extractor, not supported")


def _quantization_text(weight_bits: int, activation_bits: int, float_text: str) -> str:
    if not weight_bits:
        return float_text
    return f"a quantization-aware model ({weight_bits}-bit weights, {activation_bits}-bit activations)"


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
    said = _quantization_text(config.weight_bits, config.activation_bits, "a float model")
    held = (f"{len(ranges)} FakeQuant ranges (e.g. {ranges[0]})" if ranges
            else "no FakeQuant ranges (weights_quant/act_quant min and max)")
    raise MismatchError(f"{source.weights_from} holds {held}, but {where} describes {said}")


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


def infer_config(source, trust_weights=False, image_size=None):
    """(SSDConfig, notes): the config to convert with and what was inferred or overridden.

    Raises:
      ConfigError: the pipeline.config is unreadable or unsupported.
      MismatchError: pipeline.config and weights disagree (without `trust_weights`).
    """
    notes = []
    if source.pipeline_config is not None:
        try:
            config = SSDConfig.from_pipeline_config(source.pipeline_config)
        except ConfigError as e:
            raise e.at(source.pipeline_config_from) from None
    else:
        config = SSDConfig()
        notes.append("no pipeline.config: starting from the zoo defaults (ssd_mobilenet_v1_coco)"
                     + ("" if source.graph_def is not None else "; without a graph the anchor generator's fields "
                        "stay the defaults (`migrate verify` shows it at Postprocessor/Decode if the model's differ)"))
    # Before the graph's traits and anchors: another feature extractor fails those in misleading ways.
    check_feature_extractor(source.weights, source.weights_from)
    if source.graph_def is not None:
        try:
            traits = graph_traits(source.graph_def)
        except ConfigError as e:
            raise ConfigError(f"{source.graph_from}: {e}") from None
        if source.pipeline_config is not None:
            for key in ("image_height", "image_width"):
                if key in traits and traits[key] != getattr(config, key):
                    raise MismatchError(f"{source.pipeline_config_from} says {key} {getattr(config, key)}, "
                                        f"the graph {source.graph_from} resizes to {traits[key]}")
            quantized = (traits["weight_bits"], traits["activation_bits"])
            if quantized != (config.weight_bits, config.activation_bits):
                graph_is = ("is " + _quantization_text(*quantized, "") if quantized[0] else "has no FakeQuant ops")
                raise MismatchError(
                    f"{source.pipeline_config_from} describes "
                    f"{_quantization_text(config.weight_bits, config.activation_bits, 'a float model')}, the graph "
                    f"{source.graph_from} {graph_is}")
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
        notes.append("no graph: NMS order, batch-norm kernel, preprocessing order, 2017-era padding/anchor "
                     "order and the anchors' exact scales cannot be read off a graph and are assumed as in SSDConfig "
                     f"defaults ({config.nms_variant}, resize before scaling, the ssd_anchor_generator formula for "
                     "the interpolated scales); "
                     "convert with the .meta or frozen graph beside the checkpoint to be sure")
    layers = anchor_box_specs(source.graph_def) if source.graph_def is not None else None
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
        notes.append("image size 300x300 assumed (no graph, no pipeline.config): override with --image-size H W")
    config = _check_quantization(source, config, notes)
    held = _box_predictor_anchors(source.weights)
    if held is not None and held != config.anchors_per_location():
        where = (f"{source.pipeline_config_from}'s anchor_generator" if source.pipeline_config is not None
                 else "the zoo defaults' anchor generator (no pipeline.config, no graph to read it from)")
        fix = ("" if source.pipeline_config is not None
               else ": convert with the model's pipeline.config or its graph (.meta, frozen graph) beside the weights")
        raise MismatchError(f"{source.weights_from}: the box predictors hold {held} anchors per location, {where} "
                            f"gives {config.anchors_per_location()}{fix}")
    facts = weight_facts(source.weights, config.anchors_per_location()[0], config.min_depth,
                         config.add_background_class)
    if "depth_multiplier" in facts and _layer_depths(facts["depth_multiplier"]) == _layer_depths(config.depth_multiplier):
        # The weights show layer depths, not the float that made them: a configured multiplier
        # that builds the same layers agrees with them (1.4 -> 1433 channels, read back 1.3994).
        facts["depth_multiplier"] = config.depth_multiplier
    # Without a pipeline.config the defaults are only a starting point, not a claim to check.
    mismatches = [(key, getattr(config, key), value) for key, value in facts.items()
                  if source.pipeline_config is not None and getattr(config, key) != value]
    if mismatches and not trust_weights:
        detail = "; ".join(f"{k} is {_show(c)} in the config but {_show(v)} in the weights" for k, c, v in mismatches)
        raise MismatchError(f"{source.pipeline_config_from} disagrees with {source.weights_from}: {detail} "
                            "(--trust-weights takes the weights' values)")
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
