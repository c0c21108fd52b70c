"""The CLI's one error edge: an error of the tree is one line on stderr and exit 1."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from zerto_rewind import cli
from zerto_rewind.errors import ConfigError, NotFound, UsageError, ZertoRewindError

FAKE = "zerto_rewind_test_fake_command"


@pytest.fixture
def command(monkeypatch: pytest.MonkeyPatch) -> Callable[[BaseException], None]:
    """A `fake` subcommand that raises whatever the test hands it."""
    module = types.ModuleType(FAKE)
    monkeypatch.setitem(sys.modules, FAKE, module)
    monkeypatch.setitem(cli.COMMANDS, "fake", (FAKE, "main", "raises"))

    def raising(error: BaseException) -> None:
        def main(argv: list[str]) -> int:
            raise error

        module.main = main  # type: ignore[attr-defined]

    return raising


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            ConfigError("missing; set ZVM_URL or zvm.url", path="/etc/z.json", key="zvm.url"),
            "zerto-rewind fake: ConfigError: /etc/z.json: zvm.url: missing — set ZVM_URL or "
            "zvm.url\n",
        ),
        (
            NotFound("no VM named 'ghost'", method="GET", url="https://zvm/v1/vms", status=404),
            "zerto-rewind fake: NotFound: no VM named 'ghost'\n",
        ),
        (
            UsageError("--header 'x': not a header; write it as NAME:VALUE"),
            "zerto-rewind fake: UsageError: --header 'x': not a header — write it as NAME:VALUE\n",
        ),
    ],
)
def test_an_error_of_the_tree_is_one_line_and_exit_1(
    command: Callable[[BaseException], None],
    capsys: pytest.CaptureFixture[str],
    error: ZertoRewindError,
    line: str,
) -> None:
    """ConfigError, a ZvmError and UsageError print `zerto-rewind CMD: Type: what — do`."""
    command(error)
    assert cli.main(["fake"]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", line)


def test_a_bug_is_not_caught(command: Callable[[BaseException], None]) -> None:
    """An exception outside the tree propagates: a bug keeps its traceback, never exit 0."""
    command(KeyError("boom"))
    with pytest.raises(KeyError, match="boom"):
        cli.main(["fake"])


def test_a_bug_exits_non_zero_with_its_traceback() -> None:
    """Run as a program, a bug ends with a traceback on stderr and a non-zero exit."""
    code = (
        "import sys, types\n"
        "from zerto_rewind import cli\n"
        "m = types.ModuleType('fake')\n"
        "def main(argv): raise RuntimeError('a bug')\n"
        "m.main = main\n"
        "sys.modules['fake'] = m\n"
        "cli.COMMANDS['fake'] = ('fake', 'main', '')\n"
        "sys.exit(cli.main(['fake']))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "Traceback" in run.stderr
    assert "RuntimeError: a bug" in run.stderr


def test_a_subcommand_is_named_with_its_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`install mcp-host` errors say `zerto-rewind install mcp-host:`."""
    home = {"HOME": "/nonexistent", "ZERTO_REWIND_CONFIG": "/nonexistent/config.json"}
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    code = cli.main(["install", "mcp-host", "claude-code", "--server", "x", "--client", "c"])
    assert code == 1
    assert capsys.readouterr().err == (
        "zerto-rewind install mcp-host: UsageError: --client names an HTTP client"
        " — give --url too\n"
    )


def test_the_hook_keeps_its_own_edge(
    command: Callable[[BaseException], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook answers in Claude Code's protocol itself; the edge does not wrap it."""
    command(UsageError("x"))
    monkeypatch.setitem(cli.COMMANDS, "hook", (FAKE, "main", "the hook"))
    with pytest.raises(UsageError):
        cli.main(["hook"])


# Where a `zerto-rewind CMD:` line may be written besides the edge: the hook answers every
# failure in its host's protocol itself (cli._OWN_ERROR_EDGE), so its modules write their own.
PREFIX_WRITERS = {
    "cli/__init__.py": "the one error edge: report_error and report_warning",
    "hooks/standalone.py": "the hook's own edge (Claude Code's protocol)",
    "hooks/thin.py": "the host hook's own edge (Codex, Gemini CLI, Copilot CLI)",
    "hooks/post.py": "the hook's post event: a result not recorded (Claude Code's protocol)",
    "hooks/hook_log.py": "the hook's record step: its warnings (Claude Code's protocol)",
    # `python -m zerto_rewind.sim` runs without the CLI, and sim may not import cli
    "sim/app.py": "the simulator's own edge (exit 2 for a bad estate)",
}


def _leading_text(node: ast.AST) -> str | None:
    """A string literal's text, an f-string's with each replacement field as ``CMD``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "CMD"
            for v in node.values
        )
    return None


def _prefix_writers() -> dict[str, list[str]]:
    """Source file → each string in it that begins ``zerto-rewind CMD:`` for a real CMD."""
    commands = "|".join(re.escape(name) for name in [*cli.COMMANDS, "CMD"])
    prefix = re.compile(rf"zerto-rewind (?:{commands})(?: [\w-]+)?: ")
    root = Path(cli.__file__).resolve().parents[1]
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = _leading_text(node)
            if text is not None and prefix.match(text):
                found.setdefault(path.relative_to(root).as_posix(), []).append(text)
    return found


def test_only_the_error_edge_writes_the_command_prefix() -> None:
    """A command that fails raises (or calls report_error); it never writes the prefix itself."""
    writers = _prefix_writers()
    assert "cli/__init__.py" in writers  # the walk sees the edge, so it can see the others
    strays = {path: texts for path, texts in writers.items() if path not in PREFIX_WRITERS}
    assert strays == {}, "raise an error of the tree, or call cli.report_error/report_warning"


def test_the_list_of_prefix_writers_is_current() -> None:
    """A module that no longer writes the prefix leaves the list: the list only shrinks."""
    assert set(PREFIX_WRITERS) <= set(_prefix_writers())
