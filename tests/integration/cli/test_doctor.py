"""``zerto-rewind doctor`` against an in-process ZVM simulator on 127.0.0.1."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.config import sim_zvm, write_sim_config
from support.ports import free_port
from support.sim import sim_fixture
from zerto_rewind.cli.doctor import Check, main, run_checks
from zerto_rewind.config.loader import file_sha256
from zerto_rewind.hostconfig.install.matcher import SELF_TOOLS, compile_matcher
from zerto_rewind.hostconfig.install.settings_file import (
    POST_EVENTS,
    build_entry,
    build_post_entry,
    merge,
)
from zerto_rewind.sim import SimServer

SECRET_VAR = "ZR_DOCTOR_TEST_PASSWORD"
READ_ONLY = ["mcp__vsphere__list_vms", "mcp__vsphere__get_*"]
TOOLS: dict[str, Any] = {"mcp__vsphere__power_off_vm": {"vm_arg": "vm"}}


# One simulator for the module: the doctor only reads from it.
sim = sim_fixture(scope="module", jitter=0.0, seed=7)


@pytest.fixture
def env(sim: SimServer, tmp_path: Path) -> dict[str, str]:
    """A clean environment holding the simulator's password."""
    return {"HOME": str(tmp_path / "home"), SECRET_VAR: sim.credentials["password"]}


def write_config(sim: SimServer, directory: Path, **changes: Any) -> Path:
    """A config for the simulator; ``changes`` replace top-level keys or zvm keys (zvm_*)."""
    zvm = sim_zvm(sim, secret_env=SECRET_VAR)
    sections: dict[str, Any] = {"read_only_tools": READ_ONLY, "tools": TOOLS}
    for key, value in changes.items():
        if key.startswith("zvm_"):
            if value is None:
                zvm.pop(key[4:], None)
            else:
                zvm[key[4:]] = value
        else:
            sections[key] = value
    return write_sim_config(sim, directory, name="zerto-rewind.json", **{**sections, "zvm": zvm})


def write_host_settings(
    directory: Path,
    config: Path,
    *,
    matcher: str | None = None,
    post: bool = True,
    **handler: Any,
) -> Path:
    """Claude Code settings with the hook as install writes it (``post``: under the post
    events too); ``handler`` overrides fields."""
    from zerto_rewind.config import load_settings

    catalog = load_settings({SECRET_VAR: "x"}, path=str(config)).catalog
    entry = build_entry(
        python=sys.executable,
        config=str(config),
        matcher=matcher if matcher is not None else compile_matcher(catalog, self_tools=SELF_TOOLS),
        timeout_s=180,
        config_sha256=file_sha256(str(config)),
    )
    for key, value in handler.items():
        if value is None:
            entry["hooks"][0].pop(key, None)
        else:
            entry["hooks"][0][key] = value
    path = directory / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = merge({"model": "opus"}, entry)
    for event in POST_EVENTS if post else ():
        after = build_post_entry(compile_matcher(catalog), entry["hooks"][0]["command"])
        merged = merge(merged, after, event)
    path.write_text(json.dumps(merged, indent=2))
    # the project's MCP config registers the server under the catalog's name
    servers = {"mcpServers": {"vsphere": {"command": "mcvsphere"}}}
    (directory / ".mcp.json").write_text(json.dumps(servers))
    return path


def by_name(checks: list[Check]) -> dict[str, Check]:
    """Checks keyed by name (each name appears once in these tests)."""
    named = {c.name: c for c in checks}
    assert len(named) == len(checks), checks
    return named


