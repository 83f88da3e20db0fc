"""Measures the training memory levers for docs/training_memory.md.

    .venv/bin/python scripts/train_memory.py [--converted DIR] [--batch 8] [--steps 5] [--warmup 2]
        [--levers float32,mixed_float16,...] [--out FILE | --publish]

It prints each lever's figures as a JSON line, and writes the page to --out's file or, with
--publish, to docs/training_memory.md (`migrate.benchmark.publish`).

Every lever trains the same model (a converted directory; default: the built-in default model,
`python -m migrate convert` without a source, converted first when missing) at the same images per
optimiser step on the generated shapes set (`shapes_dataset`, written to a temporary folder), each
in a fresh process (TensorFlow's allocator starts empty, the BFC allocator switched on before
TensorFlow starts so that it keeps statistics):

  float32          the plain step
  mixed_float16    float16 compute, LossScaleOptimizer (dynamic loss scaling)
  mixed_bfloat16   bfloat16 compute
  accumulate_2/4   the batch in 2 / 4 micro-batches, gradients accumulated
  recompute        the backbone's blocks recomputed in the backward pass
  frozen_bn        batch norm in inference mode, gamma and beta not trained

After `--warmup` steps (the first one traces), each of `--steps` optimiser steps runs with the
allocator's peak reset before it: `peak` is the highest absolute peak (weights, optimiser slots and
everything resident included, as `train --max-memory` counts it), `step transient` that peak minus
what was in use before the step. images/s is the batch over the mean step time (data pipeline
included). The training settings are the zoo config's (RMSProp, hard example mining), written here
because the default model's pipeline.config holds none.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

LEVERS = ("float32", "mixed_float16", "mixed_bfloat16", "accumulate_2", "accumulate_4", "recompute", "frozen_bn")
DESCRIPTION = {
    "float32": "float32, batch in one step",
    "mixed_float16": "`--precision mixed_float16` (LossScaleOptimizer)",
    "mixed_bfloat16": "`--precision mixed_bfloat16`",
    "accumulate_2": "`--accumulate 2` (2 micro-batches)",
    "accumulate_4": "`--accumulate 4` (4 micro-batches)",
    "recompute": "`--recompute`",
    "frozen_bn": "`--freeze-batch-norm`",
}
# The zoo's ssd_mobilenet_v1_coco.config training fields (matcher, losses, hard example mining, RMSProp).
TRAINING_FIELDS = """    matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.5
      ignore_thresholds: false negatives_lower_than_unmatched: true force_match_for_each_row: true } }
    similarity_calculator { iou_similarity { } }
    normalize_loss_by_num_matches: true
    loss {
      classification_loss { weighted_sigmoid { } }
      localization_loss { weighted_smooth_l1 { } }
      hard_example_miner { num_hard_examples: 3000 iou_threshold: 0.99 loss_type: CLASSIFICATION
        max_negatives_per_positive: 3 min_negatives_per_image: 0 }
      classification_weight: 1.0
      localization_weight: 1.0
    }
    post_processing {"""
TRAIN_CONFIG = """train_config {
  batch_size: 24
  optimizer {
    rms_prop_optimizer {
      learning_rate { exponential_decay_learning_rate { initial_learning_rate: 0.004 decay_steps: 800720
        decay_factor: 0.95 } }
      momentum_optimizer_value: 0.9
      decay: 0.9
      epsilon: 1.0
    }
  }
}
"""


def training_pipeline(model_config) -> str:
    from ssd_mobilenet.config.pipeline_writer import to_pipeline_config
    text = to_pipeline_config(model_config)
    return text.replace("    post_processing {", TRAINING_FIELDS, 1) + TRAIN_CONFIG


def worker(args) -> dict:
    """One lever in this (fresh) process: {"lever", "peak", "transient", "images_per_s", "skipped"}."""
    from ssd_mobilenet import runtime
    runtime.configure(device="CPU")  # before TensorFlow starts: the BFC allocator keeps statistics
    import numpy as np

    from ssd_mobilenet import detector
    from ssd_mobilenet.training import data, precision
    from ssd_mobilenet.training.train_config import TrainingConfig
    from ssd_mobilenet.training.trainer import TOTAL_LOSS, Trainer

    lever = args.worker
    model = detector.load_model(args.converted)
    config = TrainingConfig.from_pipeline_config(training_pipeline(model.config))
    policy = lever if lever.startswith("mixed_") else "float32"
    accumulate = int(lever.split("_")[1]) if lever.startswith("accumulate_") else 1
    trainer = Trainer(precision.with_policy(model, policy), config, accumulate=accumulate,
                      freeze_batch_norm=True if lever == "frozen_bn" else None, recompute=lever == "recompute")
    dataset = data.make_dataset(args.records, model.config, args.batch // accumulate, training=True, seed=0)
    batches = iter(dataset)

    def step():
        for _ in range(accumulate):
            losses = trainer.train_step(next(batches))
        return float(losses[TOTAL_LOSS])

    for _ in range(args.warmup):
        step()
    peaks, transients, seconds = [], [], []
    start_step = int(trainer.step)
    for _ in range(args.steps):
        before = runtime.memory_info("CPU:0")["current"]
        runtime.reset_peak("CPU:0")
        start = time.perf_counter()
        loss = step()
        seconds.append(time.perf_counter() - start)
        peak = runtime.memory_info("CPU:0")["peak"]
        peaks.append(peak)
        transients.append(peak - before)
        if not np.isfinite(loss):
            raise RuntimeError(f"{lever}: loss {loss}")
    skipped = args.steps - (int(trainer.step) - start_step)  # loss-scaled steps with non-finite gradients
    return {"lever": lever, "peak": max(peaks), "transient": max(transients),
            "images_per_s": args.batch / float(np.mean(seconds)), "skipped": skipped}


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        name = fields.get("Model name", platform.processor()).strip()
        cpus = fields.get("CPU(s)", "?").strip()
        flags = fields.get("Flags", "")
        bf16 = "avx512_bf16" if "avx512_bf16" in flags else "no avx512_bf16"
        return f"{name}, {cpus} logical CPUs ({bf16}), no GPU visible"
    except OSError:
        return platform.processor() or platform.machine()


def write_doc(path, results, args, model_config, load_before, load_after, command) -> None:
    import tensorflow as tf
    base = results["float32"]
    mib = 2.0**20
    rows = []
    for lever in args.levers:
        r = results[lever]
        note = f"{r['skipped']} of {args.steps} steps skipped (loss scale)" if r["skipped"] else ""
        rows.append(f"| {DESCRIPTION[lever]} | {r['peak'] / mib:.0f} | {r['peak'] / base['peak']:.2f}x | "
                    f"{r['transient'] / mib:.0f} | {r['transient'] / base['transient']:.2f}x | "
                    f"{r['images_per_s']:.2f} | {r['images_per_s'] / base['images_per_s']:.2f}x | {note} |")
    busy = max(load_before, load_after)
    cpus = os.cpu_count() or 1
    busy_note = (f"**The machine was busy**: load average {load_before:.1f} before and {load_after:.1f} after the "
                 f"run on {cpus} logical CPUs (other processes shared them), so images/s are low and noisy; "
                 "the memory figures do not depend on it." if busy > 0.5 * cpus else
                 f"Load average {load_before:.1f} before and {load_after:.1f} after the run on {cpus} logical CPUs.")
    text = f"""# Training memory levers

Generated by one run of (from the repository root):

```bash
{command}
```

Date: {datetime.date.today().isoformat()}. Machine: {machine()}; TensorFlow {tf.__version__}.
{busy_note}

Model: `{os.path.basename(os.path.normpath(args.converted))}` ({model_config.image_height}x{model_config.image_width},
depth multiplier {model_config.depth_multiplier:g}, {model_config.num_classes} classes), trained on the generated shapes
set with the zoo config's training settings (RMSProp, hard example mining), {args.batch} images per optimiser step for
every lever. Each lever in a fresh process with the BFC allocator; after {args.warmup} warm-up steps, {args.steps}
measured steps. `peak`: the allocator's highest absolute peak during a step (weights, optimiser slots, gradient sums
and everything resident included: what `train --max-memory` compares with its budget). `step transient`: that peak
minus what was in use before the step (activations, gradients, temporaries). images/s: the batch over the mean step
time, input pipeline included. Ratios are to the float32 row.

