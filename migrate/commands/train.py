"""`migrate train`: a converted model trained further in TF2 as the TF1 OD API trained it
(`migrate.train`)."""

from __future__ import annotations

from migrate.commands.common import (EXIT_OK, add_labels, add_verbose, bad_input, labels_problem, missing,
                                     missing_file, missing_records, progress, tensorflow_command)


from migrate.common.console import shown


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="keep training a converted model in TF2 as the TF1 OD API trained it")
    p.add_argument("converted", help="a directory written by `convert` (its pipeline.config gives the training)")
    p.add_argument("--train", nargs="+", required=True, metavar="RECORDS",
                   help="training TFRecords (files or globs) in the OD API's tf.Example format")
    p.add_argument("--eval", nargs="+", metavar="RECORDS", help="evaluate the trained model on these records")
    add_labels(p, "the records' classes, written into the trained model (default: the label map CONVERTED "
               "carries); a largest id other than the model's class count starts the class heads fresh")
    p.add_argument("--config", metavar="PIPELINE",
                   help="pipeline.config with the training settings (default: the source's, kept by convert)")
    p.add_argument("--steps", type=int, metavar="N", help="optimiser steps to reach (default: num_steps)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--batch", type=int, metavar="N", help="images per optimiser step (default: batch_size)")
    size.add_argument("--max-memory", type=float, metavar="MiB",
                      help="the largest batch whose measured training step peaks under MiB (allocator peak, "
                           "weights included)")
    p.add_argument("--accumulate", type=int, default=1, metavar="K",
                   help="split each step's batch into K micro-batches and accumulate their gradients")
    p.add_argument("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32",
                   help="compute precision of the training steps: mixed_float16 (GPUs; dynamic loss scaling) or "
                        "mixed_bfloat16 (CPUs with bfloat16 units, TPUs); variables, losses and the trained model "
                        "stay float32 (default float32)")
    p.add_argument("--recompute", action="store_true",
                   help="recompute the backbone's activations in the backward pass: less memory, more compute")
    p.add_argument("--freeze-batch-norm", action="store_true",
                   help="batch norm in inference mode, gamma and beta not trained")
    p.add_argument("--devices", metavar="N|all",
                   help="split each batch across N devices (tf.distribute.MirroredStrategy): N GPUs, or without a "
                        "GPU the CPU as N logical devices; 'all': every GPU. With TF_CONFIG set, "
                        "MultiWorkerMirroredStrategy over its workers instead (default: one device)")
    p.add_argument("--checkpoint-every", type=int, default=100, metavar="N")
    p.add_argument("--seed", type=int, default=0, help="shuffling and augmentation seed")
    p.add_argument("--out", help="run directory (default: CONVERTED_trained); an existing run resumes")
    p.add_argument("--force", action="store_true", help="replace --out and start over")
    p.add_argument("--quiet", action="store_true")
    add_verbose(p)


def missing_path(args):
    if missing(args.converted):
        return f"{args.converted}: no such directory (expected the output of `migrate convert`)"
    return (missing_records(args.train, "--train") or missing_records(args.eval, "--eval")
            or labels_problem(args.labels) or missing_file(args.config, "--config"))


@tensorflow_command
def run(args) -> int:
    from migrate import evaluate, train
    from ssd_mobilenet import memory
    for flag, value in (("--steps", args.steps), ("--batch", args.batch),
                        ("--checkpoint-every", args.checkpoint_every)):
        if value is not None and value < 1:
            return bad_input(f"{flag} {value}: must be >= 1")
    devices = args.devices
    if devices is not None and devices != "all":
        devices = int(devices) if devices.isdigit() else 0
        if devices < 1:
            return bad_input(f"--devices {args.devices}: must be a number >= 1 or 'all'")
    if args.batch is not None and isinstance(devices, int) and args.batch % (devices * args.accumulate):
        return bad_input(f"--batch {args.batch} is not a multiple of --devices {devices} x --accumulate "
                         f"{args.accumulate}")
    if args.batch is not None and args.batch % args.accumulate:
        return bad_input(f"--batch {args.batch} is not a multiple of --accumulate {args.accumulate}")
    if args.max_memory is not None and not args.max_memory > 0:
        return bad_input(f"--max-memory {args.max_memory:g}: must be a positive number of MiB")
    if args.max_memory is not None and not memory.devices_initialized():
        # Allocator peaks on a CPU need the BFC allocator, chosen before TensorFlow starts
        # (a process that started it already is refused below when it has no statistics).
        memory.configure()
    result = train.run(args.converted, args.train, eval_records=args.eval, labels=args.labels, out=args.out,
                       config=args.config, steps=args.steps, batch_size=args.batch, accumulate=args.accumulate,
                       freeze_batch_norm=True if args.freeze_batch_norm else None,
                       checkpoint_every=args.checkpoint_every, force=args.force, seed=args.seed, devices=devices,
                       progress=progress(args.quiet, wrap=True), precision=args.precision, recompute=args.recompute,
                       max_memory_mb=args.max_memory)
    if "metrics" in result:
        print(evaluate.format_result(result))
    print(f"trained to step {result['step']} -> {shown(result['model_dir'])}")
    return EXIT_OK
