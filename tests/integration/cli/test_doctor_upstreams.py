"""`doctor` on the gateway's stdio upstreams: who each runs as, and what of the guard it reaches."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.users import unix_user
from zerto_rewind.cli.doctor.upstreams import upstream_checks
from zerto_rewind.config.loader import load_config
from zerto_rewind.testing import Sandbox


@pytest.fixture
def box() -> Iterator[Sandbox]:
    """Guard files in directories any user may enter: only their own modes protect them."""
    base = Path(tempfile.mkdtemp(prefix="zr-doc-up-"))
    base.chmod(0o755)
    try:
        with Sandbox(str(base / "box")) as sandbox:
            for path in (base / "box", *(base / "box").iterdir()):
                if path.is_dir():
                    path.chmod(0o755)
            yield sandbox
    finally:
        shutil.rmtree(base, ignore_errors=True)


def checks_for(box: Sandbox, *, allow: bool = False, **upstream: str) -> list[tuple[str, str]]:
    spec = {"command": [sys.executable, "-c", "pass"], "env": {"K": "v"}, **upstream}
    box.write_config(upstreams={"vsphere": spec}, state_dir=box.state_dir, log=box.log_path)
    Path(box.log_path).touch(mode=0o600)
    Path(box.state_dir).mkdir(mode=0o755, exist_ok=True)
    settings = load_config(box.env())
    return [(c.status, c.detail) for c in upstream_checks(settings, allow_privileged=allow)]


def test_a_root_upstream_fails_and_the_allowance_makes_it_a_warning(box: Sandbox) -> None:
    if os.geteuid() != 0:
        pytest.skip("judges a root gateway; CI runs as root")
    ((status, detail),) = checks_for(box)
    assert status == "fail"
    assert "would run as root" in detail
    assert "the gateway refuses to start it" in detail
    ((status, detail),) = checks_for(box, allow=True)
    assert status == "warn"
    assert "allowed by --allow-privileged-upstream" in detail


def test_a_user_of_its_own_passes_until_it_can_reach_the_guard(box: Sandbox) -> None:
    with unix_user("zr-doc-up-") as user:
        ((status, detail),) = checks_for(box, user=user.pw_name)
        assert status == "pass", detail
        assert f"runs as {user.pw_name} (uid {user.pw_uid})" in detail
        Path(box.state_dir).chmod(0o777)
        ((status, detail),) = checks_for(box, user=user.pw_name)
        assert status == "fail"
        assert "can change the state dir" in detail
        Path(box.state_dir).chmod(0o755)
        Path(box.log_path).chmod(0o666)
        ((status, detail),) = checks_for(box, user=user.pw_name)
        assert status == "fail"
        assert "can change the decision log" in detail
        Path(box.log_path).chmod(0o600)
        secret = Path(box.root) / "zvm-secret"
        secret.write_text("s3cret")
        secret.chmod(0o600)
        os.chown(secret, user.pw_uid, -1)
        zvm = {k: v for k, v in box.config()["zvm"].items() if k != "client_secret_env"}
        box.write_config(
            zvm={**zvm, "client_secret_file": str(secret)},
            upstreams={"vsphere": {"command": ["true"], "user": user.pw_name}},
        )
        checks = upstream_checks(load_config(box.env()))
        assert [c.status for c in checks] == ["fail"]
        assert f"who owns the guard's ZVM secret file {secret}" in checks[0].detail


def test_an_unknown_user_fails_naming_the_key(box: Sandbox) -> None:
    ((status, detail),) = checks_for(box, user="zr-no-such-user")
    assert status == "fail"
    assert "no user named 'zr-no-such-user'" in detail
