"""The read-only fast lane's wire (gateway/fastlane_wire.py): the strict parse, and its
classification against the full path's, on every catalog under tests/data.

The socket-level behaviour (both eras, pins, metrics) is in
tests/integration/gateway/test_gateway_fastlane.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from starlette.requests import Request

from support.config import write_config
from zerto_rewind.config import load_settings
from zerto_rewind.config.catalog_settings import CatalogSettings
from zerto_rewind.core.catalog import Classification, classify
from zerto_rewind.core.decision import Decision, Outcome, Row, ToolCall
from zerto_rewind.core.guard import classified_decision
from zerto_rewind.gateway.fastlane import _complete, _modern_rejection
from zerto_rewind.gateway.fastlane_wire import (
    LaneCall,
    StrictJsonError,
    in_clients_era,
    lane_call,
    strict_json,
    takes,
)
from zerto_rewind.gateway.service import Gateway

DATA = Path(__file__).resolve().parents[2] / "data"
CATALOGS = sorted((DATA / "catalogs").glob("*.catalog.json"))
ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}


def call(**params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}


# --------------------------------------------------------------------------- strict parse


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"a"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}',
        b'{"params":{"arguments":{"vm":{"name":"a","name":"b"}}}}',
        b'[{"a":1},{"b":2,"b":3}]',
    ],
)
def test_a_duplicated_key_at_any_depth_is_refused(body: bytes) -> None:
    with pytest.raises(StrictJsonError, match="twice"):
        strict_json(body)


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_numbers_are_refused(constant: bytes) -> None:
    with pytest.raises(StrictJsonError):
        strict_json(b'{"params":{"arguments":{"n":' + constant + b"}}}")


@pytest.mark.parametrize(
    "body", [b"", b"{", b'{"a":}', b"{'a':1}", b'{"a":1}x', b'{"a":"\xff"}', b"\x00"]
)
def test_bad_json_raises_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011  (the decoder's own errors are ValueErrors)
        strict_json(body)


def test_a_clean_body_parses_as_json_does() -> None:
    text = json.dumps(call(name="get_vm", arguments={"name": "jp-ubuntu", "n": [1, 2.5, None]}))
    assert strict_json(text.encode()) == json.loads(text)


# --------------------------------------------------------------------------- which messages


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "get_vm"}},  # no id
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        [call(name="get_vm")],  # a batch
        {**call(name="get_vm"), "jsonrpc": "1.0"},
        {**call(name="get_vm"), "id": True},
        {**call(name="get_vm"), "id": None},
        {**call(name="get_vm"), "id": 1.5},
        {**call(name="get_vm"), "extra": 1},
        call(name="get_vm", requestState="s"),
        call(name="get_vm", inputResponses={}),
        call(name="get_vm", task={"ttl": 1}),
        call(name="get_vm", arguments=["jp-ubuntu"]),
        call(name="get_vm", arguments=None),
        call(name="get_vm", _meta=[]),
        call(name=""),
        call(name=7),
        call(arguments={}),
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []},
        "tools/call",
        None,
    ],
)
def test_anything_but_one_plain_tools_call_goes_to_the_full_path(message: Any) -> None:
    assert lane_call(message) is None


def test_a_plain_call_is_read_from_its_one_parse() -> None:
    message = call(name="get_vm", arguments={"name": "jp-ubuntu"}, _meta={"progressToken": 1})
    got = lane_call(message)
    assert got == LaneCall(3, "get_vm", {"name": "jp-ubuntu"}, message)
    assert lane_call(call(name="list_vms")) == LaneCall(3, "list_vms", {}, call(name="list_vms"))
    assert lane_call({**call(name="x"), "id": "a-1"}) is not None


# --------------------------------------------------------------------------- the answer's era

STAMP = {"name": "zerto-rewind-gateway/esxi", "version": ""}
TEXT = [{"type": "text", "text": "jp-ubuntu"}]


def test_a_handshake_era_result_gets_the_modern_eras_fields_for_a_modern_client() -> None:
    """mcvsphere's results have no resultType; a 2026-07-28 client refuses them without one
    (the deployment guide's end-to-end run), so the lane adds it, as the SDK's server does."""
    result: dict[str, Any] = {"content": TEXT, "isError": False}
    in_clients_era(result, True, STAMP)
    assert result == {"content": TEXT, "isError": False, "resultType": "complete",
                      "_meta": {types.SERVER_INFO_META_KEY: STAMP}}  # fmt: skip
    mine = {"content": TEXT, "_meta": {"k": 1}}
    in_clients_era(mine, True, STAMP)
    assert mine["_meta"] == {"k": 1, types.SERVER_INFO_META_KEY: STAMP}
    theirs = {"content": TEXT, "resultType": "complete",
              "_meta": {types.SERVER_INFO_META_KEY: {"name": "upstream"}}}  # fmt: skip
    in_clients_era(theirs, True, STAMP)
    assert theirs["_meta"] == {types.SERVER_INFO_META_KEY: {"name": "upstream"}}


def test_a_modern_result_loses_its_result_type_for_a_handshake_era_client() -> None:
    result: dict[str, Any] = {"content": TEXT, "resultType": "complete"}
    in_clients_era(result, False, STAMP)
    assert result == {"content": TEXT}
    validated = types.CallToolResult.model_validate(result)
    assert validated.content[0].text == "jp-ubuntu"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("answer", "relayed"),
    [
        ({"content": TEXT}, True),
        ({"content": TEXT, "resultType": "complete"}, True),
        ({"content": TEXT, "resultType": "input_required"}, False),
        ({"resultType": "input_required", "inputRequests": {}}, False),
        ({"content": "jp-ubuntu"}, False),
        ([TEXT], False),
    ],
)
def test_only_a_whole_tool_result_is_relayed(answer: Any, relayed: bool) -> None:
    assert _complete(answer) is relayed


# --------------------------------------------------------------------------- classification


class _AskedGuard:
    """The full path's guard: its own table for the rows the classification decides (no IO),
    a deny where it would ask the estate."""

    def __init__(self, catalog: CatalogSettings) -> None:
        self.catalog = catalog

    def decide(
        self, call: ToolCall, *, verdict: Classification | None = None, **_options: object
    ) -> Decision:
        verdict = verdict or classify(call.tool_name, call.tool_input, self.catalog)
        settled = classified_decision(call, verdict, self.catalog)
        return settled or Decision(Row.ERROR, Outcome.DENY, call.tool_name, reason="asked")

    def close(self) -> None:
        return None

    def state(self) -> object:
        return object()  # no Redis to close


def _gateway(tmp_path: Path, catalog: dict[str, Any], server: str) -> Gateway:
    config = {"zvm": ZVM, **catalog, "upstreams": {server: {"command": ["true"]}}}
    settings = load_settings(
        {"HOME": str(tmp_path), "ZS": "x"}, path=str(write_config(tmp_path, config))
    )
    return Gateway(settings, guard=_AskedGuard(settings.catalog))  # type: ignore[arg-type]


ODD = [
    "",
    "*",
    "get_*",
    "list_vms ",
    " list_vms",
    "LIST_VMS",
    "list-vms",
    "list_vms\x00",
    "list_vms\n",
    "list\u200bvms",
    "lіst_vms",  # a Cyrillic i
    "mcp__other__list_vms",
    "__list_vms",
    "list_vms__power_off",
    "power_off_vm",
    "delete_vm",
    "x" * 300,
    "[a-z]*",
    "get_vm_info?",
]


def _names(catalog: dict[str, Any], server: str) -> set[str]:
    """Every tool the catalog names (a glob also as its literal and as one instance), the
    server's live tools, and the odd names above, as the server's own (unprefixed) names."""
    prefix = f"mcp__{server}__"
    entries = [*catalog.get("read_only_tools", []), *catalog.get("tools", {})]
    entries += list(catalog.get("catalog", {}).get("pins", {}))
    names = {e.removeprefix(prefix) for e in entries}
    names |= {n.replace("*", "vms").replace("?", "x") for n in names}
    live = json.loads((DATA / "servers" / f"{server}.tools.json").read_text())["tools"]
    return names | {t["name"] for t in live} | set(ODD)


def _arguments(catalog: dict[str, Any]) -> list[dict[str, Any]]:
    """No arguments, a VM, and every host-path argument of the catalog given a path."""
    paths = {a for spec in catalog.get("tools", {}).values() for a in spec.get("host_paths", [])}
    shapes: list[dict[str, Any]] = [{}, {"name": "jp-ubuntu"}]
    shapes += [{arg: "/etc/zerto-rewind/config.json", "name": "jp-ubuntu"} for arg in paths]
    return shapes


async def _both(
    gateway: Gateway, server: str, tool: str, args: dict[str, Any]
) -> tuple[bool, bool]:
    full = await gateway.decide(ToolCall(f"mcp__{server}__{tool}", args, origin="gateway"))
    fast = takes(gateway.settings.catalog, gateway.pins, server, tool, args)
    return fast, full.row == Row.READ_ONLY


@pytest.mark.parametrize("path", CATALOGS, ids=[p.name for p in CATALOGS])
@pytest.mark.parametrize("pinned", [False, True], ids=["catalog", "with-pins"])
def test_the_fast_lane_classifies_as_the_full_path(
    tmp_path: Path, path: Path, pinned: bool
) -> None:
    """For every tool name of every catalog, its live tools, odd names and argument shapes:
    the fast lane takes the call exactly when the gateway's own decide answers read-only.
    With pins, the server's live list is compared first, one read-only tool changed."""
    catalog = json.loads(path.read_text())
    server = path.name.removesuffix(".catalog.json")
    gateway = _gateway(tmp_path, catalog, server)
    if pinned:
        live = json.loads((DATA / "servers" / f"{server}.tools.json").read_text())["tools"]
        # A rug pull on one read-only tool: it no longer matches its pin.
        pulled = next(
            t for t in live if f"mcp__{server}__{t['name']}" in catalog["read_only_tools"]
        )
        pulled["description"] = "Now also deletes what it lists."
        gateway.pins.enable(gateway.upstreams[server])
        gateway.pins.listed(server, [types.Tool.model_validate(t) for t in live])
        assert not takes(gateway.settings.catalog, gateway.pins, server, pulled["name"], {})
    seen = {True: 0, False: 0}

    async def check() -> None:
        for tool in sorted(_names(catalog, server)):
            for args in _arguments(catalog):
                fast, full = await _both(gateway, server, tool, args)
                assert fast == full, (tool, args)
                seen[fast] += 1

    try:
        anyio.run(check)
    finally:
        gateway.close()
    assert seen[True] > 0, "no call was read-only: the test compares nothing"
    assert seen[False] > len(ODD), "too few calls took the full path"


def test_a_pinned_tool_that_changed_is_not_taken(tmp_path: Path) -> None:
    """A read-only tool whose pin no longer matches (or not compared yet) takes the full path."""
    path = DATA / "catalogs" / "mcvsphere.catalog.json"
    catalog = json.loads(path.read_text())
    gateway = _gateway(tmp_path, catalog, "mcvsphere")
    try:
        pins = gateway.pins
        pins.enable(gateway.upstreams["mcvsphere"])
        args = {"name": "jp-ubuntu"}
        assert not takes(gateway.settings.catalog, pins, "mcvsphere", "get_vm_info", args)
        live = json.loads((DATA / "servers" / "mcvsphere.tools.json").read_text())["tools"]
        tools = [types.Tool.model_validate(t) for t in live]
        pins.listed("mcvsphere", tools)
        assert takes(gateway.settings.catalog, pins, "mcvsphere", "get_vm_info", args)
        changed = [
            t.model_copy(update={"description": "Now also deletes it."})
            if t.name == "get_vm_info"
            else t
            for t in tools
        ]
        pins.listed("mcvsphere", changed)
        assert not takes(gateway.settings.catalog, pins, "mcvsphere", "get_vm_info", args)
        assert takes(gateway.settings.catalog, pins, "mcvsphere", "list_vms", {})
    finally:
        gateway.close()


def test_a_host_path_given_to_a_read_only_tool_is_not_taken(tmp_path: Path) -> None:
    """A read-only glob, and a ``tools`` glob with host_paths over part of it: a call that
    gives a host path is not read-only on either path; the same tool without one is."""
    catalog = {
        "read_only_tools": ["mcp__files__read_*"],
        "tools": {"mcp__files__*": {"host_paths": ["path"], "decision": "allow"}},
    }
    gateway = _gateway(tmp_path, catalog, "files")

    async def check() -> list[tuple[bool, bool]]:
        shapes = [{}, {"path": "/etc/zerto-rewind/config.json"}, {"other": "/etc/passwd"}]
        return [await _both(gateway, "files", "read_file", args) for args in shapes]

    try:
        assert anyio.run(check) == [(True, True), (False, False), (True, True)]
    finally:
        gateway.close()


# --------------------------------------------------------------------------- 2026-07-28 ladder

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
ROUTED = {"type": "object", "properties": {"name": {"type": "string", "x-mcp-header": "Vm"}}}


class _Listed:
    """An upstream whose tool list is cached, with one tool's input schema."""

    listed = True

    def __init__(self, schema: dict[str, Any] | None) -> None:
        self.schema = schema

    def input_schema(self, name: str) -> dict[str, Any] | None:
        return self.schema


def _request(*extra: tuple[str, str], name: str = "get_vm") -> Request:
    headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", name),
        *extra,
    ]
    raw = [(k.encode(), v.encode()) for k, v in headers]
    return Request({"type": "http", "method": "POST", "path": "/mcp/vsphere", "headers": raw})


