"""The prose `write_markdown` puts in docs/benchmarks.md: what each side is and the levers. It holds
no figures (a generated page must show only its run's); the measurements behind the design
choices are in docs/measurements.md."""

from __future__ import annotations

_SIDE_TEXT = {
    "tf1_session": "the frozen graph in `tf.compat.v1.Session` with its default config (Grappler folds batch norm "
                   "into the convolutions and fuses conv + bias + ReLU6): the baseline.",
    "tf1_wrap_function": "the same graph imported into `tf.compat.v1.wrap_function` and pruned to the four outputs: "
                         "what a TF2 user runs without this toolkit.",
    "saved_model": "`tf.saved_model.load(CONVERTED/saved_model).signatures['serving_default']`, plain TensorFlow: "
                   "the SavedModel `convert` writes by default (batch norm folded, heads merged, early layers in "
                   "slices, the weights as variables).",
    "saved_model_constants": "the same call on the default SavedModel exported with every weight a graph constant "
                             "(`ssd_mobilenet.formats.saved_model.writer.export_saved_model(..., "
                             "weights='constants')`, the default before issue 43): oneDNN reorders each filter "
                             "once instead of on every call, for a process that holds the weights many times over "
                             "and starts slower. On oneDNN's kernels its latency is measured in a process of its own "
                             "beside its own TF1 session: TensorFlow caches convolutions by shape, not by whether "
                             "the filter is constant, so beside `saved_model` the first to run would decide both's "
                             "filter layout (docs/measurements.md).",
    "saved_model_exact": "the same call on the SavedModel `convert --exact` writes: op for op the TF1 graph, weights "
                         "as variables.",
    "saved_model_mixed": "the same call on the SavedModel `convert --precision mixed_bfloat16` writes (CPUs; "
                         "`mixed_float16` on GPUs); detections agree by IoU and class, not to 1e-5.",
    "detector": "`ssd_mobilenet.load(CONVERTED)`: the default SavedModel run behind the library's detector "
                "(no Keras model built): batch norm folded into the convolutions, preprocessing and the early "
                "layers image by image, two images in flight at once, each feature map's box and class heads as "
                "one conv, the weights as variables.",
    "detector_constants": "`ssd_mobilenet.load(CONVERTED, freeze_weights=True)`: the Keras model built from the "
                          "checkpoint and traced with every weight a graph constant (oneDNN reorders each filter "
                          "once instead of on every call; the process holds the weights many times over and "
                          "starts slower).",
    "detector_exact": "`ssd_mobilenet.load(CONVERTED, fold_batch_norm=False, slice_size=None)`: op for op the TF1 "
                      "graph as written (the reference of the parity tests).",
    "detector_xla": "`ssd_mobilenet.load(CONVERTED, jit_compile=True)`.",
    "detector_mixed": "`ssd_mobilenet.load(CONVERTED, precision='mixed_bfloat16')` on CPUs "
                      "(`'mixed_float16'` on GPUs); detections agree by IoU and class, not to 1e-5.",
    "tflite": "the `.tflite` file `migrate export` writes by default (float32, per-class NMS in builtin ops, "
              "uint8 input [1, H, W, 3] of any size, resized in the file with the TF1 graph's kernel), exported by "
              "bench first, run by LiteRT's `Interpreter(num_threads=N)` (ai-edge-litert) through its "
              "`serving_default` signature runner (`ssd_mobilenet.formats.tflite.runner.ModelFile.detect`), "
              "with the interpreter's default op resolver, which applies the XNNPACK delegate; N is `--threads` "
              "(default: the machine's logical cores), set explicitly because the interpreter's own default is one "
              "thread. "
              "It takes one image per call, so it runs at batch 1 only, at every size of the run, interleaved "
              "with the TF1 session as every side (in the latency process, which has TensorFlow loaded for the "
              "other sides); the TF1 session's row at the same size and batch is its baseline. `file MiB` is the "
              "`.tflite` file. Its memory and `ready s` come from a fresh process that never imports TensorFlow "
              "(Python, numpy, LiteRT and the file: what a LiteRT deployment holds). No allocator peak (`n/a`): "
              "the interpreter allocates from its own arena. Its RSS ratios are to the TF1 session's memory "
              "process right after the same cells (batch 1 at each size, which every memory process then runs "
              "first, in the same order), not to that process's peak over every size and batch the "
              "`tf1_session` rows show; that process holds TensorFlow besides the graph.",
    "tflite_int8": "the same with the file `migrate export --int8` writes: the network's convolutions int8 "
                   "(weights and activations, calibrated on the generated images `export` uses without "
                   "--calibration), post-processing float32; detections agree with the float model's by class "
                   "and IoU, not exactly.",
    "onnx": "the `.onnx` file `migrate export --onnx` writes (float32, or int8 QDQ on the checkpoint's ranges for a "
            "quantization-aware model; opset 13, uint8 input [1, H, W, 3] of any "
            "size resized in the file with the TF1 graph's kernel, one NonMaxSuppression for all classes, two for "
            "FPN's many anchors), "
            "exported by bench first, run by ONNX Runtime's CPU provider with `intra_op_num_threads` N "
            "(`migrate.predict.runtimes.onnx.runner`, as `predict` runs it: its threads' spinning off, "
            "`ssd_mobilenet.formats.onnx.runner.session_options` says why). "
            "One image per call, batch 1 only, memory and `ready s` from a fresh process without TensorFlow, as "
            "the `tflite` side.",
    "onnx_int8": "the same with the file `migrate export --onnx --int8` writes: QDQ int8 convolutions (uint8 "
                 "activations, each ReLU6 folded into its convolution's range) calibrated on the generated "
                 "images, everything after the heads float32; detections agree with the float file's by class "
                 "and IoU, not exactly.",
    "openvino": "the `onnx` side's file on OpenVINO's CPU plugin in float32 (`INFERENCE_PRECISION_HINT` f32; its "
                "default on CPUs with bfloat16 units is bfloat16) with N inference threads "
                "(`migrate.bench.sides.openvino_runner`).",
    "openvino_int8": "the `onnx_int8` side's file on OpenVINO's CPU plugin as `predict --runtime openvino` runs it "
                     "(`ssd_mobilenet.formats.onnx.openvino_model.INT8_CONFIG`: float32 where it computes in float, "
                     "its snippets on, threads not pinned) with N inference threads.",
    "opencv": "the `onnx` side's file on OpenCV's DNN module (`cv2.dnn.readNetFromONNX`, its new engine) with N "
              "threads (`cv2.setNumThreads`; `migrate.bench.sides.opencv_runner`).",
}

