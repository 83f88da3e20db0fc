"""Training an `SSDMobileNetV1` as the TF1 Object Detection API's model_lib trained it.

`Trainer` runs one step on a batch of `data.make_dataset`: the network in training mode, the
groundtruth of each image, `SSDLoss`, slim's L2 regularisation (`builders`), their sum, the
gradients (clipped together to the global norm `gradient_clipping_by_norm`, as model_lib's
`optimize_loss` clipped them), TF1's optimiser update
and the moving average. The losses carry TF1's names (`Loss/localization_loss`,
`Loss/classification_loss`, `Loss/regularization_loss`, `Loss/total_loss`), summed in model_lib's
order. `train` loops over the steps with checkpoints to resume from and writes the trained
model as a converted directory (`detector.save`).

Gradient accumulation (`accumulate=K`) sums the gradients of K micro-batches in non-trainable
variables and applies their mean as one optimiser step, so the schedule, the moving average
and `optimizer.iterations` (TF1's `global_step`) advance once per K micro-batches. The mean is
the gradient of the K-times larger batch only when every micro-batch has as many matched
anchors: TF1 divided each batch's losses by the batch's matched-anchor count
(`normalize_loss_by_num_matches`), and each micro-batch divides by its own. Batch norm in
training mode also normalises with each micro-batch's statistics and moves the moving ones K
times per step.

Frozen batch norm (`freeze_batchnorm`, or `batch_norm { train: false }` in either
`conv_hyperparams`, or the `freeze_batch_norm` argument) runs every batch norm in inference mode
(its moving statistics as they are) and trains no gamma or beta. TF1 froze per layer group
(`freeze_batchnorm` the 14 MobileNet layers, `train: false` the layers under that
hyperparams block) and kept training gamma and beta; here one switch covers the whole model.

With a `tf.distribute` strategy (`strategy`), each step's batch is split across the replicas and
their gradients summed, the losses normalised by the whole batch's matched anchors: the
one-device step on the same batch with frozen batch norm; in training mode each replica's batch
norm uses its own slice's statistics, as TF1's multi-clone training did (see `distribute`).

Memory levers (docs/training_memory.md measures them): the model's compute precision
(`precision.with_policy` before the Trainer; float16 adds dynamic loss scaling, see
`precision`), recomputation of the backbone's blocks in the backward pass (`recompute=True`, see
`recompute`), accumulation and frozen batch norm above, and `memory_budget.largest_batch` for the
largest batch under a memory budget. The model written at the end computes in float32 whatever
the training precision.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time

import numpy as np
import tensorflow as tf

from ssd_mobilenet import detector
from ssd_mobilenet.training import augmentation, builders, data
from ssd_mobilenet.training import precision as precision_lib
from ssd_mobilenet.training import distribute
from ssd_mobilenet.training.distribute import Replicas, num_replicas
from ssd_mobilenet.training.recompute import Recomputed
from ssd_mobilenet import atomic_write
from ssd_mobilenet.atomic_write import atomic_directory
from ssd_mobilenet.training.optimizers import clip_gradients_by_global_norm
from ssd_mobilenet.training.ssd_loss import CLASSIFICATION_LOSS, LOCALIZATION_LOSS, SSDLoss
from ssd_mobilenet.errors import InputError

REGULARIZATION_LOSS = "Loss/regularization_loss"
TOTAL_LOSS = "Loss/total_loss"
CHECKPOINT_DIR = "checkpoints"  # under train's output directory: the resumable training state
MODEL_DIR = "model"  # under train's output directory: the trained model, as `convert` writes one
# Under CHECKPOINT_DIR: the settings a run started with, which its checkpoints depend on (see `InputError`).
RUN_SETTINGS = "run_settings.json"
_MODEL_INPUTS = ("image", "boxes", "classes", "num_boxes")


def groundtruth(boxes, classes, num_boxes, num_classes: int):
    """The per-image groundtruth lists `SSDLoss` takes, from the padded batch of `make_dataset`.

    Args:
      boxes: float32 [B, M, 4], [ymin, xmin, ymax, xmax] normalised, zeros after the objects.
      classes: int32 [B, M], 1-based, 0 after the objects.
      num_boxes: int32 [B], the objects of each image.
      num_classes: classes without background.
    Returns:
      (B tensors [M, 4], B one-hot tensors [M, num_classes], B weights [M]): the padding rows
      have weight 0, which keeps them out of matching (forced matches included) and out of the
      losses, so the padded batch gives the losses of the unpadded groundtruth.
    """
    rows = boxes.shape[1]
    weights = tf.cast(tf.range(rows)[tf.newaxis, :] < num_boxes[:, tf.newaxis], tf.float32)
    one_hot = tf.one_hot(classes - 1, num_classes)  # class 0 (padding) -> all zeros
    return tf.unstack(boxes), tf.unstack(one_hot), tf.unstack(weights)


def run_settings(training_config, batch_size: int, accumulate: int, precision: str, freeze_batch_norm) -> dict:
    """The settings a run's checkpoints depend on, as `RUN_SETTINGS` records them."""
    return {"batch_size": batch_size, "accumulate": accumulate, "precision": precision,
            "freeze_batch_norm": batch_norm_frozen(training_config, freeze_batch_norm)}


