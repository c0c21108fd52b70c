"""``zerto-rewind catalog scan`` over the official SDK client: the stand-in server (stdio and
streamable HTTP). The real third-party servers are scanned in tests/realvm."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from integration.scan.scan_helpers import scan
from support.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
STAND_IN = ROOT / "tests" / "e2e" / "vm_mcp_server.py"


def test_scan_stand_in_over_stdio() -> None:
    """The stand-in's 7 tools: get/list read-only (guessed), the rest mutating with vm_arg."""
    run = scan("--server", "vsphere", "--", sys.executable, str(STAND_IN))
    assert run.returncode == 0, run.stderr
    catalog = json.loads(run.stdout)
    assert catalog["read_only_tools"] == ["mcp__vsphere__list_vms", "mcp__vsphere__get_vm"]
    tools = catalog["tools"]
    assert tools["mcp__vsphere__power_off_vm"] == {"vm_arg": "name"}
    assert tools["mcp__vsphere__snapshot_vms"] == {"vm_arg": "vms[]"}
    assert "catalog scan of 'vsphere'" in run.stderr  # the review table is on stderr
    assert "guessed" in run.stderr


def test_scan_merge_keeps_hand_written_entries(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    hand = {"vm_arg": {"path": "command", "pattern": "@(?P<vm>[a-z0-9-]+)"}}
    config.write_text(json.dumps({"tools": {"mcp__vsphere__run_command": hand}}))
    out = tmp_path / "merged.json"
    run = scan(
        "--server", "vsphere", "--merge", str(config), "--out", str(out), "--quiet",
        "--", sys.executable, str(STAND_IN),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    merged = json.loads(out.read_text())
    assert merged["tools"]["mcp__vsphere__run_command"] == hand
    assert "mcp__vsphere__power_off_vm" in merged["tools"]


def test_scan_failure_says_what_failed() -> None:
    run = scan(
        "--server", "x", "--timeout", "20", "--", sys.executable, "-c", "import sys; sys.exit(3)"
    )
    assert run.returncode == 1
    assert "could not list the tools of" in run.stderr


def test_scan_stand_in_over_streamable_http(tmp_path: Path) -> None:
    port = free_port()
    code = (
        f"import runpy; m = runpy.run_path({str(STAND_IN)!r}); "
        f"m['server'].run('streamable-http', host='127.0.0.1', port={port})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/mcp"
        run = scan("--server", "vsphere", "--url", url, "--header", "X-Test: 1", "--quiet")
        assert run.returncode == 0, run.stderr
        assert "mcp__vsphere__power_off_vm" in json.loads(run.stdout)["tools"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_scan_failure_leads_with_the_cause_and_leaves_warnings_out(tmp_path: Path) -> None:
    """A server that warns (a third-party DeprecationWarning) and then dies on its settings:
    the error's first line names the exception; its stderr follows, without the warning."""
    lib = tmp_path / "authlib_jose.py"
    lib.write_text(
        "import warnings\n"
        "warnings.warn('authlib.jose is deprecated\\nIt will go in 2.0.', DeprecationWarning)\n"
    )
    server = tmp_path / "server.py"
    server.write_text("import authlib_jose\nraise ValueError('VCENTER_HOST is not set')\n")
    alone = subprocess.run(
        [sys.executable, "-W", "always", str(server)], capture_output=True, text=True, check=False
    )
    assert alone.stderr.startswith(f"{lib}:2: DeprecationWarning: authlib.jose is deprecated")
    run = scan(
        "--server", "x", "--timeout", "20", "--", sys.executable, "-W", "always", str(server)
    )  # fmt: skip
    assert run.returncode == 1
    first, *rest = run.stderr.splitlines()
    assert first.startswith("zerto-rewind catalog scan: ScanError: could not list the tools of")
    assert "the server stopped: ValueError: VCENTER_HOST is not set" in first
    assert "Its stderr, warnings left out:" in rest
    assert "Traceback (most recent call last):" in rest
    assert "Warning" not in run.stderr
    assert "It will go in 2.0." not in run.stderr


def test_merge_writes_the_identity_check_and_keeps_one_a_person_wrote(tmp_path: Path) -> None:
    """mcvsphere's kept tool list merged into a config: catalog.resolvers.vsphere is added
    and said; merged again into a config whose resolver a person wrote, that one stays."""
    dump = ROOT / "tests" / "data" / "servers" / "mcvsphere.tools.json"
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"catalog": {"pins": {}}}))
    config.chmod(0o600)
    run = scan("--server", "vsphere", "--quiet", "--merge", str(config), "--out", str(config),
               "--tools-json", str(dump))  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "added the identity check catalog.resolvers.vsphere" in run.stderr
    written = json.loads(config.read_text())
    assert written["catalog"]["resolvers"]["vsphere"]["tool"] == "get_vm_info"
    assert len(written["catalog"]["pins"]) == 94
    mine = {"tool": "get_vm_info", "arg": "name", "id_path": "config.instanceUuid"}
    written["catalog"]["resolvers"]["vsphere"] = mine
    config.write_text(json.dumps(written))
    again = scan("--server", "vsphere", "--quiet", "--merge", str(config), "--out", str(config),
                 "--tools-json", str(dump))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "identity check" not in again.stderr
    assert json.loads(config.read_text())["catalog"]["resolvers"]["vsphere"] == mine
