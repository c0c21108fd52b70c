"""Loading and validating the config file and the environment (config.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.config import write_config
from unit.config.config_helpers import ENV, ZVM, config_error, load
from zerto_rewind.config import (
    config_path,
    default_log_path,
    load_settings,
    validate_patterns,
)
from zerto_rewind.errors import ConfigError


def test_minimal_config_loads_with_defaults(tmp_path: Path) -> None:
    """A zvm section alone is a valid config; everything else takes its default."""
    s = load(tmp_path, {"zvm": {**ZVM, "url": "https://zvm.example/"}})
    assert s.path == str(tmp_path / "config.json")
    assert s.zvm.url == "https://zvm.example"
    assert (s.zvm.grant, s.zvm.client_id, s.zvm.username) == ("client_credentials", "rewind", None)
    assert s.zvm.secret(ENV) == "from-env"
    assert s.catalog.read_only == ()
    assert s.catalog.tools == {}
    assert (s.catalog.unknown, s.catalog.unknown_source) == ("prompt", "default")
    assert s.guard.timeout_s == 150.0
    assert (s.guard.on_pending, s.guard.prompt_as) == ("deny", "ask")
    assert s.guard.site_cadence_s["aws"] == 630.0
    assert s.allow_live_recovery is False
    assert s.log_path == "/home/op/.local/state/zerto-rewind/decisions.log"
    assert s.state_dir == "/home/op/.local/state/zerto-rewind"


def test_missing_file_names_path_and_variable(tmp_path: Path) -> None:
    """A missing file names the path and says how to point at one."""
    missing = str(tmp_path / "nope.json")
    with pytest.raises(ConfigError) as info:
        load_settings(ENV, path=missing)
    assert info.value.path == missing
    assert str(info.value).startswith(f"{missing}: ")
    assert "not found" in str(info.value)
    assert "ZERTO_REWIND_CONFIG" in str(info.value)


def test_directory_instead_of_file_is_a_config_error(tmp_path: Path) -> None:
    """A path that cannot be read as a file is a ConfigError naming it, not an OSError."""
    with pytest.raises(ConfigError, match="cannot read") as info:
        load_settings(ENV, path=str(tmp_path))
    assert info.value.path == str(tmp_path)


@pytest.mark.parametrize("text", ['{"zvm": ', "", "{'zvm': {}}", '{"zvm": {}} {}', "NaN"])
def test_invalid_json_names_file(tmp_path: Path, text: str) -> None:
    """Text that is not one JSON document is reported with the file name."""
    error = config_error(tmp_path, text)
    assert error.path == str(tmp_path / "config.json")
    assert "not valid JSON" in str(error)


@pytest.mark.parametrize("raw", [[], "zvm", 3, None])
def test_top_level_must_be_an_object(tmp_path: Path, raw: Any) -> None:
    """The document must be an object; the message says what it is instead."""
    error = config_error(tmp_path, json.dumps(raw))
    assert "must be a JSON object" in error.detail


def test_comment_keys_are_ignored(tmp_path: Path) -> None:
    """Keys starting with _ or $ are comments and schema links, not errors."""
    s = load(tmp_path, {"$schema": "x", "_note": "hi", "zvm": {**ZVM, "_why": "lab"}})
    assert s.zvm.url == ZVM["url"]


# ------------------------------------------------------- every error: file, key, problem

BAD_CONFIGS: list[tuple[dict[str, Any], str, str]] = [
    ({}, "zvm", "missing"),
    ({"zvm": ZVM, "typo": 1}, "typo", "unknown key"),
    ({"zvm": {**ZVM, "port": 9}}, "zvm.port", "unknown key"),
    ({"zvm": {**ZVM, "url": "zvm.example"}}, "zvm.url", "https://"),
    ({"zvm": {**ZVM, "url": "https://"}}, "zvm.url", "https://"),
    ({"zvm": {**ZVM, "url": ""}}, "zvm.url", "non-empty string"),
    ({"zvm": {k: v for k, v in ZVM.items() if k != "client_id"}}, "zvm.client_id", "string"),
    ({"zvm": {**ZVM, "client_secret_file": "s"}}, "zvm.client_secret", "set only one of"),
    (
        {"zvm": {"url": ZVM["url"], "client_id": "rewind"}},
        "zvm.client_secret",
        "missing: give exactly one of",
    ),
    ({"zvm": {**ZVM, "username": "op"}}, "zvm", "not both"),
    ({"zvm": {"url": ZVM["url"], "username": "op"}}, "zvm.password", "missing"),
    ({"zvm": {"url": ZVM["url"], "password_env": "P"}}, "zvm.username", "string"),
    ({"zvm": {**ZVM, "verify_tls": "no"}}, "zvm.verify_tls", "true or false"),
    ({"zvm": {**ZVM, "verify_tls": False, "ca_bundle": "ca.pem"}}, "zvm.verify_tls", "ca_bundle"),
    ({"zvm": {**ZVM, "read_timeout_s": 0}}, "zvm.read_timeout_s", "greater than 0"),
    ({"zvm": ZVM, "read_only_tools": "x"}, "read_only_tools", "must be a list"),
    ({"zvm": ZVM, "read_only_tools": ["a", ""]}, "read_only_tools[1]", "non-empty string"),
    ({"zvm": ZVM, "read_only_tools": ["a", "a"]}, "read_only_tools", "'a' twice"),
    ({"zvm": ZVM, "tools": ["a"]}, "tools", "must be a JSON object"),
    ({"zvm": ZVM, "tools": {"a": []}}, "tools.a", "must be a JSON object"),
    ({"zvm": ZVM, "tools": {"a": {"vm": "x"}}}, "tools.a.vm", "unknown key"),
    ({"zvm": ZVM, "tools": {"a": {"vm_arg": []}}}, "tools.a.vm_arg", "empty list"),
    ({"zvm": ZVM, "tools": {"a": {"vm_arg": 3}}}, "tools.a.vm_arg", "non-empty string"),
    ({"zvm": ZVM, "tools": {"a": {"vm_arg": "vms[0]"}}}, "tools.a.vm_arg", "dotted path"),
    ({"zvm": ZVM, "tools": {"a": {"vm_arg": "vm..name"}}}, "tools.a.vm_arg", "dotted path"),
    ({"zvm": ZVM, "tools": {"a": {"vm_arg": ["x", "[]"]}}}, "tools.a.vm_arg[1]", "dotted path"),
    (
        {"zvm": ZVM, "tools": {"a": {"vm_arg": {"pattern": "(?P<vm>x)"}}}},
        "tools.a.vm_arg.path",
        "non-empty string",
    ),
    (
        {"zvm": ZVM, "tools": {"a": {"vm_arg": {"path": "x", "regex": "y"}}}},
        "tools.a.vm_arg.regex",
        "unknown key",
    ),
    (
        {"zvm": ZVM, "tools": {"a": {"vm_arg": "x", "vm_map": {"strip_domain": "yes"}}}},
        "tools.a.vm_map.strip_domain",
        "true or false",
    ),
    ({"zvm": ZVM, "vm_map": {"aliases": ["a"]}}, "vm_map.aliases", "object of alias"),
    ({"zvm": ZVM, "vm_map": {"aliases": {"a": ""}}}, "vm_map.aliases.a", "non-empty string"),
    ({"zvm": ZVM, "vm_map": {"strip_domain": [""]}}, "vm_map.strip_domain", "non-empty string"),
    (
        {"zvm": ZVM, "read_only_tools": ["mcp__v__x"], "tools": {"mcp__v__x": {}}},
        "tools",
        "also in read_only_tools",
    ),
    (
        {"zvm": ZVM, "read_only_tools": ["mcp__v__*"], "tools": {"mcp__v__*": {}}},
        "tools",
        "also in read_only_tools",
    ),
    ({"zvm": ZVM, "unknown_tools": "ALLOW"}, "unknown_tools", "one of prompt, allow, deny"),
    ({"zvm": ZVM, "unknown_tools": "ignore"}, "unknown_tools", "one of prompt, allow, deny"),
    ({"zvm": ZVM, "guard": []}, "guard", "must be a JSON object"),
    ({"zvm": ZVM, "guard": {"timeout": 5}}, "guard.timeout", "unknown key"),
    ({"zvm": ZVM, "guard": {"timeout_s": 0}}, "guard.timeout_s", "greater than 0"),
    ({"zvm": ZVM, "guard": {"timeout_s": -5}}, "guard.timeout_s", "greater than 0"),
    ({"zvm": ZVM, "guard": {"timeout_s": "10"}}, "guard.timeout_s", "'10'"),
    ({"zvm": ZVM, "guard": {"timeout_s": True}}, "guard.timeout_s", "True"),
    ({"zvm": ZVM, "guard": {"timeout_s": None}}, "guard.timeout_s", "None"),
    ({"zvm": ZVM, "guard": {"on_pending": "wait"}}, "guard.on_pending", "deny, prompt, defer"),
    ({"zvm": ZVM, "guard": {"prompt_as": "allow"}}, "guard.prompt_as", "ask, deny"),
    ({"zvm": ZVM, "guard": {"overdue_factor": 0.5}}, "guard.overdue_factor", "1"),
    ({"zvm": ZVM, "guard": {"cadence_s": {"vpg-a": 0}}}, "guard.cadence_s.vpg-a", "greater"),
    ({"zvm": ZVM, "guard": {"cadence_s": [5]}}, "guard.cadence_s", "name -> seconds"),
    ({"zvm": ZVM, "guard": {"site_cadence_s": {"mars": 5}}}, "guard.site_cadence_s.mars", "kind"),
    ({"zvm": ZVM, "guard": {"site_types": {"x": "aws"}}}, "guard.site_types.x", "numbers"),
    ({"zvm": ZVM, "guard": {"site_types": {"3": "moon"}}}, "guard.site_types.3", "one of"),
    ({"zvm": ZVM, "guard": {"tag_prefix": "x" * 41}}, "guard.tag_prefix", "at most 40"),
    ({"zvm": ZVM, "recovery": {"allow_live": 1}}, "recovery.allow_live", "true or false"),
    ({"zvm": ZVM, "recovery": {"live": True}}, "recovery.live", "unknown key"),
    ({"zvm": ZVM, "state_dir": 7}, "state_dir", "non-empty string"),
    ({"zvm": ZVM, "log": ""}, "log", "non-empty string"),
]


@pytest.mark.parametrize(("raw", "key", "problem"), BAD_CONFIGS)
def test_invalid_config_names_file_key_and_problem(
    tmp_path: Path, raw: dict[str, Any], key: str, problem: str
) -> None:
    """Each invalid config gives one ConfigError: '<file>: <dotted key>: <what is wrong>'."""
    error = config_error(tmp_path, raw)
    path = str(tmp_path / "config.json")
    assert (error.path, error.key) == (path, key)
    assert problem in error.detail
    assert str(error) == f"{path}: {key}: {error.detail}"


@pytest.mark.parametrize(
    ("raw", "key", "meant"),
    [
        ({"zvm": ZVM, "guard": {"timout_s": 5}}, "guard.timout_s", "timeout_s"),
        ({"zvm": {**ZVM, "verify_ssl": False}}, "zvm.verify_ssl", "verify_tls"),
        ({"zvm": ZVM, "read_only_tool": []}, "read_only_tool", "read_only_tools"),
    ],
)
def test_a_mistyped_key_is_answered_with_did_you_mean(
    tmp_path: Path, raw: dict[str, Any], key: str, meant: str
) -> None:
    """A near miss names the key that was probably meant, as the advice."""
    error = config_error(tmp_path, raw)
    assert error.key == key
    assert error.detail.startswith(f"unknown key; did you mean {meant!r}? (known keys: ")
    assert error.advice.startswith(f"did you mean {meant!r}?")


def test_a_key_like_no_other_gets_only_the_list(tmp_path: Path) -> None:
    error = config_error(tmp_path, {"zvm": ZVM, "guard": {"zzqx": 1}})
    assert error.detail.startswith("unknown key (known keys: ")
    assert "did you mean" not in error.detail


def test_non_finite_timeout_in_file_is_refused(tmp_path: Path) -> None:
    """A timeout that overflows to infinity (1e999) is refused, as the variable's inf is."""
    text = json.dumps({"zvm": ZVM}).removesuffix("}") + ', "guard": {"timeout_s": 1e999}}'
    error = config_error(tmp_path, text)
    assert error.key == "guard.timeout_s"