| lever | peak MiB | peak x float32 | step transient MiB | transient x float32 | images/s | images/s x float32 | note |
|---|---|---|---|---|---|---|---|
""" + "\n".join(rows) + """

Reading the table:

- Mixed precision keeps float32 variables, optimiser slots and losses; only the activations are 16-bit.
  Batch norm computes in float32 on a float32 copy of its input (`layers.BatchNorm`, as Keras' own batch
  norm does), which takes back part of the saving. The speed of mixed precision belongs to GPUs (float16) and
  CPUs or TPUs with bfloat16 units: on a CPU TensorFlow's oneDNN runs bfloat16 where the CPU has it and falls back
  to Eigen for float16. float16's first steps are skipped (counted in the note) while the dynamic loss scale falls
  from 2^15 to one whose gradients are finite; a skipped step computes everything but the update.
- Accumulation runs K micro-batches of batch/K images: activations shrink with the micro-batch, while one
  float32 copy of the trained variables holds the gradient sums.
- Recompute keeps one tensor per MobileNet block and recomputes the rest in the backward pass, one block at a
  time: less activation memory for about one more forward pass of the backbone.
- Frozen batch norm runs batch norm in inference mode (no batch statistics, no gradients for gamma and beta);
  it is a training choice more than a memory lever: the tensors the backward pass keeps are about the same.
