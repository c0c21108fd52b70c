"""What the simulated ZVM protects: sites, VPGs and VMs, as plain specs.

An estate is data only; :mod:`zerto_rewind.sim.state` turns it into live objects.
The default estate mirrors the seed README; ``--estate FILE`` loads another
(schema in docs/simulator.md) and ``--vms N`` adds generated VPGs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerto_rewind.errors import ZertoRewindError
from zerto_rewind.sim.enums import SITE_KINDS

LOCAL_SITE_NAME = "zvm-local"


class EstateError(ZertoRewindError, ValueError):
    """An estate file that cannot be used; the message names the offending key.

    Still a ValueError, as it always was, for callers that parse with ``except ValueError``.
    """


@dataclass(frozen=True)
class SiteSpec:
    """A site: the local ZVM's own, or a paired peer."""

    name: str
    kind: str


@dataclass(frozen=True)
class VmSpec:
    """A VM with the vCenter identity a test gives it (else one is generated).

    ``vcenter_id`` is the managed object id (``vm-42``) that ends the VM's
    ``VmIdentifier``; ``instance_uuid`` fills ``Link.instance_identifier``.
    """

    name: str
    vcenter_id: str | None = None
    instance_uuid: str | None = None


@dataclass(frozen=True)
class VpgSpec:
    """A VPG and the VM names it protects (``vm_specs``: those given as objects)."""

    name: str
    site_kind: str
    vms: tuple[str, ...]
    protected_site: str | None = None
    recovery_site: str | None = None
    cadence_s: float | None = None
    status: int | None = None
    sub_status: int | None = None
    history_minutes: int | None = None
    priority: int = 1
    rpo_seconds: int | None = None
    vm_specs: tuple[VmSpec, ...] = ()

    def entries(self) -> tuple[VmSpec, ...]:
        """Every VM of the VPG, plain names as specs without a given identity."""
        return self.vm_specs or tuple(VmSpec(name) for name in self.vms)


@dataclass(frozen=True)
class Estate:
    """Sites and VPGs; ``local`` is the site whose ZVM answers the API."""

    local: SiteSpec
    peers: tuple[SiteSpec, ...]
    vpgs: tuple[VpgSpec, ...] = field(default=())


def default_estate() -> Estate:
    """The built-in estate (documented in docs/simulator.md)."""
    peers = (
        SiteSpec("zvm-dr", "vcenter"),
        SiteSpec("CMH-AWS", "aws"),
        SiteSpec("EUS-Azure", "azure"),
        SiteSpec("hv-dr", "hyperv"),
    )
    vpgs = (
        VpgSpec("jp-local", "vcenter", ("jp-ubuntu",)),
        VpgSpec("CMH-AWS-1", "aws", ("win2019-1",)),
        VpgSpec("EUS-AZ-1", "azure", ("web-az-1",)),
        VpgSpec("paused-vpg", "vcenter", ("sql-paused-1",), status=2, sub_status=25),
        VpgSpec("multi-a", "vcenter", ("multi-1",)),
        VpgSpec("multi-b", "vcenter", ("multi-1",), recovery_site="hv-dr"),
        VpgSpec("syncing-vpg", "vcenter", ("new-vm-1",), status=0, sub_status=1),
    )
    return Estate(SiteSpec(LOCAL_SITE_NAME, "vcenter"), peers, vpgs)


def generated_vpgs(count: int, per_vpg: int = 1) -> tuple[VpgSpec, ...]:
    """``count`` VMs named ``vm-00001``… in vCenter VPGs of ``per_vpg`` VMs each."""
    per_vpg = max(1, per_vpg)
    specs = []
    for first in range(1, count + 1, per_vpg):
        names = tuple(f"vm-{n:05d}" for n in range(first, min(first + per_vpg, count + 1)))
        specs.append(VpgSpec(f"vpg-{(first - 1) // per_vpg + 1:05d}", "vcenter", names))
    return tuple(specs)


