"""The SSDConfig of a source: pipeline.config + graph traits + what the weights prove.

Weights decide the architecture facts they encode (class count, depth multiplier,
use_depthwise, predictor kernel); a pipeline.config that disagrees is an error unless the
user trusts the weights.
"""

from __future__ import annotations

import re

from migrate.graph_traits import TFLITE_POSTPROCESS_OP, graph_traits, is_tflite_export, tflite_postprocess_node
from ssd_mobilenet.backbone import EXTRA_LAYER_DEPTHS, MOBILENET_V1_BLOCKS
from ssd_mobilenet.config import ConfigError, SSDConfig

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


def weight_facts(weights: dict, anchors_layer0: int = 3) -> dict:
    """SSDConfig fields the TF1 weights determine (only those they hold evidence for)."""
    facts = {}
    cls_bias = weights.get("BoxPredictor_0/ClassPredictor/biases")
    if cls_bias is not None:
        facts["num_classes"] = int(cls_bias.shape[0]) // anchors_layer0 - 1
    pw13 = weights.get(FE + "Conv2d_13_pointwise/weights")
    if pw13 is not None:
        facts["depth_multiplier"] = _depth_multiplier(int(pw13.shape[-1]))
        # min_depth shows only where it clamped a layer: max(int(d * multiplier), min_depth).
        clamped = set()
        for i, kind, _, base in MOBILENET_V1_BLOCKS:
            w = weights.get(FE + (f"Conv2d_{i}/weights" if kind == "conv" else f"Conv2d_{i}_pointwise/weights"))
            if w is not None and int(w.shape[-1]) > int(base * facts["depth_multiplier"]):
                clamped.add(int(w.shape[-1]))
        if len(clamped) == 1:
            facts["min_depth"] = clamped.pop()
    facts["use_depthwise"] = any(re.match(FE + r"Conv2d_13_pointwise_2_Conv2d_\d+_3x3_s2_\d+_depthwise/", n)
                                 for n in weights)
    dw = weights.get("BoxPredictor_0/BoxEncodingPredictor_depthwise/depthwise_weights")
    facts["box_predictor_use_depthwise"] = dw is not None
    kernel = dw if dw is not None else weights.get("BoxPredictor_0/BoxEncodingPredictor/weights")
    if kernel is not None:
        facts["box_predictor_kernel_size"] = int(kernel.shape[0])
    return facts


def _refuse_quantized(source):
    """A quantization-aware model computes through FakeQuant ops that the float Keras model does
    not reproduce; converting it would change its outputs silently, so every source form refuses it
    (a pipeline.config with `graph_rewriter.quantization` is refused by `SSDConfig` itself)."""
    ranges = [n for n in source.weights if re.search(r"/(act_quant|weights_quant)/(min|max)$", n)]
    if ranges:
        raise ConfigError(f"{source.weights_from}: quantization-aware model ({len(ranges)} FakeQuant ranges, "
                          f"e.g. {ranges[0]}): not supported")
    if source.graph_def is not None:
        fake = [n.name for n in source.graph_def.node if n.op.startswith("FakeQuant")]
        if fake:
            raise ConfigError(f"{source.graph_from}: quantization-aware graph ({len(fake)} FakeQuant ops, "
                              f"e.g. {fake[0]}): not supported")


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


def _padded_size(size, multiple: int) -> tuple:
    return tuple(-(-s // multiple) * multiple for s in size)


def infer_config(source, trust_weights=False, image_size=None):
    """(SSDConfig, notes): the config to convert with and what was inferred or overridden.

    Raises:
      ConfigError: the pipeline.config is unreadable or unsupported.
      MismatchError: pipeline.config and weights disagree (without `trust_weights`).
    """
    notes = []
    _refuse_quantized(source)
    if source.pipeline_config is not None:
        try:
            config = SSDConfig.from_pipeline_config(source.pipeline_config)
        except ConfigError as e:
            raise ConfigError(f"{source.pipeline_config_from}: {e}") from None
    else:
        config = SSDConfig()
        notes.append("no pipeline.config: starting from the zoo defaults (ssd_mobilenet_v1_coco)")
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
            # The graph's post-processing constants are what produced the TF1 detections.
            for key in sorted(POSTPROCESSING_FIELDS & set(traits)):
                if traits[key] != getattr(config, key):
                    notes.append(f"{key}: {traits[key]} in the graph overrides {getattr(config, key)} "
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
        notes.append("from the graph: " + ", ".join(f"{k}={v}" for k, v in sorted(traits.items())))
    else:
        notes.append("no graph: NMS order, batch-norm kernel and 2017-era padding/anchor order cannot be read "
                     f"off a graph and are assumed as in SSDConfig defaults ({config.nms_variant}); "
                     "convert with the .meta or frozen graph beside the checkpoint to be sure")
    if image_size is not None:
        if config.pad_to_multiple > 1 and source.pipeline_config is None:
            notes.append(f"pad_to_multiple {config.pad_to_multiple}: the smallest multiple giving the graph's padded "
                         "size; at --image-size it may pad otherwise than the model's own (a pipeline.config "
                         "states it)")
        config = config.replace(image_height=image_size[0], image_width=image_size[1])
        notes.append(f"image size {image_size[0]}x{image_size[1]} from --image-size")
    elif source.graph_def is None and source.pipeline_config is None:
        notes.append("image size 300x300 assumed (no graph, no pipeline.config): override with --image-size H W")
    facts = weight_facts(source.weights, config.anchors_per_location()[0])
    if "depth_multiplier" in facts and _layer_depths(facts["depth_multiplier"]) == _layer_depths(config.depth_multiplier):
        # The weights show layer depths, not the float that made them: a configured multiplier
        # that builds the same layers agrees with them (1.4 -> 1433 channels, read back 1.3994).
        facts["depth_multiplier"] = config.depth_multiplier
    # Without a pipeline.config the defaults are only a starting point, not a claim to check.
    mismatches = [(key, getattr(config, key), value) for key, value in facts.items()
                  if source.pipeline_config is not None and getattr(config, key) != value]
    if mismatches and not trust_weights:
        show = lambda x: f"{x:.7g}" if isinstance(x, float) else str(x)  # noqa: E731 (0.35, not 0.3499999940395355)
        detail = "; ".join(f"{k} is {show(c)} in the config but {show(v)} in the weights" for k, c, v in mismatches)
        raise MismatchError(f"{source.pipeline_config_from} disagrees with {source.weights_from}: {detail} "
                            "(--trust-weights takes the weights' values)")
    for key, configured, value in mismatches:
        notes.append(f"{key}: {value} from the weights overrides {configured} from pipeline.config (--trust-weights)")
    if source.pipeline_config is None:
        notes.append("from the weights: " + ", ".join(f"{k}={v}" for k, v in sorted(facts.items())))
    try:
        config = config.replace(**facts)
    except ConfigError as e:
        raise ConfigError(f"{source.weights_from}: {e}") from None
    return config, notes
