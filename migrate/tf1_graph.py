"""Running a TF1 inference graph under `tf.compat.v1`, fetching intermediate tensors by TF1 scope."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

tf1 = tf.compat.v1

DETECTION_OUTPUTS = ("detection_boxes", "detection_scores", "detection_classes", "num_detections")


def endpoint_candidates(model) -> dict:
    """{stage: (keras output key, [candidate TF1 tensor names])} in graph order.

    Stages are named by TF1 scope: `Preprocessor`, every feature extractor layer
    (`FeatureExtractor/MobilenetV1/Conv2d_7_pointwise`), `concat` (box encodings) and
    `concat_1` (class logits). slim's `mobilenet_v1_base` opens a second `MobilenetV1`
    name scope, so base layer ops live under `.../MobilenetV1/MobilenetV1/` while their
    variables do not; the extra layers have one level.
    """
    stages = {"Preprocessor": ("Preprocessor", ["Preprocessor/sub:0"])}
    for layer in model.endpoint_names:
        scope = f"FeatureExtractor/MobilenetV1/{layer}"
        stages[scope] = (layer, [f"FeatureExtractor/MobilenetV1/MobilenetV1/{layer}/Relu6:0", f"{scope}/Relu6:0"])
    stages["concat"] = ("box_encodings", ["concat:0"])
    stages["concat_1"] = ("class_predictions_with_background", ["concat_1:0"])
    return stages


class FrozenGraphRunner:
    """A session over a frozen `GraphDef`; one graph, many runs."""

    def __init__(self, graph_def, exact_arithmetic=False):
        """`exact_arithmetic=True` turns off the Grappler rewrites that change rounding.

        In a frozen graph, batch norm's scale is a constant, and Grappler folds it into the
        convolution weights (and reorders arithmetic), which moves results by ~1e-6 relative
        from the graph as written. With the rewrites off, the TF1 graph computes exactly what
        its ops say; that is the reference the stage-by-stage tests hold to bit parity.
        """
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf1.import_graph_def(graph_def, name="")
        config = tf1.ConfigProto()
        if exact_arithmetic:
            ro = config.graph_options.rewrite_options
            ro.arithmetic_optimization = rewriter_config_pb2.RewriterConfig.OFF
            ro.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
            ro.remapping = rewriter_config_pb2.RewriterConfig.OFF
        self.session = tf1.Session(graph=self.graph, config=config)
        self.input = self.graph.get_tensor_by_name("image_tensor:0")

    def has_tensor(self, name: str) -> bool:
        try:
            self.graph.get_tensor_by_name(name)
            return True
        except (KeyError, ValueError):
            return False

    def resolve(self, stages: dict) -> dict:
        """{stage: (key, tensor name)} for the stages whose tensor this graph has."""
        out = {}
        for stage, (key, candidates) in stages.items():
            found = [c for c in candidates if self.has_tensor(c)]
            if found:
                out[stage] = (key, found[0])
        return out

    def run(self, images: np.ndarray, fetches: dict) -> dict:
        """Runs `images` (uint8 [N, H, W, 3]) and returns {key: ndarray} for {key: tensor name}."""
        keys = list(fetches)
        values = self.session.run([fetches[k] for k in keys], {self.input: images})
        return dict(zip(keys, values))

    def close(self):
        self.session.close()
