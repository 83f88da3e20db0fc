"""Finding and reading a TF1 model source: checkpoint, frozen graph, SavedModel, pipeline.config.

Every reader returns the same `Source`: weights as {tf1_variable_name: ndarray}, the graph if
there is one, and the pipeline.config text if there is one, so that what follows does not care
which form the user had. No graph is executed here; frozen-graph weights are read from Const nodes.
"""

from __future__ import annotations

import dataclasses
import os
import re

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import tensor_util

from migrate.tf1 import name_map
from ssd_mobilenet.errors import InputError


@dataclasses.dataclass
class Source:
    path: str                       # what the user named
    weights: dict                   # {tf1 name: ndarray}
    weights_from: str               # the file the weights came from
    graph_def: object = None        # tf.compat.v1.GraphDef or None
    graph_from: str = None
    pipeline_config: str = None     # text
    pipeline_config_from: str = None
    files: list = dataclasses.field(default_factory=list)  # every file read
    # What wrote the graph: the TF release a meta graph or SavedModel records, and the
    # GraphDef version (`versions.producer`) every graph has (24 for TF 1.3..1.5, 27 for 1.12).
    tensorflow_version: str = None
    graph_def_version: int = None


# slim leaf names of the variables a model weight can have (the weight-shared box predictor's batch
# norm is one per feature map, `BatchNorm/feature_<j>/gamma`).
_WEIGHT_LEAF = re.compile(r"/(weights|depthwise_weights|pointwise_weights|biases|"
                          r"BatchNorm(/feature_\d+)?/(gamma|beta|moving_mean|moving_variance))$")


def _checkpoint_prefix(directory: str):
    """The checkpoint prefix in `directory`: from its `checkpoint` file, else the one `.index`."""
    state = os.path.join(directory, "checkpoint")
    if os.path.isfile(state):
        # get_checkpoint_state, not latest_checkpoint: that one logs an ERROR line to stderr when
        # the named files are missing, which then comes out before our one-line error.
        try:
            named = tf.train.get_checkpoint_state(directory).model_checkpoint_path
        except Exception:  # noqa: BLE001 - a corrupt state file is reported below
            named = None
        if named:
            prefix = named if os.path.isabs(named) else os.path.join(directory, named)
            if os.path.isfile(prefix + ".index"):
                return prefix
    indexes = sorted(f for f in os.listdir(directory) if f.endswith(".index"))
    if len(indexes) > 1:
        raise InputError(f"{directory}: {len(indexes)} checkpoints ({indexes[-1][:-len('.index')]}, ...): name one "
                         "by its prefix")
    return os.path.join(directory, indexes[0][:-len(".index")]) if indexes else None


def read_checkpoint(prefix: str) -> dict:
    index = prefix + ".index"
    if not os.path.isfile(index):
        raise InputError(f"{index}: not found")
    data = [f for f in os.listdir(os.path.dirname(prefix) or ".")
            if f.startswith(os.path.basename(prefix) + ".data-")]
    if not data:
        raise InputError(f"{index}: checkpoint index without its data file ({os.path.basename(prefix)}.data-*)")
    try:
        reader = tf.train.load_checkpoint(prefix)
        return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    except Exception as e:  # noqa: BLE001 - TF raises several types for corrupt files
        raise InputError(f"{index}: unreadable checkpoint ({_first_line(e)})") from None


def read_graph_def(path: str):
    graph_def = tf.compat.v1.GraphDef()
    try:
        with open(path, "rb") as f:
            graph_def.ParseFromString(f.read())
    except Exception as e:  # noqa: BLE001 - DecodeError and friends
        raise InputError(f"{path}: not a readable GraphDef ({_first_line(e)})") from None
    if not graph_def.node:
        raise InputError(f"{path}: empty graph")
    return graph_def


def read_meta_graph(path: str):
    """The `MetaGraphDef` of a checkpoint's `.meta` file."""
    meta = tf.compat.v1.MetaGraphDef()
    try:
        with open(path, "rb") as f:
            meta.ParseFromString(f.read())
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{path}: not a readable MetaGraphDef ({_first_line(e)})") from None
    if not meta.graph_def.node:
        raise InputError(f"{path}: meta graph without a graph")
    return meta


def read_saved_model(directory: str):
    """(meta_graph_def, weights or None) of a TF1 SavedModel; weights come from `variables/` if
    present, else from the graph's constants."""
    from tensorflow.core.protobuf import saved_model_pb2
    pb = os.path.join(directory, "saved_model.pb")
    sm = saved_model_pb2.SavedModel()
    try:
        with open(pb, "rb") as f:
            sm.ParseFromString(f.read())
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{pb}: not a readable SavedModel ({_first_line(e)})") from None
    if not sm.meta_graphs:
        raise InputError(f"{pb}: SavedModel without a meta graph")
    prefix = os.path.join(directory, "variables", "variables")
    weights = read_checkpoint(prefix) if os.path.isfile(prefix + ".index") else None
    return sm.meta_graphs[0], weights


