"""The prose `write_markdown` puts in docs/benchmarks.md: what each side is, and what made the
difference. Its figures are that page's (measured when it was written), not this module's."""

from __future__ import annotations

_SIDE_TEXT = {
    "tf1_session": "the frozen graph in `tf.compat.v1.Session` with its default config (Grappler folds batch norm "
                   "into the convolutions and fuses conv + bias + ReLU6): the baseline.",
    "tf1_wrap_function": "the same graph imported into `tf.compat.v1.wrap_function` and pruned to the four outputs: "
                         "what a TF2 user runs without this toolkit.",
    "saved_model": "`tf.saved_model.load(CONVERTED/saved_model).signatures['serving_default']`, plain TensorFlow: "
                   "the SavedModel `convert` writes by default (batch norm folded, heads merged, early layers in "
                   "slices, every weight a graph constant).",
    "saved_model_exact": "the same call on the SavedModel `convert --exact` writes: op for op the TF1 graph, weights "
                         "as variables.",
    "saved_model_mixed": "the same call on the SavedModel `convert --precision mixed_bfloat16` writes (CPUs; "
                         "`mixed_float16` on GPUs); detections agree by IoU and class, not to 1e-5.",
    "detector": "`ssd_mobilenet.load(CONVERTED)`: batch norm folded into the convolutions at load, "
                "preprocessing and the early layers in slices of 2 images, two slices in flight at once, each "
                "feature map's box and class heads as one conv, weights as variables.",
    "detector_frozen": "`ssd_mobilenet.load(CONVERTED, freeze_weights=True)`: the same with every weight a graph "
                       "constant (faster at small batches, several times the weights' size in process memory).",
    "detector_exact": "`ssd_mobilenet.load(CONVERTED, fold_batch_norm=False, slice_size=None)`: op for op the TF1 "
                      "graph as written (the reference of the parity tests).",
    "detector_xla": "`ssd_mobilenet.load(CONVERTED, jit_compile=True)`.",
    "detector_mixed": "`ssd_mobilenet.load(CONVERTED, precision='mixed_bfloat16')` on CPUs "
                      "(`'mixed_float16'` on GPUs); detections agree by IoU and class, not to 1e-5.",
}

