"""`migrate shapes`: the training demo's inputs, generated (`migrate.shapes`)."""

from __future__ import annotations

from migrate.commands.common import EXIT_OK, add_verbose, progress, tensorflow_command
from migrate.common.console import shown


def add_parser(sub) -> None:
    p = sub.add_parser("shapes", help="write the training demo's inputs: generated shape TFRecords, a small TF1 "
                                      "model and its training config")
    p.add_argument("out", metavar="DIR", help="the folder to write (train.record, eval.record, label_map.pbtxt, "
                                              "images/, tf1_model/, train.config)")
    p.add_argument("--model", choices=("plain", "ppn"), default="plain",
                   help="the model to train: plain SSD MobileNet v1 (default) or its PPN, with the zoo config's "
                        "losses of each (PPN: focal loss, no hard example miner)")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty DIR")
    p.add_argument("--quiet", action="store_true")
    add_verbose(p)


@tensorflow_command
def run(args) -> int:
    from migrate import shapes
    out = shapes.write(args.out, force=args.force, progress=progress(args.quiet, wrap=True), model=args.model)
    print(f"wrote the shapes demo -> {shown(out)}")
    return EXIT_OK
