"""A simulator, a config wired to it, and a state directory: the hook's test bench.

The demo, the benchmarks and the test suites all need the same thing: an
in-process ZVM simulator over TLS, a config file that points the hook at it
(secret passed by environment, CA bundle pinned), and a way to run the hook
exactly as a host would — a subprocess fed JSON on stdin. This is it.
Import it from :mod:`zerto_rewind.testing`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ..config.loader import load_settings
from ..config.settings import Settings
from ..hooks.standalone import LAUNCH_CODE
from ..sim import SimConfig, SimServer
from ..sim.estate import ESTATES_DIR

if TYPE_CHECKING:
    from ..zvm.client import ZvmClient

__all__ = [
    "DEMO_CADENCES",
    "DEMO_CATALOG",
    "FAST_CADENCES",
    "SECRET_ENV",
    "THREE_ZVMS",
    "HookRun",
    "Sandbox",
    "fast_sim_config",
    "packaged_estate",
    "secret_env",
]

SECRET_ENV = "ZERTO_REWIND_SANDBOX_SECRET"  # noqa: S105  # a variable name, not a secret


def secret_env(site: str | None = None) -> str:
    """The variable carrying a ZVM's secret: :data:`SECRET_ENV`, suffixed with the site's
    name (``ZERTO_REWIND_SANDBOX_SECRET_DR``) in a multi-site estate, where every ZVM has
    its own client secret."""
    if site is None:
        return SECRET_ENV
    return f"{SECRET_ENV}_{re.sub(r'[^A-Z0-9]+', '_', site.upper()).strip('_')}"


def packaged_estate(name: str) -> dict[str, Any]:
    """A packaged simulator estate (``three-sites``), as a dict to extend or trim."""
    path = ESTATES_DIR / f"{name.removesuffix('.json')}.json"
    found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return found


def _vpg(name: str, protected: str, recovery: str, vm: str, kind: str = "vcenter") -> Any:
    """One VPG of one VM, in the simulator's estate schema."""
    site = {"protected_site": protected, "recovery_site": recovery}
    return {"name": name, "site_kind": kind, **site, "vms": [vm]}


# Three sites, each with its own ZVM, and a lab site without one. Each ZVM site protects
# a VM paired with another ZVM site (web-01 hq -> dr, db-01 dr -> hq, crm-01 azure -> hq:
# two ZVMs list its VPG) and a VM that recovers to the lab (file-01, batch-01, ml-01: only
# its own ZVM lists it). So a test can darken any one site and still have, for that site,
# a VM another ZVM knows and one no other ZVM knows, and a VM of each other site.
THREE_ZVMS: dict[str, Any] = {
    "sites": [
        {"name": "hq", "kind": "vcenter", "zvm": True},
        {"name": "dr", "kind": "vcenter", "zvm": True},
        {"name": "azure", "kind": "azure", "zvm": True},
        {"name": "lab", "kind": "vcenter"},
    ],
    "tag_accepted_by": "protected",
    "vpgs": [
        _vpg("hq-web-dr", "hq", "dr", "web-01"),
        _vpg("dr-db-hq", "dr", "hq", "db-01"),
        _vpg("azure-crm-hq", "azure", "hq", "crm-01", kind="azure"),
        _vpg("hq-file-lab", "hq", "lab", "file-01"),
        _vpg("dr-batch-lab", "dr", "lab", "batch-01"),
        _vpg("azure-ml-lab", "azure", "lab", "ml-01", kind="azure"),
    ],
}

# A vSphere-like MCP server whose tools name the VM in different shapes.
DEMO_CATALOG: dict[str, Any] = {
    "read_only_tools": ["mcp__vsphere__list_vms", "mcp__vsphere__get_*"],
    "tools": {
        "mcp__vsphere__power_off_vm": {"vm_arg": "name"},
        "mcp__vsphere__reconfigure_vm": {"vm_arg": "vm.name"},
        "mcp__vsphere__snapshot_vms": {"vm_arg": "vms[]"},
        "mcp__vsphere__run_command": {
            "vm_arg": {"path": "command", "pattern": r"@(?P<vm>[A-Za-z0-9][A-Za-z0-9.-]*)"}
        },
    },
    "vm_map": {"strip_domain": ["lab.local"]},
}


# Journal cadences in seconds, per site kind (the real ones are minutes).
#
# FAST_CADENCES: a checkpoint every second or so, every three on aws, so a test
# waits for a tag no longer than that. DEMO_CADENCES, the sandbox's default,
# leaves azure and aws slower than a short guard budget, so the demo and the
# benchmarks meet a pending tag as well as a confirmed one.
FAST_CADENCES: dict[str, float] = {
    "vcenter": 1.0,
    "hyperv": 1.0,
    "vcd": 1.0,
    "azure": 2.0,
    "aws": 3.0,
}
DEMO_CADENCES: dict[str, float] = {
    "vcenter": 2.0,
    "hyperv": 2.0,
    "vcd": 2.0,
    "azure": 6.0,
    "aws": 20.0,
}