def test_huge_integer_timeout_is_a_config_error(tmp_path: Path) -> None:
    """An integer too large for a float is a ConfigError on its key, not an OverflowError."""
    text = json.dumps({"zvm": ZVM, "guard": {"timeout_s": 10**400}})
    error = config_error(tmp_path, text)
    assert error.key == "guard.timeout_s"


def test_non_ascii_digit_site_type_is_a_config_error(tmp_path: Path) -> None:
    """A site_types key like '²' (isdigit but not an int) is a ConfigError, not a ValueError."""
    error = config_error(tmp_path, {"zvm": ZVM, "guard": {"site_types": {"²": "aws"}}})
    assert error.key == "guard.site_types.²"


def test_hook_denies_when_loader_chokes(tmp_path: Path) -> None:
    """A config the loader cannot read makes the hook deny with a reason, not crash (exit 1)."""
    path = str(write_config(tmp_path, {"zvm": ZVM, "guard": {"site_types": {"²": "aws"}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}
    env.update(HOME=str(tmp_path), ZERTO_HOOK_LOG=str(tmp_path / "log"), ZS="x")
    payload = json.dumps({"tool_name": "mcp__vsphere__power_off", "tool_input": {"name": "a"}})
    proc = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "hook", "--config", path],
        input=payload.encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**300), max_value=10**300)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(max_codepoint=127), max_size=6)
)
_json_any = st.recursive(
    _json_scalars,
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(st.text(alphabet="abcdefg_3.[]", max_size=6), kids, max_size=3)
    ),
    max_leaves=8,
)
_section_keys = st.sampled_from(
    ["read_only_tools", "tools", "vm_map", "unknown_tools", "guard", "recovery", "log"]
)
_guard_keys = st.sampled_from(
    ["timeout_s", "on_pending", "prompt_as", "cadence_s", "site_cadence_s", "site_types",
     "landing_allowance_s", "overdue_factor", "overdue_min_s", "vm_cache_ttl_s", "tag_prefix"]
)  # fmt: skip


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.dictionaries(_section_keys, _json_any, max_size=3),
    st.dictionaries(_guard_keys, _json_any, max_size=3),
)
def test_any_shape_is_loaded_or_config_error(
    tmp_path: Path, sections: dict[str, Any], guard: dict[str, Any]
) -> None:
    """Whatever JSON sits under the known keys, loading succeeds or raises ConfigError."""
    raw = {"zvm": ZVM, **sections}
    if guard:
        raw["guard"] = guard
    prefix = str(tmp_path / "config.json") + ": "
    message: str | None = None
    try:
        loaded = load(tmp_path, raw)
    except ConfigError as exc:
        message = str(exc)
    if message is not None:
        assert message.startswith(prefix)
        assert len(message) > len(prefix), "the error names the key and the problem"
    else:
        assert loaded.zvm.url == ZVM["url"]
        assert loaded.guard.timeout_s > 0