- images/s: one step at a time on a shared CPU; compare them only when the header says the machine was quiet.

`train --max-memory MiB` finds the largest batch under a budget by measuring these same peaks
(`ssd_mobilenet/training/memory_budget.py`).
"""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--converted", help="a converted model directory (default: the built-in default model's)")
    p.add_argument("--batch", type=int, default=8, help="images per optimiser step (a multiple of 4)")
    p.add_argument("--steps", type=int, default=5, help="measured steps per lever")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--levers", default=",".join(LEVERS))
    from migrate.benchmark import publish
    published = os.path.join(publish.DOCS, "training_memory.md")
    publish.add_options(p, published, "write the page to this file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--records", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.levers = [lever.strip() for lever in args.levers.split(",") if lever.strip()]
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    unknown = [lever for lever in args.levers if lever not in LEVERS]
    if unknown or "float32" not in args.levers or args.batch % 4:
        p.error(f"levers among {', '.join(LEVERS)}, float32 included (the ratios' base), got {args.levers}; "
                "--batch a multiple of 4")
    from migrate import convert, default_model
    from ssd_mobilenet import detector
    from ssd_mobilenet.config.ssd_config import SSDConfig
    from ssd_mobilenet.training import shapes_dataset
    if args.converted is None:
        args.converted = default_model.converted_dir()
        if not os.path.isfile(os.path.join(args.converted, detector.CONFIG_FILE)):
            convert.convert(default_model.ensure_tf1_model(print), args.converted)
    with open(os.path.join(args.converted, detector.CONFIG_FILE), encoding="utf-8") as f:
        config = SSDConfig.from_dict(json.load(f))
    command = "python scripts/train_memory.py " + " ".join(a for a in sys.argv[1:])
    load_before = os.getloadavg()[0]
    results = {}
    with tempfile.TemporaryDirectory(prefix="train_memory_") as tmp:
        shapes = shapes_dataset.write_shapes_dataset(os.path.join(tmp, "shapes"), num_train=64, num_eval=1,
                                                     image_size=config.image_height, seed=0)
        records = os.path.join(shapes, "train.record")
        for lever in args.levers:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", lever, "--converted", args.converted,
                   "--records", records, "--batch", str(args.batch), "--steps", str(args.steps),
                   "--warmup", str(args.warmup)]
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": REPO}
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"{lever}: worker failed")
            results[lever] = json.loads(proc.stdout.strip().splitlines()[-1])
            print(json.dumps(results[lever]), flush=True)
    out = publish.destination(args, published)
    if out is None:
        print("nothing written: --out FILE, or --publish for docs/training_memory.md, writes the page")
        return 0
    write_doc(out, results, args, config, load_before, os.getloadavg()[0], command)
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
