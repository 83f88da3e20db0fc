"""The documentation site: the command-line reference covers the parser, the site builds, and the
install guide names every extra and the install lines the commands print.

`test_cli_reference_covers_the_parser` reads docs/reference/cli.md against `migrate.cli._parser()`
(no TensorFlow, well under a second). `test_site_builds_strictly` runs `mkdocs build --strict`
(the `docs` extra; about 2 s here), so a broken link, a page missing from the navigation or an
API reference to a name that no longer exists fails the suite.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
CLI_REFERENCE = os.path.join(REPO, "docs", "reference", "cli.md")
REGENERATE = "python scripts/cli_reference.py"


def _commands():
    from migrate.cli import _parser
    parser = _parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    raise AssertionError("migrate.cli._parser() has no subcommands")


def test_cli_reference_covers_the_parser():
    with open(CLI_REFERENCE, encoding="utf-8") as f:
        page = f.read()
    missing = []
    for name, sub in _commands().items():
        if f"## {name}\n" not in page:
            missing.append(f"command {name}")
            continue
        section = page.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for option in action.option_strings:
                if f"`{option}`" not in section:
                    missing.append(f"{name} {option}")
            if not action.option_strings and f"`{(action.metavar or action.dest).upper()}`" not in section:
                missing.append(f"{name} argument {action.dest}")
    assert not missing, (f"docs/reference/cli.md lacks {', '.join(missing)}: run `{REGENERATE}` and commit "
                         "the page")


def test_cli_reference_is_up_to_date():
    """The page is exactly what the script writes (help texts and defaults too)."""
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    try:
        import cli_reference
    finally:
        sys.path.pop(0)
    with open(CLI_REFERENCE, encoding="utf-8") as f:
        assert f.read() == cli_reference.render(), f"docs/reference/cli.md is out of date: run `{REGENERATE}`"


def test_site_builds_strictly(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the docs extra: pip install -e '.[docs]')")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert os.path.exists(tmp_path / "site" / "reference" / "cli.html")


def _extras() -> list:
    """The extras of pyproject.toml, by name (read as text: no toml reader before Python 3.11)."""
    with open(os.path.join(REPO, "pyproject.toml"), encoding="utf-8") as f:
        section = f.read().split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return re.findall(r"^([a-z0-9-]+)\s*=", section, re.M)


def _docs_text() -> str:
    pages = [os.path.join(REPO, "README.md"), *glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True)]
    return "\n".join(open(p, encoding="utf-8").read() for p in pages)


def test_install_guide_names_every_extra():
    """docs/guides/install.md's table of extras has a row for each extra of pyproject.toml."""
    with open(os.path.join(REPO, "docs", "guides", "install.md"), encoding="utf-8") as f:
        page = f.read()
    rows = set(re.findall(r"^\| `([a-z0-9-]+)` \|", page, re.M))
    assert _extras() and set(_extras()) <= rows, f"install.md lacks the extras {sorted(set(_extras()) - rows)}"


def test_install_hints_of_the_code_are_the_docs():
    """Each install line a command prints for a missing extra names an extra that exists, and the docs
    show the same line, so that a user finds the error's words in the docs and the reverse."""
    hints = set()
    for path in glob.glob(os.path.join(REPO, "migrate", "**", "*.py"), recursive=True) + \
            glob.glob(os.path.join(REPO, "ssd_mobilenet", "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as f:
            hints |= set(re.findall(r"pip install [-\w. ]*'?ssd-mobilenet-migrate\[[^\]]*\]'?", f.read()))
    docs = _docs_text()
    assert hints, "no install hint found in the code"
    for hint in sorted(hints):
        assert re.fullmatch(r"pip install 'ssd-mobilenet-migrate\[[a-z0-9-]+\]'", hint), \
            f"{hint}: not the form the docs use (pip install 'ssd-mobilenet-migrate[EXTRA]')"
        assert hint.split("[")[1].split("]")[0] in _extras(), f"{hint}: pyproject.toml has no such extra"
        assert hint in docs, f"{hint}: the docs do not show this line"
