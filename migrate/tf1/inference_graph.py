"""The TF1 model at a source as a frozen inference graph ready to run: frozen with the source's
weights (or built by `builder` for a checkpoint alone), pruned to the detections and the stages
compared, its ops checked against `op_allowlist` before anything runs."""

from __future__ import annotations

from migrate.tf1 import config_inference, frozen_graph, graph_traits, op_allowlist, sources
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError


def tf1_inference_graph(src: str, stage_nodes, allow_ops=(), image_size=None):
    """(frozen inference GraphDef, where it came from): the TF1 model at `src` ready to run.

    A frozen graph is used as is; a checkpoint's `.meta` or a TF1 SavedModel has its variables
    replaced by the checkpoint's values; a checkpoint without a graph is built by
    `migrate.tf1.builder` from the config its weights imply. Only the subgraph computing the
    detections and `stage_nodes` is kept, and its ops are checked against
    `op_allowlist.SSD_INFERENCE_OPS` before anything runs.
    """
    return inference_graph_of(sources.open_source(src), stage_nodes, allow_ops, image_size=image_size)


def inference_graph_of(source, stage_nodes, allow_ops=(), image_size=None, config=None):
    """`tf1_inference_graph` of an opened `sources.Source`; `config` (default: inferred from
    the source) builds the graph of a source without one."""
    if source.graph_def is None:
        from migrate.tf1 import builder
        if config is None:
            config, _ = config_inference.infer_config(source, trust_weights=True, image_size=image_size)
        try:
            graph_def = builder.frozen_graph_def(config, source.weights)
        except ValueError as e:
            raise InputError(f"{source.weights_from}: {e}") from None
        graph_from = f"{source.weights_from} (graph built by migrate.tf1.builder)"
    else:
        graph_def, graph_from = source.graph_def, source.graph_from
    names = {n.name for n in graph_def.node}
    if graph_traits.is_tflite_export(graph_def):
        raise InputError(f"{graph_from}: {graph_traits.TFLITE_REFUSAL}")
    missing = [n for n in ("image_tensor",) + DETECTION_OUTPUTS if n not in names]
    if missing:
        raise InputError(f"{graph_from}: not an SSD inference graph (no {', '.join(missing)} node)")
    outputs = list(DETECTION_OUTPUTS) + [n for n in stage_nodes if n in names]
    try:
        frozen = frozen_graph.freeze_inference_graph(graph_def, source.weights or {}, outputs)
    except InputError as e:
        raise InputError(f"{graph_from}: {e} (weights from {source.weights_from})") from None
    refused = op_allowlist.disallowed_ops(frozen, allow_ops)
    if refused:
        # Not in the SSD inference op set (op_allowlist): not run unless allowed.
        what = "is not an SSD op" if len(refused) == 1 else "are not SSD ops"
        raise InputError(f"{graph_from}: {', '.join(refused)} {what} (--allow-ops {','.join(refused)} runs "
                         f"{'it' if len(refused) == 1 else 'them'})")
    return frozen, graph_from