def test_everything_passes_for_a_correct_install(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A valid config, a reachable ZVM and install's own settings pass every check."""
    config = write_config(sim, tmp_path)
    settings = write_host_settings(tmp_path, config)
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert {name: c.status for name, c in checks.items()} == {
        "config": "pass",
        "secret": "pass",
        "zvm": "pass",
        "credentials": "pass",
        "vm_arg": "pass",
        "tls": "pass",
        "on_pending": "pass",
        "catalog ties": "pass",
        "catalog patterns": "pass",
        "hook installed": "pass",
        "hook command": "pass",
        "hook timeout": "pass",
        "hook onFailure": "pass",
        "hook matcher": "pass",
        "hook results": "pass",
        "mcp servers": "pass",
        "hosts": "pass",  # the Claude Code hook's setup: no other host's file is read
    }


def test_main_prints_json_and_exits_zero_when_all_pass(
    sim: SimServer, tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """--json prints {ok, checks}; the config is found through the hook's own --config."""
    config = write_config(sim, tmp_path)
    write_host_settings(tmp_path, config)
    assert main(["--project", str(tmp_path), "--json"], env=env) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert {c["status"] for c in report["checks"]} == {"pass"}
    assert str(config) in report["checks"][0]["detail"]


def test_broken_config_fails_and_names_the_key(
    sim: SimServer, tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An invalid config fails with file and key, skips the ZVM, and exits 1."""
    config = write_config(sim, tmp_path, guard={"timeout_s": "soon"})
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert checks["config"].status == "fail"
    assert str(config) in checks["config"].detail
    assert "guard.timeout_s" in checks["config"].detail
    assert "zvm" not in checks
    assert main(["--config", str(config)], env=env) == 1
    assert "FAIL" in capsys.readouterr().out


def test_wrong_secret_fails_the_credentials_check(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """The ZVM answers but refuses the login: zvm passes, credentials fail."""
    config = write_config(sim, tmp_path)
    env[SECRET_VAR] = "not-the-password"
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert checks["zvm"].status == "pass"
    assert checks["credentials"].status == "fail"
    assert "refused" in checks["credentials"].detail
    assert f"${SECRET_VAR}" in checks["credentials"].fix


def test_missing_secret_fails_before_contacting_the_zvm(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """An unset secret variable is its own failure, with where to put it."""
    config = write_config(sim, tmp_path)
    del env[SECRET_VAR]
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert checks["secret"].status == "fail"
    assert SECRET_VAR in checks["secret"].detail
    assert "zvm" not in checks


def test_unreachable_zvm_fails_quickly(tmp_path: Path, env: dict[str, str]) -> None:
    """A closed port on 127.0.0.1 fails the zvm check within seconds, not the 10 s deadline."""
    config = tmp_path / "zerto-rewind.json"
    url = f"https://127.0.0.1:{free_port()}"
    zvm = {"url": url, "username": "admin", "password_env": SECRET_VAR}
    config.write_text(json.dumps({"zvm": zvm, "tools": TOOLS}))
    started = time.monotonic()
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert time.monotonic() - started < 5
    assert checks["zvm"].status == "fail"
    assert "cannot reach" in checks["zvm"].detail
    assert "zvm.url" in checks["zvm"].fix
    assert "credentials" not in checks


def test_untrusted_certificate_says_to_set_ca_bundle(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """Without the simulator's CA the TLS failure points at zvm.ca_bundle."""
    config = write_config(sim, tmp_path, zvm_ca_bundle=None)
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert checks["zvm"].status == "fail"
    assert "zvm.ca_bundle" in checks["zvm"].fix


def test_tls_verification_off_is_a_warning(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """verify_tls false still reaches the ZVM but warns."""
    config = write_config(sim, tmp_path, zvm_ca_bundle=None, zvm_verify_tls=False)
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert checks["zvm"].status == "pass"
    assert checks["tls"].status == "warn"


def test_missing_vm_arg_fails_and_lists_the_tools(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A tools entry without vm_arg fails the vm_arg check by name."""
    tools = {**TOOLS, "mcp__vsphere__delete_vm": {}, "mcp__vsphere__reboot_vm": {}}
    config = write_config(sim, tmp_path, tools=tools)
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert checks["vm_arg"].status == "fail"
    assert "mcp__vsphere__delete_vm, mcp__vsphere__reboot_vm" in checks["vm_arg"].detail


def test_hook_without_on_failure_block_fails(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A hook without onFailure: block fails, explaining that a timeout lets the call run."""
    config = write_config(sim, tmp_path)
    settings = write_host_settings(tmp_path, config, onFailure=None)
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook onFailure"].status == "fail"
    assert "silent failure" in checks["hook onFailure"].detail
    assert '"onFailure": "block"' in checks["hook onFailure"].fix


def test_a_hook_not_registered_for_the_post_events_warns(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """Installed before results were recorded: a warning naming the events and the fix."""
    config = write_config(sim, tmp_path)
    settings = write_host_settings(tmp_path, config, post=False)
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook results"].status == "warn"
    assert "PostToolUse, PostToolUseFailure" in checks["hook results"].detail
    assert "not recorded" in checks["hook results"].detail
    assert "install claude-code" in checks["hook results"].fix


def test_host_timeout_below_the_guard_budget_fails(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A host timeout of 120 s under the 150 s budget fails and says what is needed."""
    config = write_config(sim, tmp_path)
    settings = write_host_settings(tmp_path, config, timeout=120)
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook timeout"].status == "fail"
    assert "165" in checks["hook timeout"].detail  # 150 s + 15 s margin


def test_matcher_that_skips_a_mutating_tool_fails(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A matcher that lets power_off_vm through without the hook fails."""
    config = write_config(sim, tmp_path)
    settings = write_host_settings(tmp_path, config, matcher="^mcp__vsphere__(?!power_)")
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook matcher"].status == "fail"
    assert "mcp__vsphere__power_off_vm" in checks["hook matcher"].detail


def test_relative_interpreter_fails_the_command_check(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A bare `python3` in the command depends on PATH and fails."""
    config = write_config(sim, tmp_path)
    command = f"python3 -m zerto_rewind hook --config {config}"
    settings = write_host_settings(tmp_path, config, command=command)
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook command"].status == "fail"
    assert "not an absolute path" in checks["hook command"].detail


def test_a_hook_started_without_dash_p_fails_and_install_rewrites_it(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A command installed before -P imports from the agent's working directory first: a
    module planted there would run as the guard. doctor fails it; install writes -P."""
    import shlex

    from zerto_rewind.cli.install_claude_code import main as install_main
    from zerto_rewind.hooks.standalone import LAUNCH_CODE

    config = write_config(sim, tmp_path)
    old = shlex.join([sys.executable, "-S", "-c", LAUNCH_CODE, "hook", "--config", str(config)])
    settings = write_host_settings(tmp_path, config, command=old)
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook command"].status == "fail"
    assert "without -P" in checks["hook command"].detail
    assert "zerto-rewind install claude-code" in checks["hook command"].fix

    assert (
        install_main(["claude-code", "--project", str(tmp_path), "--config", str(config)], env) == 0
    )
    (entry,) = json.loads(settings.read_text())["hooks"]["PreToolUse"]
    assert "-P" in shlex.split(entry["hooks"][0]["command"])
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook command"].status == "pass"


def test_no_hook_installed_fails_with_the_install_command(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """Settings files without the hook fail 'hook installed' and name the install command."""
    config = write_config(sim, tmp_path)
    settings = tmp_path / "settings.json"
    settings.write_text('{"hooks": {}}')
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook installed"].status == "fail"
    assert "zerto-rewind install claude-code" in checks["hook installed"].fix


def test_on_pending_defer_is_a_warning(tmp_path: Path) -> None:
    """guard.on_pending: defer is a warning: `claude -p` only, and only the last call of a turn."""
    from zerto_rewind.cli.doctor.config import pending_check
    from zerto_rewind.config import load_settings

    path = tmp_path / "config.json"
    path.write_text(
        '{"zvm": {"url": "https://127.0.0.1:9", "client_id": "c", "client_secret_env": "X"},'
        ' "guard": {"on_pending": "defer"}}'
    )
    check = pending_check(load_settings({"HOME": str(tmp_path)}, path=str(path)))
    assert check.status == "warn"
    assert "claude -p" in check.detail


def test_a_hook_installed_before_the_layer_folders_fails_and_install_rewrites_it(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """An old `zerto_rewind.hook` command cannot start; doctor fails it and says to install
    again, and install rewrites it."""
    import shlex
    import subprocess

    from zerto_rewind.cli.install_claude_code import main as install_main
    from zerto_rewind.hooks.standalone import LAUNCH_CODE, LEGACY_LAUNCH_CODE

    config = write_config(sim, tmp_path)
    legacy = shlex.join([sys.executable, "-c", LEGACY_LAUNCH_CODE, "hook", "--config", str(config)])
    settings = write_host_settings(tmp_path, config, command=legacy)
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook command"].status == "fail"
    assert "old import path" in checks["hook command"].detail
    assert "zerto-rewind install claude-code" in checks["hook command"].fix

    # The old import path is gone: the command fails, and onFailure: block blocks the call.
    payload = {"tool_name": "mcp__other__thing", "tool_input": {}, "hook_event_name": "PreToolUse"}
    proc = subprocess.run(
        shlex.split(legacy),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "zerto_rewind.hook" in proc.stderr

    project = tmp_path  # write_host_settings wrote <tmp_path>/.claude/settings.json
    assert (
        install_main(["claude-code", "--project", str(project), "--config", str(config)], env) == 0
    )
    (entry,) = json.loads(settings.read_text())["hooks"]["PreToolUse"]
    assert LAUNCH_CODE in entry["hooks"][0]["command"]
    assert LEGACY_LAUNCH_CODE not in entry["hooks"][0]["command"]
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook command"].status == "pass"


def test_a_config_changed_since_install_fails_the_pin(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """The hook pins the config's SHA-256; a rewritten config fails (the hook denies all)."""
    config = write_config(sim, tmp_path)
    settings = write_host_settings(tmp_path, config)
    write_config(sim, tmp_path, read_only_tools=[*READ_ONLY, "mcp__vsphere__power_off_vm"])
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    check = checks["hook command"]
    assert check.status == "fail"
    assert "changed since install" in check.detail
    assert file_sha256(str(config)) in check.detail
    assert "zerto-rewind install" in check.fix


def test_an_unpinned_hook_warns_and_install_rewrites_it_with_the_pin(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A hook from before the pin: doctor warns; install replaces it with a pinned one."""
    import shlex

    from zerto_rewind.cli.install_claude_code import main as install_main
    from zerto_rewind.hooks.standalone import LAUNCH_CODE

    config = write_config(sim, tmp_path)
    old = shlex.join([sys.executable, "-P", "-c", LAUNCH_CODE, "hook", "--config", str(config)])
    settings = write_host_settings(tmp_path, config, command=old)
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook command"].status == "warn"
    assert "does not pin its config" in checks["hook command"].detail

    assert (
        install_main(["claude-code", "--project", str(tmp_path), "--config", str(config)], env) == 0
    )
    (entry,) = json.loads(settings.read_text())["hooks"]["PreToolUse"]
    argv = shlex.split(entry["hooks"][0]["command"])
    assert argv[argv.index("--config-sha256") + 1] == file_sha256(str(config))
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["hook command"].status == "pass"
    assert "matches its pin" in checks["hook command"].detail


# ---------------------------------------------------------------- MCP server names (issue 13 §1)


def write_mcp_servers(project: Path, servers: dict[str, Any]) -> None:
    """The project's .mcp.json with these servers."""
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_a_vm_server_registered_under_another_name_fails_and_install_refuses_it(
    sim: SimServer, tmp_path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`mcvsphere` in .mcp.json, `mcp__vsphere__…` in the catalog: doctor fails, install refuses.

    Renaming the catalog's server to mcvsphere makes both pass.
    """
    from zerto_rewind.cli import run_command
    from zerto_rewind.cli.install_claude_code import main as install_main

    project = tmp_path / "project"
    project.mkdir()
    config = write_config(sim, tmp_path)
    settings = write_host_settings(project, config)
    write_mcp_servers(project, {"mcvsphere": {"command": "mcvsphere"}, "docs": {"command": "x"}})
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    mcp = checks["mcp servers"]
    assert mcp.status == "fail"
    assert "mcvsphere: looks like a VM server" in mcp.detail
    assert "docs: not a VM server" in mcp.detail  # every server read is listed
    assert str(project / ".mcp.json") in mcp.detail
    assert "rename the server 'mcvsphere' to 'vsphere'" in mcp.fix
    # the matcher check alone still passes: that was the silent hole
    assert checks["hook matcher"].status == "pass"

    argv = ["claude-code", "--project", str(project), "--config", str(config)]
    before = settings.read_text()
    assert run_command("install claude-code", lambda: install_main(argv, env)) == 1
    err = capsys.readouterr().err
    assert "mcp__<server>__" in err
    assert "mcvsphere" in err
    assert "--force" in err
    assert settings.read_text() == before
    assert install_main([*argv, "--force"], env) == 0

    renamed = {
        "read_only_tools": [t.replace("vsphere", "mcvsphere") for t in READ_ONLY],
        "tools": {k.replace("vsphere", "mcvsphere"): v for k, v in TOOLS.items()},
    }
    config = write_config(sim, tmp_path, **renamed)
    assert install_main(argv, env) == 0
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    assert checks["mcp servers"].status == "pass", checks["mcp servers"]
    assert "mcvsphere: a VM server" in checks["mcp servers"].detail


def test_servers_are_read_from_the_user_config_local_scope_and_plugins(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """~/.claude.json (user + projects[dir]) and plugin .mcp.json files are read and listed."""
    project = tmp_path / "project"
    project.mkdir()
    config = write_config(sim, tmp_path)
    settings = write_host_settings(project, config)
    (project / ".mcp.json").unlink()
    home = Path(env["HOME"])
    home.mkdir(parents=True, exist_ok=True)
    claude_json = {
        "mcpServers": {"notes": {"command": "notes-server"}},
        "projects": {str(project): {"mcpServers": {"vsphere": {"command": "mcvsphere"}}}},
    }
    (home / ".claude.json").write_text(json.dumps(claude_json))
    plugin = home / ".claude" / "plugins" / "cache" / "mkt" / "vmtools" / "1.0"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "vmtools"}))
    (plugin / ".mcp.json").write_text(
        json.dumps({"esxi": {"command": "esxi-mcp", "env": {"ESXI_HOST": "h"}}})
    )
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    mcp = checks["mcp servers"]
    assert "vsphere: a VM server" in mcp.detail
    assert "notes: not a VM server" in mcp.detail
    assert "plugin_vmtools_esxi: looks like a VM server" in mcp.detail
    assert mcp.status == "fail"  # the plugin's ESXi server is not in the catalog


def test_an_unreadable_mcp_config_is_never_passed(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A broken .mcp.json is reported as unread (warn), not as 'no VM server'."""
    config = write_config(sim, tmp_path)
    settings = write_host_settings(tmp_path, config)
    (tmp_path / ".mcp.json").write_text("{not json")
    checks = by_name(run_checks(config=str(config), settings_files=[str(settings)], env=env))
    mcp = checks["mcp servers"]
    assert mcp.status == "warn"
    assert "could not read it" in mcp.detail
    assert "no MCP config read here defines" in mcp.detail


def test_the_secret_source_is_checked_even_when_a_cached_token_works(
    sim: SimServer, tmp_path: Path, env: dict[str, str]
) -> None:
    """A token cached by an earlier hook run does not hide an unset variable or a bad file."""
    from zerto_rewind.config import load_settings
    from zerto_rewind.core.state import GuardState
    from zerto_rewind.zvm.client import ZvmClient

    config = write_config(sim, tmp_path)
    settings = load_settings(env, path=str(config))
    with ZvmClient(settings.zvm, token_cache=GuardState(settings.state_dir).token_cache()) as c:
        c.local_site()  # the token is now cached in the state directory
    assert any(Path(settings.state_dir, "tokens").iterdir())
    del env[SECRET_VAR]
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert checks["secret"].status == "fail"
    assert SECRET_VAR in checks["secret"].detail

    secret = tmp_path / "zvm-password"
    secret.write_text(sim.credentials["password"])
    secret.chmod(0o640)  # readable by the group: refused, as the hook would refuse it
    config = write_config(sim, tmp_path, zvm_password_env=None, zvm_password_file=str(secret))
    checks = by_name(run_checks(config=str(config), settings_files=[], env=env))
    assert checks["secret"].status == "fail"
    assert "zvm.password_file" in checks["secret"].detail or str(secret) in checks["secret"].detail
