"""The doctor asks the gateway itself: do the host's URL and token answer, is it ready?

For every host entry that reaches the gateway over HTTP (``…/mcp/NAME`` with a
bearer token, as ``install mcp-host --url`` writes it), the doctor sends the
entry's own ``Authorization`` header to ``/v1/catalog`` (which refuses a wrong
token: ``/healthz`` takes any caller) and then reads ``/healthz``. One check
per gateway and token: ready, not ready and why, token refused, or nothing
listening. The token is sent as the host would send it and never printed.
``/healthz`` says why only to a token ``gateway.metrics_clients`` lists (or on the
gateway's socket); to any other token the doctor reports "not ready" and where to
read why.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConfigError
from ...hostconfig.entries import entry_url, gateway_upstream_of
from ...hostconfig.files import read_host_config, servers_of
from ...hostconfig.specs import HostFile
from .check import Check

__all__ = ["gateway_health_checks"]

_TIMEOUT_S = 5.0


def gateway_health_checks(files: Sequence[HostFile]) -> list[Check]:
    """One check per (gateway URL, token) that the host ``files`` use."""
    seen: dict[tuple[str, str | None], str] = {}
    for file in files:
        if not os.path.isfile(file.path):
            continue
        try:
            data = read_host_config(file).data
        except ConfigError:
            continue  # the bypass check reports an unreadable file
        for name, entry in servers_of(data, file).items():
            url = entry_url(entry) if isinstance(entry, Mapping) else None
            if url is None or "/mcp/" not in url or gateway_upstream_of(entry, name) is None:
                continue
            base = url.split("/mcp/", 1)[0]
            seen.setdefault((base, _authorization(entry)), f"{file.path} ({name})")
    return [_ask(base, auth, where) for (base, auth), where in seen.items()]


def _authorization(entry: Mapping[str, Any]) -> str | None:
    for key in ("headers", "http_headers"):
        headers = entry.get(key)
        if isinstance(headers, Mapping):
            for header, value in headers.items():
                if str(header).lower() == "authorization" and isinstance(value, str):
                    return value
    return None


def _ask(base: str, authorization: str | None, where: str) -> Check:
    import httpx

    label = f"gateway {base}"
    headers = {"Authorization": authorization} if authorization else {}
    try:
        with httpx.Client(timeout=_TIMEOUT_S, headers=headers) as http:
            auth = http.get(f"{base}/v1/catalog")
            health = http.get(f"{base}/healthz")
    except httpx.ConnectError:
        detail = f"nothing answers at {base} (connection refused), which {where} names"
        fix = "start the gateway (`zerto-rewind gateway --listen HOST:PORT --config CONFIG`)"
        return Check(label, "fail", detail, fix)
    except httpx.HTTPError as exc:
        detail = f"{base}, which {where} names, did not answer: {type(exc).__name__}"
        return Check(label, "fail", detail, "check the URL, and the gateway's TLS certificate")
    if auth.status_code == 401:
        said = "has no token" if authorization is None else "holds a token the gateway refused"
        detail = f"{where} {said} (401 from {base})"
        fix = (
            "re-run `zerto-rewind install mcp-host` for this host (a new token), or add the "
            "token's digest to gateway.clients (`zerto-rewind gateway --hash-token`)"
        )
        return Check(label, "fail", detail, fix)
    return _health(label, base, where, health)


def _health(label: str, base: str, where: str, health: Any) -> Check:
    try:
        report = health.json()
    except ValueError:
        report = None
    if not isinstance(report, dict) or "ready" not in report:
        detail = f"{base}/healthz answered {health.status_code}, not the gateway's health report"
        return Check(label, "fail", detail, f"check the URL in {where}")
    if report["ready"]:
        return Check(label, "pass", f"the token in {where} is accepted, and the gateway is ready")
    if set(report) == {"ready"}:  # this token may not read why (gateway/probes.py)
        detail = f"the token in {where} is accepted; the gateway is not ready"
        fix = (
            "read why on the gateway's stderr, or at /healthz with a token "
            "gateway.metrics_clients lists (or over the gateway's --socket)"
        )
        return Check(label, "fail", detail, fix)
    problems = [f"{k}: {v}" for k, v in report.items() if k not in ("ready", "upstreams")]
    problems = [p for p in problems if not p.endswith(": ok")]
    upstreams = report.get("upstreams")
    if isinstance(upstreams, dict):
        problems += [f"upstream {n}: {v}" for n, v in upstreams.items() if v != "connected"]
    detail = f"the token in {where} is accepted; not ready: " + "; ".join(problems)
    return Check(label, "fail", detail, "fix what is named; the gateway's stderr says it too")