def resume_settings(output_dir: str, wanted: dict, max_memory_mb=None) -> dict | None:
    """The settings `output_dir`'s run started with (None for a new run), after checking `wanted`
    against them. A resumed `max_memory_mb` run keeps the batch it chose (no second search,
    which could choose another under other load). Raises `InputError` naming the setting."""
    path = os.path.join(output_dir, CHECKPOINT_DIR, RUN_SETTINGS)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            started = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: unreadable ({e}); remove the run folder to start again") from None
    for key, value in wanted.items():
        if key == "batch_size" and max_memory_mb is not None:
            continue
        if started.get(key) != value:
            # Resume with the settings it started with, or train into another folder.
            raise InputError(f"{output_dir}: started with {key} {started.get(key)}, not {value}")
    return started


def batch_norm_frozen(config, freeze_batch_norm=None) -> bool:
    """Whether training runs batch norm in inference mode: the argument when given, else the config's
    `freeze_batchnorm` or a `batch_norm { train: false }` in either `conv_hyperparams`."""
    if freeze_batch_norm is not None:
        return bool(freeze_batch_norm)
    blocks = (config.feature_extractor_hyperparams, config.box_predictor_hyperparams)
    return config.freeze_batchnorm or any(b.batch_norm is not None and not b.batch_norm.train for b in blocks)


def batch_norm_parameters(model) -> list:
    """gamma and beta of every batch norm of `model`."""
    return [v for norms in builders.batch_norm_layers(model).values() for norm in norms for v in (norm.gamma, norm.beta)]


