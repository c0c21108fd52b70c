"""The install planners: options and file contents in, a plan out, no filesystem touched."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from zerto_rewind.config.parser import Parser
from zerto_rewind.config.settings import Settings
from zerto_rewind.errors import ConfigError
from zerto_rewind.hostconfig.claude import McpSource
from zerto_rewind.hostconfig.hook_command import HookCommand
from zerto_rewind.hostconfig.install.catalog_client import ServiceCatalog
from zerto_rewind.hostconfig.install.plan import (
    CurrentFile,
    InstallOptions,
    InstallRefused,
    check_service_options,
    plan_hook,
    plan_managed_config,
    plan_thin_hook,
)
from zerto_rewind.hostconfig.install.plugin import MCP_SERVER_NAME

PYTHON = "/venv/bin/python"
CONFIG = "/etc/zr/config.json"
PIN = "ab" * 32
SETTINGS_PATH = "/proj/.claude/settings.json"
RAW_CONFIG = {
    "zvm": {"url": "https://127.0.0.1:9", "username": "admin", "password_env": "ZPW"},
    "read_only_tools": ["mcp__vsphere__list_vms", "mcp__vsphere__get_*"],
    "tools": {"mcp__vsphere__power_off_vm": {"vm_arg": "vm"}},
}
VSPHERE = McpSource("/proj/.mcp.json", "project", "read", {"vsphere": {"command": "mcvsphere"}})


def settings_of(raw: dict[str, Any]) -> Settings:
    """Settings parsed from ``raw`` as if read from CONFIG (no file is read)."""
    return Parser(CONFIG, "/etc/zr").settings(raw, {"ZPW": "pw"}, loose_permissions=False)


def empty(path: str = SETTINGS_PATH) -> CurrentFile:
    """A settings file that does not exist yet."""
    return CurrentFile(path, {}, None)


@pytest.fixture(autouse=True)
def no_filesystem(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any open() in a planner fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a planner opened {args[:1]}")

    monkeypatch.setattr("builtins.open", refuse)


def hook_plan(options: InstallOptions | None = None, **kwargs: Any) -> Any:
    """plan_hook with the example config, the vsphere server defined, an empty file."""
    arguments: dict[str, Any] = {
        "config": CONFIG,
        "python": PYTHON,
        "pin": PIN,
        "sources": [VSPHERE],
        "current": empty(),
        **kwargs,
    }
    return plan_hook(
        options or InstallOptions(project="/proj"), settings_of(RAW_CONFIG), **arguments
    )


# ------------------------------------------------------------------ the hook


def test_the_hook_plan_holds_the_entry_and_its_summary() -> None:
    """The new file holds one pinned entry; the summary names file, matcher, command, pin."""
    plan = hook_plan()
    assert plan.what == "the zerto-rewind hook"
    assert plan.settings.path == SETTINGS_PATH
    assert plan.settings.original is None
    assert plan.settings.changed
    (entry,) = json.loads(plan.settings.text)["hooks"]["PreToolUse"]
    argv = shlex.split(entry["hooks"][0]["command"])
    assert argv[0] == PYTHON
    assert argv[argv.index("--config-sha256") + 1] == PIN
    assert plan.summary[0] == f"settings: {SETTINGS_PATH}"
    assert plan.summary[1] == f"matcher:  {entry['matcher']}"
    assert any(line.startswith(f"pin:      config SHA-256 {PIN}") for line in plan.summary)
    assert plan.summary[-1].startswith("mcp:      not installed")
    assert plan.before == ()
    assert (
        plan.check
        == "check it with: zerto-rewind doctor --config /etc/zr/config.json --project /proj"
    )


def test_the_hook_plan_registers_the_same_command_after_the_call() -> None:
    """PostToolUse and PostToolUseFailure run the hook's own command, without the self
    tools, with a short timeout and no onFailure: block (the call has run)."""
    plan = hook_plan()
    hooks = json.loads(plan.settings.text)["hooks"]
    (pre,) = hooks["PreToolUse"]
    for event in ("PostToolUse", "PostToolUseFailure"):
        (entry,) = hooks[event]
        (handler,) = entry["hooks"]
        assert handler["command"] == pre["hooks"][0]["command"]
        assert "onFailure" not in handler
        assert handler["timeout"] <= 60
        assert "Bash" not in entry["matcher"]
        assert "power_off_vm" in entry["matcher"] or "vsphere" in entry["matcher"]
    assert any(line.startswith("results:  PostToolUse") for line in plan.summary)


def test_the_thin_plan_replaces_the_post_entries_of_a_standalone_install() -> None:
    """The thin hook records results through the service: a standalone install's post
    entries become the thin hook's (same command as its PreToolUse, the catalog's mutating
    tools, no onFailure), other hooks under those events are kept."""
    standalone = json.loads(hook_plan().settings.text)
    other = {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi"}]}
    standalone["hooks"]["PostToolUse"].append(other)
    remote = ServiceCatalog(settings_of(RAW_CONFIG).catalog, 12.0)
    current = CurrentFile(SETTINGS_PATH, standalone, json.dumps(standalone))
    plan = plan_thin_hook(thin_options(), remote, python=PYTHON, sources=[VSPHERE], current=current)
    hooks = json.loads(plan.settings.text)["hooks"]
    (pre,) = hooks["PreToolUse"]
    for event in ("PostToolUse", "PostToolUseFailure"):
        ours = [e for e in hooks[event] if e != other]
        assert [e for e in hooks[event] if e == other] == (
            [other] if event == "PostToolUse" else []
        )
        (entry,) = ours
        (handler,) = entry["hooks"]
        assert handler["command"] == pre["hooks"][0]["command"]
        assert "zerto_rewind.hooks.thin" in handler["command"]
        assert "onFailure" not in handler
        assert entry["matcher"] == pre["matcher"]
        assert "list_vms" in entry["matcher"]  # excluded: a read-only call posts nothing
    assert any(line.startswith("results:  PostToolUse") for line in plan.summary)


def test_the_hook_plan_keeps_what_the_file_holds_and_sees_no_change_twice() -> None:
    """Other keys survive; planning over its own result changes nothing."""
    first = hook_plan(current=CurrentFile(SETTINGS_PATH, {"model": "opus"}, '{"model": "opus"}'))
    assert json.loads(first.settings.text)["model"] == "opus"
    again = hook_plan(
        current=CurrentFile(SETTINGS_PATH, json.loads(first.settings.text), first.settings.text)
    )
    assert not again.settings.changed


def test_the_hook_plan_refuses_an_undefined_server_unless_forced() -> None:
    """A catalog server no MCP config defines is refused; --force plans it anyway."""
    with pytest.raises(InstallRefused, match="vsphere") as refused:
        hook_plan(sources=[])
    assert str(refused.value).endswith("install anyway with --force.")
    assert hook_plan(InstallOptions(project="/proj", force=True), sources=[]).settings.changed


def test_the_hook_plan_refuses_a_catalog_that_guards_nothing() -> None:
    """A catalog that compiles to no matcher is a refusal naming the config."""
    raw = {**RAW_CONFIG, "tools": {}, "read_only_tools": []}
    with pytest.raises(InstallRefused, match=f"^{CONFIG}: "):
        plan_hook(
            InstallOptions(project="/proj"),
            settings_of(raw),
            config=CONFIG,
            python=PYTHON,
            pin=PIN,
            sources=[VSPHERE],
            current=empty(),
        )


def test_with_mcp_server_plans_the_servers_entry_before_the_settings() -> None:
    """--with-mcp-server: the MCP config gains the serve entry, written first."""
    mcp = CurrentFile("/proj/.mcp.json", {"mcpServers": {"vsphere": {}}}, "{}")
    plan = hook_plan(InstallOptions(project="/proj", with_mcp_server=True), mcp=mcp)
    (change,) = plan.before
    servers = json.loads(change.text)["mcpServers"]
    assert set(servers) == {"vsphere", MCP_SERVER_NAME}
    assert servers[MCP_SERVER_NAME]["args"][-2:] == ["--config", CONFIG]
    assert f"mcp:      server {MCP_SERVER_NAME!r} (zerto-rewind serve) in /proj/.mcp.json" in (
        plan.summary
    )


def test_a_settings_file_of_the_wrong_shape_is_a_config_error_naming_it() -> None:
    """hooks that is not an object is refused with the file's path."""
    with pytest.raises(ConfigError, match=SETTINGS_PATH):
        hook_plan(current=CurrentFile(SETTINGS_PATH, {"hooks": []}, '{"hooks": []}'))


