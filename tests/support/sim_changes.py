"""Changes as the guard records them, against the simulator: a tagged checkpoint and the
decision line that names it, for the rewind's tests; the simulator's request counters."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import httpx

from zerto_rewind.core.decision import fmt_time
from zerto_rewind.core.decisions_log import write_record
from zerto_rewind.sim import SimServer
from zerto_rewind.zvm.client import ZvmClient

__all__ = ["log_change", "sim_http", "sim_requests", "tagged"]


def tagged(zvm: ZvmClient, vpg_id: str, name: str) -> str:
    """Tag a checkpoint through the simulator's API and return its id once it landed."""
    zvm.tag_checkpoint(vpg_id, name)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = [c for c in zvm.list_checkpoints(vpg_id) if c.tag == name]
        if found:
            return found[0].cp_id
        time.sleep(0.2)
    raise AssertionError(f"tag {name!r} did not land")


def log_change(log: Path, zvm: ZvmClient, session: str, vm: str) -> tuple[str, str]:
    """A change to ``vm`` by ``session``, after a tagged checkpoint: (VM id, checkpoint id)."""
    (ref,) = zvm.find_vms(vm)
    checkpoint = tagged(zvm, ref.vpg_id, f"zr {session} {vm}")
    write_record(
        str(log),
        {
            "time": fmt_time(time.time()),
            "session_id": session,
            "tool": "vm_reconfigure",
            "row": "mutating",
            "decision": "context",
            "vms": [vm],
            "vpgs": [ref.vpg_name],
            "vpg_ids": [ref.vpg_id],
            "checkpoint_ids": [checkpoint],
            "tags": [f"zr {session} {vm}"],
        },
    )
    return ref.vm_id, checkpoint


def sim_http(sim: SimServer) -> httpx.Client:
    """An HTTP client of the simulator's control plane, trusting its CA."""
    return httpx.Client(verify=ssl.create_default_context(cafile=sim.ca_bundle))


def sim_requests(sim: SimServer) -> dict[str, int]:
    """The simulator's request counters by route."""
    with sim_http(sim) as http:
        counters: dict[str, int] = http.get(f"{sim.url}/_sim/stats").json()["requests"]
    return counters
