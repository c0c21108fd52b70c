"""What a person sees of an approval request: every argument, shown safely.

An approval is asked where nothing can be rewound, so the approver must see the
exact call: every key and value, nested ones included (docs/approvals.md). The
arguments come from the agent, which may shape them to mislead, so this module
is the one place that turns them into text, for every door (``approvals
show``/``list``, the page, the webhook):

- every control, format (bidi, zero-width), separator, private-use or unassigned
  character becomes a visible escape (``\\x1b``, ``<U+202E>``), and a backslash
  is doubled, so an escape the agent typed cannot pass for one we made;
- nothing is cut silently: :func:`shorten` keeps head and tail and says how many
  characters it left out, and the whole value is one step away;
- host paths are also shown resolved (``/var/tmp/a/./../b`` -> ``/var/tmp/b``);
- values that look like secrets (by key name, or marked ``writeOnly`` or
  ``format: password`` in the tool's input schema) are masked, with their length
  and a short digest so two of them can still be told apart (the rules:
  ``approval_secrets``).

Pure functions only: no IO, no door. None of this is ever written to a log.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .approval_secrets import (
    MASK,
    canonical,
    is_secret_key,
    mask,
    path_matches,
    path_pattern,
)

if TYPE_CHECKING:
    from .approvals import ApprovalRequest

__all__ = [
    "ArgLine",
    "approver_json",
    "argument_lines",
    "confusable_note",
    "differences",
    "if_approved",
    "lines_of",
    "request_lines",
    "short_digest",
    "shorten",
    "timing",
    "timing_text",
    "visible",
]

# A value longer than this (in visible characters) is shown as head … tail.
LONG = 240
_HEAD = _TAIL = 100
# Up to this many requests of one tool are each compared with all the others.
_COMPARE_ALL = 50
_ESCAPED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def visible(text: str) -> str:
    """``text`` with every character a terminal or browser could interpret made a visible escape."""
    out: list[str] = []
    for ch in text:
        short = _SHORT_ESCAPES.get(ch)
        if short is not None:
            out.append(short)
            continue
        category = unicodedata.category(ch)
        # A space that is not U+0020 (no-break, ideographic…) can pass for one: escaped too.
        if category in _ESCAPED_CATEGORIES or (category == "Zs" and ch != " "):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"<U+{code:04X}>")
        else:
            out.append(ch)
    return "".join(out)


def shorten(text: str, limit: int = LONG) -> str:
    """``text`` whole if short, else its head and tail, naming how much was left out."""
    if len(text) <= limit:
        return text
    hidden = len(text) - _HEAD - _TAIL
    return f"{text[:_HEAD]} … {hidden:,} characters not shown … {text[-_TAIL:]}"


def short_digest(args_digest: str) -> str:
    """The first 12 hex digits of a request's argument digest: enough to tell calls apart."""
    return args_digest[:12]


@dataclass(frozen=True)
class ArgLine:
    """One argument value as the approver sees it: escaped, masked, never cut."""

    path: str  # where it is, keys escaped: ``spec.disks[0].name``
    value: str  # the whole value, escaped (strings quoted), or its mask
    length: int  # characters of the value as sent
    secret: bool = False
    resolved: str | None = None  # a host path, resolved, when that differs from what was sent
    host_path: bool = False  # names a file on the VM server's host (catalog host_paths)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ArgLine:
        resolved = raw.get("resolved")
        return cls(
            path=str(raw.get("path", "")),
            value=str(raw.get("value", "")),
            length=int(raw.get("length", 0)),
            secret=bool(raw.get("secret", False)),
            resolved=None if resolved is None else str(resolved),
            host_path=bool(raw.get("host_path", False)),
        )


