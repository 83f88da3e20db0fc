"""The errors' kinds (`ssd_mobilenet.errors`): defined once, with the base classes library users
catch, and mapped to exit codes in one place (`migrate.commands.common.exit_code`)."""

from __future__ import annotations

import ast
import os

import pytest

from migrate.commands.common import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_OK, exit_code
from ssd_mobilenet.errors import CheckFailedError, ConfigError, InputError, OutputExistsError, RunError

from tests.conftest import REPO
# The exception classes a module may still define beside the kinds: a signal caught where it is
# raised, never seen by a user (the TFLite converter's Flex ops, which `migrate export` falls back from).
INTERNAL = {"NeedsFlexOps"}
EXCEPTION_BASES = {"Exception", "ValueError", "RuntimeError", "OSError", "FileExistsError", "FileNotFoundError",
                   "KeyError", "TypeError"}


def _defined_exceptions():
    """(path, class name) of every class of the two packages whose base is an exception."""
    for package in ("migrate", "ssd_mobilenet"):
        for root, _, files in os.walk(os.path.join(REPO, package)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                for node in ast.walk(tree):
                    if isinstance(node, ast.ClassDef):
                        bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                        if bases & EXCEPTION_BASES or any(b.endswith("Error") for b in bases):
                            yield os.path.relpath(path, REPO), node.name


def test_the_kinds_are_defined_once_and_nowhere_else():
    found = list(_defined_exceptions())
    assert [name for path, name in found if path == os.path.join("ssd_mobilenet", "errors.py")] == \
        ["InputError", "ConfigError", "OutputExistsError", "CheckFailedError", "RunError"]
    others = [f"{path}: {name}" for path, name in found
              if path != os.path.join("ssd_mobilenet", "errors.py") and name not in INTERNAL]
    assert not others, others


def test_the_kinds_keep_the_bases_library_users_catch():
    assert issubclass(InputError, ValueError) and issubclass(ConfigError, InputError)
    assert issubclass(OutputExistsError, InputError) and issubclass(OutputExistsError, FileExistsError)
    assert issubclass(CheckFailedError, RuntimeError) and issubclass(RunError, RuntimeError)
    assert not issubclass(CheckFailedError, InputError) and not issubclass(RunError, InputError)
    assert str(OutputExistsError("out: exists")) == "out: exists"


def test_a_config_error_keeps_its_line_and_words_itself_for_the_file():
    error = ConfigError('no field "iou_treshold"', 105)
    assert str(error) == 'line 105: no field "iou_treshold"' and error.line == 105
    assert str(error.at("pipeline.config")) == 'pipeline.config:105: no field "iou_treshold"'
    assert str(ConfigError("no model").at("pipeline.config")) == "pipeline.config: no model"


def _raising(error):
    def run(args):
        raise error
    return run


@pytest.mark.parametrize("error, code, line", [
    (InputError("x.png: not a JPEG or PNG image"), EXIT_BAD_INPUT, "error: x.png: not a JPEG or PNG image"),
    (ConfigError("no model", 3).at("p.config"), EXIT_BAD_INPUT, "error: p.config:3: no model"),
    (OutputExistsError("out: exists (use --force to replace it)"), EXIT_BAD_INPUT,
     "error: out: exists (use --force to replace it)"),
    (CheckFailedError("the converted model differs"), EXIT_FAIL, "error: the converted model differs"),
    # A worker's stderr tail follows its first line: the line is the first.
    (RunError("latency worker failed:\nTraceback (most recent call last):\n  ..."), EXIT_FAIL,
     "error: latency worker failed:"),
])
def test_each_kind_is_one_line_and_its_exit_code(capsys, error, code, line):
    assert exit_code(_raising(error), None) == code
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [line]


def test_a_run_that_returns_keeps_its_code_and_other_errors_are_not_swallowed(capsys):
    assert exit_code(lambda args: EXIT_OK, None) == EXIT_OK
    with pytest.raises(KeyError):  # a bug is a traceback, not a line
        exit_code(_raising(KeyError("x")), None)
    assert capsys.readouterr().err == ""