# ------------------------------------------------------------------------ secrets


def test_secret_from_env_is_read_when_asked(tmp_path: Path) -> None:
    """client_secret_env names a variable read at use time; unset names the variable."""
    s = load(tmp_path, {"zvm": ZVM})
    assert s.zvm.secret({"ZS": "abc"}) == "abc"
    assert s.zvm.secret_hint == "$ZS"
    with pytest.raises(ConfigError, match="ZS"):
        s.zvm.secret({})
    with pytest.raises(ConfigError, match="ZS"):
        s.zvm.secret({"ZS": ""})


def test_secret_file_relative_to_config_dir(tmp_path: Path) -> None:
    """client_secret_file is resolved against the config's directory and read stripped."""
    (tmp_path / "secrets").mkdir()
    secret = tmp_path / "secrets" / "zvm.secret"
    secret.write_text("  file-secret\n")
    secret.chmod(0o600)
    zvm = {"url": ZVM["url"], "client_id": "rewind", "client_secret_file": "secrets/zvm.secret"}
    s = load(tmp_path, {"zvm": zvm})
    assert s.zvm.secret_hint == str(secret)
    assert s.zvm.secret() == "file-secret"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_secret_file_readable_by_others_refused(tmp_path: Path, mode: int) -> None:
    """A secret file that group or others can read is refused with the chmod to run."""
    secret = tmp_path / "zvm.secret"
    secret.write_text("file-secret")
    secret.chmod(mode)
    zvm = {"url": ZVM["url"], "client_id": "rewind", "client_secret_file": str(secret)}
    s = load(tmp_path, {"zvm": zvm})
    with pytest.raises(ConfigError) as info:
        s.zvm.secret()
    assert f"chmod 600 {secret}" in str(info.value)
    assert f"{mode:04o}" in str(info.value)


