"""Which argument values are secrets, and their masks: the approval views' masking rules.

A value is a secret when its key looks like one (``password``, ``api_key``,
``privateKey``, ``token``…) or when the tool's input schema marks it
``writeOnly`` or ``format: password``. A secret is shown, and kept, only as its
mask: ``<secret: N characters, sha256 12ab34cd…>`` (docs/approvals.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MASK",
    "canonical",
    "is_secret_key",
    "mask",
    "mask_secrets",
    "path_matches",
    "path_pattern",
    "schema_secret_paths",
]

_SECRET_WORDS = {
    "password",
    "passwd",
    "pass",
    "pwd",
    "passphrase",
    "token",
    "secret",
    "key",
    "apikey",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "cookie",
    "privatekey",
    "secretkey",
    "accesskey",
}
_SECRET_PARTS = ("password", "passwd", "secret", "token", "credential", "apikey", "privatekey")
MASK = re.compile(r"<secret: (\d+) characters, sha256 [0-9a-f]{8}…>")
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def mask_secrets(arguments: Any, secret_paths: Iterable[str] = ()) -> Any:
    """``arguments`` with every secret-looking value replaced by its mask, for keeping.

    A request keeps this, not the secrets: the approver is shown the mask anyway,
    and the call is bound by the digest of the arguments as sent.
    """
    secrets_at = [path_pattern(p) for p in secret_paths]
    return _masked_copy(arguments, (), secrets_at)


def _masked_copy(node: Any, parts: tuple[str | int, ...], secrets_at: list[list[str]]) -> Any:
    if parts and (is_secret_key(parts[-1]) or any(path_matches(p, parts) for p in secrets_at)):
        return node if isinstance(node, str) and MASK.fullmatch(node) else mask(node)
    if isinstance(node, dict):
        return {k: _masked_copy(v, (*parts, str(k)), secrets_at) for k, v in node.items()}
    if isinstance(node, list):
        return [_masked_copy(v, (*parts, i), secrets_at) for i, v in enumerate(node)]
    return node


def is_secret_key(part: str | int) -> bool:
    """A key named like a secret: password, passwd, api_key, privateKey, token, …"""
    if isinstance(part, int):
        return False
    lowered = part.lower()
    if any(word in lowered.replace("_", "").replace("-", "") for word in _SECRET_PARTS):
        return True
    words = {w.lower() for w in _WORDS.findall(part)}
    return bool(words & _SECRET_WORDS)


def path_pattern(path: str) -> list[str]:
    """``a.b[].c`` as ``["a", "b", "*", "c"]``: ``*`` is any list index."""
    out: list[str] = []
    for part in path.split("."):
        if part.endswith("[]"):
            out += [part[:-2], "*"]
        else:
            out.append(part)
    return out


def path_matches(pattern: list[str], parts: tuple[str | int, ...]) -> bool:
    if len(pattern) != len(parts):
        return False
    for want, got in zip(pattern, parts, strict=True):
        if want == "*":
            if not isinstance(got, int):
                return False
        elif isinstance(got, int) or want != got:
            return False
    return True


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def mask(value: Any) -> str:
    body = value if isinstance(value, str) else canonical(value)
    digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"<secret: {len(body)} characters, sha256 {digest}…>"


def schema_secret_paths(schema: Mapping[str, Any] | None) -> list[str]:
    """Argument paths an input schema marks ``writeOnly`` or ``format: password``."""
    found: list[str] = []
    if isinstance(schema, Mapping):
        _schema_walk(schema, "", found, 0)
    return found


def _schema_walk(node: Mapping[str, Any], path: str, found: list[str], depth: int) -> None:
    if depth > 16:
        return
    if path and (node.get("writeOnly") is True or node.get("format") == "password"):
        found.append(path)
        return
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        for key, child in properties.items():
            if isinstance(child, Mapping):
                _schema_walk(child, f"{path}.{key}" if path else str(key), found, depth + 1)
    items = node.get("items")
    if isinstance(items, Mapping) and path:
        _schema_walk(items, f"{path}[]", found, depth + 1)
    for combinator in ("anyOf", "oneOf", "allOf"):
        for child in node.get(combinator) or ():
            if isinstance(child, Mapping):
                _schema_walk(child, path, found, depth + 1)
