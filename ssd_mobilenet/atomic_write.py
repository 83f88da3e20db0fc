"""Writing outputs so that they appear whole or not at all.

Every command writes under a temporary name beside the destination and renames it into place
at the end, so an interrupted or failed run leaves nothing half-written. Whether an existing
destination may be replaced is the caller's decision (the commands' `--force`), taken before
any work starts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from ssd_mobilenet.errors import OutputExistsError


def umask() -> int:
    """The process umask (read without changing it for longer than the call)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path: str, data: bytes) -> None:
    """Writes `data` to `path` atomically, creating its folder; the temporary file is removed on error."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=folder)
    os.fchmod(fd, 0o666 & ~umask())  # mkstemp's 0600 is for the temporary name, not the result
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def temp_dir_beside(dest: str, prefix: str = ".tmp-") -> str:
    """A new empty folder next to `dest` (same file system, so `replace_path` is a rename)."""
    parent = os.path.dirname(os.path.abspath(dest))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.chmod(tmp, 0o777 & ~umask())
    return tmp


def check_output(path, force: bool, is_dir: bool, flag: str) -> None:
    """Refuses, before any work, an output `path` that cannot be written or would be replaced
    without `force` (`OutputExistsError`, every command's): a parent that is a file, a folder
    where a file is expected (or the reverse), or an existing output (an empty folder is taken as
    it is). `flag` names the option in the message. None: no output."""
    if path is None:
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise OutputExistsError(f"{path}: {parent} is a file, not a folder")
    if not os.path.exists(path):
        return
    if not is_dir and os.path.isdir(path):
        raise OutputExistsError(f"{path}: is a folder ({flag} takes a file name)")
    if is_dir and not os.path.isdir(path):
        raise OutputExistsError(f"{path}: is a file ({flag} takes a folder)")
    if force:
        return
    if is_dir and os.path.isdir(path) and not os.listdir(path):
        return
    raise OutputExistsError(f"{path}: exists (use --force to replace it)")


def covers(dest: str, path: str) -> bool:
    """Whether replacing `dest` whole would remove `path`: the same file or folder, or one inside it."""
    real_dest, real_path = os.path.realpath(dest), os.path.realpath(path)
    return real_path == real_dest or real_path.startswith(real_dest.rstrip(os.sep) + os.sep)


def replace_path(tmp: str, dest: str) -> None:
    """Moves `tmp` (a file or folder) into place at `dest`, replacing what is there."""
    if os.path.isdir(dest) and not os.path.islink(dest):
        old = tempfile.mkdtemp(prefix=".old-", dir=os.path.dirname(os.path.abspath(dest)))
        os.rename(dest, os.path.join(old, "x"))
        os.rename(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)


@contextlib.contextmanager
def atomic_directory(directory: str, prefix: str = ".tmp-"):
    """Yields a new empty folder beside `directory` to write into (`temp_dir_beside`); on leaving
    without an error it replaces `directory` (`replace_path`), on an error it is removed and
    `directory` stays as it was."""
    tmp = temp_dir_beside(directory, prefix)
    try:
        yield tmp
        replace_path(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
