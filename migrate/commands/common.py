"""What the commands share: exit codes and the errors' kinds they map to (`exit_code`), the
--verbose option, progress lines, the path rule of `missing_path`, and TensorFlow: whether it is
installed (`tensorflow_missing`) and its console (`tensorflow_command`)."""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import sys

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def add_verbose(p) -> None:
    p.add_argument("--verbose", action="store_true",
                   help="also show TensorFlow's own log lines and warnings (hidden by default)")


def bad_input(problem) -> int:
    """`error: PROBLEM` on stderr; the exit code of bad input."""
    print(f"error: {problem}", file=sys.stderr)
    return EXIT_BAD_INPUT


def exit_code(run, args) -> int:
    """`run(args)`, a command's run, with the errors' kinds (`ssd_mobilenet.errors`) as exit codes,
    the one place every command's are mapped:
    - `InputError` (`ConfigError`, `OutputExistsError`): `error: MESSAGE`, exit 2;
    - `CheckFailedError`: `error: MESSAGE` wrapped to the console's width, exit 1 (the first
      diverging stage, its node name ~70 characters, and its numbers are the diagnosis: not cut);
    - `RunError`: `error: ` and the message's first line (a worker's stderr tail follows it), exit 1.
    """
    from ssd_mobilenet.errors import CheckFailedError, InputError, RunError
    try:
        return run(args)
    except InputError as e:
        return bad_input(e)
    except CheckFailedError as e:
        print_wrapped(f"error: {e}")
        return EXIT_FAIL
    except RunError as e:
        lines = str(e).strip().splitlines()
        print(f"error: {lines[0] if lines else type(e).__name__}", file=sys.stderr)
        return EXIT_FAIL


# The widest line the commands print: their lines are laid out to fit (tests/migrate/test_cli.py runs every
# command and holds them to it), and notes of any length are wrapped to it (`wrapped`).
COLUMNS = 100


def wrapped(text: str) -> str:
    """`text` wrapped to COLUMNS, or to the terminal's width where it is narrower, later lines
    indented by four spaces: a note that names many fields stays readable. A word longer than
    the line (a long path) is not broken."""
    import shutil
    import textwrap
    width = min(shutil.get_terminal_size((COLUMNS, 24)).columns, COLUMNS)
    return textwrap.fill(text, width=max(width, 40), subsequent_indent="    ", break_on_hyphens=False,
                         break_long_words=False)


def print_wrapped(text: str, file=None) -> None:
    """`wrapped(text)` on `file` (default stderr)."""
    print(wrapped(text), file=file or sys.stderr, flush=True)


def progress(quiet, wrap=False):
    """`say(msg)`: `[migrate] msg` on stderr (wrapped with `wrap`), nothing when `quiet`."""
    if quiet:
        return lambda msg: None
    if wrap:
        return lambda msg: print_wrapped(f"[migrate] {msg}")
    return lambda msg: print(f"[migrate] {msg}", file=sys.stderr, flush=True)


def warn(msg: str) -> None:
    """A library's warning line, on stderr."""
    print(msg, file=sys.stderr)


def op_list(text: str) -> list:
    """--allow-ops' value: `OP,...` -> the op types."""
    return [op.strip() for op in text.split(",") if op.strip()]


def missing(path, prefix=False) -> bool:
    """Whether `path` was given and does not exist (`prefix`: a checkpoint prefix exists as
    `PREFIX.index`)."""
    return path is not None and not os.path.exists(path) and not (prefix and os.path.exists(path + ".index"))


def missing_inputs(paths) -> str | None:
    """The message for the first of `paths` (image or calibration files and folders) that does not exist."""
    for path in paths or ():
        if missing(path):
            return f"{path}: no such file or folder"
    return None


def missing_file(path, flag: str) -> str | None:
    """The message when the file `path`, given with `flag`, does not exist, else None."""
    return f"{path}: no such file ({flag})" if missing(path) else None


def missing_records(paths, flag: str) -> str | None:
    """The message for the first of `paths` (TFRecord files or glob patterns, given with `flag`)
    that names no file, by the rule `ssd_mobilenet.training.data.record_files` applies later: a
    path that exists, else a pattern that matches something."""
    for path in paths or ():
        if os.path.exists(path):
            continue
        if glob.has_magic(path):
            if not glob.glob(path):
                return f"{path}: no file matches this pattern ({flag})"
        else:
            return f"{path}: no such file ({flag})"
    return None


# Every command's --labels takes the same values (`labels_problem`), said in its help.
LABELS_HELP = ("a label_map.pbtxt, a names file (line N = class id N) or `coco`, the COCO label map the package "
               "ships for the zoo's COCO models")


def add_labels(p, what: str) -> None:
    """The `--labels` option; `what`: what the names are for in this command."""
    p.add_argument("--labels", metavar="FILE", help=f"{what}: {LABELS_HELP}")


def labels_problem(value) -> str | None:
    """The message when `--labels VALUE` is not a label map, else None: a file that does not
    exist (with the way out), or one that does not read as a label map
    (`ssd_mobilenet.label_map.read`); `coco`, a label map the package ships, is not a path.
    Every command's --labels goes through it, before any heavy work."""
    if value is None:
        return None
    from ssd_mobilenet import label_map
    from ssd_mobilenet.errors import InputError
    if missing(label_map.resolve(value)):
        return f"{value}: no such file (--labels): the model's label map, or `coco` for the COCO zoo's"
    try:
        label_map.read(value)
    except InputError as e:
        return str(e)
    return None


# What a device install (the `litert` or `onnx` extra only, deploy.md) adds to run TensorFlow.
TENSORFLOW_INSTALL = "pip install 'ssd-mobilenet-migrate[cpu]' (or [gpu])"


def tensorflow_missing(what: str) -> str | None:
    """The message when TensorFlow is not installed, for `what` (a command, "a converted
    directory") that runs it, else None. Looked up without importing it (seconds), and before
    anything imports the packages that come with it (absl: `tensorflow_output` does)."""
    if importlib.util.find_spec("tensorflow") is not None:
        return None
    return f"{what} needs TensorFlow: {TENSORFLOW_INSTALL}"


def tensorflow_command(run):
    """`run(args)` of a command that runs TensorFlow: TensorFlow's console output only under
    --verbose (`migrate.common.console.tensorflow_output`), its errors as exit codes (`exit_code`,
    their lines within TensorFlow's quieted output), and `warn_precision` after the run, bad input
    aside. The command line checks that TensorFlow is installed (`tensorflow_missing`) before any
    path when the run's `needs_tensorflow` is set, as here."""
    @functools.wraps(run)
    def quieted(args) -> int:
        from migrate.common import console
        with console.tensorflow_output(verbose=args.verbose):
            code = exit_code(run, args)
            if code != EXIT_BAD_INPUT:
                warn_precision(getattr(args, "precision", None))
            return code
    quieted.needs_tensorflow = True
    return quieted


def warn_precision(precision) -> None:
    """One line when the command ran a reduced precision this machine has no units for (after
    the command, so that bad input still gets its single line)."""
    from ssd_mobilenet import hardware
    if precision and hardware.missing_units(precision):
        # TensorFlow converts or emulates it: it pays off on machines that have them (which: the
        # deploy guide; troubleshooting.md has this line).
        print(f"warning: --precision {precision}: this machine has no {hardware.UNITS[precision][0]} units; slower "
              "than float32 here", file=sys.stderr)
