"""Which HTTP parser the listener uses (gateway/http_impl.py): the choice, and what it builds."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from support.config import write_config
from zerto_rewind.config import load_settings
from zerto_rewind.errors import ConfigError
from zerto_rewind.gateway import http_impl as module
from zerto_rewind.gateway.http_impl import http_impl, listener_options, protocol_base
from zerto_rewind.gateway.listener import MAX_HEAD_BYTES, ConnectionGate

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}


def gate() -> ConnectionGate:
    return ConnectionGate(
        max_total=10, max_per_source=2, header_timeout_s=1, body_timeout_s=2, idle_timeout_s=3
    )


def test_auto_is_httptools_when_installed_and_an_explicit_choice_stands() -> None:
    assert http_impl("auto") == "httptools"
    assert http_impl("h11") == "h11"
    assert http_impl("httptools") == "httptools"


def test_without_httptools_auto_falls_back_to_h11_and_asking_for_it_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        module.importlib.util,
        "find_spec",
        lambda name: None if name == "httptools" else real(name),
    )
    assert http_impl("auto") == "h11"
    with pytest.raises(ConfigError) as info:
        http_impl("httptools", "/etc/zr.json")
    assert info.value.key == "gateway.http_impl"
    assert "not installed" in str(info.value)
    assert "set auto or h11" in str(info.value)


def test_each_parser_gets_the_gate_and_its_own_head_bound() -> None:
    g = gate()
    fast = listener_options(g, "httptools")
    plain = listener_options(g, "h11")
    assert issubclass(fast["http"], HttpToolsProtocol)
    assert fast["http"].gate is g
    assert "h11_max_incomplete_event_size" not in fast  # bounded by the gateway instead
    assert issubclass(plain["http"], H11Protocol)
    assert plain["http"].gate is g
    assert plain["h11_max_incomplete_event_size"] == MAX_HEAD_BYTES
    assert fast["timeout_keep_alive"] == plain["timeout_keep_alive"] == 3
    assert protocol_base("httptools") is HttpToolsProtocol
    assert protocol_base("h11") is H11Protocol


def test_the_key_parses_with_its_default_and_refuses_another_value(tmp_path: Path) -> None:
    env = {"HOME": "/home/op", "ZS": "x"}
    plain = load_settings(env, path=str(write_config(tmp_path, {"zvm": ZVM})))
    assert plain.gateway.http_impl == "auto"
    given = write_config(tmp_path, {"zvm": ZVM, "gateway": {"http_impl": "h11"}})
    assert load_settings(env, path=str(given)).gateway.http_impl == "h11"
    bad = write_config(tmp_path, {"zvm": ZVM, "gateway": {"http_impl": "uvloop"}})
    with pytest.raises(ConfigError) as info:
        load_settings(env, path=str(bad))
    assert info.value.key == "gateway.http_impl"


class _Transport:
    """What the head-holding writer writes through to: the writes, in order."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_a_response_head_goes_out_with_its_body_in_one_write() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        transport = _Transport()
        held = module._HeadHeld(transport, loop)
        held.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        assert transport.writes == []
        held.write(b"{}")
        assert transport.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
        held.write(b"more")  # past the head: written through
        await asyncio.sleep(0)
        assert transport.writes[1:] == [b"more"]

    asyncio.run(main())


def test_a_head_is_not_held_past_the_loop_turn_a_close_or_a_large_body() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        streamed = _Transport()  # an SSE answer: its head, then events later
        module._HeadHeld(streamed, loop).write(b"HEAD")
        await asyncio.sleep(0)
        assert streamed.writes == [b"HEAD"]
        closed = _Transport()
        held = module._HeadHeld(closed, loop)
        held.write(b"HEAD")
        held.close()
        assert closed.writes == [b"HEAD"]
        assert held.is_closing()
        large = _Transport()
        held = module._HeadHeld(large, loop)
        held.write(b"HEAD")
        body = b"x" * (module._JOINED_MAX_BYTES + 1)
        held.write(body)  # not copied to be joined
        assert large.writes == [b"HEAD", body]
        await asyncio.sleep(0)
        assert large.writes == [b"HEAD", body]  # the turn's flush finds nothing held

    asyncio.run(main())
