"""`python -m migrate ...`: a thin command line over the library. `main(argv) -> exit code`.

Each command is a module of `migrate.commands` (its arguments, the paths it checks, its run);
this module builds the parser from them, refuses a missing path before TensorFlow loads, and
runs the command.
"""

from __future__ import annotations

import argparse
import gc
import sys

from migrate.commands import bench, convert, evaluate, export, predict, shapes, train, verify
from migrate.commands.common import EXIT_BAD_INPUT

# The subcommands, in the order `--help` lists them.
COMMANDS = {"convert": convert, "predict": predict, "verify": verify, "bench": bench, "evaluate": evaluate,
            "train": train, "shapes": shapes, "export": export}


def _parser():
    p = argparse.ArgumentParser(prog="python -m migrate", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return p


def _missing_path(args):
    """The message for the first path named on the command line that does not exist, else None.
    Checked before TensorFlow loads (seconds), with the rules and words the commands use later:
    a checkpoint prefix exists as `PREFIX.index`; paths that are only derived (CONVERTED from
    SRC, the built-in model) are left to the command."""
    check = getattr(COMMANDS[args.command], "missing_path", None)  # none for a command that reads no path
    return check(args) if check else None


def _values_attached(argv) -> list:
    """`--pipeline-options '--runner=X ...'` as `--pipeline-options=--runner=X ...`: argparse
    would take a value that starts with `--` for an option of its own."""
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv[:-1]):
        if arg == "--pipeline-options":
            argv[i:i + 2] = [f"{arg}={argv[i + 1]}"]
            break
    return argv


def main(argv=None) -> int:
    args = _parser().parse_args(_values_attached(argv))
    problem = _missing_path(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return COMMANDS[args.command].run(args)


def entry_point():
    """`ssd-migrate` and `python -m migrate`: `main`, then the process's exit."""
    code = main()
    before_exit()
    sys.exit(code)


def before_exit() -> None:
    """What the command-line process does once its command has returned, before it exits.

    The objects still alive are frozen out of the collections Python runs while it shuts down:
    after `import tensorflow` those traverse every object TensorFlow's modules made, which held a
    process's exit for ~1.4 s (docs/cold_start.md). The command's outputs are written and closed
    by then; what is frozen is freed by its reference counts as before, or by the exit itself.
    Not for a process that goes on (tests call `main` in theirs)."""
    sys.stdout.flush()
    gc.freeze()