@pytest.mark.parametrize(("content", "problem"), [("", "empty"), (None, "cannot read")])
def test_secret_file_empty_or_missing(tmp_path: Path, content: str | None, problem: str) -> None:
    """An empty or missing secret file is a ConfigError naming the file."""
    secret = tmp_path / "zvm.secret"
    if content is not None:
        secret.write_text(content)
        secret.chmod(0o600)
    zvm = {"url": ZVM["url"], "client_id": "rewind", "client_secret_file": "zvm.secret"}
    s = load(tmp_path, {"zvm": zvm})
    with pytest.raises(ConfigError, match=problem) as info:
        s.zvm.secret()
    assert str(secret) in str(info.value)


def test_secret_file_error_names_config_key(tmp_path: Path) -> None:
    """A bad secret file's error names the config file and the key that points at it."""
    secret = tmp_path / "zvm.secret"
    secret.write_text("file-secret")
    secret.chmod(0o644)
    zvm = {"url": ZVM["url"], "client_id": "rewind", "client_secret_file": "zvm.secret"}
    s = load(tmp_path, {"zvm": zvm})
    with pytest.raises(ConfigError) as info:
        s.zvm.secret()
    assert not str(info.value).startswith("environment:")
    assert info.value.key == "zvm.client_secret_file"


