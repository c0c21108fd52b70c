"""What the approver reads when the hook's config is broken or changed: every call is
denied, and the reason says why and who can fix it (never how the agent could)."""

from __future__ import annotations

from ..config.loader import ConfigChanged
from ..errors import ConfigError


def config_denial_reason(tool_name: str, problem: ConfigError) -> str:
    """What the human who approves reads when the config is broken or changed."""
    if isinstance(problem, ConfigChanged):
        return (
            f"zerto-rewind denied {tool_name}: the guard's config {problem.path} changed since "
            f"the guard was installed ({problem.detail}), so the guard does not trust it and "
            "blocks every call it watches; the call was not run. If the change was intended, "
            "whoever administers the guard accepts it by running `zerto-rewind install "
            "claude-code …` again and starting a new session; if nobody meant to change it, "
            "treat it as tampering."
        )
    return (
        f"zerto-rewind denied {tool_name}: the guard's config cannot be used "
        f"({problem.summary}), so the guard blocks every call it watches; the call was not "
        "run. An operator can see the problem with `zerto-rewind doctor`."
    )
