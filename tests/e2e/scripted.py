"""The scripting core every scripted model on loopback shares, whatever API it speaks.

A *script* is a list of turns; each turn is a list of tool calls (one assistant message;
several = parallel tool use), a single ``ToolCall``, or a ``str`` (a final text). Which turn
is next is read from the conversation a request carries, never from a counter: every
scripted call gets an id ``<prefix>_e2e_t<turn>_<n>_<hex>`` and a scripted text is matched
exactly, so the position after the last recognised turn is the next one (:meth:`position`).
Retries, resumed sessions and side requests therefore cannot desynchronise a script.

:class:`ScriptedServer` is the loopback server (stdlib ``ThreadingHTTPServer`` on
127.0.0.1, port 0) with the script, the record of every request and the held-back turns
(:func:`delayed`); :class:`ScriptedHandler` reads bodies, records them and answers JSON or
server-sent events. ``fake_anthropic`` (Messages API) and ``fake_models`` (Responses, Chat
Completions, Gemini) are the two dialects built on it.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = [
    "END_ANSWER",
    "MAX_DELAY_S",
    "SIDE_ANSWER",
    "AssistantTurn",
    "NotBefore",
    "RecordedRequest",
    "ScriptItem",
    "ScriptedHandler",
    "ScriptedServer",
    "ToolCall",
    "ToolResult",
    "Turn",
    "as_turn",
    "call",
    "delayed",
    "text",
]

_ID_RE = re.compile(r"_e2e_t(\d+)_(\d+)_")
SIDE_ANSWER = "ok"
END_ANSWER = "done"
# Given the request's messages, the epoch time before which the turn must not be answered.
NotBefore = Callable[[list[dict[str, Any]]], float | None]
MAX_DELAY_S = 120.0


@dataclass(frozen=True)
class ToolCall:
    """One scripted tool call: the tool's name as the host offers it, and its arguments."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Turn:
    """One scripted assistant message: tool calls or a final text.

    ``not_before`` (see :func:`delayed`) holds the answer back: a model that was told "retry
    after T" and waits until T before it calls again.
    """

    calls: tuple[ToolCall, ...] = ()
    text: str | None = None
    not_before: NotBefore | None = None


@dataclass(frozen=True)
class ToolResult:
    """A tool result as the model saw it (``is_error`` where the API has such a flag)."""

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
    api: str = ""  # the dialect that answered it ("messages", "responses", "chat", "gemini")


ScriptItem = Turn | ToolCall | str | list[ToolCall] | tuple[ToolCall, ...]
# What a past assistant message shows of a turn: the ids of its calls, and its text.
AssistantTurn = tuple[Sequence[str], str]


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
    turn = as_turn(item)
    return Turn(calls=turn.calls, text=turn.text, not_before=not_before)


def as_turn(item: ScriptItem) -> Turn:
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


