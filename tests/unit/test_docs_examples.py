"""Every example in README.md and docs/*.md runs: JSON and commands, checked by our parsers.

* ```json blocks: config-shaped ones (a fragment is wrapped in ``{}``; a config without
  ``zvm`` gets a stand-in one) must pass the config parser with every ``vm_arg`` pattern
  compiled; Claude Code hook settings must hold the entry ``install`` writes; MCP
  configs must hold ``command``/``args`` or ``url`` servers; simulator estates must
  pass the estate parser.
* ```bash / ```sh / ```console blocks: each ``zerto-rewind …`` (or ``python -m
  zerto_rewind …``) command must get through its command's argument parsing (nothing
  runs: parsing stops with a sentinel); each ``./scripts/…`` or ``benchmarks/…`` path
  must exist.

Deliberately partial examples are listed in :data:`ALLOWED`, each with its reason.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.cli import main as cli_main
from zerto_rewind.config.parser import Parser
from zerto_rewind.config.schema import TOP
from zerto_rewind.config.settings import validate_patterns
from zerto_rewind.hostconfig.install.settings_file import find_our_hooks
from zerto_rewind.sim.estate import parse_estate

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(json|bash|sh|console)\n(.*?)^```", re.M | re.S)
CONFIG_KEYS = set(TOP.names)  # the config's top-level keys, from its key table
STAND_IN_ZVM = {"url": "https://zvm.example.com", "client_id": "c", "client_secret_env": "S"}

# (file, first line of the block) -> why it is not checked as it stands.
ALLOWED: dict[tuple[str, str], str] = {
    (
        "docs/simulator.md",
        '{"url": "https://127.0.0.1:8443", "ca_bundle": "/tmp/zerto-sim-x/ca.pem",',
    ): "the simulator's ready file (its output, with the secret elided), not an input",
    ("docs/approvals.md", "{"): "a webhook's body (what the guard sends), not an input",
}


def blocks() -> Iterator[tuple[str, int, str, str]]:
    """(file, line, language, body) of every fenced example."""
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            yield str(path.relative_to(ROOT)), line, match.group(1), match.group(2)


def _allowed(name: str, body: str) -> bool:
    first = body.strip().splitlines()[0] if body.strip() else ""
    return (name, first) in ALLOWED


JSON_BLOCKS = [pytest.param(b, id=f"{b[0]}:{b[1]}") for b in blocks() if b[2] == "json"]
SHELL_BLOCKS = [pytest.param(b, id=f"{b[0]}:{b[1]}") for b in blocks() if b[2] != "json"]


def _load_json(body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return json.loads("{" + body + "}")  # a fragment: "key": value, …


@pytest.mark.parametrize("block", JSON_BLOCKS)
def test_json_example(block: tuple[str, int, str, str], tmp_path: Path) -> None:
    """Each JSON example parses and passes the parser of what it shows."""
    name, _line, _lang, body = block
    if _allowed(name, body):
        return
    data = _load_json(body)
    assert isinstance(data, dict)
    if "hooks" in data:
        assert find_our_hooks(data), "hook settings without zerto-rewind's entry"
        for _entry, handler in find_our_hooks(data):
            assert handler["onFailure"] == "block"
            # a standalone hook names its config; a thin hook names its service
            assert (
                " hook --config " in handler["command"] or " hook --service " in handler["command"]
            )
    elif "mcpServers" in data:
        for server in data["mcpServers"].values():
            assert isinstance(server.get("command"), str) or isinstance(server.get("url"), str)
            assert isinstance(server.get("args", []), list)
    elif "vpgs" in data and "tools" not in data:
        parse_estate(data)
    else:
        assert set(data) & CONFIG_KEYS, f"not config-shaped: {sorted(data)}"
        config = {**({} if "zvms" in data else {"zvm": STAND_IN_ZVM}), **data}
        path = tmp_path / "config.json"
        parser = Parser(str(path), str(tmp_path))
        settings = parser.settings(config, {"S": "x"}, loose_permissions=False)
        validate_patterns(settings)
        _real_vsphere_tools(name, config)


# The examples' `vsphere` server is mcvsphere (its tools/list is kept in tests/data).
MCVSPHERE = json.loads((ROOT / "tests/data/servers/mcvsphere.tools.json").read_text())["tools"]
# Tool names that illustrate a rule and are hypothetical on purpose.
HYPOTHETICAL = {
    "mcp__vsphere__get_and_reset": "configuration.md: an exact name beating a read-only glob",
}


def _real_vsphere_tools(name: str, config: dict[str, Any]) -> None:
    """Exact ``mcp__vsphere__`` names are mcvsphere tools, and a ``vm_arg`` is in its schema."""
    schemas = {t["name"]: t.get("inputSchema", {}) for t in MCVSPHERE}
    tools = config.get("tools", {})
    for key in [*config.get("read_only_tools", []), *tools]:
        if not key.startswith("mcp__vsphere__") or "*" in key or "?" in key:
            continue
        if key in HYPOTHETICAL:
            continue
        tool = key.removeprefix("mcp__vsphere__")
        assert tool in schemas, f"{name}: {key}: mcvsphere has no tool {tool!r}"
        vm_arg = tools.get(key, {}).get("vm_arg")
        for path in [vm_arg] if isinstance(vm_arg, str) else vm_arg or []:
            if isinstance(path, str):
                head = path.split(".")[0].removesuffix("[]")
                props = schemas[tool].get("properties", {})
                assert head in props, f"{name}: {key}: vm_arg {path!r} not in {sorted(props)}"


class _Parsed(Exception):
    """Raised once argparse accepted the arguments: nothing after parsing runs."""


def _commands(body: str) -> Iterator[list[str]]:
    """Each command line of a shell block (continuations joined, prompts and output dropped)."""
    joined = re.sub(r"\\\n\s*", " ", body)
    console = any(line.startswith("$ ") for line in joined.splitlines())
    for raw in joined.splitlines():
        line = raw.strip()
        if console:
            if not line.startswith("$ "):
                continue  # output
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        yield shlex.split(line, comments=True)


def _ours(argv: list[str]) -> list[str] | None:
    """The arguments after ``zerto-rewind`` / ``python -m zerto_rewind``, or None."""
    if argv and Path(argv[0]).name == "zerto-rewind":
        return argv[1:]
    if len(argv) >= 3 and Path(argv[0]).name.startswith("python") and argv[1] == "-m":
        module = argv[2]
        if module == "zerto_rewind":
            return argv[3:]
        if module == "zerto_rewind.sim":
            return ["sim", *argv[3:]]
        if module.startswith("zerto_rewind"):
            pytest.fail(f"{module}: document the `zerto-rewind` command instead")
    return None


@pytest.mark.parametrize("block", SHELL_BLOCKS)
def test_shell_example(block: tuple[str, int, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every zerto-rewind command parses; every repository script named exists."""
    name, _line, _lang, body = block
    if _allowed(name, body):
        return
    original = argparse.ArgumentParser.parse_known_args

    def parse_then_stop(self: argparse.ArgumentParser, *a: Any, **k: Any) -> Any:
        original(self, *a, **k)  # SystemExit(2) on a bad argument
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", parse_then_stop)
    for argv in _commands(body):
        if argv[0].startswith(("./scripts/", "scripts/", "benchmarks/")) or (
            len(argv) > 1 and argv[1].startswith("benchmarks/")
        ):
            script = argv[0] if not argv[0].endswith("python") else argv[1]
            assert (ROOT / script).exists(), f"{name}: {script} does not exist"
            continue
        args = _ours(argv)
        if args is None:
            continue  # another program's command (pip, claude, export, pytest…)
        try:
            code = cli_main(args)
        except _Parsed:
            continue
        except SystemExit as stop:
            pytest.fail(f"{name}: `{shlex.join(argv)}` does not parse (exit {stop.code})")
        pytest.fail(f"{name}: `{shlex.join(argv)}` ran without argparse (exit {code})")


def test_the_checker_catches_a_wrong_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt option and a config typo are caught (else the tests above prove nothing)."""
    bad_cli = ("docs/x.md", 1, "bash", "zerto-rewind install claude-code --projct /p\n")
    with pytest.raises(pytest.fail.Exception, match="does not parse"):
        test_shell_example(bad_cli, monkeypatch)
    monkeypatch.undo()
    bad_json = ("docs/x.md", 1, "json", '{"tools": {"mcp__v__x": {"vm_args": "name"}}}')
    with pytest.raises(Exception, match="vm_args"):
        test_json_example(bad_json, Path("/tmp"))
    old_readme = '{"tools": {"mcp__vsphere__power_off_vm": {"vm_arg": "name"}}}'
    with pytest.raises(AssertionError, match="no tool 'power_off_vm'"):
        test_json_example(("README.md", 1, "json", old_readme), Path("/tmp"))
    old_install = '"tools": {"mcp__vsphere__power_off": {"vm_arg": "vm"}}'
    with pytest.raises(AssertionError, match="vm_arg 'vm' not in"):
        test_json_example(("docs/install.md", 1, "json", old_install), Path("/tmp"))