def test_inline_secret_accepted_in_private_file(tmp_path: Path) -> None:
    """An inline client_secret is fine in a 0600 config and never shows in repr."""
    zvm = {"url": ZVM["url"], "client_id": "rewind", "client_secret": "inline-s3cret"}
    s = load(tmp_path, {"zvm": zvm}, mode=0o600)
    assert s.zvm.secret() == "inline-s3cret"
    assert "inline-s3cret" not in repr(s.zvm)
    assert "inline-s3cret" not in s.zvm.secret_hint


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
@pytest.mark.parametrize("key", ["client_secret", "password"])
def test_inline_secret_refused_when_config_readable(tmp_path: Path, mode: int, key: str) -> None:
    """An inline secret in a group/other-readable config is refused, naming the key and fix."""
    zvm: dict[str, Any] = {"url": ZVM["url"], key: "inline-s3cret"}
    zvm.update({"client_id": "rewind"} if key == "client_secret" else {"username": "op"})
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"zvm": zvm}, mode=mode)
    assert info.value.key == f"zvm.{key}"
    assert "chmod 600" in info.value.detail
    assert f"zvm.{key}_env" in info.value.detail
    assert "inline-s3cret" not in str(info.value)


def test_env_secret_allowed_in_readable_config(tmp_path: Path) -> None:
    """A config that names its secret's variable may be world-readable."""
    s = load(tmp_path, {"zvm": ZVM}, mode=0o644)
    assert s.zvm.secret(ENV) == "from-env"


def test_password_grant(tmp_path: Path) -> None:
    """username + password_env selects the password grant with Zerto's default client id."""
    zvm = {"url": ZVM["url"], "username": "op", "password_env": "ZP"}
    s = load(tmp_path, {"zvm": zvm})
    assert (s.zvm.grant, s.zvm.username, s.zvm.client_id) == ("password", "op", "zerto-client")
    assert s.zvm.secret({"ZP": "pw"}) == "pw"


def test_zvm_paths_resolved_against_config_dir(tmp_path: Path) -> None:
    """ca_bundle, state_dir and log given relative are resolved from the config's directory."""
    sub = tmp_path / "etc"
    sub.mkdir()
    raw = {
        "zvm": {**ZVM, "ca_bundle": "../pki/ca.pem"},
        "state_dir": "state",
        "log": "logs/decisions.log",
    }
    s = load(sub, raw)
    assert s.zvm.ca_bundle == str(tmp_path / "pki" / "ca.pem")
    assert s.state_dir == str(sub / "state")
    assert s.log_path == str(sub / "logs" / "decisions.log")


