"""The declarative TF1 -> TF2 weight name map.

The Keras model names its layers after the TF1 scopes and its variables after slim's leaf
names (see `ssd_mobilenet.layers`), so the map is a few renames. Everything in a TF1
checkpoint that is not a model weight must match an ignore rule, with its reason, or be a
weight the model's feature extractor declares unused (`SSDMobileNetV1.unused_tf1_weights`).
"""

from __future__ import annotations

import re

# A quantization-aware model's FakeQuant range variables (leaf of the TF1 name).
QUANT_RANGE = re.compile(r"/(weights_quant|act_quant)/(min|max)$")

# (TF1 name pattern, TF2 Keras variable path template). First match wins.
RULES = (
    # A quantization-aware graph's FakeQuant ranges live in the ops' name scope, which slim's
    # mobilenet_v1_base opens twice for the base layers (their weights' variable scope once).
    (r"^FeatureExtractor/MobilenetV1/MobilenetV1/(?P<rest>[^/]+/(weights_quant|act_quant)/(min|max))$",
     r"\g<rest>"),
    (r"^FeatureExtractor/MobilenetV1/(?P<rest>.+)$", r"\g<rest>"),
    (r"^(?P<rest>BoxPredictor_\d+/.+)$", r"\g<rest>"),
    (r"^(?P<rest>WeightSharedConvolutionalBoxPredictor/.+)$", r"\g<rest>"),
)

# (TF1 name pattern, reason it carries no inference weight).
IGNORE = (
    (r"(^|/)global_step$", "training step counter"),
    (r"/(RMSProp|RMSProp_1|Momentum|Adam|Adam_1|Adagrad|Ftrl|Ftrl_1)$", "optimizer slot"),
    (r"^(beta1_power|beta2_power)$", "optimizer state"),
    (r"/ExponentialMovingAverage$", "moving-average shadow (used only with --use-moving-averages)"),
)


def tf2_path(tf1_name: str):
    """The Keras variable path a TF1 variable maps to, or None when no rule matches."""
    for pattern, template in RULES:
        m = re.match(pattern, tf1_name)
        if m:
            return m.expand(template)
    return None


def ignore_reason(tf1_name: str):
    for pattern, reason in IGNORE:
        if re.search(pattern, tf1_name):
            return reason
    return None
