"""Writes docs/reference/cli.md, the command-line reference, from `migrate.cli._parser()`.

    python scripts/cli_reference.py            # rewrite docs/reference/cli.md
    python scripts/cli_reference.py --check    # exit 1 when the file is not what the parser gives

tests/docs/test_docs.py checks that every command and option of the parser appears in the page, so
run this after adding or changing an option.
"""

from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "docs", "reference", "cli.md")


def _subparsers(parser: argparse.ArgumentParser) -> dict:
    """{command: its parser}, in the order the parser lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict:
    """{command: its one-line help}."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def _cell(text) -> str:
    """Text for a Markdown table cell: no raw HTML (`<SRC>_tf2`), no emphasis (`frames/*.jpg`)."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("*", "\\*").replace("|", "\\|").replace("\n", " ")


def _usage(parser: argparse.ArgumentParser) -> str:
    # A fixed width, so that the page does not depend on the terminal that wrote it.
    formatter = argparse.HelpFormatter(parser.prog, width=78)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{s}`" for s in action.option_strings)
        if action.nargs == 0:
            return names
        metavar = action.metavar
        if metavar is None:
            metavar = "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
        if isinstance(metavar, tuple):
            metavar = " ".join(metavar)
        if action.nargs in ("+", "*"):
            metavar += " ..."
        return f"{names} `{metavar}`"
    return f"`{action.metavar or action.dest.upper()}`" + (" (optional)" if action.nargs == "?" else "")


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, "", argparse.SUPPRESS) or action.nargs == 0:
        return ""
    return f"`{action.default}`"


def render() -> str:
    from migrate.cli import _parser
    parser = _parser()
    helps = _helps(parser)
    lines = [
        "# Command line",
        "",
        "<!-- Written by scripts/cli_reference.py from migrate.cli._parser(); do not edit by hand. -->",
        "",
        parser.description,  # what `python -m migrate --help` says first
        "",
        "Every command runs as `python -m migrate COMMAND ...` (or `ssd-migrate COMMAND ...` once the package "
        "is installed). Exit codes: 0 success, 1 a check that failed (a mismatch, a failed run), 2 bad input "
        "(one `error:` line, nothing written; see [Troubleshooting](../guides/troubleshooting.md)).",
        "",
        "This page is generated from the parser itself by `python scripts/cli_reference.py`; the guides say "
        "what each command does.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    commands = _subparsers(parser)
    for name in commands:
        lines.append(f"| [`{name}`](#{name}) | {_cell(helps.get(name, ''))} |")
    own = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    if own:
        lines += ["", "Before a command: " + "; ".join(f"{_argument(a)}: {_cell(a.help or '')}" for a in own)
                  + " (`python -m migrate --version`)."]
    for name, sub in commands.items():
        lines += ["", f"## {name}", "", _cell(helps.get(name, "")), "", "```text", _usage(sub), "```", "",
                  "| argument | default | meaning |", "|---|---|---|"]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            lines.append(f"| {_argument(action)} | {_default(action)} | {_cell((action.help or '').strip())} |")
        lines.append("| `-h`, `--help` | | show the command's help and exit |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 when docs/reference/cli.md is out of date")
    p.add_argument("--out", default=OUT)
    args = p.parse_args(argv)
    sys.path.insert(0, REPO)
    text = render()
    if args.check:
        current = open(args.out, encoding="utf-8").read() if os.path.exists(args.out) else ""
        if current != text:
            print(f"{args.out} is out of date: run `python scripts/cli_reference.py`", file=sys.stderr)
            return 1
        return 0
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
