"""The reference page's account of JSON Schemas (fields, types, constraints) and the small
HTML pieces it is written with."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from html import escape
from typing import Any

Json = dict[str, Any]

_SCHEMA_REF = "#/components/schemas/"
# Constraint keywords of JSON Schema, in the order and words the page shows them.
_CONSTRAINT_WORDS = (
    ("minimum", "minimum"),
    ("exclusiveMinimum", "greater than"),
    ("maximum", "maximum"),
    ("exclusiveMaximum", "less than"),
    ("multipleOf", "multiple of"),
    ("minLength", "min length"),
    ("maxLength", "max length"),
    ("minItems", "min items"),
    ("maxItems", "max items"),
    ("uniqueItems", "unique items"),
    ("const", "exactly"),
    ("default", "default"),
)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "-", text).strip("-")


def schema_anchor(name: str) -> str:
    return "schema-" + slug(name)


# Schemas: fields, types and constraints.


def fields_table(schema: Json) -> str:
    properties: Json = schema.get("properties") or {}
    if not properties:
        return '<p class="note">No fields.</p>'
    required = set(schema.get("required", []))
    rows = [
        (
            f"<code>{escape(name)}</code>",
            type_label(field),
            yes_no(name in required),
            notes(field.get("description"), field),
        )
        for name, field in properties.items()
    ]
    return table(("Field", "Type", "Required", "Description"), rows)


def notes(description: str | None, schema: Json) -> str:
    """A field's or parameter's description and constraints, and the fields of an object
    written out in place (not behind a $ref)."""
    parts = [inline(description), constraints_text(schema)]
    parts.extend(fields_table(obj) for obj in inline_objects(schema))
    return "".join(f"<div>{part}</div>" for part in parts if part)


def inline_objects(schema: Json) -> list[Json]:
    if "$ref" in schema:
        return []
    if "properties" in schema:
        return [schema]
    return [obj for member in schema_parts(schema) for obj in inline_objects(member)]


def schema_parts(schema: Json) -> list[Json]:
    """A union's or intersection's members and an array's items."""
    items = schema.get("items")
    return [*_members(schema), items] if isinstance(items, dict) else _members(schema)


def _members(schema: Json) -> list[Json]:
    return [*schema.get("oneOf", []), *schema.get("anyOf", []), *schema.get("allOf", [])]


def type_label(schema: Json) -> str:
    if "$ref" in schema:
        return ref_link(schema["$ref"])
    for keyword, joiner in (("oneOf", " or "), ("anyOf", " or "), ("allOf", " and ")):
        if keyword in schema:
            return joiner.join(type_label(member) for member in schema[keyword])
    kinds = schema.get("type")
    if kinds is None:
        return "object" if "properties" in schema else "any"
    if isinstance(kinds, list):
        return " or ".join(_single_type_label(schema, str(kind)) for kind in kinds)
    return _single_type_label(schema, str(kinds))


def _single_type_label(schema: Json, kind: str) -> str:
    if kind == "array":
        items = schema.get("items")
        return f"array of {type_label(items)}" if isinstance(items, dict) else "array"
    if kind == "object" and "properties" not in schema and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        if isinstance(values, dict) and values:
            return f"object of {type_label(values)} values"
        return "object with any keys" if values is not False else "empty object"
    fmt = schema.get("format")
    return escape(kind) + (f" ({escape(str(fmt))})" if fmt else "")


def ref_link(ref: str) -> str:
    if not ref.startswith(_SCHEMA_REF):
        return f"<code>{escape(ref)}</code>"
    name = ref[len(_SCHEMA_REF):].replace("~1", "/").replace("~0", "~")
    return f'<a href="#{schema_anchor(name)}">{escape(name)}</a>'


def constraints_text(schema: Json) -> str:
    """Constraints of the schema and of its members written out in place (Litestar puts an
    optional parameter's constraints beside its `oneOf`)."""
    found: list[str] = []
    for source in [schema, *(m for m in _members(schema) if "$ref" not in m)]:
        found.extend(_own_constraints(source))
    return "; ".join(found)


def _own_constraints(schema: Json) -> list[str]:
    found = [
        f"{words}: {_literal(schema[keyword])}"
        for keyword, words in _CONSTRAINT_WORDS
        if keyword in schema
    ]
    if "pattern" in schema:
        found.append(f"pattern: <code>{escape(str(schema['pattern']))}</code>")
    if "enum" in schema:
        found.append("one of: " + ", ".join(_literal(value) for value in schema["enum"]))
    return found


def _literal(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"<code>{escape(json.dumps(value, ensure_ascii=False, default=str))}</code>"


# HTML pieces.


def table(headings: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    labels = [escape(heading) for heading in headings]
    head = "".join(f"<th>{label}</th>" for label in labels)
    body = "".join(
        "<tr>"
        + "".join(f'<td data-label="{h}">{cell}</td>' for h, cell in zip(labels, row, strict=True))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def yes_no(flag: Any) -> str:
    return "yes" if flag else "no"


def inline(text: str | None) -> str:
    """Escaped text, with `backticked` spans as code."""
    if not text:
        return ""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(str(text)))


def paragraph(text: str | None) -> str:
    return f'<p class="text">{inline(text)}</p>' if text else ""
