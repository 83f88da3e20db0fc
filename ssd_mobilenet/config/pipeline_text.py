"""Schema-free reader for protobuf text format (`pipeline.config`).

The Object Detection API's `.proto` files are not a dependency of this project, so a
`pipeline.config` is read into a generic tree instead of a typed message: every message
is a `TextMessage` mapping a field name to the list of its values, in file order. Scalars
keep their spelling (`Scalar`), quoted strings are unquoted (`Text`, a `str`). Every value
knows where it was written (`line`, `column`, 1-based): at its field's name, or for the list
form `name: [a, b]` at the value itself. `pipeline_schema` checks the tree against the OD
API's messages. Lexing is protobuf's own `text_format.Tokenizer`, so comments,
quoting, escapes and the separators real exports contain (`activation: RELU_6,`,
`train_config: {`) are handled exactly as protobuf does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from google.protobuf import text_format

from ssd_mobilenet.errors import ConfigError


@dataclass(frozen=True)
class Scalar:
    """An unquoted value: a number, an enum name or a bool, as spelled in the file."""

    text: str
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


class Text(str):
    """A quoted string's value (a `str`) with where it was written."""

    line = column = 0

    def __new__(cls, value: str, line: int = 0, column: int = 0):
        text = super().__new__(cls, value)
        text.line, text.column = line, column
        return text


class TextMessage(dict):
    """`{field_name: [values...]}`; values are `TextMessage`, `Scalar` or `Text`. `line` and
    `column` say where the message was written (0 for the whole file)."""

    def __init__(self, fields=(), line: int = 0, column: int = 0):
        super().__init__(fields)
        self.line, self.column = line, column

    def child(self, name: str) -> "TextMessage | None":
        """The last sub-message `name` (proto semantics for a non-repeated field), or None."""
        values = [v for v in self.get(name, []) if isinstance(v, TextMessage)]
        return values[-1] if values else None

    def scalar(self, name: str):
        """The last value of a scalar field, or None when absent."""
        values = self.get(name, [])
        return values[-1] if values else None

    def scalars(self, name: str) -> list:
        return list(self.get(name, []))

    def oneof(self, names) -> "tuple[str, TextMessage] | tuple[None, None]":
        """The (name, message) of whichever of `names` is set; (None, None) if none is."""
        for name in self:
            if name in names and isinstance(self[name][-1], TextMessage):
                return name, self[name][-1]
        return None, None


# protobuf's ParseError puts "LINE:COLUMN : " before its message, and newer releases the line's
# text too ("LINE:COLUMN : 'TEXT': "); the error keeps the location apart and leaves the text out
# (the line number points at it, and a long line would not fit a console line).
_LOCATION = re.compile(r"^\d+(:\d+)? : ")


def parse(text: str) -> TextMessage:
    """Parses protobuf text format into a `TextMessage` tree.

    Raises:
      ConfigError: the first problem, its `problem` without the line, and its `line`.
    """
    lines = text.splitlines()
    tokenizer = text_format.Tokenizer(lines)
    try:
        root = _parse_fields(tokenizer, closing=None, where=(0, 0))
    except text_format.ParseError as e:
        message, line = _LOCATION.sub("", str(e)), e.GetLine() or 0
        quoted = f"'{lines[line - 1]}': " if 0 < line <= len(lines) else None
        if quoted and message.startswith(quoted):
            message = message[len(quoted):]
        raise ConfigError(message, line) from None
    return root


def _where(tok) -> tuple:
    # The tokenizer's own position of its current token (0-based), as its ParseError reports it.
    return tok._line + 1, tok._column + 1


def _parse_fields(tok, closing, where):
    message = TextMessage(line=where[0], column=where[1])
    while True:
        if closing is None and tok.AtEnd():
            return message
        if closing is not None and tok.TryConsume(closing):
            return message
        if tok.AtEnd():
            raise tok.ParseError(f'expected "{closing}" before the end of the text')
        at = _where(tok)
        name = tok.ConsumeIdentifier()
        if tok.TryConsume(":"):
            if tok.TryConsume("["):  # short repeated form: `name: [v1, v2]`
                while not tok.TryConsume("]"):
                    message.setdefault(name, []).append(_parse_value(tok, _where(tok)))
                    tok.TryConsume(",")
            else:
                message.setdefault(name, []).append(_parse_value(tok, at))
        elif tok.LookingAt("{") or tok.LookingAt("<"):
            message.setdefault(name, []).append(_parse_value(tok, at))
        else:
            raise tok.ParseError(f'expected ":" or "{{" after field "{name}"')
        # Protobuf text format accepts an optional "," or ";" after every field.
        if not tok.TryConsume(","):
            tok.TryConsume(";")


def _parse_value(tok, where):
    if tok.TryConsume("{"):
        return _parse_fields(tok, "}", where)
    if tok.TryConsume("<"):
        return _parse_fields(tok, ">", where)
    if tok.token[:1] in ("'", '"'):
        return Text(tok.ConsumeString(), *where)  # adjacent quoted strings are concatenated
    text = tok.token
    if not text or text in "{}<>[]:,;":
        raise tok.ParseError(f'expected a value, found "{text}"')
    tok.NextToken()
    return Scalar(text, *where)
