"""The API reference at /schema: one HTML page rendered on the server from the app's OpenAPI
document. It needs no JavaScript and loads nothing from another host, so it reads the same on a
machine without internet (Litestar's default Redoc page fetches its script from a CDN)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from litestar import Request
from litestar.openapi.plugins import OpenAPIRenderPlugin

from admin_api.reference_schemas import (
    Json,
    constraints_text,
    fields_table,
    inline,
    inline_objects,
    notes,
    paragraph,
    ref_link,
    schema_anchor,
    schema_parts,
    slug,
    table,
    type_label,
    yes_no,
)

HTTP_METHODS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")
UNTAGGED = "other"
_CSS = """
body{font:16px/1.5 system-ui,sans-serif;color:#1f2328;max-width:62rem;margin:0 auto;padding:1rem}
a{color:#0969da}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
td:first-child code{overflow-wrap:normal}
table{border-collapse:collapse;width:100%;margin:.3rem 0 .8rem}
th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}
td table{margin:.3rem 0 0;font-size:.95em}
.op{border-top:1px solid #d0d7de;margin-top:1.5rem}
.method{display:inline-block;min-width:4em;text-align:center;border-radius:4px;color:#fff;
background:#57606a;font:600 .75em/1.6 ui-monospace,monospace;padding:0 .3em}
.get{background:#0969da}.post{background:#1a7f37}.put,.patch{background:#9a6700}
.delete{background:#cf222e}
.status{font:600 1em ui-monospace,monospace}.s2{color:#1a7f37}.s4,.s5{color:#cf222e}
.text{white-space:pre-line}.note{color:#57606a}
details{margin:.2rem 0 .6rem}summary{cursor:pointer}
nav li{margin:.15rem 0}
@media (max-width:40rem){
body{padding:.6rem}thead,td:empty{display:none}table,tbody,tr,td{display:block}
tr{border:1px solid #d0d7de;margin-bottom:.4rem}td{border:0;padding:.15rem .4rem}
td::before{content:attr(data-label) ": ";font-weight:600}
}
"""


class ReferencePagePlugin(OpenAPIRenderPlugin):
    """Serves the reference page, by default at the schema root (`/schema`)."""

    def __init__(self, *, path: str | Sequence[str] = "/") -> None:
        super().__init__(path=path, favicon="", style="")

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        page = render_reference_page(openapi_schema, self.get_openapi_json_route(request))
        return page.encode()


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    spec: Json
    # The path item's shared parameters and the operation's own, $refs resolved.
    parameters: list[Json]

    def anchor(self, tag: str) -> str:
        return slug(f"{tag}-{self.method}-{self.path}")


def render_reference_page(document: Json, openapi_json_url: str) -> str:
    groups = _operations_by_tag(document)
    title = str(document.get("info", {}).get("title", "API"))
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)} API reference</title><style>{_CSS}</style></head><body>",
        _header(document, openapi_json_url),
        _contents(groups),
        *(_tag_section(document, tag, operations) for tag, operations in groups.items()),
        _schemas_section(document),
        "</body></html>\n",
    ])


# The document: operations, tags and $refs.


def _operations(document: Json) -> Iterator[Operation]:
    for path, path_item in document.get("paths", {}).items():
        item = _resolve(document, path_item)
        shared = item.get("parameters", [])
        for method in HTTP_METHODS:
            if method in item:
                spec = item[method]
                own = spec.get("parameters", [])
                yield Operation(method, path, spec, _merged_parameters(document, shared, own))


def _merged_parameters(document: Json, shared: list[Json], own: list[Json]) -> list[Json]:
    """An operation's parameter replaces a path item's one of the same name and place."""
    merged: dict[tuple[str, str], Json] = {}
    for parameter in [*shared, *own]:
        resolved = _resolve(document, parameter)
        merged[(resolved.get("name", ""), resolved.get("in", ""))] = resolved
    return list(merged.values())


def _operations_by_tag(document: Json) -> dict[str, list[Operation]]:
    """Declared tags first, in their order, then the others by name; an operation with several
    tags is listed under each."""
    groups: dict[str, list[Operation]] = {t["name"]: [] for t in document.get("tags", [])}
    found: dict[str, list[Operation]] = {}
    for operation in _operations(document):
        for tag in operation.spec.get("tags") or [UNTAGGED]:
            (groups if tag in groups else found).setdefault(tag, []).append(operation)
    groups.update(sorted(found.items()))
    return {tag: sorted(ops, key=_reading_order) for tag, ops in groups.items() if ops}


def _reading_order(operation: Operation) -> tuple[str, int]:
    return operation.path, HTTP_METHODS.index(operation.method)


def _resolve(document: Json, node: Json) -> Json:
    """`node`, or what its local `$ref` points to (following chains, stopping at a loop)."""
    seen: set[str] = set()
    while isinstance(ref := node.get("$ref"), str) and ref.startswith("#/") and ref not in seen:
        seen.add(ref)
        target = _pointed_at(document, ref)
        if not isinstance(target, dict):
            break
        node = target
    return node


def _pointed_at(document: Json, ref: str) -> Any:
    node: Any = document
    for token in ref[2:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or token not in node:
            return None
        node = node[token]
    return node


# Page parts, from the top.


def _header(document: Json, openapi_json_url: str) -> str:
    info = document.get("info", {})
    url = escape(openapi_json_url)
    parts = [
        f"<header><h1>{escape(str(info.get('title', 'API')))} ",
        f"<small>{escape(str(info.get('version', '')))}</small></h1>",
        paragraph(info.get("description")),
        f'<p>The OpenAPI {escape(str(document.get("openapi", "")))} document: ',
        f'<a href="{url}"><code>{url}</code></a></p></header>',
    ]
    return "".join(parts)


def _contents(groups: dict[str, list[Operation]]) -> str:
    tags = []
    for tag, operations in groups.items():
        links = "".join(
            f'<li><a href="#{op.anchor(tag)}">{_method_badge(op.method)} '
            f"<code>{escape(op.path)}</code></a> {inline(op.spec.get('summary'))}</li>"
            for op in operations
        )
        tags.append(f'<li><a href="#{slug("tag-" + tag)}">{escape(tag)}</a><ul>{links}</ul></li>')
    return (
        f"<nav><h2>Operations</h2><ul>{''.join(tags)}</ul>"
        '<p><a href="#schemas">Schemas</a></p></nav>'
    )


def _tag_section(document: Json, tag: str, operations: list[Operation]) -> str:
    declared = {t["name"]: t for t in document.get("tags", [])}
    description = declared.get(tag, {}).get("description")
    return "".join([
        f'<section id="{slug("tag-" + tag)}"><h2>{escape(tag)}</h2>',
        paragraph(description),
        *(_operation_section(document, tag, op) for op in operations),
        "</section>",
    ])


def _operation_section(document: Json, tag: str, op: Operation) -> str:
    spec = op.spec
    return "".join([
        f'<section class="op" id="{op.anchor(tag)}">',
        f"<h3>{_method_badge(op.method)} <code>{escape(op.path)}</code></h3>",
        f"<p><strong>{inline(spec.get('summary'))}</strong></p>" if spec.get("summary") else "",
        paragraph(spec.get("description")),
        '<p class="note">Deprecated.</p>' if spec.get("deprecated") else "",
        f"<p>Auth: {_security_text(document, spec)}</p>",
        _parameters(op.parameters),
        _request_body(document, spec.get("requestBody")),
        _responses(document, spec.get("responses", {})),
        "</section>",
    ])


def _method_badge(method: str) -> str:
    return f'<span class="method {escape(method)}">{escape(method.upper())}</span>'


def _security_text(document: Json, spec: Json) -> str:
    # An operation's own requirements replace the document's.
    source = spec if "security" in spec else document
    requirements: list[Json] = source.get("security") or []
    alternatives = [
        " and ".join(_scheme_text(document, name) for name in requirement)
        for requirement in requirements
        if requirement
    ]
    if not alternatives:
        return "none"
    text = " or ".join(alternatives)
    # An empty requirement among others makes the credentials optional.
    return f"optional, {text}" if len(alternatives) < len(requirements) else text


def _scheme_text(document: Json, name: str) -> str:
    scheme = document.get("components", {}).get("securitySchemes", {}).get(name, {})
    kind, http_scheme = scheme.get("type"), str(scheme.get("scheme", ""))
    if kind == "http" and http_scheme.lower() == "bearer":
        return "bearer token (<code>Authorization: Bearer &lt;token&gt;</code>)"
    if kind == "http":
        return f"HTTP {escape(http_scheme)} authentication"
    if kind == "apiKey":
        where = escape(str(scheme.get("in", "")))
        return f"API key in {where} <code>{escape(str(scheme.get('name', '')))}</code>"
    return f"<code>{escape(name)}</code>"


def _parameters(parameters: list[Json]) -> str:
    if not parameters:
        return ""
    rows = [
        (
            f"<code>{escape(str(p.get('name', '')))}</code>",
            escape(str(p.get("in", ""))),
            type_label(p.get("schema", {})),
            yes_no(p.get("required", False)),
            notes(p.get("description"), p.get("schema", {})),
        )
        for p in parameters
    ]
    return "<h4>Parameters</h4>" + table(("Name", "In", "Type", "Required", "Description"), rows)


def _request_body(document: Json, body: Json | None) -> str:
    if not body:
        return ""
    body = _resolve(document, body)
    needed = "required" if body.get("required") else "optional"
    contents = (body.get("content") or {}).items()
    return "".join([
        f"<h4>Request body <small>({needed})</small></h4>",
        paragraph(body.get("description")),
        *(_body(document, media_type, media, shown=True) for media_type, media in contents),
    ])


def _responses(document: Json, responses: Json) -> str:
    items = []
    for status, response in responses.items():
        resolved = _resolve(document, response)
        code = escape(str(status))
        contents = (resolved.get("content") or {}).items()
        success = code.startswith("2")
        items.append("".join([
            f'<p><span class="status s{code[:1]}">{code}</span> ',
            f"{inline(resolved.get('description'))}</p>",
            *(_body(document, media_type, media, shown=success) for media_type, media in contents),
        ]))
    return "<h4>Responses</h4>" + "".join(items) if items else ""


def _body(document: Json, media_type: str, media: Json, *, shown: bool) -> str:
    """A body's media type and type, with the fields of the objects it is made of; folded
    (a <details> element) unless `shown`."""
    schema = media.get("schema", {})
    summary = f"<code>{escape(media_type)}</code>: {type_label(schema)}"
    objects = _body_objects(document, schema)
    fields = "".join(
        (f"<p>Fields of {ref_link(ref)}:</p>" if ref and len(objects) > 1 else "")
        + fields_table(obj)
        for ref, obj in objects
    )
    if not fields:
        return f"<p>{summary}</p>"
    if shown:
        return f"<p>{summary}</p>{fields}"
    return f"<details><summary>{summary}</summary>{fields}</details>"


def _body_objects(
    document: Json, schema: Json, seen: frozenset[str] = frozenset()
) -> list[tuple[str | None, Json]]:
    """The object schemas a body is made of (through $refs, a union's members, an array's
    items), each with the $ref it was reached by, if any."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(document, schema)
        if ref in seen or target is schema:
            return []
        return [
            (ref if obj is target else via, obj)
            for via, obj in _body_objects(document, target, seen | {ref})
        ]
    if "properties" in schema:
        return [(None, schema)]
    return [
        found for member in schema_parts(schema) for found in _body_objects(document, member, seen)
    ]


def _schemas_section(document: Json) -> str:
    schemas: Json = document.get("components", {}).get("schemas", {})
    if not schemas:
        return ""
    parts = ['<section id="schemas"><h2>Schemas</h2>']
    for name, schema in sorted(schemas.items()):
        parts.append(f'<div id="{schema_anchor(name)}"><h3>{escape(name)}</h3>')
        parts.append(paragraph(schema.get("description")))
        if "properties" not in schema:
            parts.append(f"<p>{type_label(schema)}</p>")
            if constraints := constraints_text(schema):
                parts.append(f"<p>{constraints}</p>")
        parts.extend(fields_table(obj) for obj in inline_objects(schema))
        parts.append("</div>")
    parts.append("</section>")
    return "".join(parts)
