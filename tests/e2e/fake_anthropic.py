"""A scripted stand-in for the Anthropic Messages API, for driving the real Claude Code CLI.

The CLI is pointed at it with ``ANTHROPIC_BASE_URL``. A test gives it a *script*: a list of
turns, each either a list of tool calls (one assistant message; several calls = parallel tool
use) or a final text. Every ``POST /v1/messages`` of the main conversation gets the next turn.

Which turn is next is read from the conversation in the request, not from a counter, so
retries, resumed sessions (``--resume``) and side requests cannot desynchronise it: every
scripted tool call gets an id ``toolu_e2e_t<turn>_<n>_<random>``, and a scripted text turn is
recognised by its exact text. Scanning the assistant messages in order, the position after the
last recognised turn is the next turn. Past the end of the script the fake says ``done``.

Requests without ``tools`` (title/summary generation, quota probes and the like) are *side
requests*: they get a short text answer and never advance the script.

Everything is recorded (``requests``), and the helpers read back what the model would have
seen: ``tool_results()``, ``user_texts()`` (text blocks of user messages), ``system_texts()``
(mid-conversation ``role: system`` messages, which is where Claude Code 2.1.328 puts a hook's
``additionalContext``) and ``context_texts()`` / ``saw(fragment)`` over all of them.

Stdlib only: ``http.server.ThreadingHTTPServer`` on 127.0.0.1, port 0.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from e2e.scripted import (
    END_ANSWER,
    SIDE_ANSWER,
    RecordedRequest,
    ScriptedHandler,
    ScriptedServer,
    ToolCall,
    ToolResult,
    Turn,
    call,
    delayed,
    text,
)

__all__ = [
    "FakeAnthropic",
    "RecordedRequest",
    "ToolCall",
    "ToolResult",
    "Turn",
    "call",
    "delayed",
    "last_tool_result_text",
    "text",
]


def last_tool_result_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last tool_result in a request's messages ("" if none)."""
    for msg in reversed(messages):
        if msg.get("role") != "user":
            continue
        for block in reversed(_blocks(msg.get("content"))):
            if block.get("type") == "tool_result":
                return _block_text(block.get("content"))
    return ""


Block = tuple[str, dict[str, Any]]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _block_text(content: Any) -> str:
    """Flatten a tool_result's content (string or list of blocks) to text."""
    return "\n".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")