# ------------------------------------------------------------------ the thin hook


def thin_options(**kwargs: Any) -> InstallOptions:
    """--service unix:/run/zr/guard.sock --project /proj, plus ``kwargs``."""
    return InstallOptions(project="/proj", service="unix:/run/zr/guard.sock", **kwargs)


def test_the_thin_plan_names_the_service_and_its_uid() -> None:
    """The thin hook's command carries the service and --service-user; identity is line 3."""
    remote = ServiceCatalog(settings_of(RAW_CONFIG).catalog, 12.0)
    plan = plan_thin_hook(
        thin_options(),
        remote,
        python=PYTHON,
        current=empty(),
        sources=[VSPHERE],
        service_uid=998,
        identity="served by uid 998",
    )
    assert plan.what == "the zerto-rewind thin hook"
    (entry,) = json.loads(plan.settings.text)["hooks"]["PreToolUse"]
    command = entry["hooks"][0]["command"]
    assert "unix:/run/zr/guard.sock" in command
    assert HookCommand.parse(command).service_user == "998"
    assert plan.summary[2] == "identity: served by uid 998"
    assert plan.check == "check it with: zerto-rewind doctor --project /proj"


def test_the_managed_thin_plan_skips_the_mcp_check_and_the_doctor_line() -> None:
    """--managed: no MCP config is consulted and the managed install says how to check."""
    remote = ServiceCatalog(settings_of(RAW_CONFIG).catalog, 12.0)
    options = InstallOptions(managed=True, service="https://gw:8443", managed_file="/m.json")
    plan = plan_thin_hook(options, remote, python=PYTHON, current=empty("/m.json"), sources=None)
    assert plan.check is None
    assert plan.settings.path == "/m.json"


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (InstallOptions(service="http://gw:80"), "clear text"),
        (InstallOptions(service="unix:relative.sock"), "must be absolute"),
        (InstallOptions(service="https://gw", config="/c.json"), "--config does not go"),
        (InstallOptions(service="https://gw", with_mcp_server=True), "--with-mcp-server"),
    ],
)
def test_service_options_that_cannot_work_are_refused(options: InstallOptions, says: str) -> None:
    """Plain http, a relative socket, --config or --with-mcp-server with --service."""
    with pytest.raises(InstallRefused, match=says):
        check_service_options(options)