class ScriptedServer:
    """The script, the record and the loopback server; a dialect adds ``handler`` and answers.

    ``start()`` / ``stop()`` / context manager; ``.url``; ``.set_script(script)``.
    """

    handler: type[ScriptedHandler]
    thread_name = "scripted-model"

    def __init__(self, script: list[ScriptItem] | None = None, model: str | None = None) -> None:
        self.script: list[Turn] = [as_turn(i) for i in (script or [])]
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.unknown: list[RecordedRequest] = []
        self.served: list[dict[str, Any]] = []  # every tool call answered to the main loop
        self.holds: list[float] = []  # seconds each delayed turn was held back
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def set_script(self, script: list[ScriptItem]) -> Self:
        """Replace the script (turn positions are read from each request, so this is safe)."""
        self.script = [as_turn(i) for i in script]
        return self

    def reset(self, script: list[ScriptItem] | None = None) -> Self:
        """Forget every request and served call (one server shared by several tests)."""
        with self._lock:
            self.requests.clear()
            self.unknown.clear()
            self.served.clear()
            self.holds.clear()
        return self.set_script(script or [])

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        handler = type("Handler", (self.handler,), {"owner": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._server.server_port}"

    # -- the record ----------------------------------------------------------------------------

    def main_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.kind == "main"]

    def tool_use_ids(self) -> list[str]:
        """Ids of the scripted tool calls served so far, in order (``…_e2e_t<turn>_<n>_…``)."""
        with self._lock:
            return [str(c["id"]) for c in self.served]

    def tool_results(self) -> list[ToolResult]:
        """Every tool result the model was sent, one per call id (the dialect reads them)."""
        raise NotImplementedError

    def context_texts(self) -> list[str]:
        """Everything non-assistant the model read as text, in order (the dialect reads it)."""
        raise NotImplementedError

    def tool_result(self, tool_use_id: str) -> ToolResult:
        for r in self.tool_results():
            if r.tool_use_id == tool_use_id:
                return r
        raise KeyError(f"the model never saw a tool result for {tool_use_id}")

    def saw(self, fragment: str) -> bool:
        """Did the model see ``fragment`` anywhere in ``context_texts()``?"""
        return any(fragment in t for t in self.context_texts())

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            if request.kind == "other":
                self.unknown.append(request)

    # -- scripting ---------------------------------------------------------------------------

    def position(self, turns: Iterable[AssistantTurn]) -> int:
        """The next script index after the assistant messages so far, in order.

        A message with scripted call ids moves past the highest turn they name; a text
        message moves one on when it is exactly the text the script has next.
        """
        pos = 0
        for ids, said in turns:
            found = [int(m.group(1)) for i in ids if (m := _ID_RE.search(str(i)))]
            if found:
                pos = max(pos, max(found) + 1)
                continue
            expected = self.script[pos].text if pos < len(self.script) else None
            if expected is not None and said.strip() == expected.strip():
                pos += 1
        return pos

    def turn_at(self, index: int, messages: list[dict[str, Any]]) -> Turn | None:
        """The scripted turn ``index`` (None past the end), after any hold it asks for."""
        if index >= len(self.script):
            return None
        turn = self.script[index]
        if turn.not_before is not None:
            self._hold(turn.not_before(messages))
        return turn

    def call_ids(self, prefix: str, index: int, turn: Turn) -> list[str]:
        """Fresh ids for the turn's calls, ``<prefix>_e2e_t<index>_<n>_<hex>``, recorded."""
        ids = [f"{prefix}_e2e_t{index}_{n}_{secrets.token_hex(4)}" for n in range(len(turn.calls))]
        with self._lock:
            self.served.extend(
                {"id": i, "name": c.name, "input": c.input}
                for i, c in zip(ids, turn.calls, strict=True)
            )
        return ids

    def _hold(self, until: float | None) -> None:
        """Sleep until ``until`` (epoch seconds), at most ``MAX_DELAY_S``; recorded in ``holds``."""
        if until is None:
            return
        wait = min(MAX_DELAY_S, max(0.0, until - time.time()))
        with self._lock:
            self.holds.append(wait)
        time.sleep(wait)


class ScriptedHandler(BaseHTTPRequestHandler):
    """Reading, recording and answering; a dialect implements ``do_GET`` / ``do_POST``."""

    owner: ScriptedServer
    protocol_version = "HTTP/1.1"
    api = ""

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

    def _record(
        self, body: Any, kind: str, turn: int | None = None, api: str | None = None
    ) -> RecordedRequest:
        rec = RecordedRequest(
            self.command,
            self.path,
            {k.lower(): v for k, v in self.headers.items()},
            body,
            kind,
            turn,
            self.api if api is None else api,
        )
        self.owner.record(rec)
        return rec

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_e2e_{secrets.token_hex(6)}")
        self.end_headers()
        self.wfile.write(data)

    def _send_events(self, events: Sequence[tuple[str | None, Any]]) -> None:
        """Server-sent events, each ``(event name or None, JSON payload or raw str)``."""
        chunks = []
        for name, payload in events:
            line = payload if isinstance(payload, str) else json.dumps(payload)
            chunks.append((f"event: {name}\n" if name else "") + f"data: {line}\n\n")
        data = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_e2e_{secrets.token_hex(6)}")
        self.end_headers()
        self.wfile.write(data)

    def do_HEAD(self) -> None:
        self._record(None, "other")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
