"""The two sides as measurement factories (`measure_isolated` imports them by name in a fresh
process): the frozen TF1 graph in a session with the default config, the converted model in a
`verify` mode, each after `memory.configure` with the memory settings. (A `.tflite` or `.onnx`
file is measured by bench's runner, in a process without TensorFlow: `measuring`.)"""

from __future__ import annotations

from migrate.tf1 import frozen_graph, sources
from migrate.tf1.side_by_side import saved_model_detector, tf2_detector
from ssd_mobilenet.detections import DETECTION_OUTPUTS

SAVED_MODEL = "saved_model"


def _configure_memory(memory_growth: bool, memory_limit_mb) -> None:
    """`memory.configure` in a measurement worker, before its first TensorFlow op."""
    if memory_growth or memory_limit_mb is not None:
        from ssd_mobilenet import memory
        memory.configure(memory_growth=memory_growth, memory_limit_mb=memory_limit_mb)


def tf1_session_runner(graph_pb: str, memory_growth: bool = False, memory_limit_mb=None):
    """Measurement factory: the frozen TF1 graph in a session with the default config,
    after `memory.configure(memory_growth, memory_limit_mb)`."""
    _configure_memory(memory_growth, memory_limit_mb)
    runner = frozen_graph.FrozenGraphRunner(sources.read_graph_def(graph_pb))
    fetches = {k: f"{k}:0" for k in DETECTION_OUTPUTS}
    return lambda images: runner.run(images, fetches)


def tf2_runner(converted: str, mode: str = "function", precision: str = "float32", memory_growth: bool = False,
               memory_limit_mb=None):
    """Measurement factory: the converted model in `mode` (eager Keras, Detector, XLA Detector,
    or the SavedModel through plain TensorFlow) at `precision`, after
    `memory.configure(memory_growth, memory_limit_mb)`."""
    _configure_memory(memory_growth, memory_limit_mb)
    if mode == SAVED_MODEL:
        run = saved_model_detector(converted)
        return lambda images: {k: v for k, v in run(images).items() if k in DETECTION_OUTPUTS}
    from ssd_mobilenet import detector as detector_lib
    run = tf2_detector(detector_lib.load_model(converted), mode, precision)
    return lambda images: {k: v for k, v in run(images).items() if k in DETECTION_OUTPUTS}
