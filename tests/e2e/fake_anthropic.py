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
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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

_ID_RE = re.compile(r"^toolu_e2e_t(\d+)_(\d+)_")
SIDE_ANSWER = "ok"
END_ANSWER = "done"


@dataclass(frozen=True)
class ToolCall:
    """One scripted ``tool_use`` block."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)


# Given the request's messages, the epoch time before which the turn must not be answered.
NotBefore = Callable[[list[dict[str, Any]]], float | None]
MAX_DELAY_S = 120.0


@dataclass(frozen=True)
class Turn:
    """One scripted assistant message: tool calls (stop_reason tool_use) or a final text.

    ``not_before`` (see :func:`delayed`) holds the answer back: a model that was told "retry
    after T" and waits until T before it calls again.
    """

    calls: tuple[ToolCall, ...] = ()
    text: str | None = None
    not_before: NotBefore | None = None


@dataclass(frozen=True)
class ToolResult:
    """A ``tool_result`` block as the model saw it."""

    tool_use_id: str
    text: str
    is_error: bool


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    kind: str  # "main", "side", "count_tokens", "other"
    turn: int | None = None  # the script turn answered (main requests only)


def call(tool_name: str, /, **tool_input: Any) -> ToolCall:
    """Shorthand: ``call("mcp__vsphere__power_off_vm", name="vm1")``."""
    return ToolCall(tool_name, tool_input)


def text(final: str) -> Turn:
    return Turn(text=final)


def delayed(item: ScriptItem, not_before: NotBefore) -> Turn:
    """``item`` as a turn answered no earlier than ``not_before(messages)`` (epoch seconds).

    The callable reads the conversation the model was sent (e.g. the retry time in the last
    tool result); ``None`` means no wait. The wait is capped at ``MAX_DELAY_S``.
    """
    turn = _as_turn(item)
    return Turn(calls=turn.calls, text=turn.text, not_before=not_before)


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
ScriptItem = Turn | ToolCall | str | list[ToolCall] | tuple[ToolCall, ...]


def _as_turn(item: ScriptItem) -> Turn:
    if isinstance(item, Turn):
        return item
    if isinstance(item, str):
        return Turn(text=item)
    if isinstance(item, ToolCall):
        return Turn(calls=(item,))
    calls = tuple(item)
    if not calls or not all(isinstance(c, ToolCall) for c in calls):
        raise TypeError(f"a script turn must be text or a non-empty list of ToolCall: {item!r}")
    return Turn(calls=calls)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _block_text(content: Any) -> str:
    """Flatten a tool_result's content (string or list of blocks) to text."""
    return "\n".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")


class FakeAnthropic:
    """``FakeAnthropic(script).start()``; ``.url`` for ANTHROPIC_BASE_URL; ``.stop()``."""

    def __init__(self, script: list[ScriptItem] | None = None, model: str | None = None) -> None:
        self.script: list[Turn] = [_as_turn(i) for i in (script or [])]
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.unknown: list[RecordedRequest] = []
        self.served: list[dict[str, Any]] = []  # every content block answered to the main loop
        self.holds: list[float] = []  # seconds each delayed turn was held back
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_script(self, script: list[ScriptItem]) -> FakeAnthropic:
        """Replace the script (turn positions are read from each request, so this is safe)."""
        self.script = [_as_turn(i) for i in script]
        return self

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeAnthropic:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeAnthropic is not started")
        return f"http://127.0.0.1:{self._server.server_port}"

    # -- what the model saw --------------------------------------------------------------------

    def main_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.kind == "main"]

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

    def tool_result(self, tool_use_id: str) -> ToolResult:
        for r in self.tool_results():
            if r.tool_use_id == tool_use_id:
                return r
        raise KeyError(f"the model never saw a tool_result for {tool_use_id}")

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

    def saw(self, fragment: str) -> bool:
        """Did the model see ``fragment`` anywhere in ``context_texts()``?"""
        return any(fragment in t for t in self.context_texts())

    def tool_use_ids(self) -> list[str]:
        """Ids of the scripted tool calls served so far, in order (``toolu_e2e_t<turn>_<n>_…``)."""
        with self._lock:
            return [b["id"] for b in self.served if b.get("type") == "tool_use"]

    # -- scripting ---------------------------------------------------------------------------

    def next_turn_index(self, messages: list[dict[str, Any]]) -> int:
        pos = 0
        for msg in messages:
            if msg.get("role") != "assistant":
                continue
            blocks = _blocks(msg.get("content"))
            turns = [
                int(m.group(1))
                for b in blocks
                if b.get("type") == "tool_use" and (m := _ID_RE.match(str(b.get("id", ""))))
            ]
            if turns:
                pos = max(pos, max(turns) + 1)
                continue
            said = "".join(b.get("text", "") for b in blocks if b.get("type") == "text").strip()
            expected = self.script[pos].text if pos < len(self.script) else None
            if expected is not None and said == expected.strip():
                pos += 1
        return pos

    def _hold(self, until: float | None) -> None:
        """Sleep until ``until`` (epoch seconds), at most ``MAX_DELAY_S``; recorded in ``holds``."""
        if until is None:
            return
        wait = min(MAX_DELAY_S, max(0.0, until - time.time()))
        with self._lock:
            self.holds.append(wait)
        time.sleep(wait)

    def answer(self, body: dict[str, Any]) -> tuple[str, int | None, list[dict[str, Any]], str]:
        """Return (kind, turn, content blocks, stop_reason) for a /v1/messages body."""
        if not body.get("tools"):
            return "side", None, [{"type": "text", "text": SIDE_ANSWER}], "end_turn"
        index = self.next_turn_index(body.get("messages", []))
        if index >= len(self.script):
            return "main", index, [{"type": "text", "text": END_ANSWER}], "end_turn"
        turn = self.script[index]
        if turn.not_before is not None:
            self._hold(turn.not_before(body.get("messages", [])))
        if turn.text is not None:
            return "main", index, [{"type": "text", "text": turn.text}], "end_turn"
        content = [
            {
                "type": "tool_use",
                "id": f"toolu_e2e_t{index}_{n}_{secrets.token_hex(4)}",
                "name": c.name,
                "input": c.input,
            }
            for n, c in enumerate(turn.calls)
        ]
        with self._lock:
            self.served.extend(content)
        return "main", index, content, "tool_use"


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAnthropic
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _read_body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _record(self, body: Any, kind: str, turn: int | None = None) -> RecordedRequest:
        rec = RecordedRequest(
            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, kind
        )
        rec.turn = turn
        with self.owner._lock:
            self.owner.requests.append(rec)
            if kind == "other":
                self.owner.unknown.append(rec)
        return rec

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_e2e_{secrets.token_hex(6)}")
        self.end_headers()
        self.wfile.write(data)

    def do_HEAD(self) -> None:
        self._record(None, "other")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

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
        data = b"".join(
            f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode() for name, payload in events
        )
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_e2e_{secrets.token_hex(6)}")
        self.end_headers()
        self.wfile.write(data)
