"""Every config key, one table per section: the one place a key is declared.

A :class:`Key` row gives a key's name in the file and the rule (:mod:`.parse_base`)
that reads its value; its :class:`Section` gives where the object sits and the anchor
of the docs/configuration.md heading that documents it. The parser takes a section's
known keys from its table (any other key is an error that lists them and names a near
miss) and reads each key that has a rule by that rule (:meth:`Section.read`). A key
without a rule is read by its section's own function (parser.py, parse_catalog.py,
parse_gateway.py), because its meaning depends on other keys (a secret's source,
``tls_cert`` with ``tls_key``). tests/unit/config/test_schema.py checks that each key
is documented under its heading, that each rule's key is a field of its section's
settings, and that the parser accepts exactly each table's keys.

To add a key ``guard.example_s``:

1. a field in the section's record (sections.py): ``example_s: float = 5.0``, its
   type and its default (a record refuses any keyword it does not declare);
2. a row in the table below: ``Key("example_s", number(inclusive=True)),``;
3. a row for it under the section's heading in docs/configuration.md.

A key of a section read by its own function (``zvm``, ``upstreams.NAME``, ``state``…)
gets its row here too, without a rule, and its reading in that function.
"""

from __future__ import annotations

from .parse_base import (
    cadences,
    choice,
    count,
    digests,
    flag,
    number,
    page_url,
    path,
    redis_url,
    scrypt_hashes,
    site_kind_cadences,
    site_types,
    tag_bound,
    tag_prefix,
    text,
    tool_pins,
    user_names,
    whole,
)
from .sections import (
    HTTP_IMPL_CHOICES,
    ON_PENDING_CHOICES,
    PROMPT_AS_CHOICES,
    PROMPT_VIA_CHOICES,
    TAG_VIA_CHOICES,
)
from .settings import RECOVERY_VIA_CHOICES, ZERTO_ID_FIELDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .parse_base import ParserBase, Rule

__all__ = ["SECTIONS", "Key", "Section"]


class Key:
    """One key of a section: its name in the file and the rule that reads its value
    (None: the section's own function reads it)."""

    __slots__ = ("name", "rule")

    def __init__(self, name: str, rule: Rule | None = None) -> None:
        self.name = name
        self.rule = rule


