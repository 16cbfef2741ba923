"""JSON Schema from the typed records a command's JSON report is made of, so the published schema cannot drift.

Each command's report is declared as `TypedDict`s (its fields, which are optional, the values each can take); a
field's description, bounds and patterns ride in `Annotated[..., Field(...)]`. `document` turns the top record into a JSON
Schema (draft 2020-12): a record becomes an object with `additionalProperties: false` in `$defs`, a union of
records `oneOf` them (their `Literal` fields tell them apart). `python -m neuroncompat_report.schema` writes a
command's schema file from its types; the tests fail when a committed file differs from what this generates.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

if sys.version_info >= (3, 11):
    from typing import NotRequired, Required, get_type_hints, is_typeddict
else:  # imported only by the schema generator and the tests, where torch has installed typing_extensions
    from typing_extensions import NotRequired, Required, get_type_hints, is_typeddict

DRAFT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class Field:
    """What a type cannot say about a field: its description for a reader, and the bounds of a number or string."""

    description: str = ""
    minimum: int | None = None
    min_length: int | None = None
    pattern: str | None = None
    key_pattern: str | None = None  # of a dict's keys
    open: bool = False  # a record that may hold fields it does not declare: inlined, with additionalProperties true

    def keywords(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.minimum is not None:
            found["minimum"] = self.minimum
        if self.min_length is not None:
            found["minLength"] = self.min_length
        if self.pattern is not None:
            found["pattern"] = self.pattern
        if self.key_pattern is not None:
            found["propertyNames"] = {"pattern": self.key_pattern}
        if self.description:
            found["description"] = self.description
        return found


@dataclass(frozen=True)
class Published:
    """A command's report schema: its top record, where the file lives (from the repository root), and its header."""

    record: type
    path: str
    id: str
    title: str


_SCALARS: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}

    def type_(self, annotation: Any) -> dict[str, Any]:
        origin = get_origin(annotation)
        if origin is typing.Annotated:
            inner, *extras = get_args(annotation)
            fields = [extra for extra in extras if isinstance(extra, Field)]
            schema = self.object(inner, extra_fields=True) if any(f.open for f in fields) else self.type_(inner)
            for field in fields:
                schema.update(field.keywords())
            return schema
        if origin in (Required, NotRequired):
            return self.type_(get_args(annotation)[0])
        if annotation in _SCALARS:
            return {"type": _SCALARS[annotation]}
        if origin is Literal:
            values = list(get_args(annotation))
            return {"const": values[0]} if len(values) == 1 else {"enum": values}
        if origin is list:
            return {"type": "array", "items": self.type_(get_args(annotation)[0])}
        if origin is dict:  # keys are strings in JSON; a Field's key_pattern says which
            return {"type": "object", "additionalProperties": self.type_(get_args(annotation)[1])}
        if origin in (Union, types.UnionType):
            members = get_args(annotation)
            if all(member in _SCALARS for member in members):
                return {"type": [_SCALARS[member] for member in members]}
            return {"oneOf": [self.type_(member) for member in members]}
        if is_typeddict(annotation):
            return self.record(annotation)
        raise TypeError(
            f"no JSON Schema for {annotation!r}: use str, int, float, bool, None, Literal, list, dict or a TypedDict"
        )

    def record(self, record: Any) -> dict[str, Any]:
        """A reference to `record`'s object schema in `$defs`, made on first use."""
        name = record.__name__
        if name not in self.defs:
            self.defs[name] = {}  # a placeholder: a record that refers to itself finds its name taken
            self.defs[name] = self.object(record)
        return {"$ref": f"#/$defs/{name}"}

    def object(self, record: Any, extra_fields: bool = False) -> dict[str, Any]:
        hints = get_type_hints(record, include_extras=True)
        schema: dict[str, Any] = {"type": "object"}
        description = " ".join((record.__doc__ or "").split())
        if description:
            schema["description"] = description
        schema["required"] = [name for name, hint in hints.items() if _required(record, name, hint)]
        schema["additionalProperties"] = extra_fields
        schema["properties"] = {name: self.type_(hint) for name, hint in hints.items()}
        return schema


def _required(record: Any, name: str, hint: Any) -> bool:
    """Whether a record's field is required: `NotRequired`/`Required` on its hint, else the record's totality.

    Read from the hint, not `__required_keys__`: on Python 3.11 a TypedDict whose module has postponed annotations
    (`from __future__ import annotations`) counts a `NotRequired[...]` field as required."""
    origin = get_origin(hint)
    if origin is NotRequired:
        return False
    return origin is Required or name in record.__required_keys__


def document(published: Published) -> dict[str, Any]:
    """The JSON Schema of `published.record`, with its `$id` and title; the records it refers to in `$defs`."""
    builder = _Builder()
    top = builder.object(published.record)
    schema: dict[str, Any] = {"$schema": DRAFT, "$id": published.id, "title": published.title, **top}
    if builder.defs:
        schema["$defs"] = dict(sorted(builder.defs.items()))
    return schema


def text(published: Published) -> str:
    """The schema file's text: what is committed, and what the tests compare it with."""
    return json.dumps(document(published), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> None:
    """`python -m neuroncompat_report.schema ROOT MODULE:ATTRIBUTE...`: write each `Published` schema under ROOT.

    The commands name their own schemas (`neuroncompat.check.report_types:PUBLISHED`): this package imports
    neither `neuroncompat` nor `migrate`."""
    root, names = Path(argv[0]), argv[1:]
    for name in names:
        module, _, attribute = name.partition(":")
        schema: Published = getattr(import_module(module), attribute)
        (root / schema.path).write_text(text(schema), encoding="utf-8")
        print(f"wrote {schema.path}", file=sys.stderr)


if __name__ == "__main__":
    # run as the package's module, not as __main__: the types' `Field`s are `neuroncompat_report.schema.Field`
    import_module("neuroncompat_report.schema").main(sys.argv[1:])
