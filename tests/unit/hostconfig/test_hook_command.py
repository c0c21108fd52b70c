"""HookCommand: what an installer writes, the doctor reads back, field for field."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerto_rewind.hostconfig.hook_command import FLAGS, HookCommand

CODE = "from zerto_rewind.claude_code.hook import run; run()"
THIN_CODE = "from zerto_rewind.claude_code.thin_hook import run; run()"
AGENT_CODE = "from zerto_rewind.agent_hooks.hook import run; run()"

# The three shapes the installers write, as they wrote them before HookCommand.
WRITTEN = [
    (
        "/v/bin/python -S -c 'from zerto_rewind.claude_code.hook import run; run()' hook "
        "--config /etc/zr/config.toml --config-sha256 ab12 --settings '/p q/.claude/settings.json'"
        " --all-tools --mcp-server zr",
        HookCommand(
            ("/v/bin/python", "-S", "-c", CODE, "hook"),
            config="/etc/zr/config.toml",
            config_sha256="ab12",
            settings="/p q/.claude/settings.json",
            all_tools=True,
            mcp_server="zr",
        ),
    ),
    (
        "/v/bin/python -c 'from zerto_rewind.claude_code.thin_hook import run; run()' hook "
        "--service unix:/run/zr/guard.sock --service-user 991 --budget 40",
        HookCommand(
            ("/v/bin/python", "-c", THIN_CODE, "hook"),
            service="unix:/run/zr/guard.sock",
            service_user="991",
            budget="40",
        ),
    ),
    (
        "/v/bin/python -c 'from zerto_rewind.agent_hooks.hook import run; run()' hook --host "
        "gemini --service https://g:8443 --token-file /t --ca-file /ca --servers vsphere,vc2 "
        "--prompt-as deny --protect /h/.gemini/settings.json --protect /etc/gw.toml --budget 20",
        HookCommand(
            ("/v/bin/python", "-c", AGENT_CODE, "hook"),
            host="gemini",
            service="https://g:8443",
            token_file="/t",
            ca_file="/ca",
            servers=("vsphere", "vc2"),
            prompt_as="deny",
            protect=("/h/.gemini/settings.json", "/etc/gw.toml"),
            budget="20",
        ),
    ),
]


@pytest.mark.parametrize(("text", "command"), WRITTEN)
def test_each_written_shape_renders_and_parses_back(text: str, command: HookCommand) -> None:
    assert command.render() == text
    assert HookCommand.parse(text) == command
    assert command.runs_hook


def test_launcher_for_is_the_launch_line_install_writes() -> None:
    # -P: the working directory (the agent's) is never on the hook's sys.path
    assert HookCommand.launcher_for("/p", CODE, isolated=True) == (
        "/p", "-S", "-P", "-c", CODE, "hook"
    )  # fmt: skip
    assert HookCommand.launcher_for("/p", CODE) == ("/p", "-P", "-c", CODE, "hook")
    assert HookCommand(HookCommand.launcher_for("/p", CODE)).code == CODE


def test_what_the_doctor_needs_from_an_older_or_hand_written_command() -> None:
    old = HookCommand.parse("ZERTO_REWIND_CONFIG=/c.toml /usr/bin/zerto-rewind hook --x 1")
    assert old.env == (("ZERTO_REWIND_CONFIG", "/c.toml"),)
    assert old.program == "/usr/bin/zerto-rewind"
    assert old.config_path == "/c.toml"
    assert old.extra == ("--x", "1")  # an unknown word is kept, and rendered back
    assert old.render() == "ZERTO_REWIND_CONFIG=/c.toml /usr/bin/zerto-rewind hook --x 1"
    assert HookCommand.parse("python -m zerto_rewind --config /a").runs_hook is False
    assert HookCommand.parse("p -c C hook --config /a --config /b").config == "/b"  # last wins
    assert HookCommand.parse("p -c C hook --config").extra == ("--config",)


def test_service_options_and_budget_are_what_the_client_reads() -> None:
    thin = HookCommand.parse(WRITTEN[1][0])
    assert thin.service_options() == {"service": "unix:/run/zr/guard.sock", "service_user": "991"}
    assert thin.budget_s(25.0) == 40.0
    assert HookCommand(("p",), budget="soon").budget_s(25.0) == 25.0
    assert HookCommand(("p",)).budget_s(25.0) == 25.0


@pytest.mark.parametrize("text", ["", "   ", "A=1", "p -c 'unclosed"])
def test_a_command_that_cannot_be_read_says_why(text: str) -> None:
    with pytest.raises(ValueError, match=r"no command|not valid shell"):
        HookCommand.parse(text)


def test_the_flag_table_covers_every_option_field() -> None:
    options = set(HookCommand.__slots__) - {"launcher", "env", "extra"}
    assert set(FLAGS.values()) == options


_word = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
)
_value = _word.filter(lambda w: not w.startswith("--"))
_maybe = st.none() | _value
_server = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)


@given(
    python=_value,
    code=_value,
    isolated=st.booleans(),
    values=st.fixed_dictionaries(
        {name: _maybe for name in FLAGS.values() if name not in ("all_tools", "servers", "protect")}
    ),
    all_tools=st.booleans(),
    servers=st.none() | st.lists(_server, max_size=3).map(tuple),
    protect=st.lists(_value, max_size=3).map(tuple),
    env=st.lists(st.tuples(st.sampled_from(["A", "ZERTO_REWIND_CONFIG"]), _value), max_size=2),
)
def test_any_command_parses_back_to_itself(
    python: str,
    code: str,
    isolated: bool,
    values: dict[str, str | None],
    all_tools: bool,
    servers: tuple[str, ...] | None,
    protect: tuple[str, ...],
    env: list[tuple[str, str]],
) -> None:
    if "=" in python:  # a program word with "=" would read as an assignment
        python = python.replace("=", "_")
    command = HookCommand(
        HookCommand.launcher_for(python, code, isolated=isolated),
        tuple(env),
        all_tools=all_tools,
        servers=servers,
        protect=protect,
        **values,  # type: ignore[arg-type]
    )
    text = command.render()
    assert HookCommand.parse(text) == command
    assert shlex.split(text)[len(env) :] == command.argv()


@pytest.mark.parametrize(
    ("args", "stray"),
    [
        (["--service", "unix:/s", "--config", "/c"], ["--config"]),
        (["--service"], ["--service"]),
        (["positional"], ["positional"]),
        (["--service", "u", "--nope", "x"], ["--nope", "x"]),
        (["--service", "u", "--all-tools"], ["--all-tools"]),
    ],
)
def test_a_hook_refuses_what_it_does_not_take(args: list[str], stray: list[str]) -> None:
    """for_hook: the words after `hook`, read with the one table, checked against the
    fields this hook takes; ValueError names each word it does not."""
    takes = frozenset(("service", "budget"))
    with pytest.raises(ValueError, match="unexpected arguments") as refused:
        HookCommand.for_hook(args, takes)
    assert str(refused.value) == f"unexpected arguments {stray!r}"


def test_a_hook_reads_its_own_options() -> None:
    """The fields it takes, last value winning, as install wrote them."""
    command = HookCommand.for_hook(
        ["--service", "a", "--budget", "9", "--service", "b", "--protect", "/p"],
        frozenset(("service", "budget", "protect")),
    )
    assert (command.service, command.budget_s(1.0), command.protect) == ("b", 9.0, ("/p",))


def test_hook_command_is_immutable_and_compared_by_value() -> None:
    """A value: equal when every field is, hashable, and no field can be set."""
    one = HookCommand(("p", "hook"), service="s")
    assert one == HookCommand(("p", "hook"), service="s") != HookCommand(("p", "hook"))
    assert hash(one) == hash(HookCommand(("p", "hook"), service="s"))
    with pytest.raises(AttributeError, match="immutable"):
        one.service = "t"  # type: ignore[misc]


def test_reading_a_hooks_options_loads_nothing_heavy() -> None:
    """The hooks read their options with it on the read-only path: no dataclasses, re,
    typing, json (the C scanner's module aside, nothing)."""
    import subprocess
    import sys

    code = (
        "import sys; from zerto_rewind.hostconfig.hook_command import HookCommand; "
        "HookCommand.for_hook(['--config', '/c', '--all-tools'], frozenset(('config',)) | "
        "frozenset(('all_tools',))); "
        "print(sorted(m for m in ('dataclasses', 're', 'typing', 'json', 'shlex', 'inspect') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_a_hook_reads_its_options_with_the_package_reader_alone() -> None:
    """hook_flags.hook_options, what the standalone hook reads with on its read-only path:
    the fields it takes, absent ones None (False, ()), as for_hook reads them."""
    from zerto_rewind.hook_flags import hook_options

    takes = frozenset(("config", "config_sha256", "settings", "all_tools", "mcp_server"))
    args = ["--config", "/a", "--all-tools", "--config", "/c", "--settings", "/s"]
    options = hook_options(args, takes)
    assert options == {
        "config": "/c",
        "config_sha256": None,
        "settings": "/s",
        "all_tools": True,
        "mcp_server": None,
    }
    command = HookCommand.for_hook(args, takes)
    assert {name: getattr(command, name) for name in takes} == options
    with pytest.raises(ValueError, match=r"unexpected arguments \['--service'\]"):
        hook_options([*args, "--service", "unix:/s"], takes)
