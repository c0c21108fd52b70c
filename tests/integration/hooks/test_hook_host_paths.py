"""The Claude Code hook on a tool that names a file on the VM server's host: ``ask``.

Through the hook as a subprocess, against the simulator: the VM is protected and a
checkpoint could be made, yet the person is asked and no tag is requested; the ask
shows the path, the decision-log line and stderr do not.
"""

from __future__ import annotations

from pathlib import Path

from zerto_rewind.testing import DEMO_CATALOG, Sandbox

UPLOAD = "mcp__vsphere__upload_iso"
PATH = "/etc/zerto-rewind/secret.txt"


def test_a_host_path_asks_shows_the_path_and_logs_only_its_name(tmp_path: Path) -> None:
    tools = {**DEMO_CATALOG["tools"], UPLOAD: {"vm_arg": "name", "host_paths": ["local_path"]}}
    catalog = {**DEMO_CATALOG, "tools": tools}
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}, catalog=catalog) as box:
        run = box.run_hook(UPLOAD, {"name": "jp-ubuntu", "local_path": PATH})
        assert run.decision == "ask", run.stdout
        assert "argument local_path" in run.reason
        assert f"local_path = {PATH!r}" in run.reason
        assert box.tag_requests() == 0
        (record,) = box.log_records()
        assert (record["row"], record["decision"]) == ("host_path", "prompt")
        assert "local_path" in record["reason"]
        assert PATH not in Path(box.log_path).read_text()
        assert PATH not in run.stderr
        plain = box.run_hook(UPLOAD, {"name": "jp-ubuntu"})
        assert plain.decision == "context", plain.stdout
