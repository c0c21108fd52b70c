"""What the simulated ZVM protects: sites, VPGs and VMs, as plain specs.

An estate is data only; :mod:`zerto_rewind.sim.state` turns it into live objects.
The default estate mirrors the seed README; ``--estate FILE`` loads another
(schema in docs/simulator.md) and ``--vms N`` adds generated VPGs. An estate whose
``sites`` say ``"zvm": true`` has one ZVM per such site (a multi-site estate);
``--estate three-sites`` names the packaged example (``ESTATES_DIR``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerto_rewind.errors import ZertoRewindError
from zerto_rewind.sim.enums import SITE_KINDS

LOCAL_SITE_NAME = "zvm-local"
# Packaged estates, loadable by name (``--estate three-sites``).
ESTATES_DIR = Path(__file__).parent / "estates"
# Which ZVM of a paired VPG accepts a tag / a recovery operation (multi-site estates).
SIDES = ("protected", "recovery", "both")


class EstateError(ZertoRewindError, ValueError):
    """An estate file that cannot be used; the message names the offending key.

    Still a ValueError, as it always was, for callers that parse with ``except ValueError``.
    """


@dataclass(frozen=True)
class SiteSpec:
    """A site: the local ZVM's own, or a paired peer.

    ``zvm``: the site has its own simulated ZVM (multi-site estates). ``client_id``
    names that ZVM's confidential client; ``peers``, when given, is the list of
    sites it is paired with (default: every site it shares a VPG with).
    """

    name: str
    kind: str
    zvm: bool = False
    client_id: str | None = None
    peers: tuple[str, ...] | None = None


@dataclass(frozen=True)
class VmSpec:
    """A VM with the vCenter identity a test gives it (else one is generated).

    ``vcenter_id`` is the managed object id (``vm-42``) that ends the VM's
    ``VmIdentifier``; ``instance_uuid`` fills ``Link.instance_identifier``.
    ``server_id`` (set by a vCenter link, not by estate files) is the vCenter's
    instance UUID, which then begins the ``VmIdentifier`` instead of the site's GUID.
    """

    name: str
    vcenter_id: str | None = None
    instance_uuid: str | None = None
    server_id: str | None = None


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
    """Sites and VPGs; ``local`` is the site whose ZVM answers the API.

    In a multi-site estate ``zvms`` names the sites with a ZVM, in file order;
    ``local`` is the first of them and ``peers`` every other site.
    """

    local: SiteSpec
    peers: tuple[SiteSpec, ...]
    vpgs: tuple[VpgSpec, ...] = field(default=())
    zvms: tuple[str, ...] = ()
    tag_accepted_by: str = "protected"
    recovery_accepted_by: str = "both"

    @property
    def multi_site(self) -> bool:
        """Whether the estate has a ZVM per ``"zvm": true`` site."""
        return bool(self.zvms)

    def site(self, name: str) -> SiteSpec:
        """A declared site by name (case-insensitive)."""
        return next(s for s in (self.local, *self.peers) if s.name.lower() == name.lower())


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


def generated_vpgs(
    count: int, per_vpg: int = 1, *, between: tuple[SiteSpec, SiteSpec] | None = None
) -> tuple[VpgSpec, ...]:
    """``count`` VMs named ``vm-00001``… in vCenter VPGs of ``per_vpg`` VMs each.

    ``between``: the (protected, recovery) sites of a multi-site estate; the VPGs
    then take the protected site's kind.
    """
    per_vpg = max(1, per_vpg)
    kind = "vcenter" if between is None else between[0].kind
    sites = (None, None) if between is None else (between[0].name, between[1].name)
    specs = []
    for first in range(1, count + 1, per_vpg):
        names = tuple(f"vm-{n:05d}" for n in range(first, min(first + per_vpg, count + 1)))
        name = f"vpg-{(first - 1) // per_vpg + 1:05d}"
        specs.append(VpgSpec(name, kind, names, protected_site=sites[0], recovery_site=sites[1]))
    return tuple(specs)


def generated_sites(estate: Estate) -> tuple[SiteSpec, SiteSpec] | None:
    """Where ``--vms`` VPGs go in a multi-site estate: first ZVM site → the next site."""
    if not estate.multi_site:
        return None
    first = estate.local
    others = [estate.site(n) for n in estate.zvms[1:]] + list(estate.peers)
    return first, (others[0] if others else first)


def estate_path(path: Path) -> Path:
    """``path``, or the packaged estate of that name when no such file exists.

    A bare name (``three-sites``, with or without ``.json``) that is not a file in
    the working directory is looked up in :data:`ESTATES_DIR`.
    """
    if path.exists() or path.parent != Path():
        return path
    packaged = ESTATES_DIR / f"{path.name.removesuffix('.json')}.json"
    return packaged if packaged.is_file() else path


def load_estate(path: Path) -> Estate:
    """Read and validate an estate file; raise :class:`EstateError` naming the key."""
    path = estate_path(path)
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


_TOP_KEYS = {"local_site", "sites", "vpgs", "tag_accepted_by", "recovery_accepted_by"}


def parse_estate(raw: object) -> Estate:
    """Validate decoded JSON into an :class:`Estate`."""
    top = _obj(raw, "(top level)", _TOP_KEYS)
    sites = tuple(_site(s, f"sites[{i}]") for i, s in enumerate(_list(top, "sites", "")))
    zvms = tuple(site.name for site in sites if site.zvm)
    if zvms:
        return _multi_site(top, sites, zvms)
    for key in ("tag_accepted_by", "recovery_accepted_by"):
        if key in top:
            msg = f'{key}: only for an estate with "zvm": true sites'
            raise EstateError(msg)
    local = _site(top.get("local_site", {"name": LOCAL_SITE_NAME, "kind": "vcenter"}), "local_site")
    if local.zvm:
        msg = 'local_site.zvm: list every site with a ZVM under sites, with "zvm": true'
        raise EstateError(msg)
    _unique_names([local.name] + [p.name for p in sites], " (including local_site)")
    kinds = {site.name.lower(): site.kind for site in (local, *sites)}
    return Estate(local, sites, _vpgs(top, kinds))


def _multi_site(top: dict[str, Any], sites: tuple[SiteSpec, ...], zvms: tuple[str, ...]) -> Estate:
    """An estate with a ZVM per ``"zvm": true`` site: every VPG names both of its sites."""
    if "local_site" in top:
        msg = 'local_site: not with "zvm": true sites; list every site under sites'
        raise EstateError(msg)
    _unique_names([s.name for s in sites], "")
    kinds = {site.name.lower(): site.kind for site in sites}
    for i, site in enumerate(sites):
        for peer in site.peers or ():
            if peer.lower() not in kinds or peer.lower() == site.name.lower():
                msg = f"sites[{i}].peers: {peer!r} is not another site of the estate"
                raise EstateError(msg)
    vpgs = _vpgs(top, kinds)
    with_zvm = {name.lower() for name in zvms}
    for i, vpg in enumerate(vpgs):
        for key in ("protected_site", "recovery_site"):
            if getattr(vpg, key) is None:
                msg = f'vpgs[{i}].{key}: required when sites have "zvm": true'
                raise EstateError(msg)
        ends = {str(vpg.protected_site).lower(), str(vpg.recovery_site).lower()}
        if not ends & with_zvm:
            msg = f"vpgs[{i}]: neither its protected nor its recovery site has a ZVM"
            raise EstateError(msg)
    first = next(s for s in sites if s.zvm)
    return Estate(
        first,
        tuple(s for s in sites if s is not first),
        vpgs,
        zvms=zvms,
        tag_accepted_by=_side(top, "tag_accepted_by", "protected"),
        recovery_accepted_by=_side(top, "recovery_accepted_by", "both"),
    )


def _unique_names(names: list[str], including: str) -> None:
    lowered = [name.lower() for name in names]
    if len(set(lowered)) != len(lowered):
        msg = f"sites: site names must be unique{including}"
        raise EstateError(msg)


def _vpgs(top: dict[str, Any], kinds: dict[str, str]) -> tuple[VpgSpec, ...]:
    vpgs = tuple(_vpg(v, f"vpgs[{i}]", kinds) for i, v in enumerate(_list(top, "vpgs", "")))
    seen: set[str] = set()
    for i, vpg in enumerate(vpgs):
        if vpg.name.lower() in seen:
            msg = f"vpgs[{i}].name: duplicate VPG name {vpg.name!r}"
            raise EstateError(msg)
        seen.add(vpg.name.lower())
    return vpgs


def _side(top: dict[str, Any], key: str, default: str) -> str:
    value = top.get(key, default)
    if value not in SIDES:
        msg = f"{key}: must be one of {', '.join(SIDES)} (got {value!r})"
        raise EstateError(msg)
    return str(value)


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
    obj = _obj(raw, where, {"name", "kind", "zvm", "client_id", "peers"})
    zvm = obj.get("zvm", False)
    if not isinstance(zvm, bool):
        msg = f"{where}.zvm: must be true or false"
        raise EstateError(msg)
    for key in ("client_id", "peers"):
        if key in obj and not zvm:
            msg = f'{where}.{key}: only for a site with "zvm": true'
            raise EstateError(msg)
    client_id = _opt(obj, "client_id", str, where)
    if client_id is not None and not client_id.strip():
        msg = f"{where}.client_id: must be a non-empty string"
        raise EstateError(msg)
    peers = None
    if "peers" in obj:
        raw_peers = _list(obj, "peers", where)
        if not all(isinstance(p, str) and p for p in raw_peers):
            msg = f"{where}.peers: must be a list of site names"
            raise EstateError(msg)
        peers = tuple(raw_peers)
    name, kind = _str(obj, "name", where), _kind(obj.get("kind"), f"{where}.kind")
    return SiteSpec(name, kind, zvm, client_id, peers)


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