_NOTES = """## What made the difference

- **Batch norm folded at load** (`ssd_mobilenet.model.fold_batch_norm`): for inference BN is a per-channel
  affine constant; folding it into the convolution weights removes two passes over every activation and
  lets Grappler fuse conv + bias + ReLU6 (and depthwise conv + bias + ReLU6) into one kernel each. The TF1
  session does the same to a frozen graph, so the folded model rounds like the TF1 session (measured on
  the zoo fixture: box codes within 3.2e-6, detections within 3e-7 of it, same classes and counts);
  `fold_batch_norm=False` keeps the graph-as-written arithmetic the parity tests hold to 1e-5.
- **Preprocessing on uint8**: the legacy resize kernels read uint8 directly (bit-identical), so no float32
  copy of the full-size batch is made.
- **Post-processing**: per-class NMS is TensorFlow's NonMaxSuppressionV4 kernel on all anchors with the
  excluded ones masked, one op per class unrolled as in the TF1 graph (independent ops the executor runs
  in parallel; a `map_fn` over classes ran them one after the other and cost 0.03-0.07x of the TF1
  latency), instead of the TF1 graph's per-class gather / slice / pad sequence; boxes and scores are
  gathered for the kept detections only; each class's scores come from one transpose and unstack
  (337 nodes instead of 694 with a strided slice per class; 1-5% of the stage). Profiled at batch 1
  (480x640, 30 runs, summed over both threads): 2.0 ms of NMS ops here against 7.2 ms in the TF1
  session's post-processing. The synthetic zoo fixture is a hard case: 4435 class scores above its
  0.3 threshold in 82 classes for one random image, where a trained detector has a few.
- **Early layers in slices** (`slice_size=2`): preprocessing and the high-resolution layers up to
  `Conv2d_5_pointwise` run two images at a time, then the rest of the network on the whole batch. The
  allocator holds one slice's large activations instead of the batch's (the batch-8 transient peak
  falls well under the TF1 graph's), and those activations stay in cache, which makes batches faster too.
  Other split points and slice sizes (frozen weights, batch 8, 24 interleaved rounds, 2026-11-23): up to
  Conv2d_3, 5 or 11 in slices of 2, or up to Conv2d_5 in slices of 1, all read 0.80-0.82x of the TF1
  session: no better choice than the default.
- **Two slices in flight** (`concurrent_slices=2`): the slice loop runs two slices at once, so each core
  works on its own slice more of the time instead of the two sharing every op of one (one op over the
  batch kept them 78% busy: one intra-op thread ran the frozen detector's batch of 8 in 263 ms, two in
  169 ms). Interleaved with one slice at a time (30 rounds, batch 8, frozen weights): 0.95x (95% interval
  0.91-0.97). Allocator transient peak at batch 8: 42.3 MiB instead of 34.9 (default), 50.6 instead of
  28.9 (frozen weights); RSS unchanged. Splitting the batch into two graph branches instead gave the same
  0.94-0.95x but a copy of the frozen constants per branch (RSS 1706 MB instead of 1124 MB), and
  splitting only the late layers' batch gave nothing (0.99x).
- **Box and class heads merged** (inference copy only): each feature map's two 1x1 convs are one conv
  whose output channels (box codes, then class logits, then zeros up to a multiple of 16) are split
  after it. The box head's small conv cost about as much as the class head's at batch 1 (0.37 vs 1.0 ms
  at 10x10x1024); the merged one 0.97 ms. Detections unchanged (boxes within 6e-8).
- **Weights as constants** (`freeze_weights=True`, `detector_frozen`): oneDNN reorders a constant filter
  into its blocked layout once and caches it; a variable's filter is reordered on every call. The
  function is traced with each weight a Const node made where it is used (Keras `StatelessScope`; the
  early layers' inside the slice loop and in the one-slice branch, since a constant passed into a loop
  or branch reaches the conv through an Enter or Switch node and is not cached). One interleaved run
  with the TF1 session and the default detector: batch 1 0.82x of the TF1 session instead of 0.90-0.92x,
  batch 8 0.80x instead of 0.83x. Batch-1 ratios move between runs on this
  shared machine: on 2026-11-23, runs of 20-25 rounds of this side against the TF1 session alone read 0.77-0.88x
  (5 runs), with 3 sides 0.83-0.84x, with 5 sides 0.82x, with 6 sides 0.86-0.88x; under the profiler
  the TF1 session's runs took 24.7-44.4 ms (every op slower together in the slow ones), this side's
  22.3-22.6 ms. Not the default: the constants sit in process memory several times over and
  Grappler's transient copies stay in the C heap (steady RSS 1102 MB vs 700 MB).
- **Where batch 1 stands** (profiled 2026-11-23, 480x640, 30 runs each, op time summed over both
  threads, frozen weights vs the TF1 session): pointwise convs equal (the same oneDNN kernels),
  depthwise convs 0.4-0.6x (fused with bias and ReLU6; the TF1 graph keeps a separate batch norm
  there), box predictors 3.2 vs 4.1 ms, preprocessing 0.5 vs 1.2 ms, NMS 2.0 vs 7.2 ms. The TF1
  session, the default and the frozen detector alone, 150 interleaved rounds, two runs: frozen
  0.805x and 0.835x of the TF1 session, default 0.83x and 0.87x. A batch-1-only function without the batch loops (`map_fn`, the slice `tf.cond`) was
  0.98x of the default: the loops are not where the rest is.
- **oneDNN weight cache** (`--weight-cache`, `runtime.configure(onednn_weight_cache=True)`, i.e.
  `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` for every side, the TF1 session included): each oneDNN
  convolution caches its reordered filter at the first call. The TF1 frozen graph's filters are
  constants, which oneDNN caches anyway; the detector's are variables, and the depthwise convs
  fused with bias and ReLU6 reordered their filter on every call even as constants (profiled at
  batch 1, layers 6-11: 0.13-0.21 ms per depthwise conv with the cache against 0.22-0.30 without). Same
  outputs bit for bit (tested). Interleaved runs of the TF1 session, the default and the frozen
  detector on 2026-11-23 (150 rounds at batch 1, 30 at batch 8, two runs per setting):
  batch 1 default 0.89x / 0.89x without the cache, 0.78x / 0.79x with it; frozen 0.83x / 0.85x
  without, 0.77x / 0.77x with; batch 8 default 0.84x / 0.84x without, 0.84x / 0.81x with; frozen
  0.80x / 0.80x without, 0.83x / 0.78x with (no gain at batch 8: a filter reorder is small next
  to 8 images). It costs a second copy of the weights (allocator resident 30 -> 60 MiB) and, for
  the default detector, a higher transient peak at batch 8 (57-63 MiB instead of 47-49; the frozen
  detector's stays lower). A process-wide promise that no weight changes after its first use:
  for inference processes only, so it is not the default.
- **One slice runs without the loop**: a batch no larger than `slice_size` takes a `tf.cond` branch
  without the slice loop's TensorArray and concatenation. With frozen weights at batch 1 it then runs as
  fast as no slicing at all (0.82x vs 0.81x of the TF1 session, within the noise; 0.83-0.86x with the loop).

## Levers

- `ssd_mobilenet.runtime.configure(memory_growth=..., memory_limit_mb=...)` before any TensorFlow op:
  GPU memory growth or a per-GPU logical device limit; on a CPU-only machine the limit goes to the BFC CPU
  allocator (`TF_CPU_ALLOCATOR_USE_BFC=true`, `TF_CPU_BFC_MEM_LIMIT_IN_MB`), which then fails an
  allocation beyond it with an OOM error.
- `precision="mixed_bfloat16"` (CPUs with bfloat16 units) / `"mixed_float16"` (GPUs).
- `jit_compile=True` (XLA): on this CPU it is many times slower (see `detector_xla`), so it is not the
  default and `load` warns when no GPU is visible; it is meant for GPUs.
- `runtime.configure(onednn_weight_cache=True)` / `--weight-cache` (bench: every side): oneDNN caches
  reordered filters (see above); inference-only processes.
- oneDNN (`TF_ENABLE_ONEDNN_OPTS=1`): TensorFlow turns it on by default on CPUs with AVX-512 VNNI / BF16
  (as here: "oneDNN custom operations are on") and leaves it off on CPUs without AVX-512, where
  setting it made the TF1 network ~25% faster at batch 8. `--onednn both` measures every side under
  each setting, so its effect shows for both sides alike.
- `ssd_mobilenet.runtime.max_batch_size(detector, budget_bytes, image_size)` / `predict --max-memory MB`.
- `ssd_mobilenet.runtime.trace(logdir)` / `--trace DIR`: a TensorBoard profiler trace.

## NMS alternatives weighed

- `tf.image.combined_non_max_suppression` (per-class NMS and the global sort in one kernel; measured on
  the 2018 zoo fixture at 480x640, batch 8, with clipped boxes and empty boxes masked as that graph
  does): the same detections on random images, in about half the post-processing time (~19 ms vs
  ~35 ms for the batch, a few percent of the total). Not adopted: with tied scores (a sigmoid
  saturates to exactly 1.0 for logits above ~17, common in trained models) it orders the detections
  differently from the TF1 graph, which sorts ties class-major (checked: 30 anchors per image set to
  score 1.0 gave different classes and boxes in the first rows). It also clips only after NMS
  (`clip_boxes`), where the 2018 graph clips before, and it returns boxes, not the anchor indices that
  `detection_anchor_indices` and `detection_multiclass_scores` are gathered by.
- `tf.image.non_max_suppression_padded`: one class per call (class-agnostic); per class it would still
  need the loop over classes that the NonMaxSuppressionV4 kernel already runs.
- `official.vision` (tf-models-official) batched per-class NMS in its detection generator: not
  added: the package pins `tensorflow~=2.20` and brings ~1.2 GB of dependencies, and exactness against
  the TF1 tie order would need the same proof.
"""
