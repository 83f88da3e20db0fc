"""`python tests/migrate/device_install.py ARGS`: `python -m migrate ARGS` in a process where TensorFlow and
the packages that come with it cannot be imported, as in a venv with only the `litert` or `onnx`
extra (docs/guides/deploy.md).

The names in `ABSENT` are not found (`importlib.util.find_spec` gives None, `import` raises
ModuleNotFoundError, as for a package that is not installed): Python's path finder is replaced by
one that does not look for them, before anything is imported. The rest of the venv (numpy,
Pillow, protobuf, LiteRT, ONNX Runtime) is found as usual. The repository must be on PYTHONPATH.
"""

import os
import sys
from importlib.machinery import PathFinder

# What the `cpu`, `gpu` and `tf` extras install besides the device's runtimes (TensorFlow's own
# dependencies among them), by top-level module.
ABSENT = ("tensorflow", "absl", "keras", "tf_keras", "tf_slim", "tensorboard", "pycocotools", "h5py")


class _PathFinderWithout(PathFinder):
    """Python's path finder, blind to `ABSENT` (its metadata finder, `find_distributions`, is left
    as it is: `--version` reads the runtimes' versions there)."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in ABSENT:
            return None
        return super().find_spec(fullname, path, target)


def hide() -> None:
    """`ABSENT` unimportable for the rest of this process (none of them imported yet)."""
    assert not any(name.partition(".")[0] in ABSENT for name in sys.modules), "imported already"
    sys.meta_path[:] = [_PathFinderWithout if finder is PathFinder else finder for finder in sys.meta_path]


if __name__ == "__main__":
    # Python put this file's folder first on sys.path: its subfolders (tests/migrate/export/, ...)
    # would be importable as top-level packages, which an install has not.
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    hide()
    from migrate.cli import entry_point
    entry_point()