class FakeAnthropic(ScriptedServer):
    """``FakeAnthropic(script).start()``; ``.url`` for ANTHROPIC_BASE_URL; ``.stop()``."""

    thread_name = "fake-anthropic"

    # -- what the model saw --------------------------------------------------------------------

    def conversation_blocks(self, roles: tuple[str, ...] = ("user", "system")) -> list[Block]:
        """(role, block) of every message with one of ``roles``, across all main requests.

        Each request repeats the conversation so far; a block is listed once, at its first
        appearance (the position in the conversation plus its type and text identify it;
        ``cache_control`` markers, which move from request to request, are ignored).
        """
        out: list[Block] = []
        seen: set[str] = set()
        for req in self.main_requests():
            for msg_index, msg in enumerate(req.body.get("messages", [])):
                role = msg.get("role")
                if role not in roles:
                    continue
                for block_index, block in enumerate(_blocks(msg.get("content"))):
                    ident = {k: v for k, v in block.items() if k != "cache_control"}
                    key = json.dumps([msg_index, block_index, role, ident], sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        out.append((str(role), block))
        return out

    def tool_results(self) -> list[ToolResult]:
        """(tool_use_id, text, is_error) of every tool_result the model saw, first-seen order."""
        out: dict[str, ToolResult] = {}
        for _, block in self.conversation_blocks(("user",)):
            if block.get("type") == "tool_result":
                tid = str(block.get("tool_use_id"))
                out.setdefault(
                    tid,
                    ToolResult(tid, _block_text(block.get("content")), bool(block.get("is_error"))),
                )
        return list(out.values())

    def user_texts(self) -> list[str]:
        """Every text block of every user message (the prompt, <system-reminder>s, ...)."""
        return [
            str(b.get("text", ""))
            for _, b in self.conversation_blocks(("user",))
            if b.get("type") == "text"
        ]

    def system_texts(self) -> list[str]:
        """Text of mid-conversation ``role: system`` messages inside ``messages``.

        Claude Code 2.1.328 delivers a PreToolUse hook's ``additionalContext`` this way, right
        after the user message holding the tool_result:
        ``PreToolUse:<tool> hook additional context: <text>``.
        """
        return [
            str(b.get("text", ""))
            for _, b in self.conversation_blocks(("system",))
            if b.get("type") == "text"
        ]

    def context_texts(self) -> list[str]:
        """Everything non-assistant the model read as text, in conversation order.

        User text blocks, mid-conversation system messages and tool_result texts: the place to
        look for a hook's denial reason or ``additionalContext`` whichever way the CLI sends it.
        """
        texts: list[str] = []
        for _, block in self.conversation_blocks(("user", "system")):
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                texts.append(_block_text(block.get("content")))
        return texts

    # -- scripting ---------------------------------------------------------------------------

    def next_turn_index(self, messages: list[dict[str, Any]]) -> int:
        turns = []
        for msg in messages:
            if msg.get("role") != "assistant":
                continue
            blocks = _blocks(msg.get("content"))
            ids = [str(b.get("id", "")) for b in blocks if b.get("type") == "tool_use"]
            said = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            turns.append((ids, said))
        return self.position(turns)

    def answer(self, body: dict[str, Any]) -> tuple[str, int | None, list[dict[str, Any]], str]:
        """Return (kind, turn, content blocks, stop_reason) for a /v1/messages body."""
        if not body.get("tools"):
            return "side", None, [{"type": "text", "text": SIDE_ANSWER}], "end_turn"
        index = self.next_turn_index(body.get("messages", []))
        turn = self.turn_at(index, body.get("messages", []))
        if turn is None:
            return "main", index, [{"type": "text", "text": END_ANSWER}], "end_turn"
        if turn.text is not None:
            return "main", index, [{"type": "text", "text": turn.text}], "end_turn"
        ids = self.call_ids("toolu", index, turn)
        content = [
            {"type": "tool_use", "id": i, "name": c.name, "input": c.input}
            for i, c in zip(ids, turn.calls, strict=True)
        ]
        return "main", index, content, "tool_use"


class _Handler(ScriptedHandler):
    owner: FakeAnthropic
    api = "messages"

    def do_GET(self) -> None:
        self._record(None, "other")
        if self.path.split("?")[0].rstrip("/") == "/v1/models":
            self._send_json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})
        else:
            self._send_json(200, {})

    def do_POST(self) -> None:
        body = self._read_body()
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/messages/count_tokens":
            self._record(body, "count_tokens")
            self._send_json(200, {"input_tokens": 100})
            return
        if path != "/v1/messages" or not isinstance(body, dict):
            self._record(body, "other")
            self._send_json(200, {})
            return
        kind, turn, content, stop_reason = self.owner.answer(body)
        self._record(body, kind, turn)
        model = self.owner.model or body.get("model") or "claude-e2e"
        message: dict[str, Any] = {
            "id": f"msg_e2e_{secrets.token_hex(8)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        if not body.get("stream"):
            message.update(content=content, stop_reason=stop_reason)
            message["usage"] = {"input_tokens": 10, "output_tokens": 10}
            self._send_json(200, message)
            return
        self._stream(message, content, stop_reason)

    def _stream(self, message: dict[str, Any], content: list[dict[str, Any]], stop: str) -> None:
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": message})
        ]
        for i, block in enumerate(content):
            if block["type"] == "tool_use":
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            else:
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            events += [
                ("content_block_start", {"type": "content_block_start", "index": i,
                                         "content_block": start}),
                ("content_block_delta", {"type": "content_block_delta", "index": i,
                                         "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]  # fmt: skip
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 10},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self._send_events(events)


FakeAnthropic.handler = _Handler
