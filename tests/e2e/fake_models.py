"""One scripted model on loopback for Codex, Gemini CLI and Copilot CLI.

The three hosts speak three APIs; one server (``FakeModels``) answers all of them, with the
scripting of :mod:`e2e.scripted` (the same as ``fake_anthropic``):

- the OpenAI **Responses** API, ``POST /v1/responses`` (Codex, ``wire_api = "responses"``):
  server-sent events ``response.created``, ``response.output_item.added`` / ``.done`` per
  output item, ``response.completed``. Codex offers an MCP server's tools as one ``namespace``
  tool named ``mcp__<server>``; a scripted ``call("mcp__vsphere__power_off", …)`` is served
  as a ``function_call`` with ``namespace: "mcp__vsphere"`` and ``name: "power_off"``;
- OpenAI **Chat Completions**, ``POST /v1/chat/completions`` (Copilot CLI), streamed as
  ``chat.completion.chunk`` events ending ``data: [DONE]``, or one JSON body;
- **Gemini**, ``POST /v1beta/models/M:streamGenerateContent?alt=sse`` and
  ``:generateContent`` (Gemini CLI), plus ``:countTokens`` and ``GET /v1beta/models``.

A request that offers tools is the main conversation and gets the next scripted turn (read
from the conversation it carries: call ids ``call_e2e_t<turn>_<n>_<hex>``, texts matched
exactly); one without tools is a side request (a title, a routing or "next speaker"
question) and never advances the script. Past the end of the script the answer is a final
text quoting the last tool result (``done: <text>``), so the host's own output shows what
the model read.

Read back, across every main request (each repeats the conversation; an entry counts once):
``offered_tools()`` (the tool names as the host offered them: Codex's namespaced tools as
``mcp__<server>__<tool>``), ``entries()`` (the conversation, one API's shape made common),
``tool_results()`` / ``tool_result(id)``, ``context_texts()`` and ``saw(fragment)``; every
request is in ``requests`` (``api`` = ``responses`` | ``chat`` | ``gemini``).

Stdlib only.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from e2e.scripted import (
    END_ANSWER,
    SIDE_ANSWER,
    RecordedRequest,
    ScriptedHandler,
    ScriptedServer,
    ToolResult,
    Turn,
    call,
    delayed,
)

# ``call`` and ``delayed`` are re-exported: a test scripts this model with them.
__all__ = ["END_ANSWER", "Entry", "FakeModels", "call", "delayed"]

_GEMINI_PATH = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
_GEMINI_MODEL = "gemini-2.5-pro"


@dataclass(frozen=True)
class Entry:
    """One item of a conversation, whatever the API: a text, a tool call or a tool result.

    ``role`` is ``user``, ``system`` (system, developer), ``assistant`` or ``tool``.
    """

    role: str
    kind: str  # "text", "call", "result"
    text: str = ""
    call_id: str = ""
    name: str = ""
    is_error: bool = False


# ---- reading the three request shapes --------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    """Every text inside a tool result's payload: strings, and ``text`` / ``output`` / … of
    its blocks, nested (a JSON document inside a text stays text)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key in ("text", "output", "content", "llmContent", "error", "message"):
            if key in value:
                yield from _strings(value[key])


