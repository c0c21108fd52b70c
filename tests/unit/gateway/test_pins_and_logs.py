"""The gateway's pin gate and the upstream's redacted log, one layer at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from support.config import write_config
from zerto_rewind.cli.doctor.live import pin_check
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.core.decision import Outcome, Row, ToolCall
from zerto_rewind.gateway.metrics import GatewayMetrics
from zerto_rewind.gateway.pins import PinGate
from zerto_rewind.gateway.upstream import Upstream
from zerto_rewind.gateway.upstream_log import REDACTED, Redactor, UpstreamLog, secret_values
from zerto_rewind.scan.pins import pins_for

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}
POWER_OFF = {
    "name": "power_off",
    "description": "Power a VM off.",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    "annotations": {"destructiveHint": True},
}
LIST_VMS = {
    "name": "list_vms",
    "description": "Every VM.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}
RUG_PULL = {**POWER_OFF, "name": "list_and_delete_vms", "annotations": {}}


def settings(tmp_path: Path, pins: dict[str, str], **raw: Any) -> Settings:
    config = {
        "zvm": ZVM,
        "read_only_tools": ["mcp__vsphere__list_*"],
        "tools": {"mcp__vsphere__power_off": {"vm_arg": "name"}},
        "catalog": {"pins": pins},
        "upstreams": {"vsphere": {"command": ["true"]}, "esx": {"command": ["true"]}},
        **raw,
    }
    return load_settings(
        {"HOME": str(tmp_path), "ZS": "x"}, path=str(write_config(tmp_path, config))
    )


def tools(*raw: dict[str, Any]) -> list[types.Tool]:
    return [types.Tool.model_validate(t) for t in raw]


def gate(tmp_path: Path, **raw: Any) -> tuple[PinGate, GatewayMetrics]:
    s = settings(tmp_path, pins_for("vsphere", [POWER_OFF, LIST_VMS]), **raw)
    metrics = GatewayMetrics()
    upstreams = {name: Upstream(spec) for name, spec in s.upstreams.items()}
    pins = PinGate(s, upstreams, metrics)
    assert pins.pinned("vsphere")
    assert not pins.pinned("esx")
    assert pins.prefixes == (), "nothing is gated before the gateway runs the upstream"
    pins.enable(upstreams["vsphere"])
    return pins, metrics


def decide(pins: PinGate, tool: str) -> Any:
    return anyio.run(pins.hold, ToolCall(tool, {"name": "jp-ubuntu"}))


def test_only_tools_matching_their_pin_are_reviewed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After a rug pull: the changed and the new tool are held (prompt), counted and logged by
    name; the unchanged tool passes; an upstream without pins is not gated at all."""
    pins, metrics = gate(tmp_path)
    assert pins.prefixes == ("mcp__vsphere__",)
    pins.listed("vsphere", tools(POWER_OFF, LIST_VMS))
    assert pins.reviewed == {"mcp__vsphere__power_off", "mcp__vsphere__list_vms"}
    assert decide(pins, "mcp__vsphere__power_off") is None
    pins.stale("vsphere")  # list_changed: nothing of vsphere is trusted until compared
    assert pins.reviewed == frozenset()
    with caplog.at_level("INFO", logger="zerto_rewind.gateway"):
        pins.listed("vsphere", tools({**POWER_OFF, "annotations": {}}, LIST_VMS, RUG_PULL))
    changed = decide(pins, "mcp__vsphere__power_off")
    new = decide(pins, "mcp__vsphere__list_and_delete_vms")
    assert (changed.row, changed.outcome) == (Row.UNLISTED, Outcome.PROMPT)
    assert "changed since the catalog was reviewed" in changed.reason
    assert "it is new" in new.reason
    assert decide(pins, "mcp__vsphere__list_vms") is None
    assert decide(pins, "mcp__esx__anything") is None
    logged = caplog.text
    assert "tool mcp__vsphere__power_off changed since it was pinned" in logged
    assert "tool mcp__vsphere__list_and_delete_vms is not pinned" in logged
    assert "inputSchema" not in logged
    assert "Power a VM off" not in logged
    text = metrics.render().decode()
    assert 'zerto_rewind_tool_pin_mismatches_total{kind="changed",upstream="vsphere"} 1.0' in text
    assert 'zerto_rewind_tool_pin_mismatches_total{kind="new",upstream="vsphere"} 1.0' in text
    assert 'zerto_rewind_unreviewed_tools{upstream="vsphere"} 2.0' in text
    pins.listed("vsphere", tools({**POWER_OFF, "annotations": {}}, LIST_VMS, RUG_PULL))
    assert 'kind="new",upstream="vsphere"} 1.0' in metrics.render().decode(), "counted once"