def fast_sim_config(**overrides: Any) -> SimConfig:
    """The sandbox's simulator: DEMO_CADENCES, no jitter, tags land 0.5 s after they are asked.

    ``overrides`` replace :class:`~zerto_rewind.sim.SimConfig` fields, e.g.
    ``fast_sim_config(cadences=FAST_CADENCES, seed=7)``.
    """
    values: dict[str, Any] = {
        "cadences": dict(DEMO_CADENCES),
        "jitter": 0.0,
        "tag_lag_s": 0.5,
        "task_duration_s": 0.2,
    }
    values.update(overrides)
    return SimConfig(**values)


@dataclass
class HookRun:
    """What one hook process did."""

    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float

    @property
    def output(self) -> dict[str, Any] | None:
        """The parsed ``hookSpecificOutput``, or None when stdout was empty."""
        if not self.stdout.strip():
            return None
        parsed = json.loads(self.stdout)
        specific: dict[str, Any] = parsed["hookSpecificOutput"]
        return specific

    @property
    def decision(self) -> str:
        """``none``, ``context``, ``deny``, ``ask``, ``defer`` or ``exit-<code>``."""
        if self.returncode != 0:
            return f"exit-{self.returncode}"
        out = self.output
        if out is None:
            return "none"
        return str(
            out.get("permissionDecision") or ("context" if out.get("additionalContext") else "none")
        )

    @property
    def reason(self) -> str:
        out = self.output or {}
        return str(out.get("permissionDecisionReason") or out.get("additionalContext") or "")


