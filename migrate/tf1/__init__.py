"""Everything that reads or runs TF1: what `convert` needs besides `ssd_mobilenet`.

Reading a model: `sources` (checkpoint, `.meta`, frozen graph, SavedModel, zoo directory -> one
`Source`), `graph_traits` and `graph_anchors` (what a graph shows of its version and anchors),
`config_inference` (the `SSDConfig` a source implies), `name_map` and `assign` (TF1 variable
names -> the Keras model's weights, strictly). Running one: `frozen_graph` (freezing, a
`tf.compat.v1` session runner), `op_allowlist` (the ops a graph may run), `inference_graph` (a
source frozen, pruned and checked, ready to run), `builder` (TF1 model directories and graphs
built from a config, in the API reference). Comparing it with the converted model: `parity` (the
rules), `side_by_side` (both sides over batches) and `self_check` (the check `convert` runs).
"""
