"""What the command line prints: the project's own lines; TensorFlow's only with `--verbose`.

TensorFlow writes to the console through four channels, and each needs its own lever (all
measured with TensorFlow 2.21 on a CPU):

1. While its shared libraries load, absl logs `WARNING: All log messages before
   absl::InitializeLog() ...` and `I0000 ... port.cc] oneDNN custom operations are on ...`,
   once per library that carries its own copy (twice). Nothing configures these:
   `TF_CPP_MIN_LOG_LEVEL=3`, `ABSL_MIN_LOG_LEVEL`, `GLOG_minloglevel` all leave them in
   (`TF_ENABLE_ONEDNN_OPTS=0` removes them by turning oneDNN off, which changes the numbers
   and the speed being measured). So `import tensorflow` runs with file descriptor 2 pointed
   at a temporary file, written back to stderr if the import raises
   (`ssd_mobilenet.tensorflow_start`, which the library uses too). Under --verbose the command
   imports TensorFlow plainly first, so that neither holds them back.
2. TensorFlow's C++ log once absl is set up (`cpu_feature_guard`'s instruction-set notice
   during the import, `MLIR V1 optimization pass is not enabled` when the default model is
   built): `TF_CPP_MIN_LOG_LEVEL=3`, in the environment before TensorFlow loads.
3. Its Python log (`WARNING:tensorflow:From ...: extract_sub_graph (from ...) is deprecated`,
   `build_tensor_info`, `convert_variables_to_constants`): the `tensorflow` logger's level,
   which `tf.get_logger()` reuses, so it is set without importing TensorFlow; and absl's
   Python logger (Keras logs some warnings through it), by its verbosity.
4. Python warnings attributed to TensorFlow, Keras or tf_slim modules (none seen in these
   commands with 2.21, even under `python -W always`; other versions raise some): an `ignore`
   filter limited to those modules, so the project's own `warnings.warn` (attributed to the
   project's modules) still shows, as one `warning: MESSAGE` line like the commands' own
   (`project_warnings_as_lines`; Python's form adds the file, line and source line).

The processes the commands start (`migrate.common.measure` and `migrate.bench` workers) capture
their stderr and show its tail only when they fail; `QUIET_ENV` tells them to quiet 1., 3.
and 4. too (`quiet_worker`), so that tail is the failure. Their C++ log level stays the one
`migrate.common.measure.BASE_ENV` gives every measured side (it is part of the recorded setup).

Only the command line calls this: importing `migrate` or `ssd_mobilenet` changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import warnings

from ssd_mobilenet import tensorflow_start

# Set for the processes a quiet command starts; `quiet_worker` reads it.
QUIET_ENV = "SSD_MIGRATE_QUIET_TENSORFLOW"
# The modules whose Python warnings are TensorFlow's (4.).
TENSORFLOW_MODULES = r"(tensorflow|keras|tf_keras|tf_slim)(\.|$)"


def shown(path: str) -> str:
    """A path as a command's line shows it: relative to the working folder when it is below it
    (`checkpoints/model_tf2`), else as it is; lines stay short where the user works."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative


@contextlib.contextmanager
def tensorflow_output(verbose: bool):
    """For the duration of one command: TensorFlow's console output only when `verbose`.
    Everything set here is put back on exit (`main` is also called in-process, by tests)."""
    if verbose:
        # As before --verbose existed: C++ INFO and WARNING lines off unless the user says otherwise.
        with environment({"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}), \
                project_warnings_as_lines():
            import tensorflow  # noqa: F401 - here, not through the library, which would hold its start-up lines back
            yield
        return
    # 2.: read when the libraries load, so before the import.
    with environment({"TF_CPP_MIN_LOG_LEVEL": "3", QUIET_ENV: "1"}), warnings.catch_warnings(), \
            project_warnings_as_lines():  # filters and warnings.showwarning put back
        restore_logs = _quiet_python_logs()  # 3. and 4.
        try:
            tensorflow_start.import_quietly()  # 1.
            yield
        finally:
            restore_logs()


# The folders of the project's two packages, side by side in a checkout as in site-packages
# (found without importing `ssd_mobilenet`, whose import loads TensorFlow).
_PROJECT_DIRS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                   package) + os.sep for package in ("migrate", "ssd_mobilenet"))


