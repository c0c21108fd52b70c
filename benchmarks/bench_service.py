"""Speed 8: the thin hook and the guard service — read-only ratio, warm confirmed decision.

The guard service (``zerto-rewind gateway --socket PATH``, the sandbox's config,
no upstreams: a hook-only service) runs for the whole script; the thin hook is
run exactly as ``install claude-code --service unix:PATH`` writes it, a fresh
process fed the PreToolUse JSON on stdin.

1. Read-only: the thin hook process for a read-only tool (``get_vm``; the
   installed matcher keeps it away from the hook, so this is the cost for a host
   that cannot filter) against bare ``python -c pass`` of the same interpreter,
   timed in interleaved rounds; the judged figure is the ratio of medians. The
   standalone hook (install's command) runs in the same rounds for reference,
   and the bench process times the unix-socket round trip on its own.
2. Confirmed: ``power_off_vm`` on ``jp-ubuntu`` (vCenter, 2 s cadence) through
   the thin hook, each run just after a journal checkpoint, after a first call
   that warms the service (token, VM and entity caches, cadence). L is the tag's
   own landing delay from the service's decision log (``landed_at`` −
   ``requested_at``), as in bench_confirmed.py; the judged figure is the median
   of (hook wall − L). The standalone hook runs interleaved with it for reference.

    .venv/bin/python benchmarks/bench_service.py [--rounds 100] [--runs 6]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _bench

from zerto_rewind.config.loader import file_sha256
from zerto_rewind.hostconfig.install.settings_file import hook_command, thin_hook_command
from zerto_rewind.service_client import request

READ_ONLY_TARGET = 1.3
CONFIRMED_TARGET_S = 0.1
VM, VPG = "jp-ubuntu", "jp-local"  # vCenter, 2 s journal cadence in the fast simulator
GUARD_TIMEOUT_S = 20
START_TIMEOUT_S = 60.0
# Modules the thin hook must not import on the unix-socket path (docs/performance.md);
# `signal` imports `enum` (~5 ms here), so the watchdog uses the C module `_signal`.
FORBIDDEN = ("json", "re", "typing", "httpx", "ssl", "http.client", "asyncio", "dataclasses",
             "enum", "signal")  # fmt: skip


def payload(tool: str, tool_input: dict[str, object], n: int, cwd: str) -> bytes:
    """A PreToolUse payload as Claude Code sends it."""
    return json.dumps(
        {
            "session_id": "bench-service",
            "transcript_path": os.path.join(cwd, "transcript.jsonl"),
            "cwd": cwd,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": f"toolu_bench_{n}",
        }
    ).encode()


def start_service(box: _bench.Sandbox, run: str) -> tuple[subprocess.Popen[bytes], str, str]:
    """``zerto-rewind gateway --socket`` on ``box``'s config; (process, socket path, stderr)."""
    box.write_config(state_dir=box.state_dir, log=box.log_path)
    sock, ready, err = (os.path.join(run, n) for n in ("guard.sock", "ready.json", "service.err"))
    argv = [sys.executable, "-m", "zerto_rewind", "gateway", "--socket", sock,
            "--ready-file", ready]  # fmt: skip
    with open(err, "wb") as fh:
        proc = subprocess.Popen(argv, env=box.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=fh)  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the guard service did not start: {Path(err).read_text()[-800:]}")
        time.sleep(0.05)
    return proc, sock, err


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (Linux /proc; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def imported_modules(argv: list[str], stdin: bytes, env: dict[str, str]) -> set[str]:
    """Modules a process imports, from ``-X importtime``."""
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], input=stdin,
                          capture_output=True, env=env, check=False)  # fmt: skip
    names = set()
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def hook_output(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, dict[str, str]]:
    """Wall seconds of one hook process and its ``hookSpecificOutput`` (it must exit 0)."""
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=120,
                          check=False)  # fmt: skip
    wall = time.perf_counter() - started
    if proc.returncode != 0 or not proc.stdout.strip():
        msg = f"hook exited {proc.returncode}: {proc.stdout[:300]!r} {proc.stderr[:300]!r}"
        raise RuntimeError(msg)
    out: dict[str, str] = json.loads(proc.stdout)["hookSpecificOutput"]
    return wall, out


# ---------------------------------------------------------------------- 1. read-only


