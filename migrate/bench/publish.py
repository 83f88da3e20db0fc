"""Where a figures script under scripts/ writes what it measured: `docs/` only when asked to publish.

The scripts that measure (bench.py, cold_memory.py, photo_memory.py, train_memory.py, web_bench.py)
each make a page of `docs/` that holds the published figures of one run on a named machine. A trial
run must not replace them: a script writes its page there only with `--publish`, writes it where
`--out` says otherwise, and without either prints its report and writes nothing.
"""

from __future__ import annotations

import os

# The repository's docs/ (a checkout: the scripts run from one).
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs")


def add_options(parser, published: str, out_help: str) -> None:
    """`--publish` (write `published`, a path below `DOCS`) and `--out` (`out_help` says what goes
    there), which exclude each other."""
    where = os.path.relpath(published, os.path.dirname(DOCS))
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--publish", action="store_true",
                       help=f"write {where}, replacing the published figures (default: print, write nothing)")
    group.add_argument("--out", help=out_help)


def destination(args, published: str) -> str | None:
    """Where the script writes: `published` with --publish, --out's path, or None (print only)."""
    return published if args.publish else args.out


def option(args) -> str:
    """The option of the run as its page records the command: ` --publish`, ` --out PATH` or ""."""
    if args.publish:
        return " --publish"
    return f" --out {args.out}" if args.out else ""
