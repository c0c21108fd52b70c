"""No secret leaks: after a representative run, the log, state and outputs hold none."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reliability.reliability_helpers import POWER_OFF, READ_ONLY_TOOL, UNLISTED_TOOL, Bench


def _record_issued_tokens(bench: Bench) -> dict[str, list[str]]:
    """Wrap the simulator's token store so every access and refresh token it issues is kept."""
    issued: dict[str, list[str]] = {"access": [], "refresh": []}
    store = bench.box.sim.state.tokens
    original = store._issue

    def issue(username: str) -> dict[str, Any]:
        answer = original(username)
        issued["access"].append(answer["access_token"])
        issued["refresh"].append(answer["refresh_token"])
        return answer

    store._issue = issue  # type: ignore[method-assign]
    return issued


def test_log_state_and_outputs_hold_no_secret_password_or_token(bench: Bench) -> None:
    """Every row, faults, an expired token and concurrency: no secret in any file or output."""
    issued = _record_issued_tokens(bench)
    box = bench.box
    try:
        bench.hook(READ_ONLY_TOOL, {"name": "jp-ubuntu"})
        bench.hook(POWER_OFF, {"name": "jp-ubuntu", "password": "arg-secret-1"})
        bench.hook(POWER_OFF, {"name": "sql-paused-1"})
        bench.hook(POWER_OFF, {"name": "ghost-vm"})
        bench.hook(POWER_OFF, {"force": True})
        bench.hook(UNLISTED_TOOL, {"token": "arg-secret-2"})
        box.control("POST", "/_sim/tokens/expire")
        bench.hook(POWER_OFF, {"name": "web-az-1"})
        for route, kind in (("vpgs.get", "malformed"), ("checkpoints.tag", "status")):
            box.control("POST", "/_sim/faults", {"route": route, "kind": kind, "count": 1})
            bench.hook(POWER_OFF, {"name": "jp-ubuntu"})
        box.control("POST", "/_sim/faults", {"route": "tokens", "kind": "status", "status": 401})
        box.control("POST", "/_sim/tokens/expire")
        bench.hook(POWER_OFF, {"name": "jp-ubuntu"})
        box.control("DELETE", "/_sim/faults")
        with ThreadPoolExecutor(5) as pool:
            list(pool.map(lambda i: bench.hook(POWER_OFF, {"name": "multi-1"}), range(5)))
    finally:
        del box.sim.state.tokens._issue
    creds = box.sim.credentials
    never = [creds["client_secret"], creds["password"], *issued["refresh"], "arg-secret-1",
             "arg-secret-2"]  # fmt: skip
    assert len(issued["access"]) >= 2, "the run fetched tokens, so there is something to look for"

    texts = {f"run {i} {stream}": getattr(run, stream)
             for i, run in enumerate(bench.runs) for stream in ("stdout", "stderr")}  # fmt: skip
    for directory, _dirs, files in os.walk(bench.root):
        for name in files:
            path = os.path.join(directory, name)
            if os.path.abspath(path) == os.path.abspath(box.config_path):
                continue
            with open(path, "rb") as fh:
                texts[path] = fh.read().decode("utf-8", "replace")
    assert any("decisions.log" in key for key in texts)
    assert any(os.sep + "tokens" + os.sep in key for key in texts), "the token cache was scanned"
    leaks = []
    for where, text in texts.items():
        # The token cache holds the current access token: that file is its whole point.
        cache = os.sep + "tokens" + os.sep in where
        for secret in never if cache else [*never, *issued["access"]]:
            if secret in text:
                leaks.append((where, secret[:6] + "…"))
    assert leaks == []
