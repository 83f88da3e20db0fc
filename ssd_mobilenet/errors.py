"""The errors of the package and of `migrate`'s commands: a handful of kinds, each a kind of
failure the user can act on, defined here once (no TensorFlow: the command line catches them
before and without loading it).

- `InputError` (a `ValueError`): a file or option the user gave is wrong (a source that does not
  read, a label map, an image, a model file, a memory budget too small, options that exclude each
  other, a graph the conversion check cannot run). The command line prints its message, one
  line naming the file or option and the problem, as `error: ...` and exits with 2.
- `ConfigError` (an `InputError`): a pipeline.config that does not read, or asks for what the
  model does not do; it keeps the line the problem is on (`line`) and words itself for the file
  (`at(path)`).
- `OutputExistsError` (an `InputError` and a `FileExistsError`): the output exists; another path
  or `--force`. Exit 2.
- `CheckFailedError` (a `RuntimeError`): the conversion's own check found that the converted
  model does not compute what the TF1 graph computes: a bug to report, or `--no-check`. Exit 1.
- `RunError` (a `RuntimeError`): a run that failed once started: a worker, a process or a
  pipeline died, a measurement failed. Exit 1.

`migrate.commands.common.exit_code` maps the kinds to the exit codes, for every command.

The base classes are kept for library users: `except ValueError` still catches every input error,
`except FileExistsError` an existing output, `except RuntimeError` a failed check or run. Two
refusals took the kind of what the user does about them, and with it another base: the memory
settings `ssd_mobilenet.memory` cannot apply (a `RuntimeError` before) and a zoo model's missing
files (`migrate.bench.zoo_models`, a `FileNotFoundError` before) are `InputError`s.
"""

from __future__ import annotations


class InputError(ValueError):
    """A file or option the user gave is wrong; the message, one line, names it and the problem."""


class ConfigError(InputError):
    """A pipeline.config that cannot be read or that asks for something unsupported.

    `line` (1-based, or None) is where in the file the problem is; `at(path)` words the error
    for the file `path` as one line: `PATH:LINE: PROBLEM`, or `PATH: PROBLEM` without a line.
    """

    def __init__(self, problem: str, line: "int | None" = None):
        super().__init__(problem if not line else f"line {line}: {problem}")
        self.problem, self.line = problem, line or None

    def at(self, path: str) -> "ConfigError":
        return ConfigError(f"{path}:{self.line}: {self.problem}" if self.line else f"{path}: {self.problem}")


class OutputExistsError(InputError, FileExistsError):
    """An output that exists and would be replaced without `force`; the message names it."""


class CheckFailedError(RuntimeError):
    """The converted model does not compute what the TF1 graph computes; the message is one line."""


class RunError(RuntimeError):
    """A run that failed once started (a worker, process or pipeline that died, a measurement
    that failed); the message says what failed."""
