"""One tool naming: the demo, the README and the user's guides name mcvsphere's tools.

mcvsphere is the VM server the README and docs/deploy.md set up; its tool list is kept in
tests/data/servers/mcvsphere.tools.json. The test sandbox's stand-in server names its
power-off tool ``power_off_vm``; that name belongs in test pages (reliability.md,
performance.md) only, where they say so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from zerto_rewind.cli import demo, demo_rewind

ROOT = Path(__file__).resolve().parents[3]
MCVSPHERE = {
    tool["name"]
    for tool in json.loads((ROOT / "tests/data/servers/mcvsphere.tools.json").read_text())["tools"]
}
NAMED = re.compile(r"mcp__vsphere__([A-Za-z0-9_]*[A-Za-z0-9])(?![*?\w])")


def _tools(text: str) -> set[str]:
    return set(NAMED.findall(text))


def test_the_demo_calls_mcvsphere_s_tools() -> None:
    steps = [step.tool for step in [*demo.STEPS, *demo.DARK, demo.RETRY]]
    catalog = [*demo.DEMO_CATALOG["read_only_tools"], *demo.DEMO_CATALOG["tools"]]
    rewind = [demo_rewind.POWER_OFF, demo_rewind.RECONFIGURE, demo_rewind.REMOVE_DISK]
    named = _tools(" ".join([*steps, *catalog, *rewind]))
    assert "power_off" in named
    assert named - MCVSPHERE == set()


@pytest.mark.parametrize(
    "page", ["README.md", "docs/deploy.md", "docs/gateway.md", "docs/tracing.md"]
)
def test_the_readme_and_the_guides_name_mcvsphere_s_tools(page: str) -> None:
    named = _tools((ROOT / page).read_text())
    assert named, f"{page} names no mcp__vsphere__ tool any more: drop it from this test"
    assert named - MCVSPHERE == set(), f"{page} names tools mcvsphere does not have"