class Sandbox:
    """An in-process simulator plus everything the hook needs to talk to it."""

    def __init__(
        self,
        root: str,
        *,
        sim_config: SimConfig | None = None,
        guard: dict[str, Any] | None = None,
        catalog: dict[str, Any] | None = None,
        estate: dict[str, Any] | None = None,
        zvm: dict[str, Any] | None = None,
    ) -> None:
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        config = sim_config or fast_sim_config()
        if estate is not None:
            path = Path(self.root) / "estate.json"
            path.write_text(json.dumps(estate), encoding="utf-8")
            config = replace(config, estate_file=path)
        self.sim = SimServer(config)
        self.guard = dict(guard or {})
        self.zvm = dict(zvm or {})
        self.catalog = dict(catalog if catalog is not None else DEMO_CATALOG)
        self.config_path = os.path.join(self.root, "zerto-rewind.json")
        self.state_dir = os.path.join(self.root, "state")
        self.log_path = os.path.join(self.root, "decisions.log")
        self._http: httpx.Client | None = None

    # ---- life cycle

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.sim.start()
        self.write_config()

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
        self.sim.stop()

    # ---- config and environment

    @property
    def sites(self) -> dict[str, dict[str, Any]]:
        """Every ZVM of a multi-site estate by site name (the ready file's ``sites``:
        url, client, CA, site identifier, kind); empty for a one-ZVM simulator."""
        found: dict[str, dict[str, Any]] = self.sim.credentials.get("sites", {})
        return found

    def zvm_entry(self, site: str | None = None) -> dict[str, Any]:
        """One ZVM's config entry: its URL, client, secret by environment, CA, and the
        sandbox's ``zvm`` extras (timeouts…). ``site`` None: the one-ZVM simulator's."""
        creds = self.sim.credentials if site is None else self.sites[site]
        entry: dict[str, Any] = {
            "url": creds["url"],
            "client_id": creds["client_id"],
            "client_secret_env": secret_env(site),
        }
        if creds["ca_bundle"]:
            entry["ca_bundle"] = creds["ca_bundle"]
        entry.update(self.zvm)
        return entry

    def config(self, **overrides: Any) -> dict[str, Any]:
        """The config dict the sandbox writes (overrides replace top-level keys).

        A one-ZVM simulator is ``zvm``; a multi-site estate is ``zvms``, one entry per
        site in the estate's order.
        """
        config: dict[str, Any]
        if self.sites:
            config = {"zvms": {site: self.zvm_entry(site) for site in self.sites}}
        else:
            config = {"zvm": self.zvm_entry()}
        config.update({**self.catalog, "guard": self.guard})
        config.update(overrides)
        return config

    def write_config(self, **overrides: Any) -> str:
        """(Re)write the config file, mode 0600; returns its path."""
        data = json.dumps(self.config(**overrides), indent=2)
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(data)
        return self.config_path

    def env(self, **extra: str) -> dict[str, str]:
        """The environment a host would give the hook."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ZERTO_HOOK_", "ZERTO_REWIND_"))
        }
        env.update(
            {
                "ZERTO_REWIND_CONFIG": self.config_path,
                "ZERTO_REWIND_STATE_DIR": self.state_dir,
                "ZERTO_HOOK_LOG": self.log_path,
                SECRET_ENV: self.sim.credentials["client_secret"],
            }
        )
        env.update({secret_env(site): f["client_secret"] for site, f in self.sites.items()})
        env.update(extra)
        return env

    # ---- the hook, as a host runs it

    def run_hook(
        self,
        tool_name: str,
        tool_input: Any,
        *,
        session_id: str = "sandbox-session-0001",
        tool_use_id: str = "toolu_sandbox",
        env: dict[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float = 300.0,
        hook_args: tuple[str, ...] = (),
    ) -> HookRun:
        """Run the hook exactly as installed (``python -c LAUNCH_CODE hook``), payload on stdin.

        ``hook_args`` follow ``hook`` (``--mcp-server NAME``, as install writes it).
        """
        payload = {
            "session_id": session_id,
            "transcript_path": os.path.join(self.root, "transcript.jsonl"),
            "cwd": self.root,
            "permission_mode": "bypassPermissions",
            "hook_event_name": "PreToolUse",
            "tool_name": tool_name,
            "tool_input": tool_input,
            "tool_use_id": tool_use_id,
        }
        data = json.dumps(payload).encode() if stdin is None else stdin
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", LAUNCH_CODE, "hook", *hook_args],
            input=data,
            capture_output=True,
            env=env or self.env(),
            timeout=timeout_s,
            check=False,
        )
        elapsed = time.monotonic() - started
        return HookRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), elapsed)

    # ---- the simulator's control plane

    def control(self, method: str, path: str, body: Any = None, *, site: str | None = None) -> Any:
        """Call ``/_sim/...`` on the simulator and return the JSON answer (None if empty).

        ``site``: the ZVM of that site of a multi-site estate (``?site=NAME``). The call
        goes through another site's port, so that a ``down`` or ``wrong_cert`` fault can
        be set and cleared on any site, the first one included.
        """
        if self._http is None:
            import ssl

            ca = self.sim.ca_bundle
            verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else True
            self._http = httpx.Client(verify=verify, timeout=10.0)
        base, params = self.sim.url, {}
        if site is not None:
            through = next((s for s in self.sites if s != site), site)
            base, params = self.sites[through]["url"], {"site": site}
        response = self._http.request(method, base + path, json=body, params=params)
        response.raise_for_status()
        return response.json() if response.content else None

    def tag_counts(self) -> dict[str, dict[str, int]]:
        """Tags each ZVM was asked for, by site and VPG name (a one-ZVM simulator's site
        is ``""``)."""
        if not self.sites:
            return {"": self.control("GET", "/_sim/stats")["tag_requests"]}
        return {s: self.control("GET", "/_sim/stats", site=s)["tag_requests"] for s in self.sites}

    def tag_requests(self, vpg_name: str | None = None, *, site: str | None = None) -> int:
        """How many tags the simulator was asked for (on one VPG, or in all), through one
        site's ZVM or, ``site`` None, through every ZVM of the estate."""
        per_site = self.tag_counts()
        counts = [per_site[site]] if site is not None else list(per_site.values())
        return sum(c.get(vpg_name, 0) if vpg_name else sum(c.values()) for c in counts)

    def wait_past_boundary(self, vpg_name: str, *, margin_s: float = 0.3) -> None:
        """Sleep until just after the VPG's next journal checkpoint.

        Journal phases are random, so a cadence longer than the budget does not
        by itself put the *next* checkpoint beyond it; right after a checkpoint,
        the next one is a whole cadence away.
        """
        journal = self.sim.state.vpg_named(vpg_name).journal
        boundary = journal.next_boundary(time.time())
        if boundary is not None:
            time.sleep(max(0.0, boundary - time.time()) + margin_s)

    def settings(self) -> Settings:
        """The settings the hook sees (read from the sandbox's config and environment)."""
        return load_settings(self.env())

    def client(self) -> ZvmClient:
        """A Zerto client for the simulator, authenticated like the hook (same token cache)."""
        from ..zvm.auth import TokenCache
        from ..zvm.client import ZvmClient

        return ZvmClient(self.settings().zvm, token_cache=TokenCache(self.state_dir))

    def log_records(self) -> list[dict[str, Any]]:
        """Every line of the decision log, parsed."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def decision_records(self) -> list[dict[str, Any]]:
        """The decision log's decision lines, parsed: its result lines (a change's outcome,
        written after it ran) left out."""
        from ..core.call_result import RESULT_EVENT

        return [r for r in self.log_records() if r.get("event_type") != RESULT_EVENT]

    def result_records(self) -> list[dict[str, Any]]:
        """The decision log's result lines, parsed: each change's outcome after it ran."""
        from ..core.call_result import RESULT_EVENT

        return [r for r in self.log_records() if r.get("event_type") == RESULT_EVENT]