class Trainer:
    """One training step at a time on an `SSDMobileNetV1`.

    Args:
      model: the model to train (its `BatchNorm.decay`s are set from the config here).
      training_config: a `train_config.TrainingConfig`.
      accumulate: micro-batches per optimiser step (see the module docstring).
      freeze_batch_norm: None (from the config), True or False.
      strategy: None (one device) or a `tf.distribute` strategy whose scope `model` was created
        under; `train_step` then takes the global batch (see `distribute`).
      recompute: recompute the backbone's activations in the backward pass (`recompute`).
    The model's dtype policy is its compute precision (`precision.with_policy`); mixed_float16
    wraps the optimiser in a `LossScaleOptimizer`.
    Attributes:
      variables: the trained variables; optimizer; moving_average (None without one);
      step: `optimizer.iterations`, the optimiser steps taken (TF1's global_step);
      replicas: the `distribute.Replicas` the step meets the other replicas through.
    """

    def __init__(self, model, training_config, accumulate: int = 1, freeze_batch_norm=None, strategy=None,
                 recompute: bool = False):
        if accumulate < 1:
            raise ValueError(f"accumulate must be >= 1, got {accumulate}")
        self.replicas = Replicas(strategy)
        self.replicas.check_created_here(model.weights)
        self.model = model
        self.config = training_config
        self.accumulate = int(accumulate)
        self.batch_norm_frozen = batch_norm_frozen(training_config, freeze_batch_norm)
        builders.set_batch_norm_decay(model, training_config)
        self.loss = SSDLoss.from_config(training_config)
        self.anchors = tf.constant(model.anchors, tf.float32)
        frozen = {id(v) for v in batch_norm_parameters(model)} if self.batch_norm_frozen else set()
        self.variables = [v for v in model.trainable_variables if id(v) not in frozen]
        optimizer_config = training_config.train.optimizer
        # === Memory levers (precision, recompute) ===
        self.precision = precision_lib.of_model(model)
        self.recompute = bool(recompute)
        self.forward = Recomputed(model) if recompute else model
        with self.replicas.scope():  # a strategy's variables: slots, averages and accumulators
            self.optimizer = precision_lib.loss_scaled(builders.optimizer(optimizer_config), self.precision)
            self.optimizer.build(self.variables)
            self.moving_average = builders.moving_average(optimizer_config, self.variables)
            self.accumulation = _Accumulation(self.variables if self.accumulate > 1 else [])
        self.regularized = builders.regularized_weights(model, training_config)
        self.clip_norm = float(training_config.train.gradient_clipping_by_norm)
        self._new_step_functions()

    def _new_step_functions(self):
        self._step_fn = self.replicas.function(self._step)
        self._accumulate_fn = self.replicas.function(self._accumulate)
        self._apply_fn = self.replicas.function(self._apply_accumulated, split=False)

    @contextlib.contextmanager
    def traced_apart(self):
        """Within: the steps run on functions of their own, dropped on leaving with what their traces
        hold (graphs, kernels and the memory those keep). A measurement of one batch size
        (`memory_budget`) then starts from the state every other size starts from, whatever was
        measured before it."""
        kept = self._step_fn, self._accumulate_fn, self._apply_fn
        self._new_step_functions()
        try:
            yield
        finally:
            self._step_fn, self._accumulate_fn, self._apply_fn = kept

    @property
    def step(self):
        return self.optimizer.iterations

    def losses(self, batch) -> dict:
        """The four losses of a batch (float32 scalars); runs the model in training mode unless frozen.
        Under `strategy.run`, this replica's share of the global batch's (see `distribute`)."""
        out = self.forward(batch["image"], training=not self.batch_norm_frozen)
        # Under a mixed policy the heads compute in 16 bits; the losses are float32 (no-op in float32).
        out = {k: tf.cast(v, tf.float32) for k, v in out.items()}
        boxes, classes, weights = groundtruth(batch["boxes"], batch["classes"], batch["num_boxes"],
                                              self.config.num_classes)
        sums = self.loss.sums(self.anchors, out["box_encodings"], out["class_predictions_with_background"],
                              boxes, classes, weights)
        losses = self.loss.normalize(sums, self.replicas.total(sums.num_matches))
        terms = [losses[LOCALIZATION_LOSS], losses[CLASSIFICATION_LOSS]]
        if self.regularized:
            losses[REGULARIZATION_LOSS] = self.replicas.share(builders.regularization_loss(self.regularized))
            terms.append(losses[REGULARIZATION_LOSS])
        losses[TOTAL_LOSS] = tf.add_n(terms)
        return losses

    def _gradients(self, batch):
        with tf.GradientTape() as tape:
            losses = self.losses(batch)
            scaled = precision_lib.scale_loss(self.optimizer, losses[TOTAL_LOSS])  # mixed_float16: times the scale
        return losses, tape.gradient(scaled, self.variables)

    def _apply(self, grads):
        # `grads`: the whole batch's, summed over the replicas (clipping sees the sum). With loss
        # scaling they arrive multiplied by the scale, a power of two: clipping them at
        # clip_norm * scale is exactly clipping the unscaled ones at clip_norm.
        if self.clip_norm > 0:
            grads = clip_gradients_by_global_norm(grads, self.clip_norm * precision_lib.gradient_scale(self.optimizer))
        loss_scaled = precision_lib.is_loss_scaled(self.optimizer)
        before = tf.identity(self.optimizer.iterations) if loss_scaled else None
        self.optimizer.apply(self.replicas.spread(grads), self.variables)
        if self.moving_average is None:
            return
        if loss_scaled:
            # A step with non-finite scaled gradients was skipped (iterations stayed): so is the average's.
            tf.cond(self.optimizer.iterations > before, self._update_average, tf.no_op)
        else:
            self.replicas.once(self.moving_average.update)

    def _update_average(self):
        self.moving_average.update()
        return tf.no_op()

    def _step(self, batch):
        losses, grads = self._gradients(batch)
        self._apply(self.replicas.sum_gradients(grads))
        return losses

    def _accumulate(self, batch):
        losses, grads = self._gradients(batch)
        self.replicas.once(self._add, self.replicas.sum_gradients(grads))
        return losses

    def _add(self, grads):
        for total, grad in zip(self.accumulation.sums, grads):
            total.assign_add(grad)
        self.accumulation.count.assign_add(1)

    def _apply_accumulated(self):
        scale = tf.constant(1.0 / self.accumulate, tf.float32)
        self._apply([tf.convert_to_tensor(total) * scale for total in self.accumulation.sums])
        for total in self.accumulation.sums:
            total.assign(tf.zeros_like(total))
        self.accumulation.count.assign(0)

    def train_step(self, batch) -> dict:
        """One micro-batch of `make_dataset` (the optimiser steps after every `accumulate`-th).

        Returns the micro-batch's losses {name: float32 scalar tensor}. With a strategy, the batch
        is the global one (its size a multiple of the replicas), split across them.
        """
        batch = {k: batch[k] for k in _MODEL_INPUTS}
        size = batch["image"].shape[0]
        if size is not None and size % self.replicas.count:
            raise ValueError(f"a batch of {size} does not split across {self.replicas.count} replicas")
        with self.replicas.scope():
            if self.accumulate == 1:
                return self._step_fn(batch)
            losses = self._accumulate_fn(batch)
            if _as_int(self.accumulation.count) == self.accumulate:
                self._apply_fn()
            return losses

    def checkpoint(self, **extra) -> tf.train.Checkpoint:
        """A TF2 checkpoint of the training state: model, optimizer (with its step), moving
        average, gradient accumulators, and `extra` (e.g. the dataset iterator)."""
        parts = {"model": self.model, "optimizer": self.optimizer, "accumulation": self.accumulation, **extra}
        if self.moving_average is not None:
            parts["moving_average"] = self.moving_average
        return tf.train.Checkpoint(**parts)

    @contextlib.contextmanager
    def averaged_weights(self):
        """Within: the model holds the moving averages (unchanged without a moving average)."""
        if self.moving_average is None:
            yield
            return
        trained = [tf.identity(v) for v in self.variables]
        self.moving_average.copy_to()
        try:
            yield
        finally:
            for v, value in zip(self.variables, trained):
                v.assign(value)


