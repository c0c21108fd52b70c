"""The real product in the real CLI: a simulator, an installed hook, the stand-in VM server.

``Guarded`` binds an :class:`~harness.E2ESession` to a :class:`zerto_rewind.testing.Sandbox`:

- the ZVM simulator runs in-process over TLS with short cadences (``SIM_CADENCES``);
- the stand-in ``vsphere`` MCP server reports every change it makes to the simulator's
  control plane (``POST /_sim/vm-actions``), so "the call never happened" is read back from
  the simulator (``vm_actions()``), not only from a local log;
- the hook is wired by ``zerto-rewind install claude-code --project DIR`` and used as written
  (the CLI picks up ``DIR/.claude/settings.json`` because it runs with ``cwd=DIR``);
- the hook's environment (config, state dir, decision log, ZVM secret) is handed to
  ``claude``, whose hooks inherit it.

Modes: ``bypassPermissions`` runs with ``--permission-mode bypassPermissions``. ``default``
runs with ``--permission-mode default --allowedTools mcp__vsphere__*``: the user has granted
the server's tools, as they would have to — the guard never answers ``allow`` (it adds a
checkpoint; it does not grant permissions the user did not), so without the grant ``-p``
denies every ungranted MCP call whatever the guard says.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from e2e.harness import ClaudeRun, E2ESession, mcp_config
from zerto_rewind.core.call_result import RESULT_EVENT
from zerto_rewind.testing import DEMO_CATALOG, SECRET_ENV, Sandbox, fast_sim_config

__all__ = [
    "AWS_CADENCE_S",
    "BUDGET_S",
    "GRANT",
    "MODES",
    "PYTHON",
    "Guarded",
    "hook_contexts",
    "parse_time",
    "retry_time_told",
]

MODES = ["bypassPermissions", "default"]
GRANT = "mcp__vsphere__*"
# Journal cadences of the simulator (seconds): vSphere-like VPGs land a tag in ~1.5 s; the
# AWS VPG CMH-AWS-1 ticks slower than the guard budget, so its tags come back *pending*.
SIM_CADENCES = {"vcenter": 1.0, "hyperv": 1.0, "vcd": 1.0, "azure": 2.0, "aws": 10.0}
AWS_CADENCE_S = SIM_CADENCES["aws"]
BUDGET_S = 4.0
# The guard expects a tag at the next boundary plus this allowance (default 3 s, sized for a
# real 5 s vSphere journal); the simulator lands tags 0.5 s after the boundary.
GUARD = {"timeout_s": BUDGET_S, "landing_allowance_s": 1.0}
PYTHON = os.path.abspath(sys.executable)
_RETRY_RE = re.compile(r"Retry the same call after (\S+Z)")
_CONTEXT_RE = re.compile(
    r"PreToolUse:(\S+) hook additional context: (.*?)(?=\n\nPreToolUse:\S+ hook additional|\Z)",
    re.DOTALL,
)


def hook_contexts(system_texts: list[str]) -> list[tuple[str, str]]:
    """(tool, additionalContext) in the order the model saw them.

    2.1.328 puts the contexts of one turn's tool calls into *one* system message, joined by a
    blank line: ``PreToolUse:<tool> hook additional context: <text>\n\nPreToolUse:…``.
    """
    return [(m.group(1), m.group(2)) for t in system_texts for m in _CONTEXT_RE.finditer(t)]


def parse_time(text: str) -> float:
    """Epoch seconds from the guard's ``2026-01-01T00:00:00.000Z``."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def retry_time_told(messages: list[dict[str, Any]]) -> float | None:
    """The retry time the guard told the model in the last tool result (a ``not_before``)."""
    from e2e.fake_anthropic import last_tool_result_text

    found = _RETRY_RE.search(last_tool_result_text(messages))
    return parse_time(found.group(1)) if found else None