def read_only(
    box: _bench.Sandbox, thin: list[str], standalone: list[str], sock: str, service_pid: int,
    rounds: int,
) -> int:  # fmt: skip
    python = sys.executable
    thin_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # the thin hook needs nothing
    box_env = box.env()
    data = payload(_bench.READ_ONLY, {"name": VM}, 0, box.root)
    forms: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass (baseline)": ([python, "-c", "pass"], thin_env),
        "thin hook (install --service), read-only": (thin, thin_env),
        "standalone hook (install's command), read-only": (standalone, box_env),
    }
    times: dict[str, list[float]] = {name: [] for name in forms}
    trips: list[float] = []
    service_cpu = 0.0
    opts = {"service": f"unix:{sock}", "service_user": str(os.geteuid())}
    for argv, env in forms.values():  # warm the page cache and .pyc files
        _bench.timed(argv, data, env)
    for n in range(rounds):
        names = list(forms)
        order = names[n % len(names) :] + names[: n % len(names)]
        for name in order:
            argv, env = forms[name]
            before = cpu_seconds(service_pid) if name.startswith("thin") else 0.0
            times[name].append(_bench.timed(argv, data, env))
            if name.startswith("thin"):
                service_cpu += cpu_seconds(service_pid) - before
        started = time.perf_counter()
        status, body = request(opts, "POST", "/v1/decide", data, timeout_s=10)
        trips.append(time.perf_counter() - started)
        if status != 200 or b'"none"' not in body:
            raise RuntimeError(f"the service answered {status}: {body[:200]!r}")
    base = _bench.median(times["python -c pass (baseline)"])
    rows = []
    for name, values in times.items():
        med = _bench.median(values)
        rows.append([name, f"{med * 1000:.2f}", f"{min(values) * 1000:.2f}", f"{med / base:.3f}"])
    _bench.table(["entry form", "median ms", "min ms", "ratio"], rows)
    print(f"\nrounds: {rounds}")
    print(f"thin hook command: {shlex.join(thin)}")
    print(f"unix-socket round trip (POST /v1/decide, read-only, from this process): median "
          f"{_bench.median(trips) * 1000:.2f} ms, min {min(trips) * 1000:.2f} ms")  # fmt: skip
    print(f"service CPU per read-only thin-hook call: {service_cpu / rounds * 1000:.2f} ms "
          "(/proc, user + system, clock-tick resolution)")  # fmt: skip
    baseline = imported_modules([python, "-c", "pass"], b"", thin_env)
    extra = imported_modules(thin, data, thin_env) - baseline
    print(f"modules the thin hook imports beyond `python -c pass`: {', '.join(sorted(extra))}")
    heavy = sorted(m for m in extra if m in FORBIDDEN or m.split(".")[0] in ("httpx", "http"))
    print()
    code = _bench.judge("read-only ratio (thin hook ÷ python -c pass)",
                        _bench.median(times["thin hook (install --service), read-only"]) / base,
                        READ_ONLY_TARGET, unit="×")  # fmt: skip
    code |= _bench.judge(f"heavy modules on the unix-socket path ({', '.join(heavy) or 'none'})",
                         len(heavy), 0)  # fmt: skip
    return code


# ---------------------------------------------------------------------- 2. confirmed


def confirmed(box: _bench.Sandbox, thin: list[str], standalone: list[str], runs: int) -> int:
    thin_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    paths = {"thin hook → service": (thin, thin_env), "standalone hook": (standalone, box.env())}
    for name, (argv, env) in paths.items():  # warm: token, VM and entity caches, cadence
        box.wait_past_boundary(VPG)
        hook_output(argv, payload(_bench.POWER_OFF, {"name": VM}, -1, box.root), env)
        del name
    rows: list[list[object]] = []
    overheads: dict[str, list[float]] = {name: [] for name in paths}
    for n in range(runs):
        for name, (argv, env) in paths.items():
            box.wait_past_boundary(VPG)
            before = _bench.zvm_requests(box)
            spawned = time.time()
            wall, out = hook_output(argv, payload(_bench.POWER_OFF, {"name": VM}, n, box.root),
                                    env)  # fmt: skip
            used = sum(_bench.diff(_bench.zvm_requests(box), before).values())
            if "a Zerto checkpoint protects" not in out.get("additionalContext", ""):
                raise RuntimeError(f"{name}: expected a confirmed decision, got {out}")
            record = box.decision_records()[-1]
            if record["row"] != "confirmed":
                raise RuntimeError(f"{name}: expected confirmed, logged {record['row']}")
            requested = _bench.epoch(record["requested_at"])
            landed = _bench.epoch(record["landed_at"])
            lag = landed - requested
            overheads[name].append(wall - lag)
            rows.append([name, n + 1, lag, wall, wall - lag, requested - spawned,
                         spawned + wall - landed, used])  # fmt: skip
    _bench.table(["path", "run", "L s", "hook s", "hook - L s", "start→request s",
                  "landed→exit s", "ZVM requests"], rows)  # fmt: skip
    print()
    for name, values in overheads.items():
        print(f"median (hook - L), {name}: {_bench.median(values):.3f} s")
    print()
    return _bench.judge("warm confirmed through the thin hook: median (hook wall − L)",
                        _bench.median(overheads["thin hook → service"]), CONFIRMED_TARGET_S,
                        unit=" s")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="read-only rounds")
    parser.add_argument("--runs", type=int, default=6, help="warm confirmed calls per path")
    args = parser.parse_args()
    _bench.header(
        "guard service and thin hook: read-only ratio, warm confirmed decision",
        "./.venv/bin/python benchmarks/bench_service.py",
    )
    box = _bench.sandbox(guard={"timeout_s": GUARD_TIMEOUT_S})
    try:
        with tempfile.TemporaryDirectory(prefix="zr-bench-svc-") as run:
            proc, sock, err = start_service(box, run)
            try:
                python = sys.executable
                thin = shlex.split(thin_hook_command(python, f"unix:{sock}",
                                                     budget_s=GUARD_TIMEOUT_S + 5))  # fmt: skip
                # as install writes it: the hook trusts only the service's own user
                thin += ["--service-user", str(os.geteuid())]
                config = box.config_path
                settings = os.path.join(box.root, ".claude", "settings.json")
                pin = file_sha256(config)  # after start_service rewrote the config
                standalone = shlex.split(
                    hook_command(python, config, settings=settings, config_sha256=pin)
                )
                print("== 1. read-only")
                code = read_only(box, thin, standalone, sock, proc.pid, args.rounds)
                print("\n== 2. warm confirmed decision")
                code |= confirmed(box, thin, standalone, args.runs)
            finally:
                stop(proc)
                if proc.returncode not in (0, -15):
                    print(f"service exited {proc.returncode}: {Path(err).read_text()[-800:]}")
        return code
    finally:
        box.stop()


if __name__ == "__main__":
    sys.exit(main())
