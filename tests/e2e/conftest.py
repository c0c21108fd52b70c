"""Fixtures for end-to-end tests against the real Claude Code CLI.

- ``claude_bin`` (session): the pinned CLI; a missing install is an ERROR, never a skip.
- ``fake_api``: a started ``FakeAnthropic`` with an empty script (set it per test).
- ``scripted_models`` (module): a started ``fake_models.FakeModels`` for the other hosts.
- ``project_dir``, ``claude_home``, ``actions_log``, ``vm_mcp_config``: per-test temp paths.
- ``e2e``: an ``E2ESession`` binding them: ``e2e.script([...])``, ``e2e.run(...)``,
  ``e2e.actions()``, ``e2e.write_settings({...})``.
- ``guarded``: the real product around ``e2e`` (``guarded.Guarded``): a ZVM simulator with
  short cadences, its config, ``zerto-rewind install claude-code --project DIR`` already run,
  and the stand-in VM server reporting its changes to the simulator.

Every test collected under this directory gets the ``e2e`` marker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.fake_anthropic import FakeAnthropic
from e2e.fake_models import FakeModels
from e2e.guarded import Guarded
from e2e.harness import E2ESession, claude_path, make_home, mcp_config

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return claude_path()


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropic]:
    api = FakeAnthropic().start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(scope="module")
def scripted_models() -> Iterator[FakeModels]:
    """One scripted model for Codex, Gemini CLI and Copilot CLI, shared by a module."""
    with FakeModels() as started:
        yield started


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def claude_home(tmp_path: Path, project_dir: Path) -> Path:
    return make_home(tmp_path / "home", project_dir)


@pytest.fixture
def actions_log(tmp_path: Path) -> Path:
    return tmp_path / "vm-actions.jsonl"


@pytest.fixture
def vm_mcp_config(tmp_path: Path, actions_log: Path) -> Path:
    return mcp_config(tmp_path / "mcp.json", actions_log=actions_log)


@pytest.fixture
def e2e(
    claude_bin: Path,
    fake_api: FakeAnthropic,
    project_dir: Path,
    claude_home: Path,
    actions_log: Path,
    vm_mcp_config: Path,
) -> E2ESession:
    return E2ESession(
        claude=claude_bin,
        api=fake_api,
        project_dir=project_dir,
        home=claude_home,
        actions_log=actions_log,
        mcp_config=vm_mcp_config,
    )


@pytest.fixture
def guarded(e2e: E2ESession, tmp_path: Path) -> Iterator[Guarded]:
    setup = Guarded.start(e2e, tmp_path / "zerto")
    try:
        setup.install()
        yield setup
    finally:
        setup.stop()