def load_estate(path: Path) -> Estate:
    """Read and validate an estate file; raise :class:`EstateError` naming the key."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        msg = f"estate file {path}: cannot read: {exc.strerror}"
        raise EstateError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"estate file {path}: not JSON: {exc}"
        raise EstateError(msg) from exc
    try:
        return parse_estate(raw)
    except EstateError as exc:
        msg = f"estate file {path}: {exc}"
        raise EstateError(msg) from exc


def parse_estate(raw: object) -> Estate:
    """Validate decoded JSON into an :class:`Estate`."""
    top = _obj(raw, "(top level)", {"local_site", "sites", "vpgs"})
    local = _site(top.get("local_site", {"name": LOCAL_SITE_NAME, "kind": "vcenter"}), "local_site")
    peers = tuple(_site(s, f"sites[{i}]") for i, s in enumerate(_list(top, "sites", "")))
    kinds = {site.name.lower(): site.kind for site in (local, *peers)}
    names = [local.name.lower()] + [p.name.lower() for p in peers]
    if len(set(names)) != len(names):
        msg = "sites: site names must be unique (including local_site)"
        raise EstateError(msg)
    vpgs = tuple(_vpg(v, f"vpgs[{i}]", kinds) for i, v in enumerate(_list(top, "vpgs", "")))
    seen: set[str] = set()
    for i, vpg in enumerate(vpgs):
        if vpg.name.lower() in seen:
            msg = f"vpgs[{i}].name: duplicate VPG name {vpg.name!r}"
            raise EstateError(msg)
        seen.add(vpg.name.lower())
    return Estate(local, peers, vpgs)


_VPG_KEYS = {
    "name",
    "site_kind",
    "vms",
    "protected_site",
    "recovery_site",
    "cadence_s",
    "status",
    "sub_status",
    "history_minutes",
    "priority",
    "rpo_seconds",
}


def _vpg(raw: object, where: str, site_kinds: dict[str, str]) -> VpgSpec:
    obj = _obj(raw, where, _VPG_KEYS)
    raw_vms = _list(obj, "vms", where)
    if not raw_vms:
        msg = f"{where}.vms: must be a non-empty list of VM names"
        raise EstateError(msg)
    specs = tuple(_vm(v, f"{where}.vms[{i}]") for i, v in enumerate(raw_vms))
    vms = [spec.name for spec in specs]
    kind = _kind(obj.get("site_kind"), f"{where}.site_kind")
    for key in ("protected_site", "recovery_site"):
        site = _opt(obj, key, str, where)
        if site is not None and site.lower() not in site_kinds:
            msg = f"{where}.{key}: unknown site {site!r}"
            raise EstateError(msg)
    protected = obj.get("protected_site")
    if protected is not None and site_kinds[protected.lower()] != kind:
        msg = f"{where}.protected_site: {protected!r} is a {site_kinds[protected.lower()]} site"
        msg += f" but site_kind is {kind}"
        raise EstateError(msg)
    cadence = _opt(obj, "cadence_s", (int, float), where)
    if cadence is not None and cadence <= 0:
        msg = f"{where}.cadence_s: must be positive"
        raise EstateError(msg)
    return VpgSpec(
        name=_str(obj, "name", where),
        site_kind=kind,
        vms=tuple(vms),
        protected_site=obj.get("protected_site"),
        recovery_site=obj.get("recovery_site"),
        cadence_s=None if cadence is None else float(cadence),
        status=_opt_int(obj, "status", where, 0, 8),
        sub_status=_opt_int(obj, "sub_status", where, 0, 42),
        history_minutes=_opt_int(obj, "history_minutes", where, 1, 43200),
        priority=_default(_opt_int(obj, "priority", where, 0, 2), 1),
        rpo_seconds=_opt_int(obj, "rpo_seconds", where, 1, 86400),
        vm_specs=specs if any(not isinstance(v, str) for v in raw_vms) else (),
    )


def _vm(raw: object, where: str) -> VmSpec:
    """A VM name, or ``{"name", "vcenter_id", "instance_uuid"}``; names are kept exactly."""
    if isinstance(raw, str) and raw:
        return VmSpec(raw)
    if not isinstance(raw, dict):
        msg = f"{where}: must be a VM name or an object with name (and vcenter_id, instance_uuid)"
        raise EstateError(msg)
    obj = _obj(raw, where, {"name", "vcenter_id", "instance_uuid"})
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        msg = f"{where}.name: required, a non-empty string"
        raise EstateError(msg)
    vcenter_id = _opt(obj, "vcenter_id", str, where)
    if vcenter_id is not None and (not vcenter_id or "." in vcenter_id or "/" in vcenter_id):
        msg = f"{where}.vcenter_id: a managed object id such as 'vm-42' (no dots or slashes)"
        raise EstateError(msg)
    instance = _opt(obj, "instance_uuid", str, where)
    return VmSpec(name, vcenter_id or None, instance or None)


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


def _site(raw: object, where: str) -> SiteSpec:
    obj = _obj(raw, where, {"name", "kind"})
    return SiteSpec(_str(obj, "name", where), _kind(obj.get("kind"), f"{where}.kind"))


def _kind(value: object, where: str) -> str:
    if value not in SITE_KINDS:
        msg = f"{where}: must be one of {', '.join(SITE_KINDS)} (got {value!r})"
        raise EstateError(msg)
    return str(value)


def _obj(raw: object, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        msg = f"{where}: must be an object"
        raise EstateError(msg)
    unknown = sorted(set(raw) - allowed)
    if unknown:
        msg = f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(allowed))})"
        raise EstateError(msg)
    return raw


def _list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        msg = f"{where + '.' if where else ''}{key}: must be a list"
        raise EstateError(msg)
    return value


def _str(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        msg = f"{where}.{key}: required, a non-empty string"
        raise EstateError(msg)
    return value


def _opt(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        msg = f"{where}.{key}: wrong type {type(value).__name__}"
        raise EstateError(msg)
    return value


def _opt_int(obj: dict[str, Any], key: str, where: str, lo: int, hi: int) -> int | None:
    value: int | None = _opt(obj, key, int, where)
    if value is not None and not lo <= value <= hi:
        msg = f"{where}.{key}: must be between {lo} and {hi} (got {value})"
        raise EstateError(msg)
    return value