def argument_lines(
    arguments: Any, *, secret_paths: Iterable[str] = (), host_paths: Iterable[str] = ()
) -> list[ArgLine]:
    """Every leaf of ``arguments``, in order, as the approver sees it.

    ``secret_paths`` and ``host_paths`` are argument paths as the catalog writes
    them (``a.b``, ``items[].c``): values under a secret path are masked whole; a
    host path's string is also shown resolved.
    """
    secrets_at = [path_pattern(p) for p in secret_paths]
    paths_at = [path_pattern(p) for p in host_paths]
    lines: list[ArgLine] = []
    for parts, value in _leaves(arguments, (), secrets_at):
        secret = isinstance(value, _Masked)
        raw = value.raw if isinstance(value, _Masked) else value
        kept = MASK.fullmatch(raw) if secret and isinstance(raw, str) else None
        text = raw if kept else mask(raw) if secret else _scalar(raw)
        length = int(kept.group(1)) if kept else _length(raw)
        host_path = any(path_matches(p, parts) for p in paths_at)
        resolved = _resolved(raw) if host_path and not secret and isinstance(raw, str) else None
        lines.append(ArgLine(_path_text(parts), text, length, secret, resolved, host_path))
    return lines


def _length(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(canonical(value))


class _Masked:
    """A subtree under a secret key: shown as one masked value."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw


def _leaves(
    node: Any, parts: tuple[str | int, ...], secrets_at: Sequence[list[str]]
) -> Iterable[tuple[tuple[str | int, ...], Any]]:
    if parts and (is_secret_key(parts[-1]) or any(path_matches(p, parts) for p in secrets_at)):
        yield parts, _Masked(node)
        return
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, (*parts, str(key)), secrets_at)
    elif isinstance(node, list) and node:
        for index, value in enumerate(node):
            yield from _leaves(value, (*parts, index), secrets_at)
    else:
        yield parts, node


def _path_text(parts: tuple[str | int, ...]) -> str:
    if not parts:
        return "(arguments)"
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f'["{visible(part)}"]'
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return '"' + visible(value).replace('"', '\\"') + '"'
    return visible(canonical(value))


def _resolved(path: str) -> str | None:
    """``path`` with ``.``, ``..`` and repeated slashes resolved (lexically: no symlinks)."""
    if not path:
        return "(empty: the server's working directory)"
    resolved = posixpath.normpath(path)
    if resolved.startswith("//"):
        resolved = "/" + resolved.lstrip("/")
    return visible(resolved) if resolved != path else None


def confusable_note(vm: str) -> str | None:
    """Why a VM name may imitate another (non-ASCII letters, mixed scripts); None if plain."""
    odd = [ch for ch in vm if ord(ch) > 0x7E or ord(ch) < 0x20]
    if not odd:
        return None
    scripts = sorted({_script(ch) for ch in vm if ch.isalpha()})
    shown = " ".join(f"<U+{ord(ch):04X}>" for ch in dict.fromkeys(odd))
    mixed = f"; letters of several scripts ({', '.join(scripts)})" if len(scripts) > 1 else ""
    return f"not plain ASCII: {shown}{mixed}. It may imitate another VM's name"


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "UNKNOWN")
    return name.split(" ")[0]


def differences(views: Mapping[str, Sequence[ArgLine]]) -> dict[str, list[str]]:
    """For requests of one tool (id -> lines): where each differs from the one most like it.

    Two calls that differ in one value show that value, however many other
    requests of the tool wait. A path present in one and absent in the other
    differs too. A request alone gets an empty list.
    """
    values = {rid: {line.path: line.value for line in lines} for rid, lines in views.items()}
    order = {rid: [line.path for line in lines] for rid, lines in views.items()}
    ids = list(views)
    out: dict[str, list[str]] = {}
    for at, rid in enumerate(ids):
        # Many requests of one tool (a flood): compare with the neighbours in order only,
        # so a page of them stays quick to draw.
        others = ids if len(ids) <= _COMPARE_ALL else ids[max(0, at - 1) : at + 2]
        best: list[str] | None = None
        for other in others:
            if other == rid:
                continue
            paths = list(dict.fromkeys([*order[rid], *order[other]]))
            differ = [p for p in paths if values[rid].get(p) != values[other].get(p)]
            if best is None or len(differ) < len(best):
                best = differ
        out[rid] = best or []
    return out


def request_lines(request: ApprovalRequest) -> list[ArgLine]:
    """A request's arguments as the approver sees them (old requests: as they were kept)."""
    if request.call_arguments is None:  # made before the whole arguments were kept
        return [
            ArgLine(visible(str(k)), visible(str(v)), len(str(v)))
            for k, v in request.arguments.items()
        ]
    return argument_lines(
        request.call_arguments, secret_paths=request.secret_paths, host_paths=request.path_args
    )


def if_approved(request: ApprovalRequest, lines: Sequence[ArgLine]) -> str:
    """What happens if this request is approved, in one plain sentence or two."""
    vms = ", ".join(visible(v) for v in request.vms)
    on = f"on VM(s) {vms}" if vms else "naming no VM that Zerto protects"
    text = f"Runs once, with no rewind point (no Zerto checkpoint in front of it), {on}."
    paths = [_path_shown(line) for line in lines if line.host_path]
    if paths:
        text += f" It may write these paths on the VM server's host: {'; '.join(paths)}."
    return text


def _path_shown(line: ArgLine) -> str:
    sent = shorten(line.value)
    return f"{line.resolved} (sent as {sent})" if line.resolved else sent


def approver_json(request: ApprovalRequest) -> dict[str, Any]:
    """A request as the approvals socket sends it: arguments as lines, secrets masked.

    The whole arguments stay in the service's state; what leaves it is what a
    person is shown (:func:`request_lines`), with each value whole.
    """
    out = request.to_json()
    out["call_arguments"] = None
    out["lines"] = [line.to_json() for line in request_lines(request)]
    return out


def lines_of(raw: Mapping[str, Any]) -> list[ArgLine]:
    """The lines :func:`approver_json` sent (none if the service sent none)."""
    found = raw.get("lines")
    if not isinstance(found, list):
        return []
    return [ArgLine.from_json(item) for item in found if isinstance(item, Mapping)]


def timing(request: ApprovalRequest, now: float) -> list[tuple[str, str, float | None]]:
    """When things happen, as (label, words, moment): who waits until when, who decided when.

    A decided request says when and by whom; only a pending one has an expiry.
    Each door shows ``words`` then the moment (:func:`timing_text` for text).
    """
    from .approvals import APPROVED, DENIED, EXPIRED, PENDING, USED

    out: list[tuple[str, str, float | None]] = [("asked", "", request.created)]
    if request.state == PENDING:
        if request.wait_until is None:
            out.append(
                ("caller", "does not wait: the same call, retried once approved, runs", None)
            )
        elif request.wait_until > now:
            out.append(("caller waits", "until", request.wait_until))
        else:
            # Said of a pending request: "approved" alone would read as if it were.
            out.append(
                ("caller", "stopped waiting (if approved, its retry runs once)", request.wait_until)
            )
        out.append(("open until", "", request.expires))
        return out
    who = visible(request.decided_by or "nobody")
    if request.state in (APPROVED, USED, DENIED) and request.decided_at is not None:
        verb = "denied" if request.state == DENIED else "approved"
        out.append((verb, f"by {who},", request.decided_at))
    if request.state == USED and request.used_at is not None:
        out.append(("ran", "", request.used_at))
    if request.state == EXPIRED:
        how = "approved but never used," if request.decided_by else "nobody answered,"
        out.append(("lapsed", how, request.expires))
    return out


def timing_text(request: ApprovalRequest, now: float) -> list[tuple[str, str]]:
    """:func:`timing` as (label, text) for a terminal or a chat line."""
    return [
        (label, " ".join(p for p in (words, _at(at, now) if at else "") if p))
        for label, words, at in timing(request, now)
    ]


def _at(epoch: float, now: float) -> str:
    from .decision import fmt_time

    delta = epoch - now
    span = abs(int(delta))
    text = f"{span} s" if span < 60 else f"{span // 60} min {span % 60:02d} s"
    relative = f"in {text}" if delta > 0 else f"{text} ago"
    return f"{fmt_time(epoch)[:19].replace('T', ' ')} UTC ({relative})"