def test_a_held_tool_is_denied_when_unlisted_tools_are_denied(tmp_path: Path) -> None:
    """unknown_tools: deny is stricter, and kept; allow is not: a changed tool still prompts."""
    pins, _ = gate(tmp_path, unknown_tools="deny")
    pins.listed("vsphere", tools(POWER_OFF, LIST_VMS, RUG_PULL))
    assert decide(pins, "mcp__vsphere__list_and_delete_vms").outcome == Outcome.DENY
    pins, _ = gate(tmp_path, unknown_tools="allow")
    pins.listed("vsphere", tools(POWER_OFF, LIST_VMS, RUG_PULL))
    assert decide(pins, "mcp__vsphere__list_and_delete_vms").outcome == Outcome.PROMPT


def test_a_list_changed_notification_makes_the_list_stale(tmp_path: Path) -> None:
    """A 2025-era server's spontaneous tools/list_changed reaches on_stale and the watcher."""
    upstream = Upstream(settings(tmp_path, {}).upstreams["vsphere"])
    seen: list[str] = []
    upstream.on_stale = lambda: seen.append("stale")
    anyio.run(upstream._on_message, types.ToolListChangedNotification())
    assert seen == ["stale"]
    assert upstream.tools_changed.is_set()


def test_doctor_fails_a_changed_pin_and_warns_an_unpinned_server(tmp_path: Path) -> None:
    """FAIL for a changed digest or a new tool a pattern would classify; WARN for a new
    unlisted tool, a removed one, or a server with no pins."""
    s = settings(tmp_path, pins_for("vsphere", [POWER_OFF, LIST_VMS]))
    assert pin_check(s, "vsphere", [POWER_OFF, LIST_VMS]).status == "pass"
    changed = pin_check(s, "vsphere", [{**POWER_OFF, "annotations": {}}, LIST_VMS])
    assert changed.status == "fail"
    assert "changed since review" in changed.detail
    by_glob = pin_check(s, "vsphere", [POWER_OFF, LIST_VMS, RUG_PULL])
    assert by_glob.status == "fail"
    assert "the hook would trust the pattern" in by_glob.detail
    unlisted = pin_check(s, "vsphere", [POWER_OFF, LIST_VMS, {**POWER_OFF, "name": "reboot"}])
    assert unlisted.status == "warn"
    assert pin_check(s, "vsphere", [POWER_OFF]).status == "warn"  # list_vms removed
    assert pin_check(s, "esx", [POWER_OFF]).status == "warn"  # no pins at all


def test_the_redactor_hides_env_values_and_secret_looking_text() -> None:
    """Env values (not short or boolean ones), key=value secrets, bearer tokens, URL passwords."""
    redact = Redactor(["hunter2-long", "true", "abc"])
    assert redact("login with hunter2-long now") == f"login with {REDACTED} now"
    assert redact("verify=true abc") == "verify=true abc"
    assert redact("password=s3cr3t; user=bob") == f"password={REDACTED}; user=bob"
    assert redact('{"api_key": "k-123"}') == f'{{"api_key": "{REDACTED}"}}'
    assert redact("Authorization: Bearer eyJhbGciOi.x.y") == f"Authorization: Bearer {REDACTED}"
    assert redact("https://admin:pa55@vc.example/sdk") == f"https://admin:{REDACTED}@vc.example/sdk"


def test_the_redactor_replaces_secrets_as_whole_tokens_never_inside_a_path() -> None:
    """A secret inside a longer name or a path component is left; the whole token is not."""
    redact = Redactor(["hunter2x", "p@ss.word!"])
    assert redact("/home/newhunter2x/repo/log") == "/home/newhunter2x/repo/log"
    assert redact("/srv/hunter2xdata") == "/srv/hunter2xdata"
    assert redact("pw hunter2x, then /home/hunter2x/") == f"pw {REDACTED}, then /home/{REDACTED}/"
    assert redact("sent 'p@ss.word!' twice") == f"sent '{REDACTED}' twice"


def test_only_secret_env_values_are_redacted_a_user_name_is_not() -> None:
    """VCENTER_USER=user is a user name: a path through /home/newuser stays whole."""
    env = {
        "VCENTER_USER": "user",
        "VCENTER_HOST": "127.0.0.1:8989",
        "VCENTER_PASSWORD": "pass-word-1",
        "MCVSPHERE_OPAQUE": "opaque-value",
    }
    assert sorted(secret_values(env)) == ["opaque-value", "pass-word-1"]
    redact = Redactor(secret_values(env))
    line = "cannot open /tmp/newuser/repo/x.log as user with pass-word-1"
    assert redact(line) == f"cannot open /tmp/newuser/repo/x.log as user with {REDACTED}"


def test_a_child_s_stderr_lands_redacted_in_a_private_log(tmp_path: Path) -> None:
    """What a child process prints to the sink is in the log (0600), its secret redacted."""
    path = tmp_path / "upstreams" / "vsphere.log"
    with UpstreamLog(str(path), ["s3cret-value"]) as log:
        code = "import sys; print('boot with s3cret-value', file=sys.stderr)"
        subprocess.run([sys.executable, "-c", code], stderr=log.sink, check=True)
    assert path.read_text() == f"boot with {REDACTED}\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