def test_absolute_and_home_paths_kept(tmp_path: Path) -> None:
    """Absolute paths stay as given and ~ expands to the user's home."""
    raw = {"zvm": {**ZVM, "ca_bundle": "/etc/pki/ca.pem"}, "log": "~/zr.log"}
    s = load(tmp_path, raw)
    assert s.zvm.ca_bundle == "/etc/pki/ca.pem"
    assert s.log_path == os.path.expanduser("~/zr.log")


# -------------------------------------------------------------- environment precedence


def test_config_path_precedence(tmp_path: Path) -> None:
    """ZERTO_REWIND_CONFIG > $XDG_CONFIG_HOME/zerto-rewind > ~/.config/zerto-rewind."""
    named = {"ZERTO_REWIND_CONFIG": "~/c.json", "XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}
    assert config_path(named) == os.path.expanduser("~/c.json")
    assert config_path({"ZERTO_REWIND_CONFIG": "  ", "XDG_CONFIG_HOME": "/xdg"}) == (
        "/xdg/zerto-rewind/config.json"
    )
    assert config_path({"HOME": "/h"}) == "/h/.config/zerto-rewind/config.json"


def test_load_uses_zerto_rewind_config(tmp_path: Path) -> None:
    """Without a path argument the file named by ZERTO_REWIND_CONFIG is loaded."""
    path = str(write_config(tmp_path, {"zvm": ZVM}))
    assert load_settings({**ENV, "ZERTO_REWIND_CONFIG": path}).path == path


def test_default_log_path(tmp_path: Path) -> None:
    """ZERTO_HOOK_LOG names the log, else the XDG state path; the old default
    ~/.zerto-guard-hook.log while it exists; no config needed."""
    assert default_log_path({"HOME": "/h"}) == "/h/.local/state/zerto-rewind/decisions.log"
    xdg = {"HOME": "/h", "XDG_STATE_HOME": "/s"}
    assert default_log_path(xdg) == "/s/zerto-rewind/decisions.log"
    home = {"HOME": str(tmp_path)}
    (tmp_path / ".zerto-guard-hook.log").write_text("")
    assert default_log_path(home) == str(tmp_path / ".zerto-guard-hook.log")
    assert load(tmp_path, {"zvm": ZVM}, home).log_path == str(tmp_path / ".zerto-guard-hook.log")
    assert default_log_path({"HOME": "/h", "ZERTO_HOOK_LOG": " /var/log/z.log "}) == (
        "/var/log/z.log"
    )


def test_log_env_beats_config(tmp_path: Path) -> None:
    """ZERTO_HOOK_LOG wins over the config's log."""
    s = load(tmp_path, {"zvm": ZVM, "log": "here.log"}, {"ZERTO_HOOK_LOG": "/env.log"})
    assert s.log_path == "/env.log"


def test_state_dir_precedence(tmp_path: Path) -> None:
    """ZERTO_REWIND_STATE_DIR > config state_dir > $XDG_STATE_HOME > ~/.local/state."""
    raw = {"zvm": ZVM, "state_dir": "st"}
    assert load(tmp_path, raw, {"ZERTO_REWIND_STATE_DIR": "/env-st"}).state_dir == "/env-st"
    assert load(tmp_path, raw, {"XDG_STATE_HOME": "/xs"}).state_dir == str(tmp_path / "st")
    plain = {"zvm": ZVM}
    assert load(tmp_path, plain, {"XDG_STATE_HOME": "/xs"}).state_dir == "/xs/zerto-rewind"


@pytest.mark.parametrize(
    ("config_value", "env_value", "expected"),
    [
        (None, None, ("prompt", "default")),
        ("allow", None, ("allow", "config")),
        ("deny", None, ("deny", "config")),
        ("allow", "deny", ("deny", "ZERTO_HOOK_UNKNOWN")),
        (None, "allow", ("allow", "ZERTO_HOOK_UNKNOWN")),
        ("deny", " PROMPT ", ("prompt", "ZERTO_HOOK_UNKNOWN")),
        ("deny", "  ", ("deny", "config")),
    ],
)
def test_unknown_tools_precedence(
    tmp_path: Path, config_value: str | None, env_value: str | None, expected: tuple[str, str]
) -> None:
    """Unlisted tools: ZERTO_HOOK_UNKNOWN > config unknown_tools > prompt."""
    raw: dict[str, Any] = {"zvm": ZVM}
    if config_value is not None:
        raw["unknown_tools"] = config_value
    env = {} if env_value is None else {"ZERTO_HOOK_UNKNOWN": env_value}
    catalog = load(tmp_path, raw, env).catalog
    assert (catalog.unknown, catalog.unknown_source) == expected


@pytest.mark.parametrize("value", ["ask", "yes", "allowed", "1"])
def test_invalid_unknown_variable_is_config_error(tmp_path: Path, value: str) -> None:
    """An invalid ZERTO_HOOK_UNKNOWN is a ConfigError naming the variable and the choices."""
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"zvm": ZVM, "unknown_tools": "allow"}, {"ZERTO_HOOK_UNKNOWN": value})
    assert "ZERTO_HOOK_UNKNOWN" in str(info.value)
    assert "prompt, allow, deny" in str(info.value)
    assert repr(value.strip().lower()) in str(info.value)