@contextlib.contextmanager
def project_warnings_as_lines():
    """For the block: a Python warning raised from the project's code (`warnings.warn` in
    `migrate` or `ssd_mobilenet`, attributed there by its stacklevel) shows as one `warning:
    MESSAGE` line on stderr, as the commands print their own warnings; Python's form
    (`FILE:LINE: UserWarning: MESSAGE` and the source line) runs past the console's 100 columns.
    Other warnings, and the filters that decide whether one shows, are left as they are."""
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if os.path.abspath(filename).startswith(_PROJECT_DIRS):
            print(f"warning: {message}", file=file or sys.stderr)
        else:
            previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


@contextlib.contextmanager
def environment(updates: dict):
    """`updates` in `os.environ` for the block (for the processes it starts), then the values
    before it put back (variables that were unset are unset again)."""
    saved = {key: os.environ.get(key) for key in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def litert_output(verbose: bool):
    """For a command that runs LiteRT and never imports TensorFlow (`predict` on a `.tflite`
    file): the interpreter's native lines (`native_stderr_quieted`) only when `verbose`."""
    saved = os.environ.get(QUIET_ENV)
    if not verbose:
        os.environ[QUIET_ENV] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(QUIET_ENV, None)
        else:
            os.environ[QUIET_ENV] = saved


def quiet_worker() -> None:
    """In a process started by a quiet command (`QUIET_ENV` set): 1., 3. and 4. for the rest of
    the process (a worker runs one job and exits)."""
    if os.environ.get(QUIET_ENV) == "1":
        _quiet_python_logs()
        tensorflow_start.import_quietly()


def _quiet_python_logs():
    """3.: TensorFlow's and absl's Python loggers at ERROR; 4.: an `ignore` filter for Python
    warnings from TensorFlow's modules. Returns a function that puts the log levels back."""
    from absl import logging as absl_logging  # pure Python, and TensorFlow imports it anyway

    tf_logger = logging.getLogger("tensorflow")
    tf_level, absl_verbosity = tf_logger.level, absl_logging.get_verbosity()
    tf_logger.setLevel(logging.ERROR)
    absl_logging.set_verbosity(absl_logging.ERROR)
    warnings.filterwarnings("ignore", module=TENSORFLOW_MODULES)

    def restore():
        tf_logger.setLevel(tf_level)
        absl_logging.set_verbosity(absl_verbosity)

    return restore


@contextlib.contextmanager
def native_stderr_quieted():
    """In a quiet command (`QUIET_ENV` set by `tensorflow_output`): file descriptor 2 sent to a
    temporary file for the block, for native code that writes to it whatever the log levels
    (the TFLite converter's `fully_quantize: 0, ...`, the interpreter's `INFO: Created TensorFlow
    Lite XNNPACK delegate`); written back to stderr if the block raises. Otherwise a no-op."""
    if os.environ.get(QUIET_ENV) != "1":
        yield
        return
    with tensorflow_start.stderr_caught():
        yield


# The lines of the project's own that a worker process writes to stderr (`only_project_lines`).
PROJECT_LINE = re.compile(r"^(\[migrate\] |warning: |error: )")


@contextlib.contextmanager
def only_project_lines(verbose: bool):
    """For a command whose workers are processes that an engine starts and whose stderr it
    does not capture (Beam's local runner): file descriptor 2 goes through a pipe that lets
    only the project's own lines (`PROJECT_LINE`) reach the console, unless `verbose`. The
    workers inherit it, so their runner's, TensorFlow's and LiteRT's lines (tracebacks
    included: the command says what failed in one line) stay out whatever their log levels."""
    saved = None if verbose else tensorflow_start.saved_stderr()
    if saved is None:
        yield
        return
    read_end, write_end = os.pipe()

    def forward():
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                if PROJECT_LINE.match(line.decode("utf-8", "replace")):
                    os.write(saved, line)

    thread = threading.Thread(target=forward, name="only_project_lines", daemon=True)
    thread.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe ends when every worker holding it has exited
        thread.join(timeout=10)
        os.close(saved)
