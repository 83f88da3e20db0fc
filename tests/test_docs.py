"""The documentation site: the command-line reference covers the parser, and the site builds.

`test_cli_reference_covers_the_parser` reads docs/reference/cli.md against `migrate.cli._parser()`
(no TensorFlow, well under a second). `test_site_builds_strictly` runs `mkdocs build --strict`
(the `docs` extra; about 2 s here), so a broken link, a page missing from the navigation or an
API reference to a name that no longer exists fails the suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
