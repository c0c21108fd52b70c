"""Saved rewind plans and how far each run got, in the guard's state directory.

``<state_dir>/rewind/`` (mode 0700) holds ``plan-<id>.json`` (the plan as the dry
run showed it) and ``run-<id>-<mode>.json`` (per VM: done, failed or skipped, and
why), each written atomically, owner-only. ``rewind --resume`` reads the second to
carry on with the VMs not done.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..errors import StateError, UsageError
from .rewind_build import RewindPlan

__all__ = ["load_plan", "load_run", "save_plan", "save_run"]

_PLAN_ID = re.compile(r"^[0-9a-f]{16}$")


def _directory(state_dir: str) -> str:
    from ..fsutil import ensure_private_dir

    return ensure_private_dir(os.path.join(state_dir, "rewind"))


def _checked(plan_id: str) -> str:
    if not _PLAN_ID.fullmatch(plan_id):
        msg = f"{plan_id!r} is not a plan id (16 hex digits, as `rewind --dry-run` prints it)"
        raise UsageError(msg)
    return plan_id


def save_plan(state_dir: str, plan: RewindPlan) -> str:
    """Keep ``plan`` for ``--plan ID``; returns its path."""
    from ..fsutil import atomic_write_json

    path = os.path.join(_directory(state_dir), f"plan-{_checked(plan.plan_id)}.json")
    atomic_write_json(path, plan.model_dump(mode="json"))
    return path


def load_plan(state_dir: str, plan_id: str) -> RewindPlan:
    """A saved plan; UsageError if there is none by that id."""
    from pydantic import ValidationError

    from ..fsutil import read_json

    path = os.path.join(state_dir, "rewind", f"plan-{_checked(plan_id)}.json")
    raw = read_json(path)
    if raw is None:
        msg = f"no saved plan {plan_id} in {os.path.dirname(path)}: run `rewind --dry-run` first"
        raise UsageError(msg)
    try:
        return RewindPlan.model_validate(raw)
    except ValidationError as exc:
        msg = f"the saved plan {path} is damaged ({exc.error_count()} errors): build it again"
        raise StateError(msg) from None


def _run_path(state_dir: str, plan_id: str, mode: str) -> str:
    return os.path.join(_directory(state_dir), f"run-{_checked(plan_id)}-{mode}.json")


def load_run(state_dir: str, plan_id: str, mode: str) -> dict[str, dict[str, str]]:
    """VM -> {"state", "why"} of an earlier run of the plan in ``mode``; {} if none."""
    from ..fsutil import read_json

    raw: Any = read_json(_run_path(state_dir, plan_id, mode))
    if not isinstance(raw, dict):
        return {}
    return {
        str(vm): {"state": str(v.get("state")), "why": str(v.get("why") or "")}
        for vm, v in raw.items()
        if isinstance(v, dict)
    }


def save_run(state_dir: str, plan_id: str, mode: str, states: dict[str, dict[str, str]]) -> None:
    """Record how far the run got, after each VM (a crash loses at most the VM in hand)."""
    from ..fsutil import atomic_write_json

    atomic_write_json(_run_path(state_dir, plan_id, mode), states)
