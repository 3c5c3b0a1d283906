"""OpenAI's Responses API (`POST /v1/responses`) on the same conversations, memory and spaces
as the chat completions route: the input and the history `previous_response_id` names become
a history of turns, matched to a conversation as any client's
(loop/conversations/client_threads.py).

A response's id names its conversation and the user message it answers
(`resp_<conversation>_<message>`), so `previous_response_id` needs no store of its own: the
turns up to that message and its reply are the conversation's. Whole, or with
`"stream": true` as the API's server-sent events.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from litestar import Request, Response, post
from litestar.params import JSONBody
from litestar.response import Stream

from admin_api.dependencies import Provided
from admin_api.dialects.common import (
    answered,
    caller_app,
    caller_of,
    chosen_model,
    client_turns,
    models_of,
    post_history,
    reply_pieces,
)
from admin_api.dialects.errors import DialectError, stream_failure
from admin_api.dialects.tools import checked_schema, offered_tools, tool_arguments, tool_spec
from loop.conversations import AUTO, NONE, REQUIRED, ClientTools, Question, ReplyStatus
from loop.errors import ConversationNotFound
from loop.service import Stores
from memory_agent import ChatMessage, JsonSchema, ToolCall

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_RESPONSE_ID = re.compile(r"resp_([0-9a-f]+)_(\d+)")


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            if kind not in ("input_text", "output_text", "text") or not isinstance(
                part.get("text"), str
            ):
                raise DialectError(
                    400, f"{where}.content[{index}]: only text parts are read, not {kind!r}"
                )
            texts.append(part["text"])
        return "\n".join(texts)
    raise DialectError(400, f"{where}.content: a string or a list of text parts")


def _input(body: dict[str, Any]) -> list[ChatMessage]:
    """The request's input as turns: a string is the user's message; a list holds messages
    (`{"role", "content"}`, with or without `"type": "message"`), the model's function calls
    (`function_call`, those in a row one assistant turn) and their results
    (`function_call_output`)."""
    given = body.get("input")
    if isinstance(given, str) and given:
        return [ChatMessage("user", given)]
    if not isinstance(given, list) or not given:
        raise DialectError(400, "input: a string or a non-empty list of messages is required")
    read: list[ChatMessage] = []
    for index, item in enumerate(given):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise DialectError(400, f"{where}: a message object is required")
        kind = item.get("type", "message")
        if kind == "function_call":
            # A response's output resent as it came: its message, then its calls, is one
            # assistant turn.
            call = _function_call(item, where)
            if read and read[-1].role == "assistant":
                read[-1] = replace(read[-1], tool_calls=(*read[-1].tool_calls, call))
            else:
                read.append(ChatMessage("assistant", "", tool_calls=(call,)))
            continue
        if kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if not isinstance(call_id, str) or not isinstance(output, str):
                raise DialectError(400, f"{where}: a call_id and the output as text")
            read.append(ChatMessage("tool", output, tool_call_id=call_id))
            continue
        if kind != "message":
            raise DialectError(
                400, f"{where}.type: {kind!r} is not supported (message, function_call,"
                " function_call_output)"
            )
        role = item.get("role")
        if role not in _ROLES:
            raise DialectError(
                400, f"{where}.role: {role!r} is not supported (system, developer, user or"
                " assistant)"
            )
        read.append(ChatMessage(_ROLES[role], _text(item.get("content"), where)))  # type: ignore[arg-type]
    return read


def _function_call(item: dict[str, Any], where: str) -> ToolCall:
    name, call_id = item.get("name"), item.get("call_id")
    if not isinstance(name, str) or not isinstance(call_id, str):
        raise DialectError(400, f"{where}: a function call with its name and call_id")
    return ToolCall(name, tool_arguments(item.get("arguments"), f"{where}.arguments"), call_id)


def _tools(body: dict[str, Any]) -> ClientTools | None:
    """`tools` (function tools, flat: `{"type": "function", "name", …}`) and
    `tool_choice`."""
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise DialectError(400, "tools: a list of tools")
    specs = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise DialectError(
                400, f"tools[{index}]: only function tools are passed on, not {kind!r}"
            )
        specs.append(tool_spec(tool, f"tools[{index}]"))
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = choice.get("name") if choice.get("type") == "function" else None
    if not isinstance(choice, str | None):
        raise DialectError(400, "tool_choice: auto, none, required or a function to call")
    return offered_tools(specs, choice or AUTO)


def _refusal(body: dict[str, Any]) -> str | None:
    if body.get("background"):
        return "background: responses are answered while the request waits"
    return None


async def _earlier_turns(
    request: Request[Any, Any, Any], stores: Stores, previous: Any, user_id: str
) -> list[ChatMessage]:
    """The turns up to the message `previous_response_id` names and its reply, of the
    caller's app and user."""
    if previous is None:
        return []
    match = _RESPONSE_ID.fullmatch(previous) if isinstance(previous, str) else None
    if match is None:
        raise DialectError(404, f"previous_response_id: no response {previous!r}")
    try:
        conversation = await stores.conversations.get(match.group(1))
    except ConversationNotFound:
        raise DialectError(404, f"previous_response_id: no response {previous!r}") from None
    if conversation.app_id != caller_app(request) or conversation.user_id != user_id:
        raise DialectError(404, f"previous_response_id: no response {previous!r}")
    asked = int(match.group(2))
    turns = [m for m in conversation.messages if m.role != "system"]
    earlier = [m for m in turns if m.id <= asked]
    later = [m for m in turns if m.id > asked]
    if later and later[0].role == "assistant":
        earlier.append(later[0])  # its reply
    return [m.chat_message() for m in earlier]