def graph_constants(graph_def) -> dict:
    """Model weights frozen into a graph: Const nodes named like slim variables or FakeQuant ranges."""
    out = {}
    for node in graph_def.node:
        if (node.op == "Const" and (_WEIGHT_LEAF.search(node.name) or name_map.QUANT_RANGE.search(node.name))
                and name_map.tf2_path(node.name) is not None):
            out[node.name] = np.asarray(tensor_util.MakeNdarray(node.attr["value"].tensor))
    return out


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def open_source(path: str) -> Source:
    """Reads whatever TF1 model forms `path` (a directory or a file in one) holds.

    Weights come from, in order of preference: a checkpoint, a SavedModel's variables, a
    frozen graph's constants, a SavedModel's constants. The graph from: a frozen graph, a
    SavedModel, a checkpoint's `.meta`. A pipeline.config (or any `.config` / `.pbtxt` file) named
    stands for its directory read with that config.
    """
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise InputError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        directory, named = path, None
    else:
        directory, named = os.path.dirname(path) or ".", path
    src = Source(path=path, weights=None, weights_from=None)
    config_named = named is not None and named.endswith((".config", ".pbtxt"))
    if config_named:
        named = None

    def take_config(p):
        try:
            with open(p, encoding="utf-8") as f:
                src.pipeline_config = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"{p}: unreadable ({e})") from None
        src.pipeline_config_from = p
        src.files.append(p)

    prefix = tflite = None
    if named is not None:
        base = os.path.basename(named)
        if base.endswith(".pb") and base != "saved_model.pb":
            src.graph_def, src.graph_from = read_graph_def(named), named
            src.files.append(named)
        elif base == "saved_model.pb":
            directory = os.path.dirname(named) or "."
        elif re.search(r"\.(index|meta|data-\d+-of-\d+)$", base) or os.path.isfile(named + ".index"):
            prefix = re.sub(r"\.(index|meta|data-\d+-of-\d+)$", "", named)
        else:
            raise InputError(f"{named}: not a checkpoint, .pb graph or pipeline.config")
    else:
        if config_named:
            take_config(path)
        entries = os.listdir(directory)
        if not entries:
            raise InputError(f"{directory}: empty directory")
        prefix = _checkpoint_prefix(directory)
        frozen = os.path.join(directory, "frozen_inference_graph.pb")
        # export_tflite_ssd_graph's output: the network's weights as constants (`graph_traits`);
        # its graph is the last resort, after a checkpoint's .meta (whose graph verify can run).
        tflite = os.path.join(directory, "tflite_graph.pb")
        if os.path.isfile(frozen):
            src.graph_def, src.graph_from = read_graph_def(frozen), frozen
            src.files.append(frozen)
        config = os.path.join(directory, "pipeline.config")
        if os.path.isfile(config) and not config_named:
            take_config(config)
        sm_dir = os.path.join(directory, "saved_model")
        if os.path.isfile(os.path.join(directory, "saved_model.pb")):
            sm_dir = directory
        if os.path.isfile(os.path.join(sm_dir, "saved_model.pb")):
            meta, weights = read_saved_model(sm_dir)
            src.files.append(os.path.join(sm_dir, "saved_model.pb"))
            src.tensorflow_version = meta.meta_info_def.tensorflow_version or None
            if src.graph_def is None:
                src.graph_def, src.graph_from = meta.graph_def, os.path.join(sm_dir, "saved_model.pb")
            if weights is not None and prefix is None:
                src.weights, src.weights_from = weights, os.path.join(sm_dir, "variables", "variables.index")
    if prefix is not None:
        src.weights, src.weights_from = read_checkpoint(prefix), prefix + ".index"
        src.files += [prefix + ".index"] + sorted(
            os.path.join(os.path.dirname(prefix), f) for f in os.listdir(os.path.dirname(prefix) or ".")
            if f.startswith(os.path.basename(prefix) + ".data-"))
        if os.path.isfile(prefix + ".meta"):
            meta = read_meta_graph(prefix + ".meta")
            src.files.append(prefix + ".meta")
            src.tensorflow_version = meta.meta_info_def.tensorflow_version or src.tensorflow_version
            if src.graph_def is None:
                src.graph_def, src.graph_from = meta.graph_def, prefix + ".meta"
    if src.graph_def is None and tflite is not None and os.path.isfile(tflite):
        src.graph_def, src.graph_from = read_graph_def(tflite), tflite
        src.files.append(tflite)
    if src.graph_def is not None:
        src.graph_def_version = int(src.graph_def.versions.producer) or None
    if src.weights is None and src.graph_def is not None:
        consts = graph_constants(src.graph_def)
        if consts:
            src.weights, src.weights_from = consts, src.graph_from
    if src.weights is None and src.graph_def is not None:
        # A frozen graph of another feature extractor holds no weight named as this tool reads them.
        from migrate.tf1.architecture import graph_weight_names, other_feature_extractor
        other = other_feature_extractor(graph_weight_names(src.graph_def))
        if other is not None:
            raise InputError(f"{src.graph_from}: feature extractor {other} not supported")
    if src.weights is None:
        data = sorted(f for f in os.listdir(directory) if re.search(r"\.data-\d+-of-\d+$", f))
        if data:
            missing = os.path.join(directory, re.sub(r"\.data-\d+-of-\d+$", ".index", data[0]))
            raise InputError(f"{missing}: not found (the checkpoint's {data[0]} is there without its index)")
        what = "a pipeline.config but no weights" if src.pipeline_config else "no TF1 model files"
        raise InputError(f"{path}: {what} (a checkpoint, frozen graph or SavedModel is needed)")
    return src
