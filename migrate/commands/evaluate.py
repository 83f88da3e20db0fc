"""`migrate evaluate`: COCO detection metrics of a converted or TF1 model on OD API TFRecords
(`migrate.evaluate`)."""

from __future__ import annotations

from migrate.commands.common import (EXIT_OK, add_labels, add_verbose, labels_problem, missing,
                                     missing_records, op_list, progress, tensorflow_command, warn)


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="COCO detection metrics of a converted or TF1 model on OD API TFRecords")
    p.add_argument("model", help="a directory written by `convert`, or a TF1 model (any form convert reads)")
    p.add_argument("--records", nargs="+", required=True, metavar="RECORDS",
                   help="TFRecord files or glob patterns in the OD API's tf.Example format")
    add_labels(p, "the categories, and ids for class texts (default: the label map a converted MODEL carries)")
    p.add_argument("--json", metavar="FILE", help="also write the metrics as JSON")
    p.add_argument("--force", action="store_true", help="replace an existing --json file")
    p.add_argument("--allow-ops", default="", metavar="OP,...",
                   help="run a TF1 graph although it holds these op types outside the SSD inference op set")
    p.add_argument("--quiet", action="store_true")
    add_verbose(p)


def missing_path(args):
    if missing(args.model, prefix=True):
        return f"{args.model}: no such file or directory"
    return missing_records(args.records, "--records") or labels_problem(args.labels)


@tensorflow_command
def run(args) -> int:
    from migrate import evaluate
    result = evaluate.evaluate(args.model, args.records, labels=args.labels, json_path=args.json, force=args.force,
                               progress=progress(args.quiet, wrap=True), warn=warn, allow_ops=op_list(args.allow_ops))
    print(evaluate.format_result(result))
    progress(args.quiet)(f"{result['images']} images ({result['skipped']} records skipped) in "
                         f"{result['seconds']:.1f} s" + (f" -> {args.json}" if args.json else ""))
    return EXIT_OK
