"""Schema-free reader for protobuf text format (`pipeline.config`).

The Object Detection API's `.proto` files are not a dependency of this project, so a
`pipeline.config` is read into a generic tree instead of a typed message: every message
is a `TextMessage` mapping a field name to the list of its values, in file order. Scalars
keep their spelling (`Scalar`), strings are unquoted (`str`). Lexing is protobuf's own
`text_format.Tokenizer`, so comments, quoting, escapes and the separators real exports
contain (`activation: RELU_6,`, `train_config: {`) are handled exactly as protobuf does.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import text_format


class TextFormatError(ValueError):
    """The text is not valid protobuf text format."""


@dataclass(frozen=True)
class Scalar:
    """An unquoted value: a number, an enum name or a bool, as spelled in the file."""

    text: str


class TextMessage(dict):
    """`{field_name: [values...]}`; values are `TextMessage`, `Scalar` or `str`."""

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


def parse(text: str) -> TextMessage:
    """Parses protobuf text format into a `TextMessage` tree.

    Raises:
      TextFormatError: with the line and column of the first problem.
    """
    tokenizer = text_format.Tokenizer(text.splitlines())
    try:
        root = _parse_fields(tokenizer, closing=None)
    except text_format.ParseError as e:
        raise TextFormatError(str(e)) from None
    return root


def _parse_fields(tok, closing):
    message = TextMessage()
    while True:
        if closing is None and tok.AtEnd():
            return message
        if closing is not None and tok.TryConsume(closing):
            return message
        if tok.AtEnd():
            raise tok.ParseError(f'expected "{closing}" before the end of the text')
        name = tok.ConsumeIdentifier()
        if tok.TryConsume(":"):
            if tok.TryConsume("["):  # short repeated form: `name: [v1, v2]`
                while not tok.TryConsume("]"):
                    message.setdefault(name, []).append(_parse_value(tok))
                    tok.TryConsume(",")
            else:
                message.setdefault(name, []).append(_parse_value(tok))
        elif tok.LookingAt("{") or tok.LookingAt("<"):
            message.setdefault(name, []).append(_parse_value(tok))
        else:
            raise tok.ParseError(f'expected ":" or "{{" after field "{name}"')
        # Protobuf text format accepts an optional "," or ";" after every field.
        if not tok.TryConsume(","):
            tok.TryConsume(";")


def _parse_value(tok):
    if tok.TryConsume("{"):
        return _parse_fields(tok, "}")
    if tok.TryConsume("<"):
        return _parse_fields(tok, ">")
    if tok.token[:1] in ("'", '"'):
        return tok.ConsumeString()  # adjacent quoted strings are concatenated
    text = tok.token
    if not text or text in "{}<>[]:,;":
        raise tok.ParseError(f'expected a value, found "{text}"')
    tok.NextToken()
    return Scalar(text)
