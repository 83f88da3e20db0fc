"""Class names for detection class ids, from an Object Detection API label map or a names file.

Two formats, told apart by content:
- `label_map.pbtxt` (protobuf text format, read with `ssd_mobilenet.pipeline_text`, no
  Object Detection API needed): `item { id: 1 name: '/m/01g317' display_name: 'person' }`.
  `display_name` is preferred over `name`, as the OD API's
  `create_category_index_from_labelmap(use_display_name=True)` does.
- a plain text file, one name per line: line N names class id N (1-based, the ids in
  `detection_classes`); an empty line leaves that id unnamed.
"""

from __future__ import annotations

import re

from ssd_mobilenet import pipeline_text


class LabelMapError(ValueError):
    """A label map that cannot be read; the message names the file and the problem."""


# A label map's first field is `item` followed by `{` (comments and blank lines aside).
_PBTXT_START = re.compile(r"\A(\s*#[^\n]*\n|\s)*item\s*\{")


def parse(text: str, path: str = "<label map>") -> dict:
    """Label map text -> {class id (int >= 1): name}."""
    if _PBTXT_START.match(text):
        return _parse_pbtxt(text, path)
    return {i: name.strip() for i, name in enumerate(text.splitlines(), start=1) if name.strip()}


def _parse_pbtxt(text: str, path: str) -> dict:
    try:
        root = pipeline_text.parse(text)
    except pipeline_text.TextFormatError as e:
        raise LabelMapError(f"{path}: not a valid label map: {e}") from None
    unknown = sorted(set(root) - {"item"})
    if unknown:
        raise LabelMapError(f"{path}: unexpected top-level field {unknown[0]!r} (a label map holds only `item`)")
    names = {}
    for n, item in enumerate(root.get("item", []), start=1):
        if not isinstance(item, pipeline_text.TextMessage):
            raise LabelMapError(f"{path}: item {n} is not a message")
        raw_id = item.scalar("id")
        try:
            class_id = int(raw_id.text)
        except (AttributeError, ValueError):
            got = getattr(raw_id, "text", raw_id)
            raise LabelMapError(f"{path}: item {n} has no integer id (got {got!r})") from None
        name = item.scalar("display_name") or item.scalar("name")
        if not isinstance(name, str):
            raise LabelMapError(f"{path}: item {n} (id {class_id}) has no quoted name or display_name")
        if class_id in names:
            raise LabelMapError(f"{path}: id {class_id} appears twice ({names[class_id]!r}, {name!r})")
        names[class_id] = name
    return names


def read(path: str) -> dict:
    """Reads a label map file -> {class id: name}.

    Raises:
      LabelMapError: naming the file, when it is missing, unreadable or malformed.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise LabelMapError(f"{path}: cannot read label map: {getattr(e, 'strerror', None) or e}") from None
    names = parse(text, path)
    if not names:
        raise LabelMapError(f"{path}: no class names in this file")
    return names
