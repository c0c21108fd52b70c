"""``zerto-rewind catalog scan``: propose a catalog from a server's own ``tools/list``.

    zerto-rewind catalog scan --server NAME [--out FILE] [--merge CONFIG] -- COMMAND [ARGS...]
    zerto-rewind catalog scan --server NAME --url URL [--header K:V ...]
    zerto-rewind catalog scan --server NAME --tools-json FILE   (a saved tools/list result)

The catalog (``read_only_tools`` and ``tools``, as in the config, with host names
``mcp__NAME__tool``, and ``catalog.pins``: a digest of each tool as scanned) goes
to stdout or ``--out`` (written atomically with the old file's mode and owner,
a new file 0600; a config holding credentials is never left readable by
others: :mod:`zerto_rewind.scan.output`); the review table to stderr. With ``--merge``, the pins
of tools already reviewed are kept, and every difference (changed, new, removed
tools) is written to stderr for review; ``--repin`` accepts the live list.
Bad input (a missing or malformed file, a wrong ``--header``) is a
:class:`~zerto_rewind.errors.UsageError` or, for the ``--merge`` config, a
:class:`~zerto_rewind.errors.ConfigError`, reported by the edge in
:mod:`zerto_rewind.cli`; nothing is written then.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UsageError

if TYPE_CHECKING:
    from ..scan.heuristics import ReviewRow
    from ..scan.identity import ResolverProposal

__all__ = ["main", "server_tools"]


def main(argv: list[str] | None = None) -> int:
    """``catalog scan …``."""
    args = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, command = args[:cut], args[cut + 1 :]
    parsed = _parser().parse_args(args)
    if parsed.action != "scan":
        _parser().error("the only action is scan")
    return _scan(parsed, command)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind catalog",
        description="Propose a catalog from an MCP server's tools/list (annotations, schemas).",
        epilog="Put the server command after `--`, e.g. "
        "`zerto-rewind catalog scan --server vsphere -- mcvsphere`.",
    )
    parser.add_argument("action", choices=["scan"], help="scan: read tools/list, print a catalog")
    parser.add_argument("--server", required=True, help="the server's name in the host's config")
    parser.add_argument("--url", help="a streamable HTTP server instead of a command")
    parser.add_argument(
        "--header", action="append", default=[], metavar="K:V", help="HTTP header (repeatable)"
    )
    parser.add_argument("--tools-json", metavar="FILE", help="read a saved tools/list result")
    parser.add_argument("--out", metavar="FILE", help="write the catalog here (default stdout)")
    parser.add_argument(
        "--merge",
        metavar="CONFIG",
        help="add the scanned tools that CONFIG does not classify yet; print the whole config",
    )
    parser.add_argument(
        "--repin",
        action="store_true",
        help="with --merge: pin every tool as scanned now, changed ones too (after review)",
    )
    parser.add_argument("--review-json", metavar="FILE", help="also write the review rows as JSON")
    parser.add_argument("--quiet", action="store_true", help="no review table on stderr")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    return parser


def _scan(args: argparse.Namespace, command: list[str]) -> int:
    from ..fsutil import atomic_write_text
    from ..scan.heuristics import catalog_from_tools, merge_into_config
    from ..scan.output import write_scan_output
    from ..scan.pins import pins_for
    from ..scan.review import render_review

    if args.repin and not args.merge:
        msg = "--repin changes the pins of a config: give it with --merge CONFIG"
        raise UsageError(msg)
    tools = server_tools(args, command)
    result = catalog_from_tools(args.server, tools)
    options = {**result.catalog.get("catalog", {}), "pins": pins_for(args.server, tools)}
    output: dict[str, Any] = {**result.catalog, "catalog": options}
    if args.merge:
        target = _merge_target(args.merge)
        output, added, hardened = merge_into_config(target, result.catalog)
        sys.stderr.write(f"--merge: {len(added)} new tool(s) added; existing entries untouched")
        if hardened:
            sys.stderr.write(
                f", except host paths added to {len(hardened)} (they name files on the VM "
                f"server's host, so calls that give one prompt): {', '.join(hardened)}"
            )
        had = args.server in ((target.get("catalog") or {}).get("resolvers") or {})
        if not had and args.server in ((output.get("catalog") or {}).get("resolvers") or {}):
            sys.stderr.write(f"; added the identity check catalog.resolvers.{args.server}")
        sys.stderr.write("\n")
        # the merged catalog options: the config's, plus an identity check it lacked
        target_options = output.get("catalog") or {}
        output["catalog"] = _merged_pins(args, target, tools, result.rows, target_options)
    if not args.quiet:
        render_review(result.rows, sys.stderr, server=args.server)
        sys.stderr.write(_identity_line(args.server, result.resolver) + "\n")
    if args.review_json:
        rows = [row.as_dict() for row in result.rows]
        atomic_write_text(args.review_json, json.dumps(rows, indent=2) + "\n", mode=0o644)
    text = json.dumps(output, indent=2) + "\n"
    if args.out:
        write_scan_output(args.out, text, output)
    else:
        sys.stdout.write(text)
    return 0


def _identity_line(server: str, resolver: ResolverProposal | None) -> str:
    """What the review says about the identity check (catalog.resolvers)."""
    if resolver is None:
        return (
            f"identity check: none proposed; no read-only tool of {server} looks one VM up by "
            "its name alone, so the gateway cannot confirm that a checkpointed call changes "
            "the VM Zerto protects (docs/catalog.md#the-identity-check-proposed)"
        )
    return (
        f"identity check: catalog.resolvers.{server} = {resolver.tool}({resolver.arg}) -> "
        f"{resolver.id_path} ({'; '.join(resolver.evidence)}); a wrong id_path makes every "
        "checkpointed call prompt: check one answer of the tool"
    )


def _merged_pins(
    args: argparse.Namespace,
    target: dict[str, Any],
    tools: list[dict[str, Any]],
    rows: list[ReviewRow],
    merged_options: dict[str, Any],
) -> dict[str, Any]:
    """The merged config's ``catalog`` object: its options kept, its pins merged; the
    differences from the old pins go to stderr."""
    from ..core.catalog import glob_match
    from ..scan.heuristics import MUTATING
    from ..scan.pins import merge_pins, merge_report

    options = dict(merged_options)
    read_only = list(target.get("read_only_tools") or [])
    conflicts: dict[str, str] = {}
    for row in rows:
        entry = next((e for e in read_only if e == row.tool or glob_match(e, row.tool)), None)
        if row.kind == MUTATING and entry is not None:
            conflicts[row.tool] = (
                f"the config reads it as read-only by {entry!r}, but the scan says it changes "
                f"things ({'; '.join(row.evidence)})"
            )
    merge = merge_pins(
        args.server, tools, options.get("pins") or {}, repin=args.repin, conflicts=conflicts
    )
    for line in merge_report(merge, args.server):
        sys.stderr.write(line + "\n")
    options["pins"] = merge.pins
    return options


def server_tools(args: argparse.Namespace, command: list[str]) -> list[dict[str, Any]]:
    sources = sum(bool(s) for s in (args.url, args.tools_json, command))
    if sources != 1:
        msg = (
            f"{'no' if sources == 0 else 'more than one'} server to scan; give exactly one of: "
            "`-- COMMAND [ARGS...]`, --url URL, --tools-json FILE"
        )
        raise UsageError(msg)
    if args.tools_json:
        data = _read_json("--tools-json", args.tools_json)
        tools = data.get("tools") if isinstance(data, dict) else data
        if not isinstance(tools, list):
            msg = (
                f"--tools-json {args.tools_json}: not a tools/list result; give the "
                'result as saved ({"tools": [...]}) or its list of tools'
            )
            raise UsageError(msg)
        odd = [i for i, t in enumerate(tools) if not isinstance(t, dict) or "name" not in t]
        if odd:
            msg = (
                f"--tools-json {args.tools_json}: tool {odd[0]} is not an object with a name; "
                'each tool is an object like tools/list answers ({"name": ..., ...})'
            )
            raise UsageError(msg)
        return tools
    from ..scan.client import list_tools_http, list_tools_stdio

    if args.url:
        headers = {}
        for item in args.header:
            key, sep, value = item.partition(":")
            if not sep or not key.strip():
                msg = f"--header {item!r}: not a header; write it as NAME:VALUE"
                raise UsageError(msg)
            headers[key.strip()] = value.strip()
        return list_tools_http(args.url, headers=headers, timeout_s=args.timeout)
    return list_tools_stdio(command[0], command[1:], timeout_s=args.timeout)


def _read_json(option: str, path: str) -> Any:
    """The JSON document in ``path``; UsageError naming the option when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        msg = f"{option} {path}: cannot read it ({exc.strerror or exc}); check the path"
        raise UsageError(msg) from None
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError for a binary file
        msg = f"{option} {path}: not JSON ({exc}); give a JSON file"
        raise UsageError(msg) from None


