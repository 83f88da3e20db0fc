"""`pip install .`, not editable: the wheel holds every file the packages read at run time (the web
page, its npm lockfile, the label maps), not the npm runtime, and an installed copy finds them inside
itself: `export --web` from it copies its own page, and without the runtime says in one line which
command installs it where.

The wheel is built from a copy of the sources (pyproject.toml, README.md and the two packages, with the
npm runtime the clone has installed), so that no earlier build's leftovers reach it (setuptools' build/lib
keeps the files of every earlier build), and installed with `pip install --target`. The commands run
with only that folder on PYTHONPATH, from a working folder outside the clone: the clone's packages,
and the venv's editable install of them, are not what runs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

import migrate
from migrate.export import web
from ssd_mobilenet import label_map
from tests.conftest import REPO

PACKAGES = ("migrate", "ssd_mobilenet")
# What a source tree holds besides the packages' files: the build's own products and Python's caches.
NOT_SOURCES = ("__pycache__", "*.pyc", "build", "*.egg-info", "node_modules")

# The wheel's build and install (~7 s), and two `export --web` processes that import TensorFlow.
pytestmark = pytest.mark.slow


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link of `src` at `dst` (the npm runtime: 150 MB), a copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _package_files(root: str) -> set:
    """The paths (relative to `root`, with /) of the packages' files below `root`, without what
    `NOT_SOURCES` names."""
    ignored = shutil.ignore_patterns(*NOT_SOURCES)
    found = set()
    for package in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(root, package)):
            dirs[:] = sorted(set(dirs) - ignored(folder, dirs))
            found |= {os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                      for name in set(files) - ignored(folder, files)}
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """(the sources' copy, the wheel's path) built by `pip wheel --no-deps` from the copy."""
    src = tmp_path_factory.mktemp("wheel_sources")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, name), src)
    for package in PACKAGES:
        shutil.copytree(os.path.join(REPO, package), src / package, copy_function=_link_or_copy,
                        ignore=shutil.ignore_patterns(*NOT_SOURCES[:-1]))
    out = tmp_path_factory.mktemp("wheel")
    # The venv's setuptools where it has one: no download of the build's requirements.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
                           *isolation, "-w", str(out), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (built,) = os.listdir(out)
    return str(src), str(out / built)


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> str:
    """The folder the wheel is installed into (`pip install --no-deps --target`)."""
    site = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                           "--no-compile", "--target", str(site), wheel[1]], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return str(site)


def _installed_web_dir(site: str) -> str:
    """`web.WEB_DIR` of the copy installed in `site`: the page's folder at its place in the
    sources."""
    return os.path.join(site, os.path.relpath(web.WEB_DIR, REPO))


def _run_installed(site: str, cwd, *args) -> subprocess.CompletedProcess:
    """`python ARGS` with the installed copy alone on PYTHONPATH, in `cwd` (outside the clone)."""
    env = {**os.environ, "PYTHONPATH": site}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_wheel_holds_every_file_the_packages_read_and_not_the_npm_runtime(wheel):
    src, wheel_file = wheel
    with zipfile.ZipFile(wheel_file) as z:
        files = {name for name in z.namelist() if ".dist-info/" not in name}
    read_at_run_time = {os.path.relpath(path, REPO).replace(os.sep, "/") for path in (
        *(os.path.join(web.PAGE_DIR, name) for name in web.PAGE_FILES),
        os.path.join(web.WEB_DIR, "package-lock.json"), os.path.join(web.WEB_DIR, "package.json"),
        *(label_map.builtin_path(name) for name in label_map.BUILTIN))}
    assert read_at_run_time <= files, f"not in the wheel: {sorted(read_at_run_time - files)}"
    sources = _package_files(src)
    assert {name for name in sources if name.endswith(".py")} <= files and files <= sources  # every module
    if os.path.isdir(os.path.join(web.WEB_DIR, "node_modules")):  # the copy had it: not shipped
        assert os.path.isdir(os.path.join(src, os.path.relpath(web.WEB_DIR, REPO), "node_modules"))
    assert not [name for name in files if "node_modules" in name]


def test_export_web_from_the_installed_wheel_says_which_npm_command_installs_its_runtime_where(
        installed, small_model, tmp_path):
    found = _run_installed(installed, tmp_path, "-c", "import migrate, ssd_mobilenet; "
                           "print(migrate.__file__); print(ssd_mobilenet.__file__)")
    assert found.stdout.split() == [os.path.join(installed, package, "__init__.py") for package in PACKAGES]
    out = tmp_path / "page"
    proc = _run_installed(installed, tmp_path, "-m", "migrate", "export", small_model().converted, "--web", str(out))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("error: --web: @litertjs/core is not installed: npm ci --ignore-scripts --prefix "
                           f"{_installed_web_dir(installed)}\n")
    assert not out.exists() and os.listdir(tmp_path) == []


def test_export_web_from_the_installed_wheel_copies_its_own_page_once_the_runtime_is_there(
        installed, small_model, tmp_path):
    converted = small_model().converted
    runtime = os.path.join(web.WEB_DIR, "node_modules")
    web.installed_runtime()  # the clone's, as scripts/setup_env.sh installs it
    web_dir = _installed_web_dir(installed)
    os.symlink(runtime, os.path.join(web_dir, "node_modules"))
    try:
        out = tmp_path / "page"
        proc = _run_installed(installed, tmp_path, "-m", "migrate", "export", converted, "--web", str(out),
                              "--quiet")
    finally:
        os.remove(os.path.join(web_dir, "node_modules"))
    # --quiet keeps the float16 file's agreement line (the small model's: nothing to compare).
    assert proc.returncode == 0 and proc.stderr.startswith("[migrate] float16: ") and \
        proc.stderr.count("[migrate]") == 1, proc.stderr
    assert proc.stdout.startswith("exported a web page: float16 weights, 100 detections, 19 files")
    assert sorted(os.listdir(out)) == sorted([
        *web.PAGE_FILES, web.MODEL_FILE, web.LABELS_FILE, web.MANIFEST_FILE,
        web.LICENSES_FILE, *(name for _, _, name in web.RUNTIME_FILES)])
    for name in set(web.PAGE_FILES) - {"index.html"}:  # index.html has the model written into it
        with open(os.path.join(web_dir, "page", name), "rb") as f:
            assert (out / name).read_bytes() == f.read(), name


def test_the_installed_console_script_runs(installed, tmp_path):
    proc = subprocess.run([os.path.join(installed, "bin", "ssd-migrate"), "--version"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": installed}, capture_output=True, text=True)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.startswith(f"ssd-mobilenet-migrate {migrate.__version__} (Python ")
