"""A host's tool call, normalised: the names the catalog and the self-protection check know.

MCP tools become ``mcp__<server>__<tool>`` (the catalog's names), a host's shell
tool becomes ``Bash`` with its ``command``, a host's file tools become ``Write``
with the ``file_path`` each writes (one per path: Codex's ``apply_patch`` may
write several). Everything else keeps the host's name; sent to the service, a
name it does not list is *unlisted*: a prompt, never a silent pass.
"""

from __future__ import annotations

from .. import _fastjson
from ..errors import HookInputError
from . import MAX_INPUT_BYTES, Host, load_object, tool_name_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MAX_INPUT_BYTES",
    "Call",
    "HookInputError",
    "Host",
    "after_result",
    "apply_patch_paths",
    "arguments",
    "deny_reason",
    "file_call",
    "host_call",
    "load_object",
    "opt_str",
    "read_payload",
    "shell_call",
    "split_server",
    "tool_name_of",
]

MCP = "mcp"
SHELL = "shell"
FILES = "files"


class Call:
    """One call as the guard sees it.

    ``kind``: ``mcp`` (asked of the service), ``shell`` (``command`` scanned) or
    ``files`` (each of ``paths`` checked). ``host_tool`` is the name the host used,
    for the reasons. ``result`` is set for a post event: what became of the call.
    """

    __slots__ = (
        "command", "cwd", "host_tool", "kind", "paths", "result", "session_id", "tool_input",
        "tool_name", "tool_use_id",
    )  # fmt: skip

    def __init__(
        self,
        kind: str,
        tool_name: str,
        host_tool: str,
        tool_input: dict[str, Any],
        ids: dict[str, str | None],
        *,
        command: str = "",
        paths: tuple[str, ...] = (),
    ) -> None:
        """``ids``: the host's ``session_id``, ``tool_use_id`` and ``cwd`` (None: not given)."""
        self.kind = kind
        self.tool_name = tool_name
        self.host_tool = host_tool
        self.tool_input = tool_input
        self.session_id = ids.get("session_id")
        self.tool_use_id = ids.get("tool_use_id")
        self.cwd = ids.get("cwd")
        self.command = command
        self.paths = paths
        # After the call (a post event): succeeded or failed; None before it.
        self.result: str | None = None

    def payload(self, **more: str) -> bytes:
        """The ``POST /v1/decide`` body: a PreToolUse payload in the catalog's names; with
        ``more`` (``result``, ``host``), the ``POST /v1/result`` body of a post event."""
        import json

        body: dict[str, Any] = {
            **more,
            "hook_event_name": "PreToolUse",
            "tool_name": self.tool_name,
            "tool_input": self.tool_input,
        }
        for key in ("session_id", "tool_use_id", "cwd"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        return json.dumps(body, ensure_ascii=False).encode()


def read_payload(
    data: bytes,
    host: str,
    events: tuple[str, ...],
    *,
    name_keys: tuple[str, ...] = ("tool_name",),
    input_keys: tuple[str, ...] = ("tool_input",),
    id_keys: dict[str, tuple[str, ...]] | None = None,
) -> tuple[dict[str, Any], str, dict[str, Any], dict[str, str | None]]:
    """Stdin → (the object, the tool's name, its arguments, the ids); HookInputError otherwise.

    ``events``: the event names this host's hook may be called for (the first is
    the one a payload without ``hook_event_name`` is taken for). ``id_keys``: for
    ``session_id``, ``tool_use_id`` and ``cwd``, the keys the host sends them under.
    """
    raw = load_object(data)
    event = raw.get("hook_event_name", raw.get("hookEventName", events[0]))
    if event not in events:
        handled = ", ".join(events)
        msg = f"zerto-rewind's {host} hook handles {handled} only, got hook_event_name={event!r}"
        raise HookInputError(msg)
    name = tool_name_of(raw, *name_keys)
    key = next((k for k in input_keys if k in raw), input_keys[0])
    keys = id_keys or {}
    ids = {
        field: next((v for k in keys.get(field, (field,)) if (v := opt_str(raw, k))), None)
        for field in ("session_id", "tool_use_id", "cwd")
    }
    return raw, name, arguments(raw.get(key), key), ids


def after_result(
    call: Call,
    raw: dict[str, Any],
    event: Any,
    post_events: dict[str, str | None],
    response_keys: tuple[str, ...],
) -> Call:
    """``call`` with its ``result`` set when ``event`` is one of the host's ``post_events``
    (event -> the result it says, None: read the answer under the first of
    ``response_keys`` present): ``failed`` for a failed answer (an MCP ``isError``, a
    non-empty ``error``, a ``success: false``, a ``resultType`` of ``failure``, ``error``
    or ``denied``: the hosts' shapes, docs/hosts.md), else ``succeeded``."""
    if event not in post_events:
        return call
    fixed = post_events[event]
    response = next((raw[k] for k in response_keys if k in raw), None)
    failed = isinstance(response, dict) and (
        response.get("isError") is True
        or bool(response.get("error"))
        or response.get("success") is False
        or response.get("resultType") in ("failure", "error", "denied")
    )
    call.result = fixed or ("failed" if failed else "succeeded")
    return call


def host_call(
    name: str,
    tool_input: dict[str, Any],
    ids: dict[str, str | None],
    *,
    shell: tuple[str, ...],
    files: tuple[str, ...],
    path_keys: tuple[str, ...],
    mcp_name: str,
) -> Call:
    """The call for a host's tool: its ``shell`` tools, its ``files`` tools, else an MCP call
    named ``mcp_name`` (the catalog's name, or the host's when it could not be split)."""
    if name in shell:
        return shell_call(name, tool_input, ids)
    if name in files:
        return file_call(name, tool_input, path_keys, ids)
    return Call(MCP, mcp_name, name, tool_input, ids)


def arguments(value: Any, key: str) -> dict[str, Any]:
    """A tool's arguments: an object, or a string holding one (Copilot may send either)."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = _fastjson.loads(value.encode()) if value.strip() else {}
        except ValueError:
            msg = f"hook input's {key} is a string that is not a JSON object"
            raise HookInputError(msg) from None
    if not isinstance(value, dict):
        msg = f"hook input's {key} must be a JSON object"
        raise HookInputError(msg)
    return value


def opt_str(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) else None


def split_server(name: str, prefix: str, servers: tuple[str, ...], sep: str) -> str | None:
    """``mcp__<server>__<tool>`` for ``prefix + server + sep + tool``; None when no server fits.

    The longest server name wins: with servers ``vm`` and ``vm-prod``, Copilot's
    ``vm-prod-power_off`` is ``vm-prod``'s ``power_off``.
    """
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix) :]
    for server in sorted(servers, key=len, reverse=True):
        head = server + sep
        if rest.startswith(head) and len(rest) > len(head):
            return f"mcp__{server}__{rest[len(head) :]}"
    return None


def shell_call(host_tool: str, tool_input: dict[str, Any], ids: dict[str, str | None]) -> Call:
    """A host's shell tool as ``Bash``: its ``command`` (a string, or an argv list joined)."""
    command = tool_input.get("command")
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    if not isinstance(command, str):
        command = ""
    return Call(SHELL, "Bash", host_tool, {"command": command}, ids, command=command)


def file_call(
    host_tool: str, tool_input: dict[str, Any], keys: tuple[str, ...], ids: dict[str, str | None]
) -> Call:
    """A host's file tool as ``Write`` of the path under the first of ``keys`` it gives."""
    paths = tuple(value for key in keys if isinstance(value := tool_input.get(key), str) and value)[
        :1
    ]
    return Call(FILES, "Write", host_tool, tool_input, ids, paths=paths)


_PATCH_HEADERS = ("*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:")


def apply_patch_paths(tool_input: Any) -> tuple[str, ...]:
    """The files a Codex ``apply_patch`` adds, updates, deletes or moves to.

    The patch text is read from every string in the input (``command``, as Codex
    sends it, or an argv list whose last word is the patch), so a differently
    keyed input is still read, never skipped.
    """
    found: dict[str, None] = {}
    for line in "\n".join(_strings(tool_input)).splitlines():
        stripped = line.strip()
        for header in _PATCH_HEADERS:
            if stripped.startswith(header):
                path = stripped[len(header) :].strip()
                if path:
                    found.setdefault(path, None)
    return tuple(found)


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        node = list(node.values())
    if isinstance(node, list):
        return [text for item in node for text in _strings(item)]
    return []


def deny_reason(outcome: str, reason: str, who: str) -> str:
    """The reason of a deny that stands for ``outcome`` on a host where ``who`` cannot ask.

    A prompt is a person's decision; where the host's hook has no question that
    holds (``who``: "a Codex hook"), the call is refused and the reason says so.
    """
    if outcome == "prompt":
        reason = (
            f"{reason} A person must decide on this call, and {who} cannot ask, so "
            "zerto-rewind refused it; the call was not run."
        ).strip()
    elif outcome == "defer":
        reason = f"{reason} ({who} cannot hold a call back; refused instead.)".strip()
    elif outcome != "deny":
        reason = f"zerto-rewind: unknown guard outcome {outcome!r}; denying to stay safe. {reason}"
    return reason or "zerto-rewind denied the call; the call was not run."
