"""The suite's tiers: what a test needs, not how long it takes.

Every collected test gets exactly one tier marker, the heaviest of what it needs:

- `unit`: Python and numpy alone (parsers, tables, the TensorFlow-free runners' arithmetic);
- `model`: TensorFlow or a Keras model (a small model of `small_model(preset)`, layers, training steps);
- `parity`: a TF1 graph (the zoo graphs of ../shared, the OD API's exports, `migrate.tf1.builder`'s);
- `cli`: a command as a user runs it (`migrate.cli.main`, a child process, a wheel), the docs or the
  browser.

`-m unit` runs in seconds while editing a parser; `-m "unit or model"` covers the Keras model; the
README's `-m "not slow"` is the tier kept under 5 minutes for every change (`slow` marks cases over
~5 s, whatever their tier). The tiers are read from what the test asks for, in the tables below: the
fixtures it requests, the folder it is in, and the names its code, its fixtures' code and the
suite's helpers they call refer to. A new test needs no marker;
a new fixture that builds a model or a TF1 graph, or a new folder of one kind, gets a line here.
"""

from __future__ import annotations

import sys
import types

TIERS = ("unit", "model", "parity", "cli")

# A session fixture -> the tier of every test that requests it (directly or through another fixture).
FIXTURE_TIERS = {
    "small_model": "model",
    "zoo_fixture": "parity", "quantized_fixture": "parity", "zoo_converted": "parity",
    "zoo_dir_converted": "parity", "odapi_converted": "parity", "quantized_converted": "parity",
    "quantized_tflite": "parity",
    "no_tensorflow": "cli",
}

# A path under tests/ (a folder ends in "/") -> the tier every test in it needs at least.
PATH_TIERS = {
    "docs/": "cli",
    "test_wheel.py": "cli",
    "test_leftovers.py": "cli",
    "migrate/test_cli.py": "cli",
    "migrate/test_device_install.py": "cli",
    "migrate/export/test_export_web.py": "cli",
    "migrate/tf1/": "parity",
    "migrate/convert/test_parity.py": "parity",
    "migrate/convert/test_family.py": "parity",
    "migrate/convert/test_odapi_exports.py": "parity",
}

# A global name a test's code calls -> the tier it implies.
CALL_TIERS = {
    "run_cli": "cli", "main": "cli", "subprocess": "cli", "sync_playwright": "cli",
    "measure_isolated": "cli", "measure_without_tensorflow": "cli",
    "model_for_fixture": "parity", "builder": "parity", "FrozenGraphRunner": "parity",
    "save_synthetic_model": "parity", "write_model_dir": "parity",
}

# Modules whose use makes a test a `model` test at least.
MODEL_MODULES = ("tensorflow", "keras", "tf_keras")


def _names_called(function) -> set:
    """The global and attribute names `function` refers to, and those of the functions nested in it
    and of the suite's own helpers it calls (a module-level function of a module under tests/)."""
    names, seen, todo = set(), set(), [function]
    while todo:
        current = todo.pop()
        code = getattr(current, "__code__", None)
        if code is None or code in seen:
            continue
        seen.add(code)
        codes = [code]
        while codes:
            c = codes.pop()
            names |= set(c.co_names)
            codes += [const for const in c.co_consts if isinstance(const, types.CodeType)]
        scope = getattr(current, "__globals__", {})
        todo += [scope[name] for name in names
                 if isinstance(scope.get(name), types.FunctionType)
                 and (scope[name].__module__ or "").startswith("tests.")]
    return names


def _runs_tensorflow(module) -> bool:
    """Whether `module` is TensorFlow or Keras, or a module that imports one of them at its top
    (the project's modules that build or run the model do; the TensorFlow-free ones do not)."""
    if module is None:
        return False
    if module.__name__.split(".")[0] in MODEL_MODULES:
        return True
    return any(isinstance(value, types.ModuleType) and value.__name__.split(".")[0] in MODEL_MODULES
               for value in vars(module).values())


def _uses_tensorflow(function, names: set) -> bool:
    """Whether `function` refers to TensorFlow, Keras or a module, function or class of a module
    that runs them (the test's own module excepted: it may import TensorFlow for other tests)."""
    scope = getattr(function, "__globals__", {})
    for name in names & set(scope):
        value = scope[name]
        if isinstance(value, types.ModuleType):
            module = value
        else:
            module = sys.modules.get(getattr(value, "__module__", None) or "")
            if module is not None and module.__name__.startswith("tests."):
                continue
        if _runs_tensorflow(module):
            return True
    return False


def _calls_need(function) -> set:
    """The tiers the names `function` (and the suite's helpers it calls) refers to imply."""
    names = _names_called(function)
    needs = {CALL_TIERS[name] for name in names if name in CALL_TIERS}
    if _uses_tensorflow(function, names):
        needs.add("model")
    return needs


def tier_of(relpath: str, fixturenames, function, fixture_functions=()) -> str:
    """The tier of a test: `relpath` its file under tests/ ('/'-separated), `fixturenames` every
    fixture it requests (pytest's closure), `function` the test function, `fixture_functions` the
    functions of the suite's own fixtures among them but those `FIXTURE_TIERS` names (what they
    call is what the test needs too)."""
    needs = {FIXTURE_TIERS[name] for name in fixturenames if name in FIXTURE_TIERS}
    needs |= {tier for path, tier in PATH_TIERS.items()
              if relpath == path or (path.endswith("/") and relpath.startswith(path))}
    for called in (function, *fixture_functions):
        needs |= _calls_need(called)
    return max(needs, key=TIERS.index, default="unit")