# ------------------------------------------------------------------ the managed config


def test_the_managed_config_is_root_owned_and_readable() -> None:
    """Without --service: root's, 0644, and the note says so (or what a dry run would do)."""
    settings = settings_of(RAW_CONFIG)
    placed = plan_managed_config(InstallOptions(managed=True), settings, source="/c", dest="/d")
    assert (placed.uid, placed.gid, placed.mode) == (0, 0, 0o644)
    assert placed.note.startswith("config:   /d (root's, 0644")
    dry = plan_managed_config(
        InstallOptions(managed=True, dry_run=True), settings, source="/c", dest="/d"
    )
    assert dry.note == "config:   would copy /c to /d (root's, 0644)"


def test_the_managed_config_refuses_a_credential_the_agent_could_read() -> None:
    """An inline secret in a config every agent's user reads is refused."""
    zvm = {"url": "https://127.0.0.1:9", "client_id": "zr", "client_secret": "s3cret"}
    raw = {**RAW_CONFIG, "zvm": zvm}
    with pytest.raises(InstallRefused, match="inline ZVM secret"):
        plan_managed_config(InstallOptions(managed=True), settings_of(raw), source="/c", dest="/d")


def test_the_services_config_takes_the_owner_given() -> None:
    """With --service: the owner given, else root's 0600."""
    settings = settings_of(RAW_CONFIG)
    options = InstallOptions(managed=True, service="unix:/s")
    owner = (0, 990, 0o640, "root's, readable by group zr (0640): the service reads it")
    placed = plan_managed_config(options, settings, source="/c", dest="/d", owner=owner)
    assert (placed.uid, placed.gid, placed.mode) == (0, 990, 0o640)
    assert placed.note == f"config:   /d, the service's: {owner[3]}"
    default = plan_managed_config(options, settings, source="/c", dest="/d")
    assert (default.uid, default.gid, default.mode) == (0, 0, 0o600)
