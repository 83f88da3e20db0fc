"""Writing a directory so that it appears whole or not at all."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def atomic_directory(directory):
    """Yields a new empty folder beside `directory` to write into; on leaving without an error it
    is renamed to `directory`, replacing an earlier one (moved aside first, then deleted), so a
    reader sees the old directory or the new one, never a half-written one. On an error the
    temporary folder is removed and `directory` stays as it was."""
    directory = os.path.abspath(os.fspath(directory))
    parent, name = os.path.split(directory)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=parent)
    try:
        yield tmp
        if os.path.lexists(directory):
            old = tempfile.mkdtemp(prefix=f".{name}.old.", dir=parent)
            os.rename(directory, os.path.join(old, "previous"))
            os.rename(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