_NOTES = """## Why each side runs as it does

The design choices behind these figures (batch norm folding, slices, merged heads, weights as
constants, the NMS kernels weighed) and the one-off measurements that decided them are in
[measurements.md](measurements.md), each with its machine and date.

## Levers

- `ssd_mobilenet.memory.configure(memory_growth=..., memory_limit_mb=...)` before any TensorFlow op:
  GPU memory growth or a per-GPU logical device limit; on a CPU-only machine the limit goes to the BFC CPU
  allocator (`TF_CPU_ALLOCATOR_USE_BFC=true`, `TF_CPU_BFC_MEM_LIMIT_IN_MB`), which then fails an
  allocation beyond it with an OOM error.
- `precision="mixed_bfloat16"` (CPUs with bfloat16 units) / `"mixed_float16"` (GPUs).
- `jit_compile=True` (XLA): measured slower than the default on CPUs (see `detector_xla`), so it is not
  the default and `load` warns when no GPU is visible; it is meant for GPUs.
- `ssd_mobilenet.load(..., freeze_weights=True)` (`detector_constants`): weights as graph constants,
  warm calls faster at batch 1 for a slower start and more memory (docs/cold_start.md).
- `memory.configure(onednn_weight_cache=True)` / `--weight-cache` (bench: every side): oneDNN caches
  reordered filters; inference-only processes.
- oneDNN (`TF_ENABLE_ONEDNN_OPTS=1`): TensorFlow turns it on by default on CPUs with AVX-512 VNNI / BF16
  and leaves it off on CPUs without AVX-512. `--onednn both` measures every side under each setting,
  so its effect shows for both sides alike.
- `ssd_mobilenet.memory.max_batch_size(detector, budget_bytes, image_size)` / `predict --max-memory MB`.
- `ssd_mobilenet.memory.trace(logdir)` / `--trace DIR`: a TensorBoard profiler trace.
"""
