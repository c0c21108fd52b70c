"""A throw-away PreToolUse hook for the harness's own tests: it records each call it is
given and answers what its rules say for the tool (deny, ask, allow, defer, context, a
sleep), so the tests learn what Claude Code does with each answer."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.harness import E2ESession, hook_settings, write_json

HOOK_SOURCE = """\
import json, sys, time

rules_path, record_path = sys.argv[1], sys.argv[2]
raw = sys.stdin.read()
with open(record_path, "a", encoding="utf-8") as fh:
    fh.write(json.dumps(json.loads(raw)) + "\\n")
event = json.loads(raw)
with open(rules_path, encoding="utf-8") as fh:
    rule = json.load(fh).get(event.get("tool_name"), {})
time.sleep(rule.get("sleep", 0))
out = {}
for decision in ("deny", "ask", "allow"):
    if decision in rule:
        out = {"permissionDecision": decision, "permissionDecisionReason": rule[decision]}
if rule.get("defer"):
    out = {"permissionDecision": "defer"}
if "context" in rule:
    out["additionalContext"] = rule["context"]
if out:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", **out}}))
"""


@dataclass
class ThrowawayHook:
    settings: Path
    rules: Path
    record: Path

    def set_rules(self, rules: dict[str, dict[str, Any]]) -> None:
        write_json(self.rules, rules)

    def calls(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]


def throwaway_hook(
    e2e: E2ESession,
    rules: dict[str, dict[str, Any]],
    *,
    timeout: float | None = None,
    on_failure: str | None = None,
) -> ThrowawayHook:
    hook_dir = e2e.project_dir.parent / "hook"
    hook_dir.mkdir(exist_ok=True)
    script = hook_dir / "hook.py"
    script.write_text(HOOK_SOURCE, encoding="utf-8")
    hook = ThrowawayHook(
        settings=hook_dir / "settings.json", rules=hook_dir / "rules.json", record=hook_dir / "in"
    )
    hook.set_rules(rules)
    command = [sys.executable, str(script), str(hook.rules), str(hook.record)]
    write_json(hook.settings, hook_settings(command, timeout=timeout, on_failure=on_failure))
    return hook