def _modern(arguments: dict[str, Any], **params: Any) -> LaneCall:
    message = call(name="get_vm", arguments=arguments, _meta=MODERN_META, **params)
    got = lane_call(message)
    assert got is not None
    return got


def test_a_clean_modern_call_passes_the_sdks_ladder() -> None:
    plain = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert _modern_rejection(_modern({"name": "a"}), _request(), _Listed(plain)) is None  # type: ignore[arg-type]
    routed = _request(("mcp-param-vm", "a"))
    assert _modern_rejection(_modern({"name": "a"}), routed, _Listed(ROUTED)) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "request_", "schema"),
    [
        ({"name": "a"}, _request(name="power_off_vm"), None),  # Mcp-Name is not the body's
        ({}, _request(("mcp-method", "tools/call")), None),  # a routing header twice
        ({"name": "a"}, _request(), ROUTED),  # a declared header left out
        ({"name": "a"}, _request(("mcp-param-vm", "b")), ROUTED),  # a header that disagrees
        ({"name": "a"}, _request(("mcp-param-vm", "a")), None),  # a header for no schema
    ],
)
def test_what_the_sdks_ladder_refuses_takes_the_full_path(
    arguments: dict[str, Any], request_: Request, schema: dict[str, Any] | None
) -> None:
    assert _modern_rejection(_modern(arguments), request_, _Listed(schema)) is not None  # type: ignore[arg-type]


def test_a_modern_call_without_its_envelope_takes_the_full_path() -> None:
    bare = lane_call(call(name="get_vm", arguments={}))
    assert bare is not None
    assert _modern_rejection(bare, _request(), _Listed(None)) is not None  # type: ignore[arg-type]
    unlisted = _Listed(None)
    unlisted.listed = False
    assert _modern_rejection(_modern({"name": "a"}), _request(), unlisted) is not None  # type: ignore[arg-type]