@pytest.mark.parametrize(("value", "expected"), [("30", 30.0), (" 2.5 ", 2.5), ("1e2", 100.0)])
def test_guard_timeout_variable_overrides_config(
    tmp_path: Path, value: str, expected: float
) -> None:
    """ZERTO_HOOK_GUARD_TIMEOUT replaces guard.timeout_s."""
    raw = {"zvm": ZVM, "guard": {"timeout_s": 90}}
    assert load(tmp_path, raw).guard.timeout_s == 90.0
    assert load(tmp_path, raw, {"ZERTO_HOOK_GUARD_TIMEOUT": value}).guard.timeout_s == expected


@pytest.mark.parametrize("value", ["0", "-1", "-0.5", "nan", "NaN", "inf", "-inf", "1e999", "ten"])
def test_invalid_guard_timeout_variable_is_config_error(tmp_path: Path, value: str) -> None:
    """0, negative, nan, inf or text in ZERTO_HOOK_GUARD_TIMEOUT is a ConfigError naming it."""
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"zvm": ZVM}, {"ZERTO_HOOK_GUARD_TIMEOUT": value})
    assert "ZERTO_HOOK_GUARD_TIMEOUT" in str(info.value)
    assert repr(value) in str(info.value)


def test_empty_guard_timeout_variable_means_unset(tmp_path: Path) -> None:
    """A blank ZERTO_HOOK_GUARD_TIMEOUT is ignored, not an error."""
    s = load(tmp_path, {"zvm": ZVM}, {"ZERTO_HOOK_GUARD_TIMEOUT": "  "})
    assert s.guard.timeout_s == 150.0


# ----------------------------------------------------------------- catalog section


def test_catalog_entries_parsed(tmp_path: Path) -> None:
    """Tool specs keep their vm_arg forms, and vm_maps are normalised."""
    raw = {
        "zvm": ZVM,
        "read_only_tools": ["mcp__vsphere__list_vms", "mcp__vsphere__get_*"],
        "tools": {
            "mcp__vsphere__power_off": {"vm_arg": "vm.name"},
            "mcp__vsphere__bulk": {"vm_arg": ["vms[]", "name"]},
            "mcp__ssh__exec": {
                "vm_arg": {"path": "command", "pattern": r"ssh (?P<vm>\S+)"},
                "vm_map": {"aliases": {"WEB": "web01"}, "strip_domain": True},
            },
            "mcp__noarg__*": {},
        },
        "vm_map": {"strip_domain": ["Corp.Example", ".lab.local"]},
    }
    catalog = load(tmp_path, raw).catalog
    assert catalog.read_only == ("mcp__vsphere__list_vms", "mcp__vsphere__get_*")
    power = catalog.tools["mcp__vsphere__power_off"]
    assert [(p.path, p.parts, p.pattern) for p in power.vm_arg] == [
        ("vm.name", ("vm", "name"), None)
    ]
    assert power.vm_map is None
    assert [p.path for p in catalog.tools["mcp__vsphere__bulk"].vm_arg] == ["vms[]", "name"]
    ssh = catalog.tools["mcp__ssh__exec"]
    assert [(p.path, p.pattern) for p in ssh.vm_arg] == [("command", r"ssh (?P<vm>\S+)")]
    assert ssh.vm_map is not None
    assert ssh.vm_map.aliases == {"WEB": "web01"}  # exact: matching never folds case
    assert ssh.vm_map.strip_domain is True
    assert catalog.tools["mcp__noarg__*"].vm_arg == ()
    assert catalog.vm_map is not None
    assert catalog.vm_map.strip_domain == ("Corp.Example", "lab.local")