def _answer_schema(text: Any) -> JsonSchema | None:
    """`text.format`: text, `json_object`, or `json_schema` with its `schema`."""
    answer_format = text.get("format") if isinstance(text, dict) else None
    kind = answer_format.get("type") if isinstance(answer_format, dict) else None
    if answer_format is None or kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema" and isinstance(answer_format.get("schema"), dict):
        return checked_schema(answer_format["schema"], "text.format.schema")
    raise DialectError(400, "text.format: text, json_object or json_schema with a schema")


@post("/responses", status_code=200)
async def create_response(
    request: Request[Any, Any, Any], data: JSONBody[dict[str, Any]], stores: Provided[Stores]
) -> Response[Any] | Stream:
    started = int(time.time())
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise DialectError(400, "model: the name of a model is required")
    if refusal := _refusal(data):
        raise DialectError(400, refusal)
    metadata = data["metadata"] if isinstance(data.get("metadata"), dict) else {}
    caller = caller_of(request, data.get("user"), metadata.get("conversation"))
    messages = await _earlier_turns(
        request, stores, data.get("previous_response_id"), caller.user_id
    )
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise DialectError(400, "instructions: a string")
    messages = (
        [ChatMessage("system", instructions)] if instructions else []
    ) + messages + _input(data)
    history = client_turns(messages)
    tools = _tools(data)
    model = await chosen_model(models_of(request).chat, data["model"])
    question = await post_history(
        request, stores, history, model, caller, _answer_schema(data.get("text")), tools
    )
    shape = _Shape(question, started, model.served, instructions, tools)
    return await answered(
        request, stores, question, stream=bool(data.get("stream")),
        pieces=lambda ending: _events(shape, question, ending),
        media_type="text/event-stream", whole=shape.response,
        stream_headers={"Cache-Control": "no-cache"},
    )


