"""`python -m migrate train CONVERTED --train RECORDS ...`: keep training a converted model in TF2
as the TF1 Object Detection API trained it (`ssd_mobilenet.training`).

The training settings (`train_config` and the model's loss, matcher and hyperparams) come from
`--config` when given, else from the source's own pipeline.config that `convert` kept
(`source_pipeline.config`), else from CONVERTED's `pipeline.config`; the first that has them is
used, and without any the run is refused (the OD API had no defaults for them either). The
model's class count, background class and box coder scales are always the converted model's.
`--steps` and `--batch` override `num_steps` and `batch_size`; `--max-memory MiB` instead measures the
largest batch whose training step peaks under MiB (`memory_budget`). `--precision` (mixed_float16 with
dynamic loss scaling, mixed_bfloat16), `--recompute`, `--accumulate` and `--freeze-batch-norm` are
the memory levers (`trainer`; docs/training_memory.md); the run says which are on. With `--labels` whose class count
differs from the model's (a COCO model tuned to one's own classes), the class heads start fresh,
as the OD API's `fine_tune_checkpoint_type: detection` restored everything but them, and the run
says so.

OUT (default `CONVERTED_trained`) holds `checkpoints/` (the resumable state: a run started again
on the same OUT continues from its last checkpoint) and `model/`, the trained model as `convert`
writes one (`model_config.json`, `checkpoint/`, `pipeline.config`, `saved_model/`, and the label
map: `--labels`, else CONVERTED's), renamed into place when training ends. Its weights are trained:
CONVERTED's mark of synthetic weights (`converted_dir.SYNTHETIC_FILE`) does not go along. An
OUT that is not a training run's is refused unless `--force`, which also starts a run over.

`--devices N` trains on N devices with `tf.distribute.MirroredStrategy`, each batch split evenly
across them (`ssd_mobilenet.training.distribute`): N GPUs when there are GPUs (`all`: every
one), else the CPU split into N logical devices (which share the same cores: a way to run the
distributed path without GPUs, not a speed-up). The batch must be a multiple of N x
`--accumulate`. The losses and updates are the one-device run's on the same batches (the
matched-anchor normaliser is the whole batch's), except that batch norm in training mode
normalises each device's slice with its own statistics, as TF1's multi-clone training did.
Checkpoints do not depend on the device count: a run resumes on another count, or on one device.

Multi-worker: with `TF_CONFIG` set (the standard `{"cluster": {"worker": [...]}, "task": {"type":
"worker", "index": i}}`), training runs `MultiWorkerMirroredStrategy` over the workers, each on
its GPUs (or its CPU), and `--devices` is refused. Start the same command on every worker with
its own TF_CONFIG and the same OUT on storage every worker sees (NFS, a bucket): the chief (the
"chief" task, else worker 0) writes the checkpoints and the model there, the others save into a
temporary folder of their own that they remove (TF's multi-worker checkpointing), and every worker
restores from the chief's checkpoints, so a run resumes on any worker count or on one process
(a worker that resumed elsewhere than the others is refused). Every worker reads the whole global
batch of the same records and keeps its devices' slices. A worker lost mid-run ends the others
with one line naming it (`RunError`); starting every worker again resumes the run from its
last checkpoint. `--force` is refused under TF_CONFIG (remove OUT before starting the workers).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import warnings

from ssd_mobilenet import atomic_write
from ssd_mobilenet.errors import InputError, OutputExistsError, RunError

PIPELINE_CONFIG = "pipeline.config"
SOURCE_PIPELINE_CONFIG = "source_pipeline.config"  # written by convert
PROGRESS_LINES = 20  # about this many progress lines per run, whatever its length


def default_out(converted: str) -> str:
    return os.path.abspath(converted).rstrip(os.sep) + "_trained"


def with_fresh_class_heads(model, num_classes: int, seed: int = 0):
    """(a copy of `model` for `num_classes` classes, the paths of its fresh variables): every
    weight of `model` whose shape fits is copied; the class predictors' (whose width is the class
    count) are drawn anew from the OD API's conv initializer (truncated normal, stddev 0.03),
    biases zero."""
    import tensorflow as tf

    from ssd_mobilenet.model import SSDMobileNetV1
    new = SSDMobileNetV1(dataclasses.replace(model.config, num_classes=num_classes))
    old = {v.path: v for v in model.weights}
    rng = tf.random.Generator.from_seed(seed)
    fresh = []
    for v in new.weights:
        source = old.get(v.path)
        if source is not None and tuple(source.shape) == tuple(v.shape):
            v.assign(source)
            continue
        fresh.append(v.path)
        if v.path.endswith("biases"):
            v.assign(tf.zeros(v.shape, v.dtype))
        else:
            v.assign(rng.truncated_normal(v.shape, stddev=0.03, dtype=v.dtype))
    return new, fresh


def losses_line(losses: dict) -> str:
    """What the step lines' numbers are (`step_line`): `loss = localization + classification +
    regularization`, the terms of `losses` ({name: value}, the trainer's) in their order."""
    from ssd_mobilenet.training.trainer import TOTAL_LOSS
    terms = [k.split("/")[-1].replace("_loss", "") for k in losses if k != TOTAL_LOSS]
    return f"loss = {' + '.join(terms)}"


def step_line(step: int, steps: int, losses: dict, images_per_second: float) -> str:
    """One step's progress: `step 300/1500: loss 2.0183 = 0.4127 + 1.4687 + 0.1369, 31.5 images/s`,
    the total and its terms in `losses_line`'s order."""
    from ssd_mobilenet.training.trainer import TOTAL_LOSS
    terms = " + ".join(f"{v:.4f}" for k, v in losses.items() if k != TOTAL_LOSS)
    return (f"step {step}/{steps}: loss {losses[TOTAL_LOSS]:.4f} = {terms}, {images_per_second:.1f} "
            "images/s")


def _label_map_classes(labels: str) -> int:
    """The class count a label map trains: its largest id. Ids it leaves unused below that keep
    their columns, which no box trains, as the OD API's COCO configs (`num_classes: 90`) did with
    COCO's 80 categories (`--labels coco`)."""
    from ssd_mobilenet import label_map
    return max(label_map.read(labels))


def training_settings(converted: str, config: str = None):
    """(path, TrainingConfig) of the first config with training settings (module docstring).

    Raises:
      InputError: none has them, or `config` is missing; ConfigError: a config that has them
        asks for what training cannot do (naming the file and field).
    """
    from ssd_mobilenet.errors import ConfigError
    from ssd_mobilenet.training.train_config import TrainingConfig
    if config is not None and not os.path.isfile(config):
        raise InputError(f"{config}: no such file")
    candidates = [config] if config is not None else [os.path.join(converted, name)
                                                       for name in (SOURCE_PIPELINE_CONFIG, PIPELINE_CONFIG)]
    for path in candidates:
        try:
            if os.path.isfile(path) and _has_training_fields(path):
                return path, TrainingConfig.from_pipeline_config(path)
        except ConfigError as e:
            raise e.at(path) from None
    # Training settings: model.ssd.loss and train_config (an inference-only config has neither).
    raise InputError(f"{candidates[0] if config else converted}: no training settings; give --config "
                     "PIPELINE_CONFIG")


def _has_training_fields(path: str) -> bool:
    # An inference-only pipeline.config (what convert writes) has neither block.
    from ssd_mobilenet.config.pipeline_reader import parse_pipeline_config
    root = parse_pipeline_config(path)
    model = root.child("model")
    ssd = model.child("ssd") if model is not None else None
    return root.child("train_config") is not None and ssd is not None and ssd.child("loss") is not None


def _pipeline_text(config_path: str, num_classes: int) -> str:
    """The pipeline.config with `model.ssd.num_classes` set to `num_classes`, for the trained model."""
    with open(config_path, encoding="utf-8") as f:
        text = f.read()
    text, n = re.subn(r"(\bnum_classes\s*:\s*)\d+", lambda m: f"{m.group(1)}{num_classes}", text, count=1)
    return text if n == 1 else None


def settings_notes(training_config, steps: int) -> list:
    """What the run's settings do that a user may not expect: the augmentation it applies (none
    when the config lists none, as in the OD API), and a moving average too slow for the run."""
    train = training_config.train
    kinds = [a.kind for a in train.data_augmentation]
    notes = [f"augmentation: {', '.join(kinds)}" if kinds
             else "no augmentation (the config lists no data_augmentation_options)"]
    optimizer = train.optimizer
    if optimizer is not None and optimizer.use_moving_average and steps:
        horizon = 1.0 / max(1.0 - optimizer.moving_average_decay, 1e-12)
        if steps < horizon:
            # The written model holds the averages (as the OD API saved them), and an average over
            # more steps than the run has is mostly the starting weights.
            notes.append(f"moving_average_decay {optimizer.moving_average_decay:g} averages over about "
                         f"{horizon:.0f} steps and this run has {steps}: the written model (the averages) stays "
                         "close to the starting weights; set use_moving_average: false for short runs")
    return notes


def _strategy(devices, batch_text: str, batch: int, accumulate: int):
    """`distribute.make_strategy(devices)`; refuses (InputError) what it refuses and a batch
    that does not split into replicas x `accumulate`, a known count before creating the strategy."""
    from ssd_mobilenet.training import distribute

    def check(replicas):
        if batch % (replicas * accumulate):
            raise InputError(f"{batch_text} is not a multiple of {replicas} replicas x --accumulate {accumulate}")

    if devices is not None and distribute.multi_worker_configured():
        # Under TF_CONFIG every worker trains on all its GPUs (or its CPU).
        raise InputError(f"--devices {devices}: not with TF_CONFIG; leave --devices out or unset TF_CONFIG")
    if devices is not None and devices != distribute.ALL and int(devices) < 1:
        raise InputError(f"--devices {devices}: must be >= 1")
    if devices != distribute.ALL:
        check(1 if devices is None else int(devices))
    try:
        strategy = distribute.make_strategy(devices)
    except ValueError as e:
        raise InputError(f"--devices {devices}: {e}") from None
    check(distribute.num_replicas(strategy))
    return strategy


def _check_out(out: str, force: bool) -> bool:
    """Whether OUT holds a run to resume; refuses an OUT that is not a training run's."""
    from ssd_mobilenet.training.trainer import CHECKPOINT_DIR
    if not os.path.exists(out):
        return False
    if not os.path.isdir(out):
        raise OutputExistsError(f"{out}: exists and is not a folder")
    is_run = os.path.isdir(os.path.join(out, CHECKPOINT_DIR))
    if force:
        shutil.rmtree(out)
        return False
    if not is_run and os.listdir(out):
        raise OutputExistsError(f"{out}: exists and holds no training run (use --force to replace it)")
    return is_run


def lost_worker_message(error: Exception, out: str, last_step) -> str | None:
    """One line for a multi-worker run whose collective ops lost a peer (None for other errors):
    the worker whose address the error names (else "another worker"), the step reached, the last
    checkpoint, and to start every worker again."""
    import tensorflow as tf

    from ssd_mobilenet.training import distribute
    from ssd_mobilenet.training.trainer import CHECKPOINT_DIR
    task = distribute.cluster_task()
    if task is None or not isinstance(error, tf.errors.OpError):
        return None
    kind, index, _, addresses = task
    text = str(error)
    # TF names a peer by its address, or by its task ("The following tasks are unhealthy (stopped
    # sending heartbeats): /job:worker/replica:0/task:1").
    named = [f"{k} {i} ({address})" for (k, i), address in sorted(addresses.items()) if (k, i) != (kind, index)
             and (address and address in text or re.search(rf"/job:{k}/(replica:\d+/)?task:{i}\b", text))]
    lost = named[0] if named else "another worker"
    latest = tf.train.latest_checkpoint(os.path.join(out, CHECKPOINT_DIR))
    # Every worker started again with the same command and TF_CONFIG resumes from the last
    # checkpoint. (The error's type, most often UnavailableError, is left out: the address says it.)
    resume = f"to resume at {os.path.basename(latest)}" if latest else "(no checkpoint yet: from the start)"
    reached = f" after step {last_step}" if last_step is not None else ""
    return f"{kind} {index} lost {lost}{reached}: start every worker again {resume}"


def levers_line(training_config, precision: str, recompute: bool, accumulate: int, freeze_batch_norm,
                max_memory_mb) -> str:
    """The console line naming the memory levers of a run ("memory levers: none" for none)."""
    from ssd_mobilenet.training import trainer
    on = []
    if precision != "float32":
        on.append(f"precision {precision}" + (" (dynamic loss scaling)" if precision == "mixed_float16" else ""))
    if recompute:
        on.append("recompute")
    if accumulate > 1:
        on.append(f"accumulate {accumulate}")
    if trainer.batch_norm_frozen(training_config, freeze_batch_norm):
        on.append("frozen batch norm")
    if max_memory_mb is not None:
        on.append(f"max memory {max_memory_mb:g} MiB")
    return "memory levers: " + (", ".join(on) if on else "none")


def run(converted: str, train_records, eval_records=None, labels: str = None, out: str = None, config: str = None,
        steps: int = None, batch_size: int = None, accumulate: int = 1, freeze_batch_norm=None,
        checkpoint_every: int = 100, force: bool = False, seed: int = 0, devices=None, progress=None,
        precision: str = "float32", recompute: bool = False, max_memory_mb: float | None = None) -> dict:
    """Trains CONVERTED on `train_records` (module docstring); evaluates the trained model on
    `eval_records` when given. `devices`: None (one device), N or "all" (`distribute.make_strategy`);
    the CPU split happens here, so call it before TensorFlow has initialised its devices.

    Returns:
      {"out", "model_dir", "step", "resumed_from", "losses", "notes", "metrics" (with eval_records)}.
    Raises:
      InputError, OutputExistsError, InputError, InputError,
      ConfigError: bad input, before any step runs; InputError,
      InputError: `max_memory_mb` too small for one image, or no allocator
      statistics (nothing written: the search runs before the run's first checkpoint).
    """
    from ssd_mobilenet import converted_dir, detector, label_map
    from ssd_mobilenet.formats.saved_model.writer import export_saved_model
    from ssd_mobilenet.training import data, distribute, trainer

    say = progress or (lambda msg: None)
    if not converted_dir.is_converted(converted):
        raise InputError(converted_dir.not_converted(converted))
    if accumulate < 1:
        raise InputError(f"--accumulate {accumulate}: must be >= 1")
    if max_memory_mb is not None and devices is not None:
        raise InputError(f"--max-memory {max_memory_mb:g}: measures one device; with --devices give --batch")
    if force and distribute.multi_worker_configured():
        # Each worker would remove the run the others use.
        raise InputError("--force: TF_CONFIG is set; remove OUT before starting the workers")
    config_path, training_config = training_settings(converted, config)
    batch = training_config.train.batch_size if batch_size is None else batch_size
    batch_text = f"--batch {batch}" if batch_size is not None else f"{config_path}: batch_size {batch}"
    # Before any TensorFlow op: splitting the CPU into logical devices must precede their initialisation.
    strategy = _strategy(devices, batch_text, batch, accumulate)
    replicas = distribute.num_replicas(strategy)
    wanted = _label_map_classes(labels) if labels is not None else None
    # The model's own label map names its classes (class texts in the records): never a new class count.
    labels = labels or converted_dir.label_map_file(converted)
    files = data.record_files(train_records)  # missing or empty files: refused before anything runs
    # A training set whose every record is unusable would repeat without ever giving a batch.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", data.RecordWarning)  # named again when training reads them
        if next(iter(data.read_examples(files, label_map=labels).take(1)), None) is None:
            raise InputError(f"{', '.join(files)}: no usable record to train on")
    if eval_records:
        data.record_files(eval_records)
    notes = []
    out = os.path.abspath(out or default_out(converted))
    resume = _check_out(out, force)  # last: with force it removes OUT, so only once the input is good
    if resume:
        trainer.resume_settings(out, trainer.run_settings(training_config, batch, accumulate, precision,
                                                          freeze_batch_norm), max_memory_mb)
    scope = distribute.Replicas(strategy).scope  # the model's variables must be the strategy's
    with scope():
        model = detector.load_model(converted)
    num_classes = model.config.num_classes
    training_config = dataclasses.replace(training_config, num_classes=num_classes,
                                          add_background_class=model.config.add_background_class,
                                          box_coder_scales=tuple(model.config.box_coder_scales))
    notes.append(f"training settings from {config_path}")
    if wanted is not None and wanted != num_classes:
        with scope():
            model, fresh = with_fresh_class_heads(model, wanted, seed)
        training_config = dataclasses.replace(training_config, num_classes=wanted)
        notes.append(f"{labels} has {wanted} classes, the model {num_classes}: the class heads start fresh "
                     f"({len(fresh)} variables), every other weight is the converted model's")
        num_classes = wanted
    pipeline_text = _pipeline_text(config_path, num_classes)
    steps = training_config.train.num_steps if steps is None else steps
    notes.extend(settings_notes(training_config, steps))
    for note in notes:
        say(note)
    every = max(1, (steps or 1) // PROGRESS_LINES)
    if resume:
        say(f"resuming the run in {out}")
    if strategy is not None:
        say(f"training on {replicas} replicas ({type(strategy).__name__}), {batch // (replicas * accumulate)} images "
            "each per micro-batch")
    say(levers_line(training_config, precision, recompute, accumulate, freeze_batch_norm, max_memory_mb))

    reported, done = [], [None]

    def report(step, losses, images_per_second):
        done[0] = step
        # A mixed_float16 step skipped for non-finite gradients leaves the step where it was: one line per step.
        if (step % every == 0 or step == steps) and reported[-1:] != [step]:
            if not reported:
                say(losses_line(losses))
            reported.append(step)
            say(step_line(step, steps, losses, images_per_second))

    def extra(folder, trained):
        if pipeline_text is not None:
            atomic_write.write_text(os.path.join(folder, PIPELINE_CONFIG), pipeline_text)
        if labels is not None:  # the label map travels with the model (`converted_dir.LABEL_MAP_FILE`)
            atomic_write.write_text(os.path.join(folder, converted_dir.LABEL_MAP_FILE), label_map.as_pbtxt(labels))
        export_saved_model(trained, os.path.join(folder, "saved_model"), source=folder)

    try:
        result = trainer.train(model, training_config, train_records, out, steps=steps, batch_size=batch_size,
                               accumulate=accumulate, freeze_batch_norm=freeze_batch_norm,
                               checkpoint_every=checkpoint_every, progress=report, label_map=labels, seed=seed,
                               write_extra=extra, strategy=strategy, precision=precision, recompute=recompute,
                               max_memory_mb=max_memory_mb, say=say)
    except InputError:  # a resume under other settings: not a lost worker
        raise
    except Exception as e:  # a collective op's gRPC failure surfaces as one of tf.errors' OpErrors
        lost = lost_worker_message(e, out, done[0])
        if lost is None:
            raise
        raise RunError(lost) from None
    result = {"out": out, "notes": notes, **result}
    from migrate.common.console import shown
    say(f"trained to step {result['step']} -> {shown(result['model_dir'])}")
    if eval_records:
        from migrate import evaluate
        result["metrics"] = evaluate.evaluate(result["model_dir"], eval_records, labels=labels,
                                              progress=say)["metrics"]
    return result
