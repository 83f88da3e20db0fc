"""`python -m migrate ...`: a thin command line over the library. `main(argv) -> exit code`."""

from __future__ import annotations

import argparse
import os
import sys

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def _parser():
    p = argparse.ArgumentParser(prog="python -m migrate", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="convert a TF1 OD API SSD MobileNet v1 to a native TF2 model")
    c.add_argument("src", help="TF1 model directory, or a checkpoint / frozen graph / pipeline.config in one")
    c.add_argument("--out", help="output directory (default: <SRC>_tf2)")
    c.add_argument("--force", action="store_true", help="replace an existing non-empty --out")
    c.add_argument("--trust-weights", action="store_true",
                   help="when pipeline.config and the weights disagree, take the weights' values")
    c.add_argument("--image-size", nargs=2, type=int, metavar=("H", "W"),
                   help="input size when neither a graph nor a pipeline.config says it")
    c.add_argument("--use-moving-averages", action="store_true",
                   help="take ExponentialMovingAverage shadows where the checkpoint has them")
    c.add_argument("--quiet", action="store_true")
    return p


def _progress(quiet):
    return (lambda msg: None) if quiet else (lambda msg: print(f"[migrate] {msg}", file=sys.stderr, flush=True))


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from migrate import assign, convert, infer, sources
    from ssd_mobilenet.config import ConfigError
    bad_input = (sources.SourceError, ConfigError, infer.MismatchError, assign.MappingError,
                 convert.OutputExistsError)
    try:
        if args.command == "convert":
            report = convert.convert(args.src, args.out, force=args.force, trust_weights=args.trust_weights,
                                     image_size=args.image_size, use_moving_averages=args.use_moving_averages,
                                     progress=_progress(args.quiet))
            for note in report["notes"]:
                print(f"[migrate] {note}", file=sys.stderr)
            print(f"converted {report['num_weights']} weights ({len(report['ignored'])} ignored) -> {report['out']}")
            return EXIT_OK
    except bad_input as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_FAIL


def entry_point():
    sys.exit(main())