def _content_text(content: Any) -> str:
    """A message's content (a string, or a list of ``{type, text}`` parts) as one text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def _result_text(payload: Any) -> str:
    return "\n".join(s for s in _strings(payload) if s)


def _responses_entries(body: dict[str, Any]) -> list[Entry]:
    out: list[Entry] = []
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            role = str(item.get("role"))
            role = "system" if role in ("system", "developer") else role
            out.append(Entry(role, "text", _content_text(item.get("content"))))
        elif kind == "function_call":
            name = str(item.get("name", ""))
            if item.get("namespace"):
                name = f"{item['namespace']}__{name}"
            out.append(Entry("assistant", "call", str(item.get("arguments", "")),
                             str(item.get("call_id", "")), name))  # fmt: skip
        elif kind == "function_call_output":
            output = item.get("output")
            error = isinstance(output, dict) and output.get("success") is False
            out.append(Entry("tool", "result", _result_text(output), str(item.get("call_id", "")),
                             is_error=error))  # fmt: skip
    return out


def _chat_entries(body: dict[str, Any]) -> list[Entry]:
    out: list[Entry] = []
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        role = str(msg.get("role"))
        if role == "tool":
            out.append(Entry("tool", "result", _result_text(msg.get("content")),
                             str(msg.get("tool_call_id", ""))))  # fmt: skip
            continue
        role = "system" if role in ("system", "developer") else role
        said = _content_text(msg.get("content"))
        if said or role != "assistant":
            out.append(Entry(role, "text", said))
        for tc in msg.get("tool_calls") or []:
            fn = tc.get("function") or {}
            out.append(Entry("assistant", "call", str(fn.get("arguments", "")),
                             str(tc.get("id", "")), str(fn.get("name", ""))))  # fmt: skip
    return out


def _gemini_entries(body: dict[str, Any]) -> list[Entry]:
    out: list[Entry] = []
    system = body.get("systemInstruction")
    if isinstance(system, dict):
        out.append(Entry("system", "text", _gemini_text(system.get("parts"))))
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        role = "assistant" if content.get("role") == "model" else "user"
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if "text" in part and not part.get("thought"):
                out.append(Entry(role, "text", str(part["text"])))
            elif isinstance(part.get("functionCall"), dict):
                fc = part["functionCall"]
                out.append(Entry("assistant", "call", json.dumps(fc.get("args", {})),
                                 str(fc.get("id", "")), str(fc.get("name", ""))))  # fmt: skip
            elif isinstance(part.get("functionResponse"), dict):
                fr = part["functionResponse"]
                response = fr.get("response")
                error = isinstance(response, dict) and "error" in response
                out.append(Entry("tool", "result", _result_text(response), str(fr.get("id", "")),
                                 str(fr.get("name", "")), error))  # fmt: skip
    return out


def _gemini_text(parts: Any) -> str:
    if isinstance(parts, list):
        return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
    return ""


_ENTRIES = {"responses": _responses_entries, "chat": _chat_entries, "gemini": _gemini_entries}


def _offered(api: str, body: dict[str, Any]) -> list[str]:
    """The names of the tools a request offers, as a model would call them."""
    tools = body.get("tools") or []
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if api == "gemini":
            names += [str(d.get("name")) for d in tool.get("functionDeclarations") or []]
        elif api == "chat":
            names.append(str((tool.get("function") or {}).get("name", tool.get("name"))))
        elif tool.get("type") == "namespace":
            names += [f"{tool.get('name')}__{t.get('name')}" for t in tool.get("tools") or []]
        elif "name" in tool:
            names.append(str(tool["name"]))
    return names


def _has_tools(api: str, body: dict[str, Any]) -> bool:
    return bool(_offered(api, body))


class FakeModels(ScriptedServer):
    """``FakeModels(script).start()``; ``.url`` (``/v1`` under it for OpenAI); ``.stop()``."""

    thread_name = "fake-models"

    # -- what the model saw --------------------------------------------------------------------

    def entries(self, roles: tuple[str, ...] = ("user", "system", "assistant", "tool")) -> list[
        Entry
    ]:  # fmt: skip
        """The conversation across all main requests, each entry once (first-seen order)."""
        out: list[Entry] = []
        seen: set[str] = set()
        for req in self.main_requests():
            for index, entry in enumerate(_ENTRIES[req.api](req.body)):
                if entry.role not in roles:
                    continue
                key = json.dumps([index, asdict(entry)], sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    out.append(entry)
        return out

    def offered_tools(self) -> list[str]:
        """Every tool name any main request offered (first-seen order)."""
        names: dict[str, None] = {}
        for req in self.main_requests():
            names.update(dict.fromkeys(self.offered_tools_of(req)))
        return list(names)

    @staticmethod
    def offered_tools_of(request: RecordedRequest) -> list[str]:
        """The tool names one request offered."""
        return _offered(request.api, request.body) if isinstance(request.body, dict) else []

    def tool_results(self) -> list[ToolResult]:
        """Every tool result the model was sent, one per call id, in first-seen order."""
        out: dict[str, ToolResult] = {}
        for entry in self.entries(("tool",)):
            out.setdefault(entry.call_id, ToolResult(entry.call_id, entry.text, entry.is_error))
        return list(out.values())

    def context_texts(self) -> list[str]:
        """Everything non-assistant the model read, in conversation order."""
        return [e.text for e in self.entries(("user", "system", "tool"))]

    # -- scripting ---------------------------------------------------------------------------

    def answer(self, api: str, body: dict[str, Any]) -> tuple[str, int | None, Turn, list[str]]:
        """(kind, turn index, the turn to serve, its call ids) for a request body."""
        if not _has_tools(api, body):
            return "side", None, Turn(text=SIDE_ANSWER), []
        entries = _ENTRIES[api](body)
        index = self.position(_assistant_turns(entries))
        turn = self.turn_at(index, _messages(api, body))
        if turn is None:
            results = [e.text for e in entries if e.kind == "result"]
            quoted = f"{END_ANSWER}: {results[-1]}" if results else END_ANSWER
            return "main", index, Turn(text=quoted), []
        if turn.text is not None:
            return "main", index, turn, []
        return "main", index, turn, self.call_ids("call", index, turn)


def _assistant_turns(entries: list[Entry]) -> list[tuple[list[str], str]]:
    """Each assistant entry as (call ids, text) for :meth:`ScriptedServer.position`."""
    return [
        ([e.call_id] if e.kind == "call" else [], e.text if e.kind == "text" else "")
        for e in entries
        if e.role == "assistant"
    ]


def _messages(api: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation in the request's own shape (what a ``delayed`` callable reads)."""
    key = {"responses": "input", "chat": "messages", "gemini": "contents"}[api]
    value = body.get(key)
    return list(value) if isinstance(value, list) else []


