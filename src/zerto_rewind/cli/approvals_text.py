"""``zerto-rewind approvals`` as text for a terminal: every argument, nothing interpreted.

Every string that came from the agent's call (tool, VM names, keys, values,
principal, host, reasons) passes through :func:`~zerto_rewind.core.approval_view.visible`
before it is printed, so no escape sequence, carriage return or bidi control
reaches the approver's terminal. Nothing here uses markup (rich is not involved).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..core.approval_view import (
    ArgLine,
    confusable_note,
    differences,
    if_approved,
    short_digest,
    shorten,
    timing_text,
    visible,
)
from ..core.approvals import PENDING, ApprovalRequest

__all__ = ["details", "listing"]

_LABEL = 10


def details(
    request: ApprovalRequest, lines: Sequence[ArgLine], link: str | None, *, full: bool
) -> str:
    """``approvals show``: the request, what approving does, and every argument."""
    now = time.time()
    out = [
        _fact("request", f"{request.id} ({request.state})"),
        _fact("tool", visible(request.tool)),
        _fact("VMs", ", ".join(visible(v) for v in request.vms) or "none named"),
    ]
    for vm in request.vms:
        note = confusable_note(vm)
        if note is not None:
            out.append(_fact("WARNING", f"VM {visible(vm)}: {note}"))
    out += [
        _fact("why", visible(request.why)),
        _fact("requester", _requester(request)),
        _fact("digest", f"{short_digest(request.args_digest)} (sha256 of the arguments)"),
    ]
    out += [_fact("VPG", visible(status)) for status in request.vpg_status]
    out += [_fact(label, text) for label, text in timing_text(request, now)]
    if request.note:
        out.append(_fact("reason", visible(request.note)))
    if request.state == PENDING:
        out.append(_fact("if approved", if_approved(request, lines)))
    out += _arguments(request.id, lines, full=full)
    if link:
        out.append(_fact("page", visible(link)))
    return "\n".join(out)


def listing(requests: Sequence[tuple[ApprovalRequest, Sequence[ArgLine]]]) -> list[str]:
    """``approvals list``: one line per request, then what differs from same-tool requests."""
    now = time.time()
    by_tool: dict[str, dict[str, Sequence[ArgLine]]] = {}
    for request, lines in requests:
        by_tool.setdefault(request.tool, {})[request.id] = lines
    differing = {
        rid: paths for views in by_tool.values() for rid, paths in differences(views).items()
    }
    out: list[str] = []
    for request, lines in requests:
        out.append(_line(request, now))
        paths = differing.get(request.id) or []
        if paths:
            out.append(
                f"    differs from the most similar other {visible(request.tool)} request in:"
            )
            values = {line.path: line for line in lines}
            for path in paths:
                line = values.get(path)
                shown = "(absent)" if line is None else _value(line, full=False)
                if line is not None and line.resolved is not None:
                    shown += f" (resolves to {line.resolved})"
                out.append(f"      {path} = {shown}")
    return out


def _line(request: ApprovalRequest, now: float) -> str:
    vms = ",".join(visible(v) for v in request.vms) or "-"
    when = "; ".join(f"{label} {text}" for label, text in timing_text(request, now)[1:])
    return (
        f"{request.id}  {request.state:<8} {visible(request.tool)}  vm={vms}  "
        f"by={visible(request.principal)}  digest={short_digest(request.args_digest)}  {when}"
    )


def _requester(request: ApprovalRequest) -> str:
    text = visible(request.principal)
    if request.host:
        text += f" via {visible(request.host)}"
    if request.session:
        text += f", session {visible(request.session)}"
    return text


def _arguments(request_id: str, lines: Sequence[ArgLine], *, full: bool) -> list[str]:
    if not lines:
        return [_fact("arguments", "none")]
    out: list[str] = []
    cut = False
    for line in lines:
        shown = _value(line, full=full)
        cut = cut or shown != line.value
        out.append(_fact("argument", f"{line.path} = {shown}"))
        if line.resolved is not None:
            out.append(_fact("", f"  resolves to {line.resolved}"))
    if cut:
        out.append(_fact("", f"long values are cut: `approvals show {request_id} --full`"))
    return out


def _value(line: ArgLine, *, full: bool) -> str:
    if line.secret:
        return line.value + " (masked: it looks like a secret)"
    return line.value if full else shorten(line.value)


def _fact(label: str, text: str) -> str:
    return f"{label:<{_LABEL}}{text}" if len(label) < _LABEL else f"{label} {text}"