class Section:
    """The keys one JSON object may hold, where it sits (``zvms.SITE``) and the anchor of
    the docs/configuration.md heading that documents them."""

    __slots__ = ("doc", "keys", "names", "where")

    def __init__(self, where: str, doc: str, *keys: Key) -> None:
        self.where = where
        self.doc = doc
        self.keys = keys
        self.names = tuple(key.name for key in keys)

    def read(self, parser: ParserBase, raw: Any, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """``raw`` (the value of the dotted ``key``) checked as an object of this table's
        keys, and each of its keys that has a rule read by it: (the object, name -> value)."""
        spec = parser.obj(raw, key, self.names)
        prefix = f"{key}." if key else ""
        values = {
            row.name: row.rule(parser, spec[row.name], prefix + row.name)
            for row in self.keys
            if row.rule is not None and row.name in spec
        }
        return spec, values


TOP = Section(
    "(top level)",
    "configuration",
    *map(Key, ("zvm", "zvms", "read_only_tools", "tools", "vm_map", "unknown_tools")),
    *map(Key, ("catalog", "guard", "recovery", "state_dir", "log", "log_anchor")),
    *map(Key, ("upstreams", "gateway", "state", "approvals")),
)

# ---- the ZVMs: read together (the grant depends on which secret keys are given)
ZVM = Section(
    "zvm, zvms.SITE",
    "zvm",
    *map(Key, ("url", "client_id", "client_secret", "client_secret_env", "client_secret_file")),
    *map(Key, ("username", "password", "password_env", "password_file")),
    Key("ca_bundle", path),
    Key("verify_tls", flag),
    Key("connect_timeout_s", number()),
    Key("read_timeout_s", number()),
    Key("scope", text),
    Key("allow_insecure_http", flag),
)

# ---- the catalog
CATALOG = Section(
    "catalog",
    "the-catalog",
    Key("from_annotations", flag),
    Key("resolvers"),
    Key("pins", tool_pins),
)
TOOL = Section(
    "tools.NAME",
    "the-catalog",
    *map(Key, ("vm_arg", "vm_map", "vpgs", "decision", "host_paths")),
)
VM_PATH = Section("tools.NAME.vm_arg", "the-catalog", Key("path"), Key("pattern"))
VM_MAP = Section("vm_map, tools.NAME.vm_map", "the-catalog", Key("aliases"), Key("strip_domain"))
RESOLVER = Section(
    "catalog.resolvers.SERVER",
    "the-identity-check-catalogresolvers",
    *map(Key, ("tool", "arg", "id_path")),
    Key("zerto_field", choice(ZERTO_ID_FIELDS)),
    Key("zerto_pattern"),
    Key("timeout_s", number()),
    Key("vcenter", text),
    Key("vcenter_path"),
)

# ---- the guard: every key by its rule
GUARD = Section(
    "guard",
    "guard",
    Key("timeout_s", number()),
    Key("on_pending", choice(ON_PENDING_CHOICES)),
    Key("prompt_as", choice(PROMPT_AS_CHOICES)),
    Key("cadence_s", cadences),
    Key("site_cadence_s", site_kind_cadences),
    Key("site_types", site_types),
    Key("landing_allowance_s", number(inclusive=True)),
    Key("overdue_factor", number(minimum=1.0, inclusive=True)),
    Key("overdue_min_s", number()),
    Key("vm_cache_ttl_s", number(inclusive=True)),
    Key("tag_prefix", tag_prefix),
    Key("protect_self", flag),
    Key("prompt_via", choice(PROMPT_VIA_CHOICES)),
    Key("max_tags_per_minute", tag_bound),
    Key("tag_via", choice(TAG_VIA_CHOICES)),
    Key("site_down_s", number(inclusive=True)),
    Key("unknown_outcome_window_s", number(inclusive=True)),
)
RECOVERY = Section(
    "recovery", "recovery", Key("allow_live", flag), Key("via", choice(RECOVERY_VIA_CHOICES))
)
LOG_ANCHOR = Section(
    "log_anchor",
    "log_anchor-the-decision-logs-signed-anchors",
    Key("every_lines", whole(1, 1_000_000)),
    Key("every_s", number(minimum=1.0, inclusive=True)),
    Key("path", path),
)

# ---- the gateway's sections
UPSTREAM = Section(
    "upstreams.NAME",
    "upstreams-the-gateway",
    *map(Key, ("command", "env", "url", "headers")),
    Key("timeout_s", number()),
    *map(Key, ("user", "group", "workdir", "log")),
)
_LISTENER = "gateway-the-listeners-bounds-and-who-reads-its-health"
GATEWAY = Section(
    "gateway",
    _LISTENER,
    Key("clients", digests),
    Key("tls_cert", path),
    Key("tls_key", path),
    Key("allow_insecure_bind", flag),
    Key("fast_lane", flag),
    Key("http_impl", choice(HTTP_IMPL_CHOICES)),
    Key("limits"),
    Key("max_body_bytes", count(minimum=1024.0)),
    Key("elicit_timeout_s", number()),
    Key("header_timeout_s", number(minimum=0.1, inclusive=True)),
    Key("body_timeout_s", number(minimum=0.1, inclusive=True)),
    Key("idle_timeout_s", number(minimum=0.1, inclusive=True)),
    Key("handshake_timeout_s", number(minimum=0.1, inclusive=True)),
    Key("max_connections", count()),
    Key("max_connections_per_source", count()),
    Key("metrics_clients", digests),
)
# Within a minute: a longer handshake wait lets abandoned sessions fill the gateway again.
LIMITS = Section(
    "gateway.limits",
    "gatewaylimits-what-one-token-and-all-of-them-may-hold",
    Key("sessions_per_token", count()),
    Key("sessions", count()),
    Key("calls_per_token", count()),
    Key("argument_bytes_per_token", count()),
    Key("argument_bytes", count()),
    Key("argument_bytes_per_s_per_token", count()),
    Key("retry_after_s", count()),
    Key("handshake_s", number(at_most=60.0)),
    Key("idle_s", number(at_most=86400.0, why=" (a day)")),
)
APPROVALS = Section(
    "approvals",
    "approvals",
    Key("approvers"),
    Key("agent_users", user_names),
    Key("web_approvers", scrypt_hashes),
    Key("wait_s", number(inclusive=True)),
    Key("expires_s", number(inclusive=True)),
    Key("trust_client_answers", flag),
    Key("page_url", page_url),
    Key("notify"),
    Key("max_open_per_principal", whole(1, 1000)),
    Key("socket_max_ops", whole(1, 10_000)),
    Key("socket_max_age_s", number()),
)
APPROVERS = Section(
    "approvals.approvers", "approvals", Key("users", user_names), Key("groups", user_names)
)
NOTIFY = Section(
    "approvals.notify",
    "approvals",
    Key("url"),
    Key("secret_env", text),
    Key("secret_file", path),
    Key("timeout_s", number()),
)
# state.url first: the others apply to a Redis only.
STATE = Section(
    "state",
    "state-shared-state-in-redis",
    Key("url", redis_url),
    Key("password_env", text),
    Key("password_file", path),
    Key("allow_unauthenticated_redis", flag),
    Key("ca_file", path),
)

SECTIONS = (
    TOP, ZVM, CATALOG, TOOL, VM_PATH, VM_MAP, RESOLVER, GUARD, RECOVERY, LOG_ANCHOR,
    UPSTREAM, GATEWAY, LIMITS, APPROVALS, APPROVERS, NOTIFY, STATE,
)  # fmt: skip
