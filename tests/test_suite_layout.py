"""The test suite's own layout: no folder of it can stand in for a package.

Under pytest's default import mode a test folder without `__init__.py` is put on `sys.path`, and
its subfolders become importable top-level names: `tests/onnx/` was imported as the `onnx`
package where the onnx package was not installed (`ImportError: cannot import name 'numpy_helper'
from 'onnx' (unknown location)`). The suite mirrors the packages it tests (`tests/migrate/`,
`tests/ssd_mobilenet/formats/onnx/`, ...), so every such name would shadow the real package: every
folder of the suite is a package under `tests`, its modules are
`tests.ssd_mobilenet.formats.onnx.test_onnx_writer` and so on, and no folder name reaches `sys.path`.
"""

from __future__ import annotations

import importlib.util
import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))


def _test_folders():
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        if any(f.endswith(".py") for f in files):
            yield root


def test_every_test_folder_is_a_package_under_tests():
    missing = [os.path.relpath(d, os.path.dirname(TESTS)) for d in _test_folders()
               if not os.path.isfile(os.path.join(d, "__init__.py"))]
    assert not missing, f"folders without __init__.py (their subfolders would shadow packages): {missing}"
    assert __name__ == "tests.test_suite_layout"


def test_no_test_folder_is_on_sys_path():
    folders = {os.path.realpath(d) for d in _test_folders()}
    assert not folders & {os.path.realpath(p or os.getcwd()) for p in sys.path}


def test_a_test_folder_named_after_a_package_does_not_shadow_it():
    # tests/migrate/, tests/ssd_mobilenet/ and tests/ssd_mobilenet/formats/onnx/ are named after
    # packages: each name resolves to the package where it is installed, and to nothing (not to the
    # folder) where it is not.
    for name, folder in [("migrate", "migrate"), ("ssd_mobilenet", "ssd_mobilenet"),
                         ("onnx", os.path.join("ssd_mobilenet", "formats", "onnx"))]:
        spec = importlib.util.find_spec(name)
        assert spec is None or not os.path.realpath(spec.origin or "").startswith(os.path.realpath(TESTS))
        dotted = "tests." + folder.replace(os.sep, ".")
        assert importlib.util.find_spec(dotted).origin == os.path.join(TESTS, folder, "__init__.py")
