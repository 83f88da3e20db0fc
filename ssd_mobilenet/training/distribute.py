"""Training on several devices with `tf.distribute`: what `Trainer(strategy=...)` does differently.

A step (or micro-batch, with accumulation) takes the global batch, splits it in order into equal
slices, one per replica, and runs the step on each under `strategy.run`:
- each replica computes its slice's `SSDLoss.sums`; the matched-anchor counts are all-reduced
  (SUM) first, and every replica divides its sums by the count of the whole batch, as one device
  would (`normalize_loss_by_num_matches` divides by the batch's count; hard example mining works
  per image and needs nothing shared). A replica's losses are then its share of the batch's, and
  the regularisation loss enters each replica as 1/N of itself, so it counts once;
- the gradients of the shares are all-reduced (SUM): the gradient of the global batch. The
  clipping (`gradient_clipping_by_norm`, by the global norm) is applied to that sum, as slim's
  model_deploy summed the clones' gradients before the OD API clipped them;
- the optimiser applies that sum. Keras 3's optimisers sum the replicas' gradients themselves
  in `apply` (with no switch to turn it off, and before any clipping of their own), so each
  replica hands the optimiser 1/N of the clipped sum (`spread`; exact for N a power of two);
- the moving average and the accumulators are updated once, in cross-replica context
  (`merge_call`), so every replica's copy of a variable holds the same value.
The step returns the losses summed over the replicas, the global batch's.

Batch norm in training mode normalises each replica's slice with that slice's statistics, as
TF1's multi-clone training did (no SyncBatchNorm), so a training-mode step on N devices is not
the one-device step on the same batch; with frozen batch norm it is (up to float32 summation
order). The moving statistics follow the first replica's slice, as model_deploy ran only the
first clone's update ops (`BatchNorm`'s moving statistics aggregate ONLY_FIRST_REPLICA).

Input: one `tf.data` iterator of global batches is read and split with
`experimental_distribute_values_from_function` rather than iterated through
`experimental_distribute_dataset`, whose iterators TF cannot checkpoint: the plain iterator
resumes exactly and is the same stream of batches whatever the replica count, so a checkpoint
moves between a distributed and a single-device run. Under MultiWorkerMirroredStrategy every
worker reads the whole global batch (same seed, same stream) and keeps its replicas' slices.

Variables must be created under `strategy.scope()`: the model by the caller (`Trainer` checks),
the optimiser slots, moving average and accumulators by `Trainer`. TF2 checkpoints store one
value per variable, so they restore into any strategy or none.

Choosing the strategy (`make_strategy`): `TF_CONFIG` set -> MultiWorkerMirroredStrategy (each
worker's GPUs, or its CPU); GPUs visible -> MirroredStrategy over the first N (all with "all");
no GPU -> the CPU split into N logical devices (`split_cpu`, which must run before TensorFlow
initialises its devices). One device and no TF_CONFIG -> no strategy.
"""

from __future__ import annotations

import contextlib
import json
import os

import tensorflow as tf

ALL = "all"  # `make_strategy(ALL)`: every visible GPU