class _Shape:
    """The fields of one response, as the API gives them."""

    def __init__(
        self, question: Question, created: int, model: str, instructions: str | None,
        tools: ClientTools | None,
    ) -> None:
        self.id = f"resp_{question.conversation_id}_{question.message_id}"
        self.created, self.model, self.instructions = created, model, instructions
        self.item_id = f"msg_{question.conversation_id}_{question.message_id}"
        self.tools = tools

    def response(self, status: ReplyStatus | None, *, streamed: bool = False) -> dict[str, Any]:
        """The response object: in progress (no status yet) or completed. Its output: the
        message, then the model's function calls; a whole response leaves out a message
        without text beside calls (a streamed one has opened it already)."""
        reply = status.reply if status else None
        output: list[dict[str, Any]] = []
        if reply is not None:
            if reply.content or streamed or not reply.tool_calls:
                output.append(self.item(reply.content))
            output += [function_call(call) for call in reply.tool_calls]
        elif status is not None:
            output.append(self.item(""))
        tools = self.tools
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": "completed" if status is not None else "in_progress",
            "model": self.model,
            "instructions": self.instructions,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": _choice(tools.choice) if tools else "none",
            "tools": [
                {"type": "function", "name": t.name, "description": t.description,
                 "parameters": t.parameters, "strict": False}
                for t in (tools.tools if tools else ())
            ],
            "usage": _usage(status) if status else None,
            "error": None,
            "incomplete_details": None,
            "metadata": {},
        }

    def item(self, text: str, *, done: bool = True) -> dict[str, Any]:
        return {
            "type": "message",
            "id": self.item_id,
            "status": "completed" if done else "in_progress",
            "role": "assistant",
            "content": [self.part(text)] if done else [],
        }

    @staticmethod
    def part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": []}


def _choice(choice: str) -> str | dict[str, str]:
    return choice if choice in (AUTO, NONE, REQUIRED) else {"type": "function", "name": choice}


def function_call(call: ToolCall, *, done: bool = True) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call.id}",
        "call_id": call.id,
        "name": call.name,
        "arguments": json.dumps(call.arguments) if done else "",
        "status": "completed" if done else "in_progress",
    }


def _usage(status: ReplyStatus) -> dict[str, Any]:
    reply = status.reply
    given = (reply.prompt_tokens if reply else None) or 0
    written = (reply.completion_tokens if reply else None) or 0
    return {
        "input_tokens": given,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": written,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": given + written,
    }


async def _events(
    shape: _Shape, question: Question, ending: Callable[[], Awaitable[None]]
) -> AsyncIterator[bytes]:
    """The API's events: created, the output item and its text part opened, the text as it
    is written, both closed, completed (or `error`)."""
    number = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal number
        payload = {"type": kind, "sequence_number": number, **fields}
        number += 1
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

    where = {"item_id": shape.item_id, "output_index": 0}
    yield event("response.created", response=shape.response(None))
    yield event("response.in_progress", response=shape.response(None))
    yield event("response.output_item.added", output_index=0, item=shape.item("", done=False))
    yield event("response.content_part.added", **where, content_index=0, part=shape.part(""))
    written = ""
    try:
        async for piece in reply_pieces(question):
            if isinstance(piece, str):
                written += piece
                yield event("response.output_text.delta", **where, content_index=0,
                            delta=piece, logprobs=[])
                continue
            text = piece.reply.content if piece.reply else written
            yield event("response.output_text.done", **where, content_index=0, text=text,
                        logprobs=[])
            yield event("response.content_part.done", **where, content_index=0,
                        part=shape.part(text))
            yield event("response.output_item.done", output_index=0, item=shape.item(text))
            for index, call in enumerate(piece.reply.tool_calls if piece.reply else (), 1):
                arguments = json.dumps(call.arguments)
                at = {"item_id": f"fc_{call.id}", "output_index": index}
                yield event("response.output_item.added", output_index=index,
                            item=function_call(call, done=False))
                yield event("response.function_call_arguments.delta", **at, delta=arguments)
                yield event("response.function_call_arguments.done", **at, arguments=arguments)
                yield event("response.output_item.done", output_index=index,
                            item=function_call(call))
            yield event("response.completed", response=shape.response(piece, streamed=True))
    except Exception as error:  # said in the stream, as the API does
        status, message = stream_failure(error)
        yield event("error", code=str(status), message=message, param=None)
        return
    await ending()
