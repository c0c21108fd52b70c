"""Shared pieces of the reliability suite: call names, the budget, and the per-test bench."""

from __future__ import annotations

from pathlib import Path

from zerto_rewind.testing import HookRun, Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"
READ_ONLY_TOOL = "mcp__vsphere__get_vm"
UNLISTED_TOOL = "mcp__vsphere__delete_datastore"
# Budget for the guard in this suite; every answer must come within budget + 1 s.
BUDGET_S = 5.0
GUARD = {"timeout_s": BUDGET_S, "landing_allowance_s": 1.0}


class Bench:
    """A module's Sandbox, with a fresh state directory and log for each test."""

    def __init__(self, box: Sandbox, root: Path) -> None:
        self.box = box
        self.root = root
        self.state_dir = str(root / "state")
        self.log_path = str(root / "decisions.log")
        self.runs: list[HookRun] = []

    def env(self, **extra: str) -> dict[str, str]:
        """The hook's environment, pointed at this test's state directory and log."""
        return self.box.env(
            ZERTO_REWIND_STATE_DIR=self.state_dir, ZERTO_HOOK_LOG=self.log_path, **extra
        )

    def hook(self, tool: str, tool_input: object, **kwargs: object) -> HookRun:
        """Run the hook as Claude Code would, in this test's state."""
        env = kwargs.pop("env", None) or self.env()
        run = self.box.run_hook(tool, tool_input, env=env, timeout_s=60, **kwargs)  # type: ignore[arg-type]
        self.runs.append(run)
        return run
