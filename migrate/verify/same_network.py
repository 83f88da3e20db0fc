"""Whether the TF1 model and the converted one are the same network, checked before either runs.

Two networks whose tensors have other shapes (another input size, class count, depth, feature
maps or anchors per location) cannot be compared stage by stage: that is no numeric finding, so
`verify` refuses the pair in one line naming what differs and what to do.
"""

from __future__ import annotations

from migrate.common.console import shown
from migrate.tf1 import config_inference
from ssd_mobilenet import anchor_generators
from ssd_mobilenet.config.ssd_config import float_text
from ssd_mobilenet.errors import InputError

IMAGE_SIZE = "image size"

# What sets the shapes of a network's tensors: (what the message calls it, its value as shown).
SHAPE_FACTS = (
    (IMAGE_SIZE, lambda c: f"{c.image_height}x{c.image_width}"),
    ("feature extractor", lambda c: c.feature_extractor_type),
    ("box predictor", lambda c: c.box_predictor_type),
    ("depth multiplier", lambda c: float_text(c.depth_multiplier)),
    ("classes", lambda c: str(c.num_classes)),
    ("feature maps", lambda c: str(c.num_feature_maps)),
    ("anchors per location", lambda c: "[" + " ".join(map(str, anchor_generators.anchors_per_location(c))) + "]"),
)


def tf1_config(source, converted_config):
    """The SSDConfig of the TF1 model in `source` (a `sources.Source`), as `convert` infers it
    with the weights trusted. A source without a graph gets the converted model's image size:
    verify builds its graph at that size (`inference_graph_of`)."""
    size = None if source.graph_def is not None else (converted_config.image_height, converted_config.image_width)
    config, _ = config_inference.infer_config(source, trust_weights=True, image_size=size)
    return config


def differences(tf1, converted) -> list:
    """[(fact, the converted model's value, the TF1 model's value)] of the `SHAPE_FACTS` that
    differ between two SSDConfigs, in `SHAPE_FACTS` order."""
    return [(what, value(converted), value(tf1)) for what, value in SHAPE_FACTS if value(converted) != value(tf1)]


def check_same_network(tf1, converted, converted_dir: str, src: str) -> None:
    """Raises `InputError` when the TF1 model at `src` (its config `tf1`) and the converted
    one in `converted_dir` (its config `converted`) differ in a `SHAPE_FACTS` fact.

    The message lists each difference; when the image size alone differs (a source converted
    without its graph or pipeline.config, at an assumed size) it says the `--image-size` to
    convert again with, else that the converted model is not a conversion of `src`.
    """
    diffs = differences(tf1, converted)
    if not diffs:
        return
    listed = "; ".join(f"{what} {ours}, TF1 {theirs}" for what, ours, theirs in diffs)
    if [what for what, _, _ in diffs] == [IMAGE_SIZE]:
        todo = f"convert again with --image-size {tf1.image_height} {tf1.image_width}"
    else:
        todo = "not a conversion of this model (verify the one it was converted from)"
    raise InputError(f"{shown(converted_dir)} against {shown(src)}: {listed}: {todo}")