class _Accumulation(tf.Module):
    """Gradient sums of the micro-batches of the current step and their count."""

    def __init__(self, variables):
        super().__init__(name="accumulation")
        self.sums = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False) for v in variables]
        self.count = tf.Variable(0, dtype=tf.int64, trainable=False)


def _same_on_every_worker(strategy, value: int) -> bool:
    """Whether every replica of `strategy` holds `value`: sums of the value and of its square
    all-reduced (all equal exactly when the sum of squares is n * value^2)."""
    local = tf.constant([value, value * value], tf.float64)
    ctx = lambda: tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, local)  # noqa: E731
    total = strategy.experimental_local_results(strategy.run(ctx))[0].numpy()
    n = strategy.num_replicas_in_sync
    return bool(total[0] == n * value and total[1] == n * value * value)


def _as_int(variable) -> int:
    # int() of a Keras variable holding a tf.distribute MirroredVariable fails; its value does not.
    return int(tf.convert_to_tensor(variable))


def write_model(trainer: Trainer, directory: str, extra=None) -> str:
    """The trained model (the moving averages when there are some, as the OD API's saver stored
    them) as a converted directory (`detector.save`), written beside `directory` and renamed into
    place, replacing an earlier one. `extra(folder, model)`, when given, adds files to the folder
    before the rename (e.g. the SavedModel), with the averaged weights in place. The model written
    computes in float32 (a float32 copy of a mixed precision one: the same variables)."""
    with atomic_directory(directory) as tmp, trainer.averaged_weights():
        model = precision_lib.with_policy(trainer.model, "float32")
        detector.save(model, tmp)
        if extra is not None:
            extra(tmp, model)
    return os.path.abspath(os.fspath(directory))


