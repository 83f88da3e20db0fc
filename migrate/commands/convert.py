"""`migrate convert`: a TF1 OD API SSD MobileNet v1 -> a native TF2 model
(`migrate.convert.conversion`)."""

from __future__ import annotations

from migrate.commands.common import (EXIT_OK, add_labels, add_verbose, labels_problem, missing, op_list, print_wrapped,
                                     progress, tensorflow_command)
from migrate.common.console import shown


def add_parser(sub) -> None:
    c = sub.add_parser("convert", help="convert a TF1 OD API SSD MobileNet v1 to a native TF2 model")
    c.add_argument("src", nargs="?", help="TF1 model directory, or a checkpoint / frozen graph / pipeline.config "
                   "in one (default: the built-in model, built under checkpoints/ on first use)")
    c.add_argument("--out", help="output directory (default: <SRC>_tf2)")
    c.add_argument("--force", action="store_true", help="replace an existing non-empty --out")
    c.add_argument("--trust-weights", action="store_true",
                   help="when pipeline.config and the weights disagree, take the weights' values")
    c.add_argument("--image-size", nargs=2, type=int, metavar=("H", "W"),
                   help="input size when neither a graph nor a pipeline.config says it")
    c.add_argument("--use-moving-averages", action="store_true",
                   help="take ExponentialMovingAverage shadows where the checkpoint has them")
    c.add_argument("--no-check", action="store_true",
                   help="write without checking the conversion against the source's TF1 graph")
    c.add_argument("--allow-ops", default="", metavar="OP,...",
                   help="let the check run these op types although they are not in the SSD inference op set")
    c.add_argument("--exact", action="store_true",
                   help="write the SavedModel op for op as the TF1 graph is written (default: the fast one, batch "
                        "norm folded, heads merged)")
    c.add_argument("--constant-weights", action="store_true",
                   help="the fast SavedModel with every weight a graph constant: faster warm calls on oneDNN, for "
                        "a process that starts slower and holds the weights many times over (default in float32: "
                        "variables)")
    c.add_argument("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32",
                   help="the SavedModel's compute precision: mixed_bfloat16 for CPUs with bfloat16 units, "
                        "mixed_float16 for GPUs (outputs stay float32; default float32)")
    add_labels(c, "the label map to keep in --out as label_map.pbtxt (default: the one the source's "
               "pipeline.config names in label_map_path, where that file is found)")
    c.add_argument("--quiet", action="store_true")
    add_verbose(c)


def missing_path(args):
    if missing(args.src, prefix=True):
        return f"{args.src}: no such file or directory"
    return labels_problem(args.labels)


@tensorflow_command
def run(args) -> int:
    from migrate.convert import conversion
    from migrate.tf1 import config_inference
    if args.src is None:
        from migrate.convert import default_model
        args.src = default_model.ensure_tf1_model(progress(args.quiet, wrap=True))
        args.out = args.out or default_model.converted_dir()
        args.labels = args.labels or default_model.LABELS
    report = conversion.convert(args.src, args.out, force=args.force, trust_weights=args.trust_weights,
                                image_size=args.image_size, use_moving_averages=args.use_moving_averages,
                                check=not args.no_check, progress=progress(args.quiet, wrap=True),
                                saved_model="exact" if args.exact else "fast", precision=args.precision,
                                allow_ops=op_list(args.allow_ops),
                                saved_model_weights="constants" if args.constant_weights else None, labels=args.labels)
    for note in report["notes"]:
        if args.verbose or not note.startswith(config_inference.EVERY_GRAPH_FIELD):
            print_wrapped(f"[migrate] {note}")
    print(f"converted {report['num_weights']} weights ({len(report['ignored'])} ignored) -> {shown(report['out'])}")
    return EXIT_OK