def test_exact_name_and_overlapping_pattern_may_coexist(tmp_path: Path) -> None:
    """A read-only exact name inside a mutating pattern is not a conflict (exact wins later)."""
    raw = {"zvm": ZVM, "read_only_tools": ["mcp__v__list"], "tools": {"mcp__v__*": {}}}
    catalog = load(tmp_path, raw).catalog
    assert "mcp__v__list" in catalog.read_only
    assert "mcp__v__*" in catalog.tools
    from zerto_rewind.core.catalog import MUTATING, READ_ONLY, classify

    listed = classify("mcp__v__list", {}, catalog)
    assert (listed.kind, listed.entry) == (READ_ONLY, "mcp__v__list")  # the exact name wins
    other = classify("mcp__v__power_off", {}, catalog)
    assert (other.kind, other.entry) == (MUTATING, "mcp__v__*")  # the pattern still applies


def test_validate_patterns_accepts_named_vm_group(tmp_path: Path) -> None:
    """A vm_arg pattern with a (?P<vm>...) group passes validation."""
    raw = {"zvm": ZVM, "tools": {"t": {"vm_arg": {"path": "c", "pattern": r"@(?P<vm>\w+)"}}}}
    validate_patterns(load(tmp_path, raw))


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [(r"ssh (\S+", "not a valid regular expression"), (r"ssh (\S+)", "named group (?P<vm>")],
)
def test_validate_patterns_rejects_bad_regex(tmp_path: Path, pattern: str, problem: str) -> None:
    """A broken regex, or one without the vm group, is a ConfigError on the pattern's key."""
    raw = {"zvm": ZVM, "tools": {"t": {"vm_arg": ["name", {"path": "c", "pattern": pattern}]}}}
    s = load(tmp_path, raw)
    with pytest.raises(ConfigError) as info:
        validate_patterns(s)
    assert info.value.path == s.path
    assert info.value.key == "tools.t.vm_arg.pattern"
    assert problem in info.value.detail


# ------------------------------------------------------------------- guard section


def test_guard_section_values(tmp_path: Path) -> None:
    """Every guard knob is read, and site cadences merge over the defaults."""
    raw = {
        "zvm": ZVM,
        "guard": {
            "timeout_s": 40,
            "on_pending": "defer",
            "prompt_as": "deny",
            "cadence_s": {"VPG-A": 12},
            "site_cadence_s": {"aws": 300},
            "site_types": {"3": "aws", "7": "azure"},
            "landing_allowance_s": 1.5,
            "overdue_factor": 4,
            "overdue_min_s": 30,
            "vm_cache_ttl_s": 0,
            "tag_prefix": "zr",
        },
        "recovery": {"allow_live": True},
    }
    s = load(tmp_path, raw)
    g = s.guard
    assert (g.timeout_s, g.on_pending, g.prompt_as) == (40.0, "defer", "deny")
    assert g.cadence_s == {"VPG-A": 12.0}
    assert g.site_cadence_s["aws"] == 300.0
    assert g.site_cadence_s["vcenter"] == 5.0
    assert g.site_types == {3: "aws", 7: "azure"}
    assert (g.landing_allowance_s, g.overdue_factor, g.overdue_min_s) == (1.5, 4.0, 30.0)
    assert (g.vm_cache_ttl_s, g.tag_prefix) == (0.0, "zr")
    assert s.allow_live_recovery is True