def _dataset(records, model, micro_batch: int, label_map, seed: int, training_config):
    # The augmentation the config lists, in its order (the OD API applied none when it listed none).
    steps = augmentation.steps_of(training_config.train.data_augmentation)
    dataset = data.make_dataset(records, model.config, micro_batch, training=True, label_map=label_map, seed=seed,
                                augmentation_steps=steps)
    options = tf.data.Options()
    # The pipeline's py_functions (naming a skipped record once, a file's size) hold no state a
    # resumed run needs, so the iterator is checkpointed without them.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset.with_options(options)


def train(model, training_config, records, output_dir, *, steps: int | None = None, batch_size: int | None = None,
          accumulate: int = 1, freeze_batch_norm=None, checkpoint_every: int = 100, keep_checkpoints: int = 3,
          progress=None, label_map=None, seed: int = 0, write_extra=None, strategy=None, precision: str = "float32",
          recompute: bool = False, max_memory_mb: float | None = None, say=None) -> dict:
    """Trains `model` on OD API TFRecords, resuming from `output_dir`'s latest checkpoint.

    Args:
      model: an `SSDMobileNetV1` (e.g. `detector.load_model` of a converted directory).
      training_config: a `TrainingConfig`; its `num_steps` and `batch_size` unless given here.
      records: TFRecord paths or patterns (`data.make_dataset`).
      output_dir: `checkpoints/` (model, optimizer, moving average, accumulators, the dataset
        iterator) every `checkpoint_every` steps and at the end, and `model/`, the trained model.
      steps: optimiser steps to reach (a resumed run counts those already taken).
      batch_size: images per optimiser step, in `accumulate` micro-batches of
        `batch_size / accumulate`, each split across the strategy's replicas.
      strategy: None or a `tf.distribute` strategy `model` was created under (`Trainer`); the
        checkpoints are the same either way, so a run resumes under another strategy or none.
      progress: called after every step as `progress(step, losses, images_per_second)`, losses
        {name: float} averaged over the step's micro-batches.
      write_extra: `write_model`'s `extra`.
      precision: "float32", "mixed_bfloat16" or "mixed_float16" (`precision`): the model trains
        as a copy computing in that precision; the written model is float32.
      recompute: `Trainer`'s recompute.
      max_memory_mb: instead of `batch_size`, the largest batch whose measured step peaks under
        this many MiB (`memory_budget.largest_batch`; a multiple of `accumulate`).
      say: called with a line about the batch `max_memory_mb` chose (and the sizes measured).
      seed: the dataset's shuffling and augmentation seed. tf.data combines a shuffle's seed with
        TensorFlow's global seed, so a resumed run continues the same stream of batches only
        under the same global seed (`tf.random.set_seed`) as the interrupted one, or none in both.
    Returns:
      {"step": the last step, "losses": its losses, "model_dir": the written model directory,
       "resumed_from": the step the run started at (0 for a fresh run), "batch_size": images per step}.
    Raises:
      InputError, InputError: with `max_memory_mb` (see there).
      InputError: `output_dir` holds a run started with another batch size, accumulation,
        precision or batch-norm freezing (`RUN_SETTINGS`), before anything runs.
    """
    steps = training_config.train.num_steps if steps is None else int(steps)
    batch_size = training_config.train.batch_size if batch_size is None else int(batch_size)
    settings = run_settings(training_config, batch_size, accumulate, precision, freeze_batch_norm)
    started = resume_settings(output_dir, settings, max_memory_mb)
    if started is not None and max_memory_mb is not None:
        batch_size, max_memory_mb = started["batch_size"], None
        if say is not None:
            say(f"batch size {batch_size}: the batch this run chose for its memory budget")
    if steps <= 0:
        raise ValueError(f"steps must be positive, got {steps} (set num_steps or pass steps)")
    if max_memory_mb is None and batch_size % (accumulate * num_replicas(strategy)):
        raise ValueError(f"batch_size {batch_size} is not a multiple of {num_replicas(strategy)} replicas x accumulate "
                         f"{accumulate}")
    if max_memory_mb is not None and strategy is not None:
        raise ValueError("max_memory_mb measures one device's steps: give batch_size with a strategy")
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = precision_lib.with_policy(model, precision)  # a strategy's variables for a policy copy
    trainer = Trainer(model, training_config, accumulate, freeze_batch_norm, strategy, recompute=recompute)
    if max_memory_mb is not None:
        from ssd_mobilenet.training import memory_budget
        micro = memory_budget.largest_batch(trainer, max_memory_mb, progress=say)
        batch_size = accumulate * micro
        if say is not None:
            parts = f" ({accumulate} micro-batches of {micro})" if accumulate > 1 else ""
            say(f"batch size {batch_size}{parts}: the largest whose measured training step peaks under "
                f"{max_memory_mb:g} MiB")
    # Under TF_CONFIG every worker saves (a save meets the other workers), and only the chief into
    # the run: the others into a folder of their own, removed after each save (TF's multi-worker
    # checkpointing). Every worker restores from the chief's checkpoints, so the run directory
    # must be on storage they all see.
    chief = distribute.is_chief()
    checkpoint_dir = os.path.join(output_dir, CHECKPOINT_DIR)
    save_dir = checkpoint_dir
    if not chief:
        task_type, task_index = distribute.cluster_task()[:2]  # (type, index, address, addresses)
        save_dir = os.path.join(output_dir, f".{task_type}-{task_index}-{CHECKPOINT_DIR}")
    if started is None and chief:
        atomic_write.write_text(os.path.join(checkpoint_dir, RUN_SETTINGS),
                                json.dumps(dict(settings, batch_size=batch_size), indent=1))
    iterator = iter(_dataset(records, model, batch_size // accumulate, label_map, seed, training_config))
    checkpoint = trainer.checkpoint(iterator=iterator)
    manager = tf.train.CheckpointManager(checkpoint, save_dir, max_to_keep=keep_checkpoints)
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if latest:
        checkpoint.restore(latest).assert_consumed()
    step, losses = _as_int(trainer.step), {}
    resumed_from = step
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and not _same_on_every_worker(strategy, step):
        # The chief's checkpoints are the run's: every worker must see them.
        raise InputError(f"{output_dir}: not shared: workers resumed at other steps (here {step})")
    while step < steps:
        start = time.perf_counter()
        micro = [trainer.train_step(next(iterator)) for _ in range(accumulate)]
        losses = {k: float(np.mean([m[k].numpy() for m in micro])) for k in micro[0]}
        step = _as_int(trainer.step)
        if progress is not None:
            progress(step, losses, batch_size / (time.perf_counter() - start))
        if step % checkpoint_every == 0 or step == steps:
            manager.save(checkpoint_number=step)
            if not chief:
                shutil.rmtree(save_dir, ignore_errors=True)
    model_dir = os.path.abspath(os.path.join(output_dir, MODEL_DIR))
    if chief:
        model_dir = write_model(trainer, model_dir, write_extra)
    return {"step": step, "losses": losses, "model_dir": model_dir, "resumed_from": resumed_from,
            "batch_size": batch_size}