def split_cpu(n: int) -> None:
    """Splits the first physical CPU into `n` logical devices (`/cpu:0` .. `/cpu:{n-1}`).

    Raises:
      RuntimeError: TensorFlow has initialised its devices already with another split.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is not None and len(current) == n:
        return
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])


def multi_worker_configured() -> bool:
    """Whether `TF_CONFIG` names a cluster (then training runs MultiWorkerMirroredStrategy)."""
    try:
        return bool(json.loads(os.environ.get("TF_CONFIG", "") or "{}").get("cluster"))
    except (ValueError, AttributeError):
        return False


def cluster_task() -> tuple:
    """(task type, index, its address, {(type, index): address} of every task) from `TF_CONFIG`,
    or None without a cluster."""
    if not multi_worker_configured():
        return None
    spec = json.loads(os.environ["TF_CONFIG"])
    cluster, task = spec["cluster"], spec.get("task", {})
    addresses = {(kind, i): address for kind, members in cluster.items() for i, address in enumerate(members)}
    kind, index = task.get("type", "worker"), int(task.get("index", 0))
    return kind, index, addresses.get((kind, index)), addresses


def is_chief() -> bool:
    """Whether this process writes the run's checkpoints and model: the one process without a
    cluster; under `TF_CONFIG` the "chief" task, or worker 0 when the cluster names none (TF's
    multi-worker convention)."""
    task = cluster_task()
    if task is None:
        return True
    kind, index, _, addresses = task
    has_chief = any(k == "chief" for k, _ in addresses)
    return kind == "chief" or (kind == "worker" and index == 0 and not has_chief)


def make_strategy(devices=None):
    """The strategy for `devices` replicas on this machine (module docstring), or None for one.

    Args:
      devices: None or 1 (one device), an int N > 1, or "all" (every GPU); not used under
        TF_CONFIG, where each worker takes all its GPUs or its CPU.
    Raises:
      ValueError: more GPUs asked for than visible; devices < 1.
    """
    if multi_worker_configured():
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_physical_devices("GPU")
    if devices == ALL:
        devices = max(len(gpus), 1)
    devices = 1 if devices is None else int(devices)
    if devices < 1:
        raise ValueError(f"devices must be >= 1, got {devices}")
    if gpus:
        if devices > len(gpus):
            raise ValueError(f"{devices} devices asked for, {len(gpus)} GPUs visible")
        return None if devices == 1 else tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(devices)])
    if devices == 1:
        return None
    split_cpu(devices)
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(devices)])


def num_replicas(strategy) -> int:
    return 1 if strategy is None else strategy.num_replicas_in_sync


class Replicas:
    """The points where a `Trainer` step meets the other replicas; each is the identity (the
    one-device step, op for op) without a strategy or outside `strategy.run`."""

    def __init__(self, strategy=None):
        self.strategy = strategy
        self.count = num_replicas(strategy)

    def scope(self):
        return contextlib.nullcontext() if self.strategy is None else self.strategy.scope()

    def check_created_here(self, variables) -> None:
        """Raises ValueError unless `variables` (Keras or tf) were created under the strategy's scope."""
        if self.strategy is None:
            return
        outside = [v.path if hasattr(v, "path") else v.name for v in variables
                   if not self.strategy.extended.variable_created_in_scope(getattr(v, "value", v))]
        if outside:
            # Build or load the model within strategy.scope().
            raise ValueError(f"{len(outside)} model variables (e.g. {outside[0]}) not created under strategy.scope()")

    def _context(self):
        """The replica context of a step under `strategy.run`, else None."""
        if self.strategy is None:
            return None
        context = tf.distribute.get_replica_context()
        return context if context is not None and context.strategy is self.strategy else None

    def total(self, value):
        """`value` summed over the replicas (a per-replica count -> the global batch's)."""
        context = self._context()
        return value if context is None else context.all_reduce(tf.distribute.ReduceOp.SUM, value)

    def share(self, value):
        """This replica's 1/N of a value the whole step has once (the regularisation loss)."""
        return value if self._context() is None else value / tf.cast(self.count, value.dtype)

    def sum_gradients(self, grads) -> list:
        """Every replica's gradients summed (all-reduce), None gradients left None."""
        context = self._context()
        if context is None:
            return grads
        present = [i for i, g in enumerate(grads) if g is not None]
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
        out = list(grads)
        for i, g in zip(present, summed):
            out[i] = g
        return out

    def spread(self, grads) -> list:
        """This replica's 1/N of gradients summed over the replicas, for an optimiser that sums them again."""
        if self._context() is None:
            return grads
        return [None if g is None else g / tf.cast(self.count, g.dtype) for g in grads]

    def once(self, fn, *args):
        """Runs `fn(*args)` once in cross-replica context (state updates); `args` arrive per replica."""
        context = self._context()
        if context is None:
            return fn(*args)
        return context.merge_call(lambda _, *merged: fn(*merged), args=args)

    def function(self, step, split: bool = True):
        """`tf.function` of `step(batch) -> {name: scalar}`; with a strategy, the function splits the
        global batch across the replicas, runs `step` on each and returns the losses summed. With
        `split=False`, `step()` takes no batch and returns nothing (it runs on every replica)."""
        # No autograph: the steps' control flow on tensors is written as tf.cond, their Python `if`
        # and `for` decide on Python values; autograph would only rewrite every function the trace
        # calls, a third of tracing a step (docs/measurements.md, "A run's start").
        if self.strategy is None:
            return tf.function(step, autograph=False)
        strategy, count = self.strategy, self.count
        if not split:
            return tf.function(lambda: strategy.run(step), autograph=False)

        def distributed(batch):
            def slice_for(context):
                def part(t):
                    size = tf.shape(t)[0] // count
                    return t[context.replica_id_in_sync_group * size:(context.replica_id_in_sync_group + 1) * size]
                return tf.nest.map_structure(part, batch)

            per_replica = strategy.run(step, args=(strategy.experimental_distribute_values_from_function(slice_for),))
            return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in per_replica.items()}

        return tf.function(distributed, autograph=False)
