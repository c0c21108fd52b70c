"""``zerto-rewind catalog scan``: propose a catalog from a server's own ``tools/list``.

    zerto-rewind catalog scan --server NAME [--out FILE] [--merge CONFIG] -- COMMAND [ARGS...]
    zerto-rewind catalog scan --server NAME --url URL [--header K:V ...]
    zerto-rewind catalog scan --server NAME --tools-json FILE   (a saved tools/list result)

The catalog (``read_only_tools`` and ``tools``, as in the config, with host names
``mcp__NAME__tool``) goes to stdout or ``--out``; the review table to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import ZertoRewindError

__all__ = ["main"]


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
    try:
        return _scan(parsed, command)
    except (ZertoRewindError, OSError, ValueError) as exc:
        sys.stderr.write(f"zerto-rewind catalog scan: {exc}\n")
        return 1


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
    parser.add_argument("--review-json", metavar="FILE", help="also write the review rows as JSON")
    parser.add_argument("--quiet", action="store_true", help="no review table on stderr")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    return parser


def _scan(args: argparse.Namespace, command: list[str]) -> int:
    from ..fsutil import atomic_write_text
    from ..scan.heuristics import catalog_from_tools, merge_into_config
    from ..scan.review import render_review

    tools = _tools(args, command)
    result = catalog_from_tools(args.server, tools)
    output: dict[str, Any] = result.catalog
    if args.merge:
        with open(args.merge, encoding="utf-8") as fh:
            existing = json.load(fh)
        if not isinstance(existing, dict):
            msg = f"{args.merge}: not a JSON object"
            raise ValueError(msg)
        output, added = merge_into_config(existing, result.catalog)
        sys.stderr.write(f"--merge: {len(added)} new tool(s) added; existing entries untouched\n")
    if not args.quiet:
        render_review(result.rows, sys.stderr, server=args.server)
    if args.review_json:
        rows = [row.as_dict() for row in result.rows]
        atomic_write_text(args.review_json, json.dumps(rows, indent=2) + "\n", mode=0o644)
    text = json.dumps(output, indent=2) + "\n"
    if args.out:
        atomic_write_text(args.out, text, mode=0o644)
    else:
        sys.stdout.write(text)
    return 0


def _tools(args: argparse.Namespace, command: list[str]) -> list[dict[str, Any]]:
    sources = sum(bool(s) for s in (args.url, args.tools_json, command))
    if sources != 1:
        msg = "give exactly one of: `-- COMMAND [ARGS...]`, --url URL, --tools-json FILE"
        raise ValueError(msg)
    if args.tools_json:
        with open(args.tools_json, encoding="utf-8") as fh:
            data = json.load(fh)
        tools = data.get("tools") if isinstance(data, dict) else data
        if not isinstance(tools, list):
            msg = f"{args.tools_json}: expected a tools/list result or a list of tools"
            raise ValueError(msg)
        return [t for t in tools if isinstance(t, dict)]
    from ..scan.client import list_tools_http, list_tools_stdio

    if args.url:
        headers = {}
        for item in args.header:
            key, sep, value = item.partition(":")
            if not sep or not key.strip():
                msg = f"--header {item!r}: expected K:V"
                raise ValueError(msg)
            headers[key.strip()] = value.strip()
        return list_tools_http(args.url, headers=headers, timeout_s=args.timeout)
    return list_tools_stdio(command[0], command[1:], timeout_s=args.timeout)