def _namespaced(name: str, body: dict[str, Any]) -> tuple[str | None, str]:
    """(namespace, tool) when ``name`` is ``<namespace>__<tool>`` of an offered namespace."""
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            prefix = f"{tool.get('name')}__"
            inner = {t.get("name") for t in tool.get("tools") or [] if isinstance(t, dict)}
            if name.startswith(prefix) and name.removeprefix(prefix) in inner:
                return str(tool["name"]), name.removeprefix(prefix)
    return None, name


class _Handler(ScriptedHandler):
    owner: FakeModels

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models") and "/v1beta" in path:
            self._record(None, "other", api="gemini")
            self._send_json(200, {"models": [_gemini_model_info(_GEMINI_MODEL)]})
            return
        if path.endswith("/models"):
            self._record(None, "other", api="openai")
            self._send_json(200, {"object": "list", "data": []})
            return
        self._record(None, "other")
        self._send_json(200, {})

    def do_POST(self) -> None:
        body = self._read_body()
        path = self.path.split("?")[0].rstrip("/")
        gemini = _GEMINI_PATH.match(path)
        if not isinstance(body, dict):
            self._record(body, "other")
            self._send_json(400, {"error": {"message": "the scripted model wants a JSON body"}})
        elif path.endswith("/responses"):
            self._responses(body)
        elif path.endswith("/chat/completions"):
            self._chat(body)
        elif gemini and gemini["method"] == "countTokens":
            self._record(body, "count_tokens", api="gemini")
            self._send_json(200, {"totalTokens": 100})
        elif gemini and gemini["method"] in ("generateContent", "streamGenerateContent"):
            self._gemini(body, gemini["model"], stream=gemini["method"] != "generateContent")
        else:
            self._record(body, "other")
            self._send_json(404, {"error": {"message": f"the scripted model has no {path}"}})

    # -- Responses (Codex) -----------------------------------------------------------------------

    def _responses(self, body: dict[str, Any]) -> None:
        kind, index, turn, ids = self.owner.answer("responses", body)
        self._record(body, kind, index, api="responses")
        items: list[dict[str, Any]] = []
        if turn.text is not None:
            items.append({
                "type": "message", "id": f"msg_e2e_{secrets.token_hex(8)}", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            })  # fmt: skip
        for call_id, tc in zip(ids, turn.calls, strict=True):
            namespace, name = _namespaced(tc.name, body)
            item = {
                "type": "function_call", "id": f"fc_e2e_{secrets.token_hex(8)}",
                "call_id": call_id, "name": name, "arguments": json.dumps(tc.input),
                "status": "completed",
            }  # fmt: skip
            if namespace is not None:
                item["namespace"] = namespace
            items.append(item)
        response_id = f"resp_e2e_{secrets.token_hex(8)}"
        response = {
            "id": response_id, "object": "response", "created_at": int(time.time()),
            "status": "in_progress", "model": body.get("model", "scripted"), "output": [],
        }  # fmt: skip
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": response})
        ]
        for n, item in enumerate(items):
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": n, "item": item},
                )
            )
            if item["type"] == "message":
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": n,
                            "content_index": 0,
                            "delta": turn.text,
                        },
                    )
                )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": n, "item": item},
                )
            )
        done = {**response, "status": "completed", "output": items, "usage": {
            "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20,
        }}  # fmt: skip
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        self._send_events(events)

    # -- Chat Completions (Copilot) ----------------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> None:
        kind, index, turn, ids = self.owner.answer("chat", body)
        self._record(body, kind, index, api="chat")
        calls = [
            {"index": n, "id": call_id, "type": "function",
             "function": {"name": tc.name, "arguments": json.dumps(tc.input)}}
            for n, (call_id, tc) in enumerate(zip(ids, turn.calls, strict=True))
        ]  # fmt: skip
        finish = "tool_calls" if calls else "stop"
        base = {
            "id": f"chatcmpl-e2e-{secrets.token_hex(8)}", "created": int(time.time()),
            "model": body.get("model", "scripted"),
        }  # fmt: skip
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": turn.text}
            if calls:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                         for c in calls]  # fmt: skip
            self._send_json(200, {**base, "object": "chat.completion", "usage": usage,
                                  "choices": [{"index": 0, "message": message,
                                               "finish_reason": finish}]})  # fmt: skip
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        delta: dict[str, Any] = {"role": "assistant"}
        if turn.text is not None:
            delta["content"] = turn.text
        if calls:
            delta["tool_calls"] = calls
        events: list[tuple[str | None, Any]] = [
            (None, {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
            (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**chunk, "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        self._send_events(events)

    # -- Gemini ------------------------------------------------------------------------------

    def _gemini(self, body: dict[str, Any], model: str, *, stream: bool) -> None:
        kind, index, turn, ids = self.owner.answer("gemini", body)
        self._record(body, kind, index, api="gemini")
        parts: list[dict[str, Any]] = []
        schema = (body.get("generationConfig") or {}).get("responseJsonSchema")
        if kind == "side" and schema is not None:
            # Gemini CLI's routing and "next speaker" questions want JSON of a schema.
            parts.append({"text": json.dumps(_from_schema(schema))})
        elif turn.text is not None:
            parts.append({"text": turn.text})
        for call_id, tc in zip(ids, turn.calls, strict=True):
            parts.append({"functionCall": {"id": call_id, "name": tc.name, "args": tc.input}})
        payload = {
            "candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10,
                              "totalTokenCount": 20},
            "modelVersion": model,
            "responseId": f"e2e-{secrets.token_hex(8)}",
        }  # fmt: skip
        if stream:
            self._send_events([(None, payload)])
        else:
            self._send_json(200, payload)


def _from_schema(schema: Any) -> Any:
    """The smallest value of a JSON schema; an enum says ``user`` when it can (ends a turn)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props: dict[str, Any] = schema.get("properties") or {}
        wanted = set(schema.get("required") or props)
        return {k: _from_schema(v) for k, v in props.items() if k in wanted}
    smallest = {"string": SIDE_ANSWER, "integer": 1, "number": 1, "boolean": False, "array": []}
    return smallest.get(kind)


def _gemini_model_info(name: str) -> dict[str, Any]:
    return {
        "name": f"models/{name}",
        "displayName": name,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
        "inputTokenLimit": 1_000_000,
        "outputTokenLimit": 65_536,
    }


FakeModels.handler = _Handler
