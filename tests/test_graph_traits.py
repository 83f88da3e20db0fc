"""`migrate.graph_traits`: what the published graphs show of the releases that wrote them.

The score path (the ops from the class logits `concat_1` to NMS) differs between releases in
ways a pipeline.config does not record; every op on it must be accounted for.
"""

import copy

import pytest
import tensorflow as tf

from conftest import DEPTHWISE, QUANTIZED, TF13, ZOO_2017, ZOO_2018, needs_shared, zoo_path
from migrate import graph_traits, sources
from ssd_mobilenet.config import BACKGROUND_SLICE_LOGITS, BACKGROUND_SLICE_SCORES

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
    with pytest.raises(graph_traits.ScorePathError, match="Postprocessor/temperature \\(Mul\\)"):
        graph_traits.graph_traits(graph_def)


@needs_shared
def test_a_slice_other_than_the_background_column_is_refused():
    graph_def = copy.deepcopy(_graph(ZOO_2017))
    begin = next(n for n in graph_def.node if n.name == "Postprocessor/Slice/begin")
    begin.attr["value"].tensor.CopyFrom(tf.make_tensor_proto([0, 0, 2], dtype=tf.int32))
    with pytest.raises(graph_traits.ScorePathError, match="Postprocessor/Slice"):
        graph_traits.score_path_traits(graph_def)
