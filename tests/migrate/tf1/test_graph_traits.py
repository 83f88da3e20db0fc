"""`migrate.tf1.graph_traits`: what the published graphs show of the releases that wrote them.

The score path (the ops from the class logits `concat_1` to NMS) differs between releases in
ways a pipeline.config does not record; every op on it must be accounted for.
"""

import copy

import pytest
import tensorflow as tf

from tests.conftest import DEPTHWISE, QUANTIZED, TF13, ZOO_2017, ZOO_2018, needs_shared, zoo_path
from migrate.tf1 import graph_traits, sources
from ssd_mobilenet.config.ssd_config import BACKGROUND_SLICE_LOGITS, BACKGROUND_SLICE_SCORES
from ssd_mobilenet.errors import ConfigError

# What each published graph's score path holds, read off the graphs (see ../shared/zoo/README.md).
SCORE_PATHS = {
    TF13: ("Slice", "Sigmoid"),                               # TF 1.3: no scale_logits
    ZOO_2017: ("Slice", "RealDiv", "Sigmoid"),                # TF 1.4: slice, scale_logits, convert_scores
    ZOO_2018: ("RealDiv", "Sigmoid", "Slice"),                # TF 1.5: convert first, slice the scores
    QUANTIZED: ("RealDiv", "Sigmoid", "Identity", "Slice"),   # TF 1.9: raw_box_scores between
    DEPTHWISE: ("RealDiv", "Sigmoid", "Identity", "Slice"),   # TF 1.12
}


def _graph(name):
    return sources.read_meta_graph(zoo_path(name, "model.ckpt.meta")).graph_def


@needs_shared
@pytest.mark.parametrize("name", sorted(SCORE_PATHS))
def test_score_path_of_every_published_graph(name):
    graph_def = _graph(name)
    paths = graph_traits.score_paths(graph_def)
    assert paths and {tuple(n.op for n in p) for p in paths} == {SCORE_PATHS[name]}
    traits = graph_traits.score_path_traits(graph_def)
    sliced_first = SCORE_PATHS[name][0] == "Slice"
    assert traits == {"score_converter": "SIGMOID", "logit_scale": 1.0, "add_background_class": True,
                      "background_slice": BACKGROUND_SLICE_LOGITS if sliced_first else BACKGROUND_SLICE_SCORES}


@needs_shared
def test_an_op_on_the_score_path_that_is_not_reproduced_is_refused():
    """A Mul inserted between the converter and the slice would change every score: refused by name."""
    graph_def = copy.deepcopy(_graph(ZOO_2018))
    nodes = {n.name: n for n in graph_def.node}
    extra = graph_def.node.add(name="Postprocessor/temperature", op="Mul",
                               input=["Postprocessor/convert_scores", "Postprocessor/scale_logits/y"])
    extra.attr["T"].type = nodes["Postprocessor/convert_scores"].attr["T"].type
    nodes["Postprocessor/Slice"].input[0] = extra.name
    with pytest.raises(ConfigError, match="Postprocessor/temperature \\(Mul\\)"):
        graph_traits.graph_traits(graph_def)


@needs_shared
def test_a_slice_other_than_the_background_column_is_refused():
    graph_def = copy.deepcopy(_graph(ZOO_2017))
    begin = next(n for n in graph_def.node if n.name == "Postprocessor/Slice/begin")
    begin.attr["value"].tensor.CopyFrom(tf.make_tensor_proto([0, 0, 2], dtype=tf.int32))
    with pytest.raises(ConfigError, match="Postprocessor/Slice"):
        graph_traits.score_path_traits(graph_def)


# ---- the preprocessing order ----------------------------------------------------------------

def _preprocessor_graph(order: str, static_batch: bool = False):
    """A GraphDef holding only an OD API `Preprocessor` (float32 [N, H, W, 3] `Cast` -> [N, 64, 80, 3]),
    written here the way the OD API code writes it: `tf.map_fn` over the images (TF1 control flow,
    a TensorArray scatter and gather), or `tf.unstack`/`tf.stack` for a static batch
    (`shape_utils.static_or_dynamic_map_fn`). `order`: resize_first (2017-2018 exports: scale the
    loop's output), normalize_first (`ssd_meta_arch.preprocess` of TF 1.15 era code: loop over
    the scaled image), or neither (both read the cast image: no OD API order)."""
    tf1 = tf.compat.v1
    was_v2 = tf1.control_flow_v2_enabled()
    tf1.disable_control_flow_v2()  # the loop's nodes in the GraphDef, as in TF1 exports
    try:
        graph = tf.Graph()
        with graph.as_default():
            shape = [2 if static_batch else None, None, None, 3]
            image = tf.cast(tf1.placeholder(tf.uint8, shape, name="image_tensor"), tf.float32, name="Cast")

            def resize(x):
                with tf1.name_scope("ResizeImage"):
                    out = tf.raw_ops.ResizeBilinear(images=x[None], size=[64, 80], half_pixel_centers=False)
                    return tf.squeeze(out, [0])

            def resize_all(x):
                if static_batch:
                    return tf.stack([resize(i) for i in tf.unstack(x)])
                return tf1.map_fn(resize, x, fn_output_signature=tf.float32)

            with tf1.name_scope("Preprocessor"):
                if order == "normalize_first":
                    out = resize_all((2.0 / 255.0) * image - 1.0)
                elif order == "resize_first":
                    out = (2.0 / 255.0) * resize_all(image) - 1.0
                else:
                    out = tf.concat([resize_all(image), (2.0 / 255.0) * image - 1.0], 0)
            tf.identity(out, name="preprocessed")
        return graph.as_graph_def()
    finally:
        if was_v2:
            tf1.enable_control_flow_v2()


@pytest.mark.parametrize("static_batch", [False, True])
def test_preprocessing_order_is_read_off_the_resize_loop(static_batch):
    """Resize-first: Preprocessor/mul reads the loop's output, and Preprocessor/sub is the image the
    feature extractor gets. Normalize-first: the loop reads Preprocessor/sub (the full-size image);
    the loop's output is the preprocessed image."""
    first = _preprocessor_graph("resize_first", static_batch)
    assert graph_traits.preprocessing_order(first) == {"normalize_before_resize": False}
    assert graph_traits.preprocessed_image(first) == "Preprocessor/sub:0"
    later = _preprocessor_graph("normalize_first", static_batch)
    assert graph_traits.preprocessing_order(later) == {"normalize_before_resize": True}
    nodes = {n.name: n for n in later.node}
    image = graph_traits.preprocessed_image(later)
    assert image == ("Preprocessor/stack:0" if static_batch else "Preprocessor/map/TensorArrayStack/TensorArrayGatherV3:0")
    assert nodes["preprocessed"].input[0] == image.split(":")[0]


def test_a_preprocessor_in_neither_order_is_refused():
    with pytest.raises(ConfigError, match="cannot tell if the Preprocessor scales before or after "
                                          "resizing"):
        graph_traits.graph_traits(_preprocessor_graph("neither"))
    assert graph_traits.preprocessed_image(_preprocessor_graph("neither")) is None


@needs_shared
@pytest.mark.parametrize("name", sorted(SCORE_PATHS))
def test_every_published_graph_resizes_first(name):
    graph_def = _graph(name)
    assert graph_traits.preprocessing_order(graph_def) == {"normalize_before_resize": False}
    assert graph_traits.preprocessed_image(graph_def) == "Preprocessor/sub:0"