@dataclass
class Guarded:
    """One test's guarded setup; see the module docstring."""

    e2e: E2ESession
    box: Sandbox

    @classmethod
    def start(cls, e2e: E2ESession, root: Path) -> Guarded:
        box = Sandbox(
            str(root),
            sim_config=fast_sim_config(cadences=dict(SIM_CADENCES)),
            guard=dict(GUARD),
            catalog=DEMO_CATALOG,
        )
        box.start()
        e2e.mcp_config = mcp_config(
            root / "mcp.json",
            actions_log=e2e.actions_log,
            sim_url=box.sim.url,
            sim_ca=box.sim.ca_bundle,
        )
        return cls(e2e, box)

    def stop(self) -> None:
        self.box.stop()

    # ---- config and install ---------------------------------------------------------------

    @property
    def settings_path(self) -> Path:
        return self.e2e.project_dir / ".claude" / "settings.json"

    def configure(self, **guard: Any) -> None:
        """Rewrite the config's ``guard`` section (``GUARD`` plus ``guard``).

        The installed hook pins the config it was installed with, so a changed config
        is installed again, as an operator accepts a change (docs/install.md).
        """
        self.box.guard = {**GUARD, **guard}
        self.box.write_config()
        if self.settings_path.exists():
            self.install()

    def zerto_rewind(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``zerto-rewind ARGS`` with this environment's interpreter."""
        proc = subprocess.run(
            [PYTHON, "-m", "zerto_rewind", *args],
            capture_output=True,
            text=True,
            env=self.box.env(),
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"zerto-rewind {args} exited {proc.returncode}: {proc.stderr}")
        return proc

    def install(self, *extra: str) -> dict[str, Any]:
        """``zerto-rewind install claude-code --project DIR --config C``; the settings written."""
        self.zerto_rewind(
            "install",
            "claude-code",
            "--project",
            str(self.e2e.project_dir),
            "--config",
            self.box.config_path,
            # the VM server reaches claude with --mcp-config; install checks its name
            "--mcp-config",
            str(self.e2e.mcp_config),
            *extra,
        )
        return self.installed()

    def installed(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.settings_path.read_text(encoding="utf-8"))
        return data

    def handler(self) -> dict[str, Any]:
        """The installed hook handler (the only PreToolUse entry)."""
        [entry] = self.installed()["hooks"]["PreToolUse"]
        [handler] = entry["hooks"]
        return dict(handler)

    # ---- running claude ---------------------------------------------------------------------

    def hook_env(self, **extra: str) -> dict[str, str]:
        """What the hook needs from Claude Code's environment (and nothing else of ours)."""
        env = self.box.env()
        keys = ("ZERTO_REWIND_CONFIG", "ZERTO_REWIND_STATE_DIR", "ZERTO_HOOK_LOG", SECRET_ENV)
        return {**{k: env[k] for k in keys}, **extra}

    def run(
        self,
        mode: str,
        prompt: str | None = "Do the scripted VM work.",
        *,
        resume: str | None = None,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        plugin_dirs: Sequence[Path] = (),
        timeout: float = 90,
        output_format: str = "json",
    ) -> ClaudeRun:
        """One ``claude -p`` in ``mode`` (see the module docstring for ``default``)."""
        args = list(extra_args)
        if mode == "default":
            args = ["--allowedTools", GRANT, *args]
        return self.e2e.run(
            prompt,
            permission_mode=mode,
            resume=resume,
            env={**self.hook_env(), **(env or {})},
            extra_args=args,
            plugin_dirs=plugin_dirs,
            timeout=timeout,
            output_format=output_format,
        )

    # ---- what really happened ---------------------------------------------------------------

    def vm_actions(self) -> list[tuple[str, str]]:
        """(vm, action) of every change the stand-in VM server made, from the simulator."""
        return [(a["vm"], a["action"]) for a in self.box.control("GET", "/_sim/vm-actions")]

    def vm_action_times(self) -> list[float]:
        return [float(a["at"]) for a in self.box.control("GET", "/_sim/vm-actions")]

    def log(self) -> list[dict[str, Any]]:
        """The decision log's decision lines, one dict per line (result lines apart)."""
        return [r for r in self.box.log_records() if r.get("event_type") != RESULT_EVENT]

    def results(self) -> list[dict[str, Any]]:
        """The result lines the hook wrote from the host's after-call events."""
        return [r for r in self.box.log_records() if r.get("event_type") == RESULT_EVENT]

    def rows(self) -> list[tuple[str, str]]:
        """(row, decision) of every decision-log line."""
        return [(r["row"], r["decision"]) for r in self.log()]

    def tag_requests(self, vpg: str | None = None) -> int:
        return self.box.tag_requests(vpg)

    def tagged_checkpoints(self, vpg_id: str) -> dict[str, tuple[str, float]]:
        """{checkpoint id: (tag, landed epoch)} of the VPG's tagged checkpoints (ZVM API)."""
        client = self.box.client()
        try:
            found = client.list_checkpoints(vpg_id)
        finally:
            client.close()
        return {c.cp_id: (c.tag, c.timestamp.timestamp()) for c in found if c.tag}

    def wait_for_aws_boundary(self) -> None:
        """Right after CMH-AWS-1's checkpoint: its next one is a whole cadence (> budget) away."""
        self.box.wait_past_boundary("CMH-AWS-1")

    def sleep_until(self, epoch: float, *, cap: float = 60.0) -> None:
        time.sleep(min(cap, max(0.0, epoch - time.time())))
