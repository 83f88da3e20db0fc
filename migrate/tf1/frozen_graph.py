"""Running a TF1 inference graph under `tf.compat.v1`, fetching intermediate tensors by TF1 scope."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import tensor_util
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError

tf1 = tf.compat.v1


# The decoded boxes [N, A, 4] ([ymin, xmin, ymax, xmax], unclipped): the reshape after
# `Postprocessor/Decode` in every export seen (TF 1.3 .. 1.12); TF 1.9+ exports also name it.
DECODED_BOXES = ("Postprocessor/Decode",
                 ("decoded_boxes", ["Postprocessor/raw_box_locations:0", "Postprocessor/Reshape_2:0"]))

_VARIABLE_OPS = ("VariableV2", "Variable")


def freeze_inference_graph(graph_def, weights: dict, outputs=DETECTION_OUTPUTS):
    """The subgraph that computes `outputs`, with its variables replaced by constants.

    Nothing is executed: each `VariableV2` node the outputs depend on becomes a `Const` holding
    `weights[name]` (a checkpoint's saving, restoring and training ops are not part of the
    subgraph and are dropped). Device pins are cleared so a graph exported on a GPU runs here.

    Args:
      graph_def: a meta graph's or TF1 SavedModel's GraphDef.
      weights: {variable name: ndarray}.
      outputs: node names to keep (with everything they depend on).
    Raises:
      InputError: naming the variables without a value or with another shape.
    """
    sub = tf1.graph_util.extract_sub_graph(graph_def, list(outputs))
    frozen = tf1.GraphDef()
    frozen.versions.CopyFrom(sub.versions)
    frozen.library.CopyFrom(sub.library)
    problems = []
    for node in sub.node:
        out = frozen.node.add()
        if node.op not in _VARIABLE_OPS:
            out.CopyFrom(node)
            out.device = ""
            continue
        value = weights.get(node.name)
        shape = [d.size for d in node.attr["shape"].shape.dim]
        if value is None:
            problems.append(f"{node.name} has no value")
            continue
        if list(np.shape(value)) != shape:
            problems.append(f"{node.name} is {list(np.shape(value))}, the graph wants {shape}")
            continue
        dtype = tf.dtypes.as_dtype(node.attr["dtype"].type)
        out.name, out.op = node.name, "Const"
        out.attr["dtype"].CopyFrom(attr_value_pb2.AttrValue(type=dtype.as_datatype_enum))
        out.attr["value"].CopyFrom(attr_value_pb2.AttrValue(
            tensor=tensor_util.make_tensor_proto(np.asarray(value, dtype=dtype.as_numpy_dtype))))
    if problems:
        raise InputError("; ".join(problems[:5]) + (" ..." if len(problems) > 5 else ""))
    return frozen


FE_OP_SCOPE = "FeatureExtractor/MobilenetV1/MobilenetV1"  # slim's mobilenet_v1_base opens the scope twice
# The `Preprocessor` stage's candidate: the scaled image of graphs that resize first, and what
# `FrozenGraphRunner` resolves to the preprocessed image in any graph.
PREPROCESSED_IMAGE = "Preprocessor/sub:0"


def _output_ops(layer) -> tuple:
    """The op ending a Keras layer's TF1 scope: ReLU6 (in a quantization-aware graph the activation's
    FakeQuant after it), the bias add of a linear conv (FPN's projections), a max-pool (PPN's)."""
    import keras

    from ssd_mobilenet.layers import SlimConv
    if isinstance(layer, keras.layers.MaxPooling2D):
        return ("MaxPool",)
    if isinstance(layer, SlimConv) and not layer.relu6:
        return ("act_quant/FakeQuantWithMinMaxVars", "BiasAdd")
    return ("act_quant/FakeQuantWithMinMaxVars", "Relu6")


def endpoint_candidates(model) -> dict:
    """{stage: (keras output key, [candidate TF1 tensor names])} in graph order.

    Stages are named by TF1 scope: `Preprocessor`, every feature extractor layer
    (`FeatureExtractor/MobilenetV1/Conv2d_7_pointwise`, `.../fpn/top_down/smoothing_1`,
    `.../MaxPool2d_0_2x2`: `model.endpoint_scopes`), `concat` (box encodings) and
    `concat_1` (class logits). slim's `mobilenet_v1_base` opens a second `MobilenetV1`
    name scope, so base layer ops live under `.../MobilenetV1/MobilenetV1/` while their
    variables do not; the other layers have one level. `Preprocessor/sub:0` stands for the
    preprocessed image, which `FrozenGraphRunner.resolve` finds wherever the graph has it (in
    graphs that scale before resizing, `Preprocessor/sub` is the full-size image).
    """
    stages = {"Preprocessor": ("Preprocessor", [PREPROCESSED_IMAGE])}
    for layer, scope in model.endpoint_scopes.items():
        ops = _output_ops(model.get_layer(layer))
        stages[f"FeatureExtractor/MobilenetV1/{scope}"] = (
            layer, [f"{prefix}/{scope}/{op}:0" for op in ops for prefix in (FE_OP_SCOPE, "FeatureExtractor/MobilenetV1")])
    stages["concat"] = ("box_encodings", ["concat:0"])
    stages["concat_1"] = ("class_predictions_with_background", ["concat_1:0"])
    return stages


class FrozenGraphRunner:
    """A session over a frozen `GraphDef`; one graph, many runs."""

    def __init__(self, graph_def, exact_arithmetic=False):
        """`exact_arithmetic=True` turns Grappler off, and with it the rewrites that change rounding.

        In a frozen graph, batch norm's scale is a constant, and Grappler folds it into the
        convolution weights (constant folding, arithmetic optimisation, remapping), which moves
        results by ~1e-6 relative from the graph as written. With Grappler off, the TF1 graph
        computes exactly what its ops say; that is the reference the stage-by-stage tests hold
        to bit parity. Off as a whole rather than pass by pass: its other passes do not change
        values, and optimising the 7k-node zoo graph costs seconds per session.
        """
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf1.import_graph_def(graph_def, name="")
        config = tf1.ConfigProto()
        if exact_arithmetic:
            config.graph_options.rewrite_options.disable_meta_optimizer = True
        self.session = tf1.Session(graph=self.graph, config=config)
        self.input = self.graph.get_tensor_by_name("image_tensor:0")
        from migrate.tf1.graph_traits import head_concats, preprocessed_image
        heads = head_concats(graph_def)
        # `concat:0` / `concat_1:0` in stage candidates mean the box encodings / class logits,
        # wherever this graph has them (some exports swap the two names).
        self.head_tensors = {"concat:0": heads["box_encodings"] + ":0", "concat_1:0": heads["class_logits"] + ":0"}
        # `Preprocessor/sub:0` means the preprocessed image: the resize loop's output in graphs
        # that scale first; None (not compared) when the graph's order cannot be told.
        self.aliases = {**self.head_tensors, PREPROCESSED_IMAGE: preprocessed_image(graph_def)}

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
            found = [c for c in (self.aliases.get(c, c) for c in candidates) if c is not None and self.has_tensor(c)]
            if found:
                out[stage] = (key, found[0])
        return out

    def run(self, images: np.ndarray, fetches: dict, feeds: dict = None) -> dict:
        """Runs `images` (uint8 [N, H, W, 3]) and returns {key: ndarray} for {key: tensor name}.

        `feeds`: {tensor name: ndarray} fed in place of what the graph computes there (e.g. the
        class logits `concat_1:0`, to run post-processing on chosen values).
        """
        keys = list(fetches)
        feed_dict = {self.input: images, **{self.graph.get_tensor_by_name(k): v for k, v in (feeds or {}).items()}}
        values = self.session.run([fetches[k] for k in keys], feed_dict)
        return dict(zip(keys, values))

    def close(self):
        self.session.close()
