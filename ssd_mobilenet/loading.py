"""`ssd_mobilenet.load`: a detector for a converted directory, from its SavedModel when that
computes what was asked for, else from its checkpoint through the Keras model.

The SavedModel stands in for the checkpoint only when all of these hold
(`saved_model_for`); otherwise `load` builds the Keras model and checks the checkpoint strictly
(`detector.load_model`), as it always did:
- the options are the SavedModel's: no XLA, batch norm folded, its precision, its kind of
  weights (or `freeze_weights=None`) and its slicing (or the defaults);
- its metadata file (`converted_dir`) records the fingerprint of the directory's
  `model_config.json` and checkpoint as they are now: it was exported from them, by `convert` or
  `train`, which write both from one model and check the SavedModel against the TF1 graph;
- TensorFlow's fingerprint of the SavedModel is the one recorded when it was written.
When the metadata is there but a fingerprint differs (a config edited by hand, a checkpoint
replaced), `load` warns and builds the Keras model: the checkpoint and config decide.
"""

from __future__ import annotations

import warnings

from ssd_mobilenet import converted_dir


def saved_model_for(directory: str, jit_compile: bool = False, precision: str = "float32",
                    fold_batch_norm: bool = True, freeze_weights: bool | None = None, warn: bool = True,
                    **options) -> dict | None:
    """The metadata of `directory`'s SavedModel when it computes what `load` was asked for and
    belongs to the directory's config and checkpoint (module docstring), else None (with a
    warning, when `warn`, if only the fingerprints stood in the way)."""
    path = converted_dir.saved_model_path(directory)
    metadata = converted_dir.read_metadata(path)
    if metadata is None or jit_compile or not fold_batch_norm or metadata.get("variant") != "fast":
        return None
    if precision != metadata.get("precision"):
        return None
    if freeze_weights is not None and freeze_weights != (metadata.get("weights") == "constants"):
        return None
    # The SavedModel was traced with `Detector`'s default slicing, which its metadata records.
    if any(k not in ("slice_size", "concurrent_slices") or v != metadata.get(k) for k, v in options.items()):
        return None  # other slicing, or an option `Detector` will refuse
    mismatch = converted_dir.saved_model_mismatch(directory, metadata)
    if mismatch is None:
        import tensorflow as tf
        try:
            written = tf.saved_model.experimental.read_fingerprint(path).singleprint()
        except (OSError, ValueError, tf.errors.OpError):
            written = None
        if written != metadata.get("saved_model_fingerprint"):
            mismatch = "its files differ from its metadata"
    if mismatch is not None:
        if warn:
            # `load` then builds the model from the checkpoint (troubleshooting.md).
            warnings.warn(f"{directory}: saved_model/ not used: {mismatch}", stacklevel=3)
        return None
    return metadata


def load(directory: str, jit_compile: bool = False, precision: str = "float32", fold_batch_norm: bool = True,
         freeze_weights: bool | None = None, **options):
    """A detector for a directory written by `python -m migrate convert` (or `migrate train`).

    `precision`: "float32", "mixed_bfloat16" (CPUs with bfloat16 units, TPUs) or
    "mixed_float16" (GPUs). `fold_batch_norm` (default True: the fast path, rounding like
    the TF1 session), `freeze_weights` and `options` (`slice_size`, `concurrent_slices`)
    are `Detector`'s. `freeze_weights` None (the default) holds the weights as the fast
    SavedModel does (`ssd_mobilenet.formats.saved_model.writer`): variables in float32 and for
    quantization-aware models, graph constants in a mixed precision (their casts folded). True makes every weight a
    graph constant: oneDNN then reorders each filter once instead of on every call (faster warm
    calls), for a process that holds the weights many times over and starts slower
    (docs/cold_start.md); not for quantization-aware models, whose FakeQuant steps turn a
    constant filter's other kernel rounding into whole steps.

    Returns:
      a `SavedModelDetector` when the directory's SavedModel computes what was asked for and was
      exported from its config and checkpoint (module docstring): no Keras model is built; else
      a `Detector` over the Keras model restored from the checkpoint (strict: every variable of
      the model, and nothing else). Both take the same calls and have the same attributes.
    """
    if jit_compile:
        import tensorflow as tf
        if not tf.config.list_physical_devices("GPU"):
            # XLA was measured several times slower than the default for this network on CPUs.
            warnings.warn("jit_compile=True on CPU: measured several times slower here; XLA pays on GPUs",
                          stacklevel=2)
    metadata = saved_model_for(directory, jit_compile, precision, fold_batch_norm, freeze_weights, **options)
    if metadata is not None:
        from ssd_mobilenet.formats.saved_model.runner import SavedModelDetector
        return SavedModelDetector(directory, metadata)
    import gc

    from ssd_mobilenet import detector
    from ssd_mobilenet.formats.saved_model.writer import FAST_VARIANT, weights_as_constants
    model = detector.load_model(directory)
    if freeze_weights is None:
        freeze_weights = weights_as_constants(FAST_VARIANT, model.config, precision)
    result = detector.Detector(model, jit_compile=jit_compile, precision=precision,
                               fold_batch_norm=fold_batch_norm, freeze_weights=freeze_weights, **options)
    # The folded copy replaced the loaded model; Keras models hold reference cycles, so
    # collect now rather than keep both sets of weights until the next collection.
    gc.collect()
    return result
