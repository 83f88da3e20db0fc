"""`python -m migrate ...`: a thin command line over the library. `main(argv) -> exit code`.

Each command is a module of `migrate.commands` (its arguments, the paths it checks, its run);
this module builds the parser from them, refuses a missing path before TensorFlow loads, and
runs the command.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sys

from migrate.commands import bench, convert, evaluate, export, predict, shapes, train, verify
from migrate.commands.common import COLUMNS, EXIT_BAD_INPUT, exit_code, tensorflow_missing

# The subcommands, in the order `--help` lists them.
COMMANDS = {"convert": convert, "predict": predict, "verify": verify, "bench": bench, "evaluate": evaluate,
            "train": train, "shapes": shapes, "export": export}


# The runtimes `--version` names, by the module each installs: (module, name shown).
RUNTIME_MODULES = (("tensorflow", "TensorFlow"), ("ai_edge_litert", "LiteRT"), ("onnxruntime", "ONNX Runtime"))


def installed_version(module: str) -> str | None:
    """The version of the distribution that installs `module`, read from its metadata without
    importing it (`import tensorflow` takes seconds); None when the module is not installed.
    The distribution is found by the module: TensorFlow comes as `tensorflow`, `tensorflow-cpu`,
    `tensorflow-macos` and others."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return None
    # The folder the module was installed into (above a package's own folder).
    site = os.path.dirname(os.path.dirname(spec.origin) if spec.submodule_search_locations else spec.origin)
    fallback = None
    for dist in importlib.metadata.distributions(path=[site]):
        top_level = dist.read_text("top_level.txt")
        if top_level is not None:
            if module in top_level.split():
                return dist.version
        elif fallback is None and any(f.parts[:1] == (module,) for f in dist.files or ()):
            fallback = dist.version  # a wheel without top_level.txt: by its files
    return fallback or "(version unknown)"


def version_line() -> str:
    """`--version`: this package's version, Python's, and the installed runtimes' (a LiteRT-only
    or ONNX-only install has no TensorFlow)."""
    import migrate
    versions = {name: installed_version(module) for module, name in RUNTIME_MODULES}
    runtimes = [f"{name} {version}" for name, version in versions.items() if version is not None]
    parts = [f"Python {platform.python_version()}"] + ([", ".join(runtimes)] if runtimes else [])
    if versions["TensorFlow"] is None:
        parts.append("no TensorFlow")
    return f"ssd-mobilenet-migrate {migrate.__version__} ({'; '.join(parts)})"


class _VersionAction(argparse.Action):
    """`--version`: `version_line()` on stdout, exit 0 (argparse's own would rewrap the line)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, wrapped to the terminal as argparse does but never wider than the
    commands' own lines (`common.COLUMNS`)."""

    def __init__(self, prog, **kwargs):
        width = min(shutil.get_terminal_size().columns - 2, COLUMNS)
        super().__init__(prog, width=kwargs.pop("width", None) or width, **kwargs)


def _did_you_mean(word: str, known) -> str:
    """` (did you mean X?)` for the entry of `known` closest to a misspelt `word`, else ""."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser with `_HelpFormatter` that names the closest choice to a misspelt one
    (argparse does from Python 3.14 only, and in other words); `add_subparsers` makes the
    commands' of this class."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def _check_value(self, action, value):
        # argparse's hook for a value outside `choices`: the command's name, or an option's (--precision).
        if action.choices is None or value in action.choices:
            return super()._check_value(action, value)
        hint = _did_you_mean(value, action.choices)
        if action.dest == "command":  # the eight names would not fit the line: --help lists them with their use
            hint = hint or f" ({self.prog} --help lists them)"
            raise argparse.ArgumentError(None, f"{value}: no such command{hint}")
        name = action.option_strings[-1] if action.option_strings else action.metavar or action.dest
        raise argparse.ArgumentError(None, f"{name} {value}: no such choice" + (hint or " (the usage line lists them)"))


class _CommandParser(_Parser):
    """A command's parser: an argument it does not know is its error (`python -m migrate
    COMMAND: error: unrecognized arguments: --ouput x (did you mean --out?)`, with its usage), not
    the top-level parser's, which argparse would report without the command."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            unknown = next((arg.split("=")[0] for arg in extras if arg.startswith("-")), None)
            self.error(f"unrecognized arguments: {' '.join(extras)}"
                       + (_did_you_mean(unknown, self._option_string_actions) if unknown else ""))
        return namespace, extras


# What `--help` says of the tool, above the commands (and docs/reference/cli.md, scripts/cli_reference.py).
DESCRIPTION = ("Convert a TF1 Object Detection API SSD MobileNet v1 to a native TF2 model, check it against the "
               "TF1 graph, then run, export, evaluate, train or benchmark it.")


def _parser():
    p = _Parser(prog="python -m migrate", description=DESCRIPTION,
                epilog="`python -m migrate COMMAND --help` shows a command's arguments.")
    p.add_argument("--version", action=_VersionAction,
                   help="show the package's version, Python's and the installed runtimes' (TensorFlow, LiteRT, "
                        "ONNX Runtime), and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return p


def _missing_tensorflow(args):
    """The message when the command runs TensorFlow (`common.tensorflow_command`) and it is not
    installed (a device install, deploy.md), else None: said before a path, which the user would
    otherwise fix only to learn this. `predict` checks by its MODEL (a file's runtime needs none)."""
    if getattr(COMMANDS[args.command].run, "needs_tensorflow", False):
        return tensorflow_missing(args.command)
    return None


def _missing_path(args):
    """The message for the first path named on the command line that does not exist, else None.
    Checked before TensorFlow loads (seconds), with the rules and words the commands use later:
    a checkpoint prefix exists as `PREFIX.index`, a record pattern matches a file, `--labels coco`
    is the shipped label map; paths that are only derived (CONVERTED from SRC, the built-in model)
    are left to the command."""
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
    problem = _missing_tensorflow(args) or _missing_path(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return exit_code(COMMANDS[args.command].run, args)


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
