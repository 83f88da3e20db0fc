"""`import tensorflow` without the lines its shared libraries print while they load.

TensorFlow 2.21 writes, on file descriptor 2, before anything can configure its log: `WARNING:
All log messages before absl::InitializeLog() is called are written to STDERR`, where it runs
oneDNN's kernels `I0000 ... port.cc] oneDNN custom operations are on ...` (once per library that
carries its own copy), and `cpu_feature_guard`'s notice of the instructions it was not built
for. `TF_CPP_MIN_LOG_LEVEL`, `ABSL_MIN_LOG_LEVEL` and `GLOG_minloglevel` leave the first ones in.
`import_quietly` sends file descriptor 2 to a temporary file for the import alone, and writes
what it caught back to stderr if the import raises: a real error stays visible, and nothing
TensorFlow logs after its import (its errors, its warnings) is touched.

The package imports TensorFlow this way when a name it loads on first use, or a module of it
that needs TensorFlow, is first taken from it (`ssd_mobilenet.load`, `from ssd_mobilenet import
image_io`): a script's output stays its own. A script that imports TensorFlow itself first gets
TensorFlow's lines as TensorFlow prints them (nothing to do then). `migrate`'s command line
imports it so too (`migrate.common.console`), except under `--verbose`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile


def import_quietly() -> None:
    """`import tensorflow` with file descriptor 2 sent to a temporary file, written back to
    stderr if the import raises. A crash inside the import (e.g. a CPU without the instructions
    the build needs) loses it: import TensorFlow first to see it. Nothing to do when TensorFlow
    is already loaded."""
    if "tensorflow" in sys.modules:
        return
    with stderr_caught():
        import tensorflow  # noqa: F401


@contextlib.contextmanager
def stderr_caught():
    """Within: file descriptor 2 goes to a temporary file, written back to stderr if the block
    raises. Without a usable fd 2 (e.g. stderr closed) the block runs as is."""
    saved = saved_stderr()
    if saved is None:
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        except BaseException:
            restore_stderr(saved)
            caught.seek(0)
            sys.stderr.write(caught.read().decode("utf-8", "replace"))
            sys.stderr.flush()
            raise
        restore_stderr(saved)


def saved_stderr() -> int | None:
    """A duplicate of file descriptor 2 to put back later (`restore_stderr`), after flushing what
    Python holds for it; None without a usable one (e.g. stderr closed)."""
    try:
        sys.stderr.flush()
        return os.dup(2)
    except (OSError, ValueError, AttributeError):
        return None


def restore_stderr(saved: int) -> None:
    """File descriptor 2 back to `saved` (`saved_stderr`), which is closed."""
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