def _merge_target(path: str) -> dict[str, Any]:
    """The config ``--merge`` adds to, checked where the merge would otherwise garble it."""
    config = _read_json("--merge", path)
    if not isinstance(config, dict):
        msg = "not a JSON object; --merge takes a zerto-rewind config file"
        raise ConfigError(msg, path=path)
    read_only = config.get("read_only_tools")
    if read_only is not None and not (
        isinstance(read_only, list) and all(isinstance(n, str) for n in read_only)
    ):
        msg = "not a list of tool names; fix it (see docs/configuration.md)"
        raise ConfigError(msg, path=path, key="read_only_tools")
    if config.get("tools") is not None and not isinstance(config["tools"], dict):
        msg = "not an object of tool entries; fix it (see docs/configuration.md)"
        raise ConfigError(msg, path=path, key="tools")
    options = config.get("catalog")
    pins = options.get("pins") if isinstance(options, dict) else None
    if options is not None and not isinstance(options, dict):
        msg = "not an object; fix it (see docs/configuration.md)"
        raise ConfigError(msg, path=path, key="catalog")
    if pins is not None and not (
        isinstance(pins, dict) and all(isinstance(v, str) for v in pins.values())
    ):
        msg = "not an object of tool name -> pin; fix it (see docs/configuration.md)"
        raise ConfigError(msg, path=path, key="catalog.pins")
    return config
