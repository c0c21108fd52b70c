"""Speed 1: the hook process for a read-only call, as a ratio to ``python -c pass``.

Every entry form is timed in interleaved rounds (so load on the machine hits
them alike); the judged form is the command ``zerto-rewind install`` writes. Each
process's CPU time (user + system) is shown too: on a loaded machine the wall-time
ratio swings by ±0.2 from run to run, the CPU ratio far less.
The Node peer guard cc-safety-net 2.4.5 is timed too when npm can install it.

    .venv/bin/python benchmarks/bench_readonly.py [--rounds 100] [--no-node]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile

import _bench

TARGET = 1.3
LAUNCHER = "import sys;from zerto_rewind.hooks.standalone import main;sys.exit(main())"


def forms(python: str, config: str) -> dict[str, list[str]]:
    """Entry forms of the hook, by the name the table prints."""
    script = os.path.join(os.path.dirname(python), "zerto-rewind")
    found = {
        "python -c pass (baseline)": [python, "-c", "pass"],
        "python -m zerto_rewind hook": [python, "-m", "zerto_rewind", "hook", "--config", config],
        "python -c <launcher>": [python, "-c", LAUNCHER, "--config", config],
    }
    if os.path.exists(script):
        found["zerto-rewind hook (console script)"] = [script, "hook", "--config", config]
    return found


def install_form(python: str, config: str) -> list[str] | None:
    """The exact command `zerto-rewind install` writes (pinned config, settings file), split
    as a shell would."""
    try:
        from zerto_rewind.config.loader import file_sha256
        from zerto_rewind.hostconfig.install.settings_file import hook_command
    except ImportError:
        return None
    settings = os.path.join(os.path.dirname(config), ".claude", "settings.json")
    command = hook_command(python, config, config_sha256=file_sha256(config), settings=settings)
    return shlex.split(command)


def cc_safety_net(workdir: str) -> tuple[list[str] | None, str]:
    """npm-install cc-safety-net 2.4.5 into ``workdir``; its hook command, or why not."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None, "node/npm not on PATH"
    entry = os.path.join(
        workdir, "node_modules", "cc-safety-net", "dist", "bin", "cc-safety-net.js"
    )
    if not os.path.exists(entry):
        cmd = [
            "npm",
            "install",
            "--prefix",
            workdir,
            "cc-safety-net@2.4.5",
            "--no-audit",
            "--no-fund",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=180, check=False)
        except subprocess.TimeoutExpired:
            return None, "npm install timed out"
        if proc.returncode != 0 or not os.path.exists(entry):
            return None, f"npm install failed: {proc.stderr.decode()[-200:].strip()}"
    node = shutil.which("node") or "node"
    return [node, entry, "hook", "--claude-code"], "npm cc-safety-net@2.4.5"


def _children_cpu() -> float:
    """User + system CPU seconds of every child waited for so far. Beside the wall time:
    a busy machine stretches a process's wall time far more than the CPU it spends."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def imported_modules(argv: list[str], stdin: bytes, env: dict[str, str]) -> set[str]:
    """Modules a process imports, from ``-X importtime``."""
    cmd = [argv[0], "-X", "importtime", *argv[1:]]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, env=env, check=False)
    names = set()
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--no-node", action="store_true", help="skip cc-safety-net")
    args = parser.parse_args()
    _bench.header(
        "read-only decision: hook process vs `python -c pass`",
        "./.venv/bin/python benchmarks/bench_readonly.py",
    )
    box = _bench.sandbox()
    try:
        return measure(box, args)
    finally:
        box.stop()


def measure(box: _bench.Sandbox, args: argparse.Namespace) -> int:
    python, config = sys.executable, box.config_path
    env = box.env()
    payload = json.dumps(
        {
            "session_id": "bench",
            "hook_event_name": "PreToolUse",
            "tool_name": _bench.READ_ONLY,
            "tool_input": {"name": "jp-ubuntu"},
            "tool_use_id": "toolu_bench",
        }
    ).encode()
    candidates = forms(python, config)
    installed = install_form(python, config)
    judged = "install's command"
    # A harmless Bash call: with guard.protect_self the hook sees every Bash call and scans
    # it for the guard's own paths; it must stay as cheap as a read-only call.
    bash = "install's command, Bash `ls -la` (protect_self)"
    if installed is not None:
        candidates[judged] = installed
        candidates[bash] = installed
    bash_payload = json.dumps(
        {
            "session_id": "bench",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls -la", "description": "List files"},
            "tool_use_id": "toolu_bench",
            "cwd": os.path.dirname(config),
        }
    ).encode()
    node_note = "skipped (--no-node)"
    node_home = tempfile.mkdtemp(prefix="zr-bench-node-")
    node_env = {**env, "HOME": node_home}
    node_payload = json.dumps(
        {
            "session_id": "bench",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls -la"},
            "tool_use_id": "toolu_bench",
        }
    ).encode()
    if not args.no_node:
        node_cmd, node_note = cc_safety_net(os.path.join(tempfile.gettempdir(), "zr-bench-ccsn"))
        if node_cmd is not None:
            candidates["cc-safety-net hook --claude-code (node)"] = node_cmd
    times: dict[str, list[float]] = {name: [] for name in candidates}

    def inputs(name: str) -> tuple[bytes, dict[str, str]]:
        if name.startswith("cc-safety-net"):
            return node_payload, node_env
        return (bash_payload if name == bash else payload), env

    cpu: dict[str, list[float]] = {name: [] for name in candidates}
    for name, argv in candidates.items():  # warm the page cache and .pyc files
        _bench.timed(argv, *inputs(name))
    for _round in range(args.rounds):
        for name, argv in candidates.items():
            spent = _children_cpu()
            times[name].append(_bench.timed(argv, *inputs(name)))
            cpu[name].append(_children_cpu() - spent)
    base = _bench.median(times["python -c pass (baseline)"])
    cpu_base = _bench.median(cpu["python -c pass (baseline)"])
    rows = []
    for name, values in times.items():
        med, cpu_med = _bench.median(values), _bench.median(cpu[name])
        rows.append([name, f"{med * 1000:.2f}", f"{min(values) * 1000:.2f}", f"{med / base:.3f}",
                     f"{cpu_med * 1000:.2f}", f"{cpu_med / cpu_base:.3f}"])  # fmt: skip
    _bench.table(["entry form", "median ms", "min ms", "ratio", "CPU ms", "CPU ratio"], rows)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\nrounds: {args.rounds}; cc-safety-net: {node_note}")
    if installed is not None:
        print(f"install writes: {shlex.join(installed)}")
    subject = judged if installed is not None else "python -c <launcher>"
    # (every timed run is checked: exit 0 and nothing on stdout, the Bash call included)
    baseline = imported_modules([python, "-c", "pass"], b"", env)
    extra = imported_modules(candidates[subject], payload, env) - baseline
    print(f"modules the judged form imports beyond `python -c pass`: {', '.join(sorted(extra))}")
    print()
    verdict = _bench.judge(
        f"read-only ratio ({subject})", _bench.median(times[subject]) / base, TARGET, unit="×"
    )
    if installed is not None:
        ratio = _bench.median(times[bash]) / base
        verdict |= _bench.judge(f"Bash ratio ({bash})", ratio, TARGET, unit="×")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
