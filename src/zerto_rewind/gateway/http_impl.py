"""Which HTTP/1.1 parser serves the gateway's listeners: h11 or httptools (``gateway.http_impl``).

uvicorn's httptools protocol (llhttp, in C) costs a read-only call less CPU than its h11
one, and the listener's bounds hold with either (:mod:`.listener`): the caps are counted
at ``accept()``, whatever parses the request. What differs is where the parser keeps its
state, so the deadlines follow llhttp's callbacks here instead of h11's states, and two
bounds h11 gave for free are kept by hand:

* **Head size.** llhttp buffers a request head of any size; here a head still
  incomplete past :data:`.listener.MAX_HEAD_BYTES` gets 400 and the connection is
  closed, as h11's bound does.
* **Smuggling.** llhttp refuses a request with both ``Content-Length`` and
  ``Transfer-Encoding`` before the app sees it, with uvicorn's generic 400; the answer
  here names why, as the h11 path's does, and the connection is closed (nothing after
  it is parsed).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ..errors import ConfigError
from .listener import MAX_HEAD_BYTES, ConnectionGate, Guarded, guarded_protocol, raw_response

__all__ = ["http_impl", "listener_options", "protocol_base"]

_FRAMING_REFUSAL = "both Content-Length and Transfer-Encoding: refused"


def http_impl(choice: str, path: str | None = None) -> str:
    """``h11`` or ``httptools`` for ``gateway.http_impl``; ``auto`` is httptools when installed."""
    installed = importlib.util.find_spec("httptools") is not None
    if choice == "auto":
        return "httptools" if installed else "h11"
    if choice == "httptools" and not installed:
        msg = (
            "httptools is asked for and not installed in the gateway's environment: "
            "install the gateway's dependencies again, or set auto or h11"
        )
        raise ConfigError(msg, path=path, key="gateway.http_impl")
    return choice


def protocol_base(impl: str) -> type:
    """uvicorn's protocol class for ``impl`` (``h11`` or ``httptools``)."""
    if impl == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return H11Protocol


def listener_options(gate: ConnectionGate, impl: str, base: type | None = None) -> dict[str, Any]:
    """What ``uvicorn.Config`` takes for a listener bounded by ``gate``, parsed by ``impl``
    (``base``: a subclass of :func:`protocol_base`'s class, for the unix peer's user)."""
    parent = base if base is not None else protocol_base(impl)
    options: dict[str, Any] = {"timeout_keep_alive": gate.idle_timeout_s}
    if impl == "httptools":
        options["http"] = type("GuardedProtocol", (_GuardedLlhttp, parent), {"gate": gate})
    else:
        options["http"] = guarded_protocol(gate, parent)
        options["h11_max_incomplete_event_size"] = MAX_HEAD_BYTES
    return options


def _framing_parser(protocol: Any) -> Any:
    """An llhttp request parser that keeps why it last refused a request."""
    if not _PARSER_CLASS:
        _PARSER_CLASS.append(_framing_parser_class())
    parser = _PARSER_CLASS[0](protocol)
    # uvicorn's own leniency: answer the first of pipelined requests sent after a close.
    parser.set_dangerous_leniencies(lenient_data_after_close=True)
    return parser


# Made once, on the first connection: httptools is imported only when it serves.
_PARSER_CLASS: list[type] = []


def _framing_parser_class() -> type:
    import httptools

    class FramingParser(httptools.HttpRequestParser):
        error = ""

        def feed_data(self, data: Any) -> None:
            try:
                super().feed_data(data)
            except httptools.HttpParserError as exc:
                self.error = str(exc)
                raise

    return FramingParser


class _GuardedLlhttp(Guarded):
    """The gate's deadlines over uvicorn's httptools protocol (mixed in before it)."""

    parser: Any
    cycle: Any
    transport: Any
    # Where the current request is: idle (between requests, or none of its head yet),
    # head, body, done (in; the app answers it).
    _state = "idle"
    _head_bytes = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parser = _framing_parser(self)

    def data_received(self, data: bytes) -> None:
        if self._state in ("idle", "head"):
            self._head_bytes += len(data)
        super(Guarded, self).data_received(data)  # uvicorn's, past the h11 mixin's
        if self._state in ("idle", "head"):
            if self._head_bytes > MAX_HEAD_BYTES:
                if not self.transport.is_closing():
                    self.send_400_response("Request head too large.")
                return
            # A request's head begun and not whole: its deadline runs from these first
            # bytes. Armed after they are parsed, not before: a request that arrives whole
            # (most do) arms no timer at all.
            if self._deadline is None:
                self._arm("header", self.gate.header_timeout_s)
        self._track()

    def send_400_response(self, msg: str) -> None:
        self._flush_head()  # an answer's head held back goes out before the 400
        if "can't be present with" in self.parser.error:  # llhttp's Content-Length/TE refusal
            self.transport.write(raw_response(400, "Bad Request", _FRAMING_REFUSAL))
            self.transport.close()
            return
        super().send_400_response(msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._state = "head"

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._state, self._head_bytes = "body", 0
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # the request's, new
            cycle.transport = _HeadHeld(self.transport, self.loop)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._state = "done"

    def on_response_complete(self) -> None:
        self._flush_head()  # a response without a body written (HEAD): its head is out now
        if self._state == "done":
            self._state = "idle"
        super().on_response_complete()

    def _track(self) -> None:
        if self._state == "body":
            if self._phase != "body":
                self._arm("body", self.gate.body_timeout_s)
        elif self._state == "done" or self._phase == "body":
            self._disarm()  # the request is in: the app and keep-alive take over

    def _flush_head(self) -> None:
        cycle = self.cycle
        if cycle is not None and isinstance(cycle.transport, _HeadHeld):
            cycle.transport.flush()

    def _nothing_answered(self) -> bool:
        cycle = self.cycle
        return cycle is None or cycle.response_complete or not cycle.response_started


# A body up to this size goes out in one write with its response's head.
_JOINED_MAX_BYTES = 64 * 1024


class _HeadHeld:
    """One request's view of its connection's transport: the response's head is held
    until its body follows, and both go out in one write.

    uvicorn writes a response's head and its body in two ``send`` calls: two syscalls
    here, two segments, and two wake-ups of the client. An answer of known length (the
    fast lane's, the SDK's JSON answers) sends its body in the same step as its head; a
    streamed one (SSE) may not, so a head is never held past the current turn of the
    loop (``call_soon``), nor past a close.
    """

    __slots__ = ("_head", "_loop", "_started", "transport")

    def __init__(self, transport: Any, loop: Any) -> None:
        self.transport = transport
        self._loop = loop
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes) -> None:
        if not self._started:  # the first write: the response's head (or a 100 Continue)
            self._started = True
            self._head = data
            self._loop.call_soon(self.flush)
            return
        head, self._head = self._head, None
        if head is not None:
            if len(data) <= _JOINED_MAX_BYTES:
                data = head + data
            else:
                self.transport.write(head)
        self.transport.write(data)

    def flush(self) -> None:
        head, self._head = self._head, None
        if head is not None:
            self.transport.write(head)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def is_closing(self) -> bool:
        return bool(self.transport.is_closing())
