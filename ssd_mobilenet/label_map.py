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


def _pbtxt_items(text: str, path: str) -> list:
    """Label map text -> [(class id, name or None, display_name or None)], in file order."""
    try:
        root = pipeline_text.parse(text)
    except pipeline_text.TextFormatError as e:
        raise LabelMapError(f"{path}: not a valid label map: {e}") from None
    unknown = sorted(set(root) - {"item"})
    if unknown:
        raise LabelMapError(f"{path}: unexpected top-level field {unknown[0]!r} (a label map holds only `item`)")
    items, seen = [], {}
    for n, item in enumerate(root.get("item", []), start=1):
        if not isinstance(item, pipeline_text.TextMessage):
            raise LabelMapError(f"{path}: item {n} is not a message")
        raw_id = item.scalar("id")
        try:
            class_id = int(raw_id.text)
        except (AttributeError, ValueError):
            got = getattr(raw_id, "text", raw_id)
            raise LabelMapError(f"{path}: item {n} has no integer id (got {got!r})") from None
        name, display_name = (v if isinstance(v, str) else None
                              for v in (item.scalar("name"), item.scalar("display_name")))
        if name is None and display_name is None:
            raise LabelMapError(f"{path}: item {n} (id {class_id}) has no quoted name or display_name")
        if class_id in seen:
            raise LabelMapError(f"{path}: id {class_id} appears twice ({seen[class_id]!r}, {display_name or name!r})")
        seen[class_id] = display_name or name
        items.append((class_id, name, display_name))
    return items


def _parse_pbtxt(text: str, path: str) -> dict:
    return {class_id: display_name or name for class_id, name, display_name in _pbtxt_items(text, path)}


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise LabelMapError(f"{path}: cannot read label map: {getattr(e, 'strerror', None) or e}") from None


def read(path: str) -> dict:
    """Reads a label map file -> {class id: name}.

    Raises:
      LabelMapError: naming the file, when it is missing, unreadable or malformed.
    """
    names = parse(_read_text(path), path)
    if not names:
        raise LabelMapError(f"{path}: no class names in this file")
    return names


def class_ids(path: str) -> dict:
    """Reads a `label_map.pbtxt` -> {class text: class id}, keyed by both `name` and `display_name`.

    This is how the Object Detection API's TFRecord decoder resolves `image/object/class/text`:
    a text matches an item's `name` or its `display_name`.

    Raises:
      LabelMapError: naming the file, when it is missing, unreadable, malformed, not a pbtxt
        label map, or when one text names two different ids.
    """
    text = _read_text(path)
    if not _PBTXT_START.match(text):
        raise LabelMapError(f"{path}: not a label_map.pbtxt (class texts need its `item {{ id name }}` entries)")
    ids = {}
    for class_id, *texts in _pbtxt_items(text, path):
        for t in texts:
            if t is not None and ids.setdefault(t, class_id) != class_id:
                raise LabelMapError(f"{path}: {t!r} names both id {ids[t]} and id {class_id}")
    if not ids:
        raise LabelMapError(f"{path}: no class names in this file")
    return ids
