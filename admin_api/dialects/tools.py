"""A request's tools and schemas as the dialects give them: the tools offered (OpenAI's chat
API, Ollama's, the Responses API's), the calls of an assistant turn, and the bounds a client's
JSON schema must keep.
"""

from __future__ import annotations

import json
import re
from typing import Any

from admin_api.dialects.errors import DialectError
from loop.conversations import AUTO, NONE, REQUIRED, ClientTools
from memory_agent import JsonSchema, ToolCall, ToolSpec

# A tool's name, as OpenAI's API allows it.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def tool_spec(function: Any, where: str) -> ToolSpec:
    """A tool the client offers: `{"name", "description", "parameters"}` (OpenAI's
    `function`, Ollama's, or a Responses tool)."""
    if not isinstance(function, dict):
        raise DialectError(400, f"{where}: a function object is required")
    name = function.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise DialectError(400, f"{where}.name: letters, digits, _ . : - (at most 64)")
    description = function.get("description") or ""
    if not isinstance(description, str):
        raise DialectError(400, f"{where}.description: a string")
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise DialectError(400, f"{where}.parameters: a JSON schema object")
    checked = checked_schema(parameters, f"{where}.parameters", grammar=False)
    return ToolSpec(name, description, checked)


def offered_tools(tools: list[ToolSpec], choice: str = AUTO) -> ClientTools | None:
    """The client's tools and its choice (a tool's name, or auto, none, required)."""
    if not tools:
        return None
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise DialectError(400, "tools: each tool's name once")
    if choice not in (AUTO, NONE, REQUIRED, *names):
        raise DialectError(400, f"tool_choice: {choice!r} is not one of the tools offered")
    return ClientTools(tuple(tools), choice)


def tool_arguments(arguments: Any, where: str) -> dict[str, Any]:
    """A call's arguments: an object, or (OpenAI's way) its JSON text."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            raise DialectError(400, f"{where}: the arguments are not JSON") from None
    if not isinstance(arguments, dict):
        raise DialectError(400, f"{where}: the arguments are a JSON object")
    return arguments


def function_tools(tools: Any) -> list[ToolSpec]:
    """`tools` as OpenAI's chat API and Ollama give them: `{"type": "function", "function"}`."""
    if not tools:
        return []
    if not isinstance(tools, list):
        raise DialectError(400, "tools: a list of tools")
    specs = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            raise DialectError(400, f"tools[{index}]: only function tools are passed on")
        specs.append(tool_spec(tool.get("function"), f"tools[{index}].function"))
    return specs


def tool_calls_of(calls: Any, index: int) -> tuple[ToolCall, ...]:
    """An assistant turn's `tool_calls` (`{"id"?, "function": {"name", "arguments"}}`)."""
    if not calls:
        return ()
    if not isinstance(calls, list):
        raise DialectError(400, f"messages[{index}].tool_calls: a list of calls")
    read = []
    for number, call in enumerate(calls):
        where = f"messages[{index}].tool_calls[{number}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise DialectError(400, f"{where}: a function call with its name")
        arguments = tool_arguments(function.get("arguments"), f"{where}.function.arguments")
        read.append(ToolCall(function["name"], arguments, str(call.get("id") or "")))
    return tuple(read)


# A client's JSON schema becomes the backend's grammar (llama.cpp unrolls every length and
# repeat limit into it): bounded here, so no schema can exhaust memory or crash the backend.
MAX_SCHEMA_BYTES = 16 * 1024
MAX_SCHEMA_DEPTH = 16
MAX_SCHEMA_LIMIT = 1000
MAX_TOOL_SCHEMA_BYTES = 64 * 1024
_LIMITS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


def checked_schema(schema: JsonSchema, where: str, *, grammar: bool = True) -> JsonSchema:
    """The client's answer schema, or a 400 when it is larger, deeper or asks for longer
    runs than a backend's grammar can hold. A tool's parameters (`grammar=False`) become no
    grammar: only their size and depth are bounded."""
    most = MAX_SCHEMA_BYTES if grammar else MAX_TOOL_SCHEMA_BYTES
    if len(json.dumps(schema)) > most:
        raise DialectError(400, f"{where}: at most {most} bytes of JSON schema")

    def walk(part: Any, depth: int) -> None:
        if depth > MAX_SCHEMA_DEPTH:
            raise DialectError(400, f"{where}: nested at most {MAX_SCHEMA_DEPTH} deep")
        if isinstance(part, dict):
            for key, value in part.items():
                if grammar:
                    _check_limit(key, value, where)
                walk(value, depth + 1)
        elif isinstance(part, list):
            for value in part:
                walk(value, depth + 1)

    walk(schema, 0)
    return schema


def _check_limit(key: str, value: Any, where: str) -> None:
    """A 400 when a schema keyword asks a grammar for a run longer than it can hold."""
    if key in _LIMITS and isinstance(value, int | float) and value > MAX_SCHEMA_LIMIT:
        raise DialectError(400, f"{where}: {key} at most {MAX_SCHEMA_LIMIT}")
    if key == "pattern" and isinstance(value, str) and any(
        int(bound or 0) > MAX_SCHEMA_LIMIT
        for match in _REPEAT.findall(value) for bound in match
    ):
        raise DialectError(400, f"{where}: pattern repeats at most {MAX_SCHEMA_LIMIT}")


